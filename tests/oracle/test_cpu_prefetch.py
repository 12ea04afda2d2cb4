"""cpu's prefetch of a row group's next input row (intent_trace/oracle/numba/prefetch.py, emitter.py).

A row group prefetches row ``r + 1`` of each argument it reads at row ``r`` just before its first write. The
prefetch is a hint: the tests check where it is emitted, that the row kernels keep NumPy's values in both builds
with it, and that the intrinsic accepts every array and row a kernel can hand it (rows outside the array, empty
arrays, non-contiguous rows, which it skips) without touching memory it should not.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.prefetch import prefetch_row

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "benchmarks"))
sys.path.insert(0, str(_ROOT / "examples"))
from row_softmax import softmax_rows  # noqa: E402
from zoo_kernels import layer_norm  # noqa: E402


@intent.kernel
def scaled_rows(x: I.In[I.f32, ("M", "N")], s: I.In[I.f32, ("M",)], y: I.Out[I.f32, ("M", "N")]):
    """No reduction consumed by a member: no row group, so no prefetch."""
    y[:, :] = x[:, :] * I.reshape(s[:], (x.shape[0], 1))


@pytest.mark.parametrize("threshold", [1 << 62, 0], ids=["serial", "parallel"])
@pytest.mark.parametrize("m, n", [(1, 5), (3, 1024), (17, 1000)])
def test_layer_norm_prefetches_its_next_input_row_and_keeps_its_values(monkeypatch, threshold, m, n):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", threshold)
    rng = np.random.default_rng(m * n)
    x = (rng.standard_normal((m, n)) * 3 + 1).astype(np.float32)
    g, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    y = np.full((m, n), np.nan, np.float32)
    exe = intent.compile(layer_norm, target="cpu")
    exe(x, g, b, y)
    # in both builds' code: one prefetch of x's next row, right before the loop that writes y's row
    found = re.findall(r"R\.prefetch_row\(arg0, (\w+) \+ 1\)\n\s*for \w+ in range\(arg3\.shape\[1\]\):\n(?:.*\n){1,9}?"
                       r"\s*arg3\[\1, \w+\] = ", exe.source)
    assert len(found) >= 2, exe.source
    assert exe.source.count("R.prefetch_row(") == len(found)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b
    assert np.allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threshold", [1 << 62, 0], ids=["serial", "parallel"])
def test_a_parallel_loop_over_rows_prefetches_its_next_row_too(monkeypatch, threshold):
    """The ``for r in I.parallel(rows)`` spelling of softmax: the iteration prefetches x's next row before it
    writes y's row, as the whole-tensor spelling's row group does."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", threshold)
    x = (np.random.default_rng(5).standard_normal((9, 300)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe = intent.compile(softmax_rows, target="cpu")
    exe(x, y)
    found = re.findall(r"R\.prefetch_row\(arg0, (\w+) \+ 1\)\n\s*for \w+ in range\(\w+\):\n(?:.*\n){1,4}?"
                       r"\s*arg1\[\1, \w+\] = ", exe.source)
    assert len(found) >= 2 and exe.source.count("R.prefetch_row(") == len(found), exe.source
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_a_kernel_without_a_row_group_prefetches_nothing():
    exe = intent.compile(scaled_rows, target="cpu")
    x = np.ones((4, 8), np.float32)
    y = np.empty_like(x)
    exe(x, np.arange(4, dtype=np.float32), y)
    assert "prefetch" not in exe.source
    assert np.array_equal(y, np.arange(4, dtype=np.float32)[:, None] * x)


@njit
def _hint(a, r):
    prefetch_row(a, r)
    return a.sum()


def _arrays():
    base = np.arange(6 * 10 * 4, dtype=np.float32).reshape(6, 10, 4)
    return {
        "c2d": base.reshape(60, 4),
        "c3d": base,
        "long rows": np.zeros((2, 5000), np.float64),  # a row above the prefetch cap
        "fortran": np.asfortranarray(base.reshape(60, 4)),
        "strided rows": base.reshape(60, 4)[:, ::2],
        "reversed rows": base.reshape(60, 4)[::-1],
        "empty": np.zeros((0, 4), np.float32),
        "empty rows": np.zeros((3, 0), np.float32),
    }


@pytest.mark.parametrize("name", list(_arrays()))
def test_the_prefetch_is_a_hint_for_every_array_and_row(name):
    a = _arrays()[name]
    before = a.copy()
    for r in (0, 1, a.shape[0] - 1, a.shape[0], a.shape[0] + 1, -1, -(1 << 40), 1 << 40):
        assert _hint(a, r) == before.sum()
    assert np.array_equal(a, before)


@njit
def _hint_only(a, r):
    prefetch_row(a, r)


def test_the_prefetch_is_llvm_prefetch_under_its_bounds_check():
    _hint_only(np.zeros((3, 8), np.float32), 1)
    ir = _hint_only.inspect_llvm(_hint_only.signatures[0])
    body = ir[ir.index("define"):]
    # the row is compared with 0 and with the row count before any prefetch is issued
    assert "@llvm.prefetch" in body and body.index("icmp") < body.index("call void @llvm.prefetch"), body
