"""Runtime helpers that keep the cpu target's compile time down (issue 19), against Python's own semantics.

``R.min2``/``R.max2`` are intrinsics with the builtins' results (NumPy/Python as the reference: the first operand
unless the second is strictly smaller/larger, mixed types unified as Numba's builtins unify them). An allocation
check is one ``R.exceeds`` call compiled once per argument types, however many sites a kernel has (Numba compiles
a function once per literal value it is passed, so the site numbers and item sizes are int64 values).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import runtime as R
from intent_trace.oracle.numba.minmax import max2, min2


@njit(cache=False)
def _both(a, b):
    return min2(a, b), max2(a, b)


@njit(cache=False)
def _builtins(a, b):
    return min(a, b), max(a, b)


@pytest.mark.parametrize("a, b", [
    (3, 5), (5, 3), (-2, -2), (0, -7),
    (np.int64(2), np.uint64(7)),  # unified to float64, as the builtins do
    (np.int32(-4), np.int64(9)),
    (1.5, np.float32(2.5)), (-0.0, 0.0), (0.0, -0.0),
    (math.nan, 1.0), (1.0, math.nan), (math.inf, -math.inf),
])
def test_min2_max2_are_the_builtins(a, b):
    got, want = _both(a, b), _builtins(a, b)
    assert [type(x) for x in got] == [type(x) for x in want]
    for g, w, py in zip(got, want, (min(a, b), max(a, b))):
        assert np.array_equal(np.float64(g), np.float64(w), equal_nan=True)
        assert math.copysign(1.0, g) == math.copysign(1.0, w)  # -0.0 and +0.0: the operand the builtin returns
        assert np.array_equal(np.float64(g), np.float64(py), equal_nan=True)  # and Python's own


@njit(cache=False)
def _literals():
    return min2(0, 7), max2(256, -1), min2(np.int64(5), 3)


def test_min2_max2_take_literals():
    assert _literals() == (0, 256, 3)


@intent.kernel
def three_temporaries(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    a = I.exp(x[:, :])
    b = a + a  # a used twice: materialised; so is b
    y[:, :] = b * b + a


def test_one_allocation_check_helper_for_every_site(monkeypatch, tmp_path):
    monkeypatch.setenv("INTENT_TRACE_CACHE_DIR", str(tmp_path))
    exe = intent.compile(three_temporaries, target="cpu")
    assert exe.source.count("R.exceeds(") >= 2
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    y = np.zeros_like(x)
    exe(x, y)
    a = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(y, (2 * a) ** 2 + a, rtol=1e-5)
    sites = {sig[1] for sig in R.exceeds.signatures}
    assert sites == {R.exceeds.signatures[0][1]} and str(sites.pop()) == "int64"  # no Literal[int](k) per site
