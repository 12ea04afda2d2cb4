"""tilelang-cuda specifics on a GPU machine (collected only when INTENT_TRACE_TEST_TARGETS names tilelang-cuda):
the tiled matmul and flash-attention specialisations against references, and the fallback for extents their tiles do
not divide."""
from __future__ import annotations

import numpy as np
import pytest
from example_modules import example

import intent_trace as intent
from intent_trace import I


@intent.kernel
def matmul_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.cast(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32), I.f16)


def _exact_operands(m, k, n, seed):
    """Small integers: every product and partial sum is exact in f32, so any association gives one result."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)
    b = rng.integers(-4, 5, (k, n)).astype(np.float16)
    return a, b, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)


@pytest.mark.parametrize("m,k,n,columns", [(256, 128, 512, 128), (2048, 64, 2048, 256)])
def test_tiled_matmul_specialisation_is_exact_on_exact_operands(m, k, n, columns):
    # 128 x 256 tiles where their grid has WIDE_BLOCKS (128) blocks, 128 x 128 tiles on smaller grids
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    assert [s.name for s in exe.specializations] == ["matmul", "matmul"]
    spec = exe.specialization_for({ev.extent: s for ev, s in zip(exe.graph.extents, (m, k, n))})
    assert spec.grid[1][1] == columns
    a, b, want = _exact_operands(m, k, n, 0)
    c = np.zeros((m, n), np.float16)
    exe(a, b, c)
    np.testing.assert_array_equal(c, want)
    assert "T.gemm" in exe.source


def test_tiled_matmul_rounds_the_f32_accumulator_to_f16_once():
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 256)).astype(np.float16)
    c = np.zeros((128, 256), np.float16)
    exe(a, b, c)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 64 * 2.0**-24 / (1 - 64 * 2.0**-24) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    lo, hi = (exact - bound).astype(np.float16), (exact + bound).astype(np.float16)
    assert np.all((c >= np.minimum(lo, hi)) & (c <= np.maximum(lo, hi)))


@pytest.mark.parametrize("m,k,n", [(1, 8, 8), (129, 72, 264), (1000, 1000, 1000), (300, 8, 520), (257, 520, 8)])
def test_tiled_matmul_masks_the_tails_its_tiles_do_not_divide(m, k, n):
    # tails on every axis, a single row, K shorter than one k-step: exact operands, so the result is exact
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    assert exe.specialization_for({ev.extent: s for ev, s in zip(exe.graph.extents, (m, k, n))}) is not None
    a, b, want = _exact_operands(m, k, n, m + k + n)
    c = np.full((m, n), np.nan, np.float16)  # every element written
    exe(a, b, c)
    np.testing.assert_array_equal(c, want)
    import torch  # none outside C: C is the leading rows of a larger device buffer whose last row stays NaN

    big = torch.full((m + 1, n), float("nan"), dtype=torch.float16, device="cuda")
    exe.launch(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), big[:m])
    torch.cuda.synchronize()
    assert torch.isnan(big[m]).all() and np.array_equal(big[:m].cpu().numpy(), want)


@pytest.mark.parametrize("batch,m,k,n", [(1, 128, 64, 256), (3, 100, 72, 264), (5, 1, 8, 8)])
def test_batched_tiled_matmul_is_exact_on_exact_operands(batch, m, k, n):
    from example_modules import benchmark_module

    exe = intent.compile(benchmark_module("zoo_kernels").batched_matmul_f16, target="tilelang-cuda")
    sizes = {"B": batch, "M": m, "K": k, "N": n}
    assert exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents}).name == \
        "batched_matmul"
    pairs = [_exact_operands(m, k, n, 10 * j + batch) for j in range(batch)]
    a, b, want = (np.stack([p[i] for p in pairs]) for i in range(3))
    c = np.full((batch, m, n), np.nan, np.float16)
    exe(a, b, c)
    np.testing.assert_array_equal(c, want)


def test_extents_the_tiles_do_not_divide_take_the_general_program():
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    a, b, want = _exact_operands(3, 7, 5, 2)
    c = np.zeros((3, 5), np.float16)
    exe(a, b, c)
    np.testing.assert_array_equal(c, want)


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


def _serial_f32_matmul(a, b):
    """The serial program's sum on x86 NumPy: from +0, add each rounded product in ascending k (x86 NaN rules)."""
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for kk in range(a.shape[1]):
            c = c + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    return c


def test_f32_matmul_tiles_on_cuda_cores_within_t5s_bound_and_keeps_the_serial_nans():
    exe = intent.compile(matmul_f32, target="tilelang-cuda")
    spec = exe.specialization_for({ev.extent: {"M": 256, "K": 24, "N": 128}[ev.extent.name] for ev in exe.graph.extents})
    assert spec is not None and "T.gemm" not in spec.program  # f32 operands never reach tensor cores (TF32)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((256, 24)).astype(np.float32)
    b = rng.standard_normal((24, 128)).astype(np.float32)
    a[3, 5] = np.array([0x7FC0_1234], np.uint32).view(np.float32)[0]  # a NaN payload reaches row 3
    b[6, 1] = np.array([0xFF80_0055], np.uint32).view(np.float32)[0]  # a signalling NaN, sign set: column 1
    a[5, 2], b[2, 7] = 0.0, np.inf  # 0 * inf: x86's default NaN at (5, 7)
    a[9, :], b[:, 11] = 1e30, 1e30  # overflow to inf at (9, 11)
    a[12, :] *= np.float32(1e-38)  # subnormal products in row 12
    a[4, :] = -0.0  # row 4: +0 + (-0 * x) keeps +0
    c = np.full((256, 128), np.nan, np.float32)
    exe(a, b, c)
    want = _serial_f32_matmul(a, b)
    assert np.isnan(want[3]).all() and np.isnan(want[5, 7]) and np.isinf(want[9, 11])
    nan = np.isnan(want)  # recomputed by the serial program: its payloads, bit for bit
    np.testing.assert_array_equal(c[nan].view(np.uint32), want[nan].view(np.uint32))
    assert np.isinf(c[9, 11]) and c[9, 11] > 0 and np.all(c[4][~np.isnan(want[4])] == 0) and not np.signbit(c[4][~np.isnan(want[4])]).any()
    # fused multiply-adds (T10): within T5's bound of the exact sum, plus the subnormal products' absolute error
    with np.errstate(all="ignore"):
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = 25 * 2.0 ** -24 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 24 * 2.0 ** -149
    ok = np.isfinite(exact) & np.isfinite(want)  # (9, 11) overflows f32
    assert np.all(np.abs(c[ok] - exact[ok]) <= bound[ok])


