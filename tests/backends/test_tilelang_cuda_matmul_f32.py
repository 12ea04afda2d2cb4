"""The f32 matmul on CUDA cores (cuda_matmul.simt): a 128 x 128 block tile, an 8 x 8 register block a thread, one
fused multiply-add a product (T10), tails read as zeros and stored only inside C, NaN outputs recomputed by the
serial program (x86's payloads).

On the H200 (the lead's run)::

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/backends/test_tilelang_cuda_matmul_f32.py tests/backends/test_tilelang_cuda.py -k "f32"

The program text: never ``T.gemm`` (f32 tensor-core MMAs are TF32: Hopper's wgmma has no FP32 operands), ``fmaf``
in the inner loop, and TileLang lowers it for sm_90a. The numbers: on every executable target against NumPy float64
within T5's bound ((K + 1) u sum |a||b|, plus the subnormal products' absolute error), at extents no tile divides;
NaN results keep the serial program's payload bits; on tilelang-c the C target runs the CUDA program emulated (its
blocks one after another, each phase between barriers a serial loop over the block's threads).
"""
import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda_kernels, cuda_matmul, targets
from intent_trace.backends.tilelang import target as tl_target

RNG = np.random.default_rng(3232)
U32 = 2.0 ** -24
EMULATED = attrs.evolve(targets.C, specializations=cuda_kernels.emulated_specializations)
SIMT_TARGETS = ("tilelang-c", "tilelang-cuda")


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


def test_the_program_accumulates_with_fma_on_cuda_cores_at_any_extents():
    (spec,) = cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)
    p = spec.program
    assert "T.gemm" not in p and "T.call_extern('float32', 'fmaf', a[i], b[j], acc[i * 8 + j])" in p
    assert "T.if_then_else(by * 128 + (l * 256 + tx) // 16 < d0 and ko * 16 + (l * 256 + tx) % 16 < d1" in p
    assert "if by * 128 + tx // 16 + 16 * i < d0 and bx * 128 + tx % 16 + 16 * j < d2:" in p
    assert spec.applies({0: 1, 1: 1, 2: 1}) and spec.applies({0: 130, 1: 37, 2: 129})
    assert not spec.applies({0: 0, 1: 4, 2: 4})  # an empty extent: the general program
    source = cuda_source(p)
    assert "fmaf(a[" in source and "mma" not in source.replace("#pragma", "") and "__syncthreads()" in source


def test_the_emulated_program_is_the_cuda_one_a_thread_at_a_time():
    spec = cuda_matmul.simt(matmul_f32.trace(), targets.C)
    p = spec.program
    assert p.count("for tx in T.serial(256):") == 4  # init, load, multiply-add, store: the barriers' phases
    assert "T.sync_threads()" not in p and "acc = T.alloc_local((16384,), 'float32')" in p
    assert "T.call_extern('float32', 'fmaf', a[i], b[j], acc[tx * 64 + i * 8 + j])" in p


@pytest.fixture
def compiled(target, monkeypatch):
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel, sizes):
        exe = intent.compile(kernel, target=target)
        if target in SIMT_TARGETS:
            spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), sizes)))
            assert spec is not None and "fmaf" in spec.program, spec
        return exe

    return compiled


def _serial(a, b):
    """The serial program's sum on x86 NumPy: from +0, add each rounded product in ascending k (x86 NaN rules)."""
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for kk in range(a.shape[1]):
            c = c + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    return c


def _check(c, a, b, target):
    with np.errstate(all="ignore"):
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = (a.shape[1] + 1) * U32 * (np.abs(a).astype(np.float64) @ np.abs(b)) + a.shape[1] * 2.0 ** -149
    want = _serial(a, b)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(c), nan)
    if target in SIMT_TARGETS:  # recomputed by the serial program's helpers: its payloads, bit for bit
        np.testing.assert_array_equal(c[nan].view(np.uint32), want[nan].view(np.uint32))
    ok = np.isfinite(exact) & np.isfinite(want)
    assert np.all(np.abs(c[ok] - exact[ok]) <= bound[ok]), np.max(np.abs(c[ok] - exact[ok]) / bound[ok])
    return want


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (128, 16, 128), (130, 37, 129), (257, 40, 300)])
def test_f32_matmul_within_t5s_bound_at_tails(compiled, target, m, k, n):
    exe = compiled(matmul_f32, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    exe(a, b, c)
    _check(c, a, b, target)


def test_f32_matmul_nans_infs_zeros_and_subnormals(compiled, target):
    m, k, n = 140, 24, 131
    exe = compiled(matmul_f32, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    a[3, 5] = np.array([0x7FC0_1234], np.uint32).view(np.float32)[0]  # a NaN payload reaches row 3
    b[6, 1] = np.array([0xFF80_0055], np.uint32).view(np.float32)[0]  # a signalling NaN, sign set: column 1
    a[5, 2], b[2, 7] = 0.0, np.inf  # 0 * inf: x86's default NaN at (5, 7)
    a[9, :], b[:, 11] = 1e30, 1e30  # overflow to inf at (9, 11)
    a[12, :] *= np.float32(1e-38)  # subnormal products in row 12
    a[4, :] = -0.0  # row 4: +0 + (-0 * x) keeps +0
    a[139, :] = 2.0  # the last row, in the second block's tail
    c = np.full((m, n), np.nan, np.float32)
    exe(a, b, c)
    want = _check(c, a, b, target)
    assert np.isnan(want[3]).all() and np.isnan(want[5, 7]) and np.isinf(want[9, 11])
    assert np.isinf(c[9, 11]) and c[9, 11] > 0 and np.all(c[4][~np.isnan(want[4])] == 0) and not np.signbit(c[4][~np.isnan(want[4])]).any()


def test_wrong_dtype_and_extents_leave_the_output_unchanged(compiled):
    exe = compiled(matmul_f32, (2, 3, 4))
    c = np.full((2, 4), 5.0, np.float32)
    with pytest.raises(TypeError):
        exe(np.ones((2, 3), np.float64), np.ones((3, 4), np.float32), c)
    with pytest.raises(ValueError, match="K"):
        exe(np.ones((2, 3), np.float32), np.ones((5, 4), np.float32), c)
    assert np.all(c == 5.0)
