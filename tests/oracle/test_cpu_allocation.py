"""The cpu target's allocation limit: every allocation of generated code is checked before it is made.

A temporary that cannot fit is a ValueError naming it, its extent and its size (``intent_trace.limits``),
read from ``INTENT_TRACE_MAX_ALLOCATION`` at each call (never baked into the cached module), and the caller's
arrays are left bit-identical: outputs are staged whenever the kernel can fail after a write, with
``checks=False`` too (the allocation checks are not run-time checks the user can turn off).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target


@intent.kernel
def write_then_outer(x: I.In[I.f32, ("N",)], w: I.In[I.f32, ("M",)], y: I.Out[I.f32, ("N",)],
                     z: I.Out[I.f32, ("N",)]):
    y[:] = x[:] * 2.0  # written first, straight into the caller's array when nothing is staged
    outer = I.reshape(x[:], (x.shape[0], 1)) * I.reshape(w[:], (1, w.shape[0]))
    z[:] = I.reduce.sum(I.cumsum(outer, axis=1), axis=1)  # the cumsum result: an (N, M) temporary


def _arrays(n=5, m=40):
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 4, n).astype(np.float32)
    w = rng.integers(-4, 4, m).astype(np.float32)
    y, z = np.full(n, 7.0, np.float32), np.full(n, -3.0, np.float32)
    return x, w, y, z


@pytest.mark.parametrize("checks", [True, False])
def test_cpu_temporary_over_the_limit_is_a_value_error_and_outputs_stay_bit_identical(monkeypatch, checks):
    exe = intent.compile(write_then_outer, target="cpu", checks=checks)
    x, w, y, z = _arrays()
    exe(x, w, y, z)  # under the machine's limit: runs (and the module is cached before the limit changes)
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(z, (x[:, None] * np.cumsum(w)[None, :]).sum(axis=1))
    y0, z0 = np.full(5, 7.0, np.float32), np.full(5, -3.0, np.float32)
    y[:], z[:] = y0, z0
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "400")  # 5 * 40 f32 = 800 bytes cannot fit; 20 can
    with pytest.raises(ValueError) as e:
        exe(x, w, y, z)
    message = str(e.value)
    assert "`scan`" in message and "(N, M)" in message and "200 elements (800 bytes)" in message
    assert "400 bytes" in message
    assert y.tobytes() == y0.tobytes() and z.tobytes() == z0.tobytes()
    monkeypatch.delenv("INTENT_TRACE_MAX_ALLOCATION")
    exe(x, w, y, z)  # the limit is read per call
    np.testing.assert_array_equal(y, x * 2)


@intent.kernel
def rows_outer(x: I.In[I.f32, ("B", "N")], w: I.In[I.f32, ("M",)], z: I.Out[I.f32, ("B", "N")]):
    for b in I.parallel(I.domain(0, x.shape[0])):
        z[b, 0] = 1.0
        outer = I.reshape(x[b, :], (x.shape[1], 1)) * I.reshape(w[:], (1, w.shape[0]))
        z[b, :] = I.reduce.sum(I.cumsum(outer, axis=1), axis=1)


@pytest.mark.parametrize("parallel", [False, True])
def test_cpu_temporary_over_the_limit_inside_a_parallel_loop(monkeypatch, parallel):
    if parallel:
        monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    rng = np.random.default_rng(1)
    x, w = rng.integers(-4, 4, (6, 5)).astype(np.float32), rng.integers(-4, 4, 40).astype(np.float32)
    z = np.full((6, 5), 9.0, np.float32)
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "400")
    exe = intent.compile(rows_outer, target="cpu", checks=False)
    with pytest.raises(ValueError, match=r"200 elements \(800 bytes\)"):
        exe(x, w, z)
    assert z.tobytes() == np.full((6, 5), 9.0, np.float32).tobytes()
    monkeypatch.delenv("INTENT_TRACE_MAX_ALLOCATION")
    exe(x, w, z)
    np.testing.assert_array_equal(z, (x[:, :, None] * np.cumsum(w)[None, None, :]).sum(axis=2))


@intent.kernel
def grow_in_while(x: I.In[I.f32, ("N", "M")], y: I.Out[I.f32, ("N",)]):
    v, _ = I.while_(lambda c: c[1] < 4, lambda c: (I.cumsum(c[0], axis=1), c[1] + 1), (x[:, :], I.cast(0, I.i32)))
    y[:] = I.reduce.sum(v, axis=1)


def test_cpu_failed_allocation_inside_a_while_loop_without_checks_stops(monkeypatch):
    x = np.ones((4, 64), np.float32)
    y = np.zeros(4, np.float32)
    exe = intent.compile(grow_in_while, target="cpu", checks=False)
    exe(x, y)
    np.testing.assert_array_equal(y, [math.comb(68, 5)] * 4)  # four prefix sums of ones, summed: C(68, 5)
    y[:] = 0
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "100")  # the 1024-byte cumsum result cannot fit
    with pytest.raises(ValueError, match=r"of shape \(N, M\) needs 256 elements \(1024 bytes\)"):
        exe(x, y)
    assert not y.any()


def test_cpu_staging_copy_over_the_limit_is_a_value_error_naming_it(monkeypatch):
    x, w, y, z = _arrays(n=50, m=2)
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "100")  # y's 200-byte staging copy cannot fit
    with pytest.raises(ValueError, match="staging copy of y"):
        intent.compile(write_then_outer, target="cpu")(x, w, y, z)
    assert (y == 7).all()
