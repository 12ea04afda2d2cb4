"""A cpu call stages its outputs only when a check can fail after a write (oracle/numba/staging.py, issue 19).

Staging (running on copies of the Out/InOut arrays, copied back on success) keeps a failing call's outputs
unchanged (T9) at the price of two passes over every output and fresh pages per call. Row kernels (both softmax
spellings, a norm whose centred row is a quotient) have one kind of check: the allocation of their row buffers
inside the parallel loop over rows (layer norm has none: its centred row is recomputed, oracle/numba/rows.py).
It is made once before the loop, where nothing has been written, so they run unstaged and still leave their outputs
bit for bit as they were when the buffer cannot be allocated; a loop over no rows allocates nothing and cannot
fail. A check that can follow a write (a data-dependent store after an output was written, a row loop after a
write) keeps the staging. Serial and parallel builds.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import bits_equal
from example_modules import benchmark_module, example

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

ZOO = benchmark_module("zoo_kernels")


@intent.kernel
def quotient_norm(x: I.In[I.f32, ("M", "N")], g: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)],
                  y: I.Out[I.f32, ("M", "N")]):
    """Layer norm of the row divided by its largest magnitude: the quotient is held in a row buffer."""
    n = I.cast(x.shape[1], I.f32)
    c = (x[:, :] - ZOO.rows(I.reduce.sum(x[:, :], axis=1) / n, x)) / ZOO.rows(I.reduce.max(I.abs(x[:, :]), axis=1), x)
    var = I.reduce.sum(c * c, axis=1) / n
    y[:, :] = c * ZOO.rows(I.rsqrt(var + 1e-5), x) * g[:] + b[:]


ROW_KERNELS = {"softmax_whole": (ZOO.softmax_whole, 1), "softmax_parallel": (example("row_softmax").softmax_rows, 1),
               "quotient_norm": (quotient_norm, 3)}


@intent.kernel
def count_then_softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], count: I.Out[I.f32, (1,)]):
    """A write before the row loop: its row-buffer check then follows a write."""
    count[0] = I.cast(x.shape[0], I.f32)
    e = I.exp(x[:, :] - ZOO.rows(I.reduce.max(x[:, :], axis=1), x))
    y[:, :] = e / ZOO.rows(I.reduce.sum(e, axis=1), x)


@intent.kernel
def write_then_store(x: I.In[I.f32, ("K",)], idx: I.In[I.i32, ("K",)], first: I.Out[I.f32, ("K",)],
                     y: I.Out[I.f32, ("N",)]):
    first[:] = x[:] * 2.0  # written before the bounds check of the store below can fail
    b = I.buffer((y.shape[0],), I.f32, init=0.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = x[k]
    y[:] = b[:]


def _args(name, m, n, rng):
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    extra = [rng.standard_normal(n).astype(np.float32) for _ in range(ROW_KERNELS[name][1] - 1)]
    return [x, *extra]


def _poisoned(shape):
    """An output filled with a NaN pattern the kernel never writes."""
    return np.full(shape, 0x7FC0DEAD, np.uint32).view(np.float32)


@pytest.mark.parametrize("checks", [True, False])
@pytest.mark.parametrize("name", sorted(ROW_KERNELS))
def test_row_kernels_run_unstaged(name, checks):
    exe = intent.compile(ROW_KERNELS[name][0], target="cpu", checks=checks)
    assert exe.module.ERROR_SITES and exe.module.STAGES_OUTPUTS is False


@pytest.mark.parametrize("checks", [True, False])
def test_layer_norm_allocates_nothing_and_checks_nothing(checks):
    exe = intent.compile(ZOO.layer_norm, target="cpu", checks=checks)
    assert exe.module.ERROR_SITES == [] and exe.module.STAGES_OUTPUTS is False


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name", sorted(ROW_KERNELS))
def test_a_row_buffer_over_the_limit_fails_before_any_write(monkeypatch, name, parallel):
    if parallel:
        monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    kernel = ROW_KERNELS[name][0]
    m, n = 9, 40  # a row buffer of 40 float32: 160 bytes
    args = _args(name, m, n, np.random.default_rng(1))
    exe = intent.compile(kernel, target="cpu")
    y = _poisoned((m, n))
    exe(*args, y)  # under the machine's limit: runs
    assert not np.isnan(y).any()
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "100")
    y = _poisoned((m, n))
    with pytest.raises(ValueError, match=r"40 elements \(160 bytes\), more than the 100 bytes"):
        exe(*args, y)
    assert bits_equal(y, _poisoned((m, n)))
    assert (exe._pick([*args, y]) is exe.module.kernel_parallel) == parallel  # the build that ran
    empty = [a[:0] if a.ndim == 2 else a for a in args]  # no rows: nothing is allocated, nothing fails
    exe(*empty, np.zeros((0, n), np.float32))


@pytest.mark.parametrize("parallel", [False, True])
def test_a_check_after_a_write_keeps_the_staging(monkeypatch, parallel):
    if parallel:
        monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    exe = intent.compile(count_then_softmax, target="cpu")
    assert exe.module.STAGES_OUTPUTS is True
    y, count = _poisoned((5, 12)), _poisoned((1,))
    exe(x, y, count)
    assert count[0] == 5 and np.allclose(y.sum(axis=1), 1, rtol=0, atol=1e-6)
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "40")  # the row buffer (48 bytes) cannot fit, nor y's copy
    y, count = _poisoned((5, 12)), _poisoned((1,))
    with pytest.raises(ValueError, match=r"the staging copy of y needs 60 elements"):  # staged: copied first
        exe(x, y, count)
    assert bits_equal(y, _poisoned((5, 12))) and bits_equal(count, _poisoned((1,)))
    monkeypatch.delenv("INTENT_TRACE_MAX_ALLOCATION")

    store = intent.compile(write_then_store, target="cpu")
    assert store.module.STAGES_OUTPUTS is True
    first, out = _poisoned((3,)), _poisoned((4,))
    with pytest.raises(IndexError, match="coordinate 9 on axis 0 is outside its extent 4"):
        store(np.ones(3, np.float32), np.array([0, 9, 1], np.int32), first, out)
    assert bits_equal(first, _poisoned((3,))) and bits_equal(out, _poisoned((4,)))