@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


def test_grid_mapped_pointwise_nest_matches_numpy_bit_for_bit():
    from .tilelang_support import F32_EDGES  # adversarial values (±0, NaN payloads, subnormals, inf)

    exe = intent.compile(chain4, target="tilelang-cuda")
    assert "T.get_thread_binding()" in exe.program
    rng = np.random.default_rng(3)
    x = np.concatenate([np.asarray(F32_EDGES, np.float32), rng.standard_normal(5000).astype(np.float32)])
    y = np.roll(x, 7)[::-1].copy()
    out = np.zeros_like(x)
    exe(x, y, out)
    with np.errstate(all="ignore"):
        t = x * np.float32(1.5) + y
        want = np.where(np.isnan(t) | np.isnan(x), np.float32(np.nan), np.maximum(t, x)) - np.float32(0.25)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(out[finite].view(np.uint32), want[finite].view(np.uint32))
    assert np.all(np.isnan(out[~finite]))


# --- flash attention (examples/flash_attention.py) -------------------------------------------------------------

FA = example("flash_attention")


def _attention_case(B, L, S, D, seed, causal=False):
    """Inputs, the float64 reference with P rounded to f16 (one slice: the global row max; l of the unrounded P)
    and the bound of a target's error from it: any segmentation rounds each p = exp(s - m_slice) to f16 relative
    to its slice's max, so a PV term differs from the reference's by at most 2^-11 + 2^-11 relative and the quotient
    by 2^-10 max|v|; the output's rounding to f16 adds 2^-11 max|v|; f32 contracts, sums and exp (<= 2 ulp) add
    ~1e-5 relative. Bound: 2^-9 max|v|."""
    import math

    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    scale = 1.0 / math.sqrt(D)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.arange(L)[:, None] >= np.arange(S)[None, :], s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
    return (q, k, v, scale), want / p.sum(axis=2, keepdims=True), 2.0**-9 * float(np.abs(v).max())


def _chosen(exe, **sizes):
    """The name of the program the executable runs at these extents ("general" for its own)."""
    spec = exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents})
    return "general" if spec is None else spec.name


@pytest.mark.parametrize("name", ["attention_f16", "attention_f16_fast", "attention_f16_causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_tiled_attention_matches_numpy(D, name):
    B, L, S = 2, 256, 256
    exe = intent.compile(getattr(FA, name), target="tilelang-cuda")
    assert _chosen(exe, B=B, L=L, S=S, D=D) == f"segmented_fold_d{D}"
    args, want, bound = _attention_case(B, L, S, D, seed=D, causal=name.endswith("causal"))
    out = np.zeros((B, L, D), np.float16)
    exe(*args[:3], out, args[3])
    assert np.abs(out.astype(np.float64) - want).max() <= bound


def test_tiled_attention_agrees_with_tilelang_c():
    # the serial program of tilelang-c segments the keys otherwise: both within the bound of the reference, so within
    # twice the bound of each other (a small shape: the serial C program takes seconds per 128 x 128 x 64 batch entry)
    B, L, S, D = 1, 128, 128, 64
    if "tilelang-c" not in intent.runnable_targets():
        pytest.skip("tilelang-c does not run on this machine")
    exe = intent.compile(FA.attention_f16, target="tilelang-cuda")
    assert _chosen(exe, B=B, L=L, S=S, D=D) == f"segmented_fold_d{D}"
    args, want, bound = _attention_case(B, L, S, D, seed=3)
    out, c_out = np.zeros((B, L, D), np.float16), np.zeros((B, L, D), np.float16)
    exe(*args[:3], out, args[3])
    intent.compile(FA.attention_f16, target="tilelang-c")(*args[:3], c_out, args[3])
    assert np.abs(c_out.astype(np.float64) - want).max() <= bound
    assert np.abs(out.astype(np.float64) - c_out.astype(np.float64)).max() <= 2 * bound


def test_attention_extents_the_tiles_do_not_divide_take_the_tile_program_with_masked_tails():
    B, L, S, D = 2, 48, 80, 16
    exe = intent.compile(FA.attention_f16, target="tilelang-cuda")
    assert _chosen(exe, B=B, L=L, S=S, D=D) == "segmented_fold_d16"
    args, want, bound = _attention_case(B, L, S, D, seed=5)
    out = np.zeros((B, L, D), np.float16)
    exe(*args[:3], out, args[3])
    assert np.abs(out.astype(np.float64) - want).max() <= bound
