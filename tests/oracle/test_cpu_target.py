"""The cpu target (Numba CPU oracle): generated source, caching, checks, staging, injection safety."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I


@intent.kernel
def axpy(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], a: I.f32):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * a + y[d]


@intent.kernel
def gather_rows(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], out: I.Out[I.f32, ("K",)]):
    k = I.domain(0, idx.shape[0])
    for i in I.parallel(k):
        out[i] = x[idx[i]]


def test_cpu_source_is_a_numba_function_without_fastmath():
    exe = intent.compile(axpy, target="cpu")
    assert "@njit(" in exe.source and "def kernel(" in exe.source
    assert "fastmath" not in exe.source


def test_cpu_fuses_a_pointwise_chain_without_temporaries():
    exe = intent.compile(axpy, target="cpu")
    assert "alloc_empty" not in exe.source  # read -> mul -> add -> write is one loop, no array temporaries
    assert "prange" in exe.source


def test_cpu_axpy_matches_numpy():
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, dtype=np.float32)
    want = (x * np.float32(3.0) + y).astype(np.float32)
    intent.compile(axpy, target="cpu")(x, y, 3.0)
    np.testing.assert_array_equal(y, want)


def test_cpu_in_process_cache_returns_the_same_executable():
    assert intent.compile(axpy, target="cpu") is intent.compile(axpy, target="cpu")
    assert intent.compile(axpy, target="cpu", checks=False) is not intent.compile(axpy, target="cpu")


def test_cpu_out_of_bounds_data_index_raises_index_error_and_keeps_outputs():
    x = np.arange(4, dtype=np.float32)
    idx = np.array([0, 9, 1], dtype=np.int32)
    out = np.full(3, -1.0, dtype=np.float32)
    with pytest.raises(IndexError, match=r"x: coordinate 9 on axis 0 is outside its extent 4"):
        intent.compile(gather_rows, target="cpu")(x, idx, out)
    np.testing.assert_array_equal(out, [-1.0, -1.0, -1.0])


def test_cpu_checks_false_drops_the_bounds_checks_from_the_source():
    checked = intent.compile(gather_rows, target="cpu").source
    unchecked = intent.compile(gather_rows, target="cpu", checks=False).source
    assert "err[0] =" in checked and "err[0] =" not in unchecked
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(2, dtype=np.float32)
    intent.compile(gather_rows, target="cpu", checks=False)(x, np.array([3, 0], np.int32), out)
    np.testing.assert_array_equal(out, [3.0, 0.0])


def test_cpu_checks_false_still_stages_when_an_in_view_aliases_an_output():
    @intent.kernel
    def shift(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0] - 1)
        for i in I.parallel(d):
            y[i + 1] = x[i]

    buf = np.arange(5, dtype=np.float32)
    intent.compile(shift, target="cpu", checks=False)(buf, buf)
    np.testing.assert_array_equal(buf, [0, 0, 1, 2, 3])  # reads saw the caller's data, not partial writes


def test_cpu_user_names_never_reach_generated_source():
    @intent.kernel
    def k(np: I.In[I.f32, ("err",)], R: I.Out[I.f32, ("err",)], math: I.f32, kernel: I.Constexpr[int] = 2):
        d = I.domain(0, np.shape[0])
        R[d] = np[d] * math + I.cast(kernel, I.f32)

    exe = intent.compile(k, target="cpu")
    x = np_module.arange(3, dtype=np_module.float32)
    out = np_module.zeros(3, dtype=np_module.float32)
    exe(x, out, 2.0)
    np_module.testing.assert_array_equal(out, x * 2 + 2)
    signature = next(line for line in exe.source.splitlines() if line.startswith("def kernel("))
    assert signature == "def kernel(arg0, arg1, arg2, ext0, limit, err):"


np_module = np


def test_cpu_extent_names_that_would_inject_code_are_rejected():
    with pytest.raises(ValueError, match="identifier"):
        I.In[I.f32, ("N); import os; os.system('true'); (",)]


def test_cpu_record_field_names_that_would_inject_code_are_rejected(tmp_path):
    marker = tmp_path / "pwned"

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(**{f"a=open({str(marker)!r},'w')#": x[d]})
        y[d] = r.a

    with pytest.raises(intent.TraceError, match="identifier"):
        intent.compile(k, target="cpu")
    assert not marker.exists()


def test_cpu_on_disk_cache_is_reused_by_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import time, numpy as np
        import intent_trace as intent
        from intent_trace import I
        from intent_trace.oracle.numba import target

        @intent.kernel
        def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
            d = I.domain(0, x.shape[0])
            y[d] = I.exp(x[d]) * 2.0 + 1.0

        exe = intent.compile(k, target="cpu")
        x = np.ones(4, np.float32); y = np.zeros(4, np.float32)
        exe(x, y)
        fn = exe.function
        print(len(fn.stats.cache_hits), len(fn.stats.cache_misses))
    """)
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split() == ["0", "1"]  # compiled once...
    assert second.stdout.split() == ["1", "0"]  # ...and loaded from disk by the next process


