"""The write pass of a row group held on chip (cuda_rows.RowEmitter.strided: the chunks the row fills carry no guard
per element, the chunk it ends in does), checked in numbers: RMSNorm with a per-column weight -- the GPU zoo's f16
kernel, a bf16 one and an f32 one -- at row lengths on both sides of every chunk and tier boundary (1, 7, 255, 257,
1023, 1024, 1025, 4097: a warp's rows, a block's, and a pass's), on every executable target through the shared
``target`` fixture (tilelang-c runs CUDA's row mapping emulated), against NumPy in float64 within T5's bound; and
rows holding NaN and infinity, whose NaN bits are hand-computed from x86's rules (T3: the NaN operand's payload,
quieted; the default NaN 0xFFC00000 for an invalid operation)."""
import ml_dtypes
import numpy as np
import pytest
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_rows import U32, compiled  # noqa: F401  (the fixture: CUDA's rows emulated)
from schedule.row_kernels import rms_norm

RNG = np.random.default_rng(1717)
LENGTHS = (1, 7, 255, 257, 1023, 1024, 1025, 4097)
rms_norm_f16 = benchmark_module("zoo_kernels").rms_norm_f16  # the zoo's: weights in f16, computed in f32


@intent.kernel
def rms_norm_bf16(x: I.In[I.bf16, ("M", "N")], w: I.In[I.bf16, ("N",)], y: I.Out[I.bf16, ("M", "N")]):
    xf = I.cast(x[:, :], I.f32)
    mean_square = I.reduce.sum(xf * xf, axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = I.cast(xf * I.reshape(I.rsqrt(mean_square + 1e-6), (x.shape[0], 1)) * I.cast(w[:], I.f32), I.bf16)


#: (kernel, dtype, one rounding to the result's format relative, the smallest normal's half-ulp absolute)
CASES = {"f16": (rms_norm_f16, np.float16, 2.0 ** -11, 2.0 ** -25),
         "bf16": (rms_norm_bf16, ml_dtypes.bfloat16, 2.0 ** -8, 2.0 ** -134),
         "f32": (rms_norm, np.float32, 0.0, 2.0 ** -149)}


def _reference(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("d", list(CASES))
def test_rms_norm_with_weights_is_within_the_bound_at_every_row_length(compiled, d, n):
    kernel, dtype, rounding, tiny = CASES[d]
    x = (RNG.standard_normal((5, n)) * 3).astype(dtype)
    w = (RNG.standard_normal(n) + 1).astype(dtype)
    y = np.full_like(x, np.nan)
    compiled(kernel)(x, w, y)
    want = _reference(x, w)
    # rsqrt within 2 ulp where rms_norm uses sqrt and a division: (N + 10)·u relative in f32, one rounding more
    bound = ((n + 10) * U32 + rounding) * np.abs(want) + tiny
    assert np.all(np.abs(y.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("n", [7, 1024, 1025])
@pytest.mark.parametrize("d", ["f16", "bf16"])
def test_rms_norm_rows_with_nan_and_inf_keep_x86_s_nan_bits(compiled, d, n):
    kernel, dtype, rounding, tiny = CASES[d]
    bits = np.uint16
    x = (RNG.standard_normal((4, n)) * 3).astype(dtype)
    w = (RNG.standard_normal(n) + 1).astype(dtype)
    nan = {"f16": 0x7E05, "bf16": 0x7FC5}[d]  # a quiet NaN with a payload (both formats keep it through f32)
    x[0, n - 1] = np.array(nan, bits).view(dtype)  # the row's last element (the edge chunk where n is no multiple)
    x[1, n // 2] = np.inf  # the mean square is inf: x * 0 elsewhere, inf * 0 (invalid) at the inf
    x[2, 0] = -np.inf
    w[n // 3] = np.array(nan ^ 0x8000 ^ 0x2, bits).view(dtype)  # a negative NaN weight: its column NaN in every row
    y = np.zeros_like(x)
    compiled(kernel)(x, w, y)
    got = y.view(bits)
    col = n // 3

    def cast(b):  # the final cast of a NaN to the format (C body, x86): f16 keeps its payload's top bits, bf16 none
        return b if d == "f16" else (b & 0x8000) | 0x7FC0

    # row 0: the sum is x's NaN, quieted (it is quiet): every element x_j * NaN = that NaN, then * w_j keeps the first
    # NaN operand: x's NaN everywhere (the NaN weight's column too: the left operand comes first)
    assert (got[0] == cast(nan)).all(), got[0]
    for r in (1, 2):  # rsqrt(inf) = 0: finite elements become (±)0 * w, the inf element inf * 0 = the default NaN
        at = n // 2 if r == 1 else 0
        default = {"f16": 0xFE00, "bf16": 0xFFC0}[d]
        assert got[r, at] == default, hex(got[r, at])
        finite = np.ones(n, bool)
        finite[[at, col]] = False
        assert (y[r, finite].astype(np.float64) == 0).all()
        if col != at:
            assert got[r, col] == cast(nan ^ 0x8000 ^ 0x2)  # (±0) * NaN weight: the weight's NaN, quiet already
    ok = np.ones(n, bool)
    ok[col] = False
    want = _reference(x[3:], w)
    bound = ((n + 10) * U32 + rounding) * np.abs(want) + tiny
    assert np.all(np.abs(y[3:, ok].astype(np.float64) - want[:, ok]) <= bound[:, ok])
    assert got[3, col] == cast(nan ^ 0x8000 ^ 0x2)
