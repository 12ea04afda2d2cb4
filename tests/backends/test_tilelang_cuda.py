"""tilelang-cuda specifics on a GPU machine (collected only when INTENT_TRACE_TEST_TARGETS names tilelang-cuda):
the tiled matmul specialisation against exact references, and the fallback for extents its tiles do not divide."""
from __future__ import annotations

import numpy as np

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


def test_tiled_matmul_specialisation_is_exact_on_exact_operands():
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    assert [s.name for s in exe.specializations] == ["matmul"]
    a, b, want = _exact_operands(256, 128, 512, 0)
    c = np.zeros((256, 512), np.float16)
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


def test_extents_the_tiles_do_not_divide_take_the_general_program():
    exe = intent.compile(matmul_f16, target="tilelang-cuda")
    a, b, want = _exact_operands(3, 7, 5, 2)
    c = np.zeros((3, 5), np.float16)
    exe(a, b, c)
    np.testing.assert_array_equal(c, want)


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