def test_cpu_large_calls_use_the_parallel_build_with_identical_results():
    exe = intent.compile(axpy, target="cpu")
    assert "def kernel_parallel(" in exe.source
    n = 1 << 17
    x = np.arange(n, dtype=np.float32)
    y_small, y_large = np.ones(8, np.float32), np.ones(n, np.float32)
    assert exe._pick([x, y_large]) is exe.module.kernel_parallel
    assert exe._pick([x[:8], y_small]) is exe.module.kernel
    exe(x, y_large, 0.5)
    np.testing.assert_array_equal(y_large, x * np.float32(0.5) + np.float32(1))


@intent.kernel
def shifted_and_transposed(x: I.In[I.f32, ("N",)], z: I.Out[I.f32, ("M",)], a: I.In[I.f32, ("R", "C")],
                           b: I.Out[I.f32, ("C", "R")]):
    for i in I.parallel(I.domain(0, z.shape[0])):
        z[i] = x[i + 1]  # a parallel point in signed index arithmetic
    b[:, :] = I.transpose(a[:, :]) + 1.0  # a parallel loop nest whose index is permuted


def test_cpu_parallel_build_indexes_with_signed_arithmetic():
    n = 1 << 16
    x = np.arange(n + 1, dtype=np.float32)
    z = np.zeros(n, np.float32)
    a = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    b = np.zeros((48, 64), np.float32)
    exe = intent.compile(shifted_and_transposed, target="cpu")
    assert exe._pick([x, z, a, b]) is exe.module.kernel_parallel
    exe(x, z, a, b)
    np.testing.assert_array_equal(z, x[1:])
    np.testing.assert_array_equal(b, a.T + 1)


@intent.kernel
def chunked_prefix(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, ("N",)]):
    d = I.domain(0, x.shape[0])
    outs, _ = I.region_scan(source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                            combine=lambda a, b: a + b, identity=I.cast(0.0, I.f64), initial_state=I.cast(0.0, I.f64),
                            apply=lambda t, s: s + t, emit=lambda s, state: I.cumsum(s, axis=0) + state)
    y[d] = outs


def test_cpu_parallel_build_offsets_region_slices_with_signed_arithmetic():
    x = np.random.default_rng(0).standard_normal(1 << 16)
    y = np.zeros_like(x)
    exe = intent.compile(chunked_prefix, target="cpu")
    assert exe._pick([x, y]) is exe.module.kernel_parallel
    exe(x, y)
    np.testing.assert_allclose(y, np.cumsum(x), rtol=0, atol=1e-9)


@intent.kernel
def scale_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = x[:, :] * 2.0


def test_cpu_a_bound_layout_is_remembered_and_every_other_is_checked_again():
    """Calls whose arguments are all NumPy arrays reuse the binding of a layout (dtype, shape, strides,
    writeability) seen before; a layout not seen before is bound and checked as on a first call, one that
    fails is never remembered, and a kernel with a scalar parameter binds every call."""
    exe = intent.compile(scale_rows, target="cpu")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):
        y = np.zeros_like(x)
        exe(x, y)
        assert np.array_equal(y, x * 2) and len(exe._layouts) == 1
    wide = np.arange(20, dtype=np.float32).reshape(4, 5)
    y = np.zeros_like(wide)
    exe(wide, y)  # other extents
    assert np.array_equal(y, wide * 2) and len(exe._layouts) == 2
    strided = np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2]  # the same shape, other strides
    y = np.zeros_like(x)
    exe(strided, y)
    assert np.array_equal(y, strided * 2) and len(exe._layouts) == 3
    frozen = np.zeros_like(x)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        exe(x, frozen)
    with pytest.raises(ValueError, match="disagrees"):
        exe(x, np.zeros((3, 5), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        exe(x.astype(np.float64), np.zeros_like(x))
    assert len(exe._layouts) == 3 and not frozen.any()
    scaled = intent.compile(axpy, target="cpu")
    ys = np.ones(4, np.float32)
    scaled(np.arange(4, dtype=np.float32), ys, 3.0)
    assert np.array_equal(ys, np.arange(4, dtype=np.float32) * 3 + 1) and not scaled._layouts
