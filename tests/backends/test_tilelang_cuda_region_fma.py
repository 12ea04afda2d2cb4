"""Flash attention written with ``I.fma`` (``examples/flash_attention.py``: ``attention_f16_fma``, the score scaled and
the row max subtracted in one fused op, as FlashAttention's FFMA) as a segmented fold on tilelang-cuda.

The program: the row max is reduced on the unscaled product (no element pass before it), the fused op is CUDA's
``fmaf`` alone on the tile program's fast path (cuda_region_tiles.fast_helpers: a NaN result's row is recomputed by
the serial program, :mod:`intent_trace.backends.tilelang.cuda_region_nan`), and the program lowers for sm_90a to it
(ptxas' spill check is test_tilelang_cuda_region.py's). The numbers run on every executable target (tilelang-c runs
CUDA's mapping emulated) against the float64 NumPy reference of the test file next door, with its bound (P rounded
to f16: 2^-9 max|v|; exp2 approximate is within it), at extents no block divides, and with NaN and infinite inputs
at several positions of Q, K and V, in blocks the source's tail masks and in whole ones: NaN-ness must be the
reference's, every other element within the bound.
"""
import re

import numpy as np
import pytest

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import _attention_case, _check, _reference, _specs, compiled  # noqa: F401
from backends.tilelang_support import cuda_source
from schedule.region_kernels import FA

KERNEL = FA.attention_f16_fma


def test_the_fused_scores_are_one_fmaf_after_a_max_of_the_raw_product():
    program = _specs(KERNEL)["segmented_fold_d128"].program
    qk = re.search(r"T\.wgmma_gemm\(\w+, \w+, (\w+), transpose_B=True", program).group(1)
    assert re.search(rf"T\.reduce_max\({qk}, ", program)
    assert "float it_fma_f32(float a, float b, float c) { return fmaf(a, b, c); }" in program
    assert "it_fma_f32_ieee" not in program  # no x86-NaN decision around it in the hot loop


def test_the_fma_program_lowers_to_fmaf_for_sm90a():
    # ptxas' register and spill check is test_tilelang_cuda_region.py's test_the_programs_lower_for_sm90a
    source = cuda_source(_specs(KERNEL)["segmented_fold_d128"].program)
    assert "wgmma" in source and "fmaf(" in source


@pytest.mark.parametrize("B, L, S, D", [(2, 16, 40, 16), (1, 300, 600, 16), (1, 128, 256, 32)],
                         ids=["below-one-block", "tails", "whole-blocks"])
def test_fma_attention_matches_numpy(compiled, B, L, S, D):  # noqa: F811
    args, bound = _attention_case(B, L, S, D, seed=L + S + 1)
    out = np.zeros((B, L, D), np.float16)
    compiled(KERNEL, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args), bound)


@pytest.mark.parametrize("where", ["first-block", "tail-block"])
def test_fma_attention_with_nan_and_infinite_inputs(compiled, where):  # noqa: F811
    # S = 150: one whole block of 128 keys and a tail of 22 the last block masks; the specials sit in either. Batch 0:
    # a NaN query (its row NaN) and a NaN value (its column NaN); batch 1: an infinite key and an infinite query (the
    # rows whose score is +inf: inf - inf); batch 2: a NaN key (every row NaN)
    B, L, S, D = 3, 140, 150, 16
    key = 7 if where == "first-block" else 140
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=13 + key)
    q[0, 3, 5] = np.nan
    v[0, key, 4] = np.nan
    k[1, key, 2] = np.inf
    q[1, 139, 0] = np.inf
    k[2, key + 1, 9] = np.nan
    out = np.zeros((B, L, D), np.float16)
    compiled(KERNEL, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale)
    assert np.isnan(want[0, 3]).all() and np.isnan(want[0, :, 4]).all() and not np.isnan(want[0]).all()
    assert np.isnan(want[1]).any() and not np.isnan(want[1]).all() and np.isnan(want[2]).all()
    _check(out, want, bound)
