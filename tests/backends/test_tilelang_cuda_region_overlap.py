"""The segmented fold's overlapped source loop (cuda_region_overlap: a block's second product issued with
``T.wgmma_gemm`` and accumulated into the running leaf while the next block's element work runs, FlashAttention's
combine form).

Which folds get it is decided from the helpers' structure: attention in every spelling, causal or not (the fold's
own combine, its operands the other way round, shifted, anti-causal, the FlashAttention and fma spellings), f16 and
bf16; not a fold whose summary has one product, none, or f32 products, and never on Metal. The schedule says so. The numbers: bf16 causal attention and the
reversed combine run on every executable target (tilelang-c runs CUDA's mapping emulated: the same rotated
loop, the products synchronous) against float64 NumPy, at extents no block divides (the loop's extra iteration, the
late V tile of the last block, the first block's missing PV), and one block exactly; the f16 kernels' numbers are
tests/backends/test_tilelang_cuda_region*.py's, which run the overlapped program now.

Bounds: the softmax of float64 NumPy (no rounding of P); the program rounds P times the combine's factor to bf16
(2^-9 relative on each term), its output to bf16 (2^-9 of |out| <= max|v|), f32 sums well inside: 2^-7 max|v| covers
them with room and fails any block dropped or mis-scaled.
"""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import _attention_case, _check, _reference, _specs, compiled  # noqa: F401
from backends.test_tilelang_metal_region import attention_bf16  # its summarize rounds P to bf16
from intent_trace.backends.tilelang import metal_region, targets
from intent_trace.backends.tilelang.metal_region import MetalSpelling
from schedule import region_skip_kernels as K
from schedule.region_kernels import (FA, attention_causal_shifted_f16, batched_attention, key_max_f16, outer_max_f32,
                                     score_sum_f16)

BF16 = ml_dtypes.bfloat16


@intent.fn
def _combine_reversed(a, b):
    """``FA.combine`` with every operation's operands the other way round (the block's term first)."""
    ma, la, acc_a = a
    mb, lb, acc_b = b
    m = I.maximum(mb, ma)
    alpha, beta = FA.rescale(ma, m), FA.rescale(mb, m)
    return m, lb * beta + la * alpha, acc_b * FA.rows(beta, acc_b) + acc_a * FA.rows(alpha, acc_a)


REVERSED = batched_attention(FA.summarize_causal, _combine_reversed, positions=True)


@intent.fn
def _summarize_causal_bf16(k, v, key_pos, q, scale, query_pos):
    """``summarize_causal`` with P rounded to bf16 before the PV product."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    keep = I.reshape(query_pos, (q.shape[0], 1)) >= I.reshape(key_pos, (1, k.shape[0]))
    s = I.select(keep, s, I.full(s.shape, FA.NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp(s - FA.rows(m, s)), I.zeros(s.shape, I.f32))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.bf16), v, acc_dtype=I.f32)


@intent.kernel
def causal_bf16(q: I.In[I.bf16, ("B", "L", "D")], k: I.In[I.bf16, ("B", "S", "D")],
                v: I.In[I.bf16, ("B", "S", "D")], out: I.Out[I.bf16, ("B", "L", "D")], scale: I.f32):
    key_pos, query_pos = I.indices(I.domain(0, k.shape[1])), I.indices(I.domain(0, q.shape[1]))
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        L, D = queries.shape
        identity = (I.full((L,), FA.NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
        m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :], key_pos), axis=0, summarize=_summarize_causal_bf16,
                                  combine=FA.combine, identity=identity, operands=(queries, scale, query_pos))
        out[b, :, :] = I.cast(acc / FA.rows(l, acc), I.bf16)


OVERLAPPED = (FA.attention_f16_causal, attention_causal_shifted_f16, K.anti_causal_f16, REVERSED, causal_bf16,
              FA.attention_f16, FA.attention_f16_fast, FA.attention_f16_fma, attention_bf16)


@pytest.mark.parametrize("kernel", OVERLAPPED, ids=lambda k: k.name)
def test_attention_in_every_spelling_gets_the_overlapped_loop(kernel):
    spec = _specs(kernel)["segmented_fold_d128"]
    assert spec.program.count("T.wgmma_gemm(") == 2 and "T.gemm(" not in spec.program
    assert "T.wait_wgmma(1)" in spec.program and "overlapped" in spec.part.param("pipelined")


@pytest.mark.parametrize("kernel", [key_max_f16, score_sum_f16, outer_max_f32, FA.attention],
                         ids=["one-product", "sum", "no-product", "f32-products"])
def test_other_folds_keep_the_waiting_loop(kernel):
    for spec in _specs(kernel).values():
        assert "wgmma_gemm" not in spec.program and "wait_wgmma" not in spec.program
        assert "overlapped" not in spec.part.param("pipelined")


def test_metal_never_overlaps():
    specs = metal_region.specializations(FA.attention_f16_causal.trace(), targets.METAL)
    assert specs and MetalSpelling.overlap is False
    for spec in specs:
        assert "wgmma" not in spec.program and "overlapped" not in spec.part.param("pipelined")


def test_the_reversed_combine_rescales_by_the_running_leafs_factor():
    # the reversed combine writes acc_b * beta + acc_a * alpha: the running leaf is rescaled by alpha, P by beta
    program = _specs(REVERSED)["segmented_fold_d128"].program
    run = re.search(r"T\.wgmma_gemm\((\w+), \w+, (\w+), clear_accum=False", program)
    p, acc = run.groups()
    alpha = re.search(rf"{acc}\[(\w+), (\w+)\], (row\d+)\[\1\]\)", program).group(3)
    beta = re.search(rf"{p}\[\w+, \w+\] = T\.Cast\('float16', T\.call_extern\('float32', 'it_mul_f32', "
                     r"\w+\[\w+, \w+\], (row\d+)\[\w+\]\)\)", program).group(1)
    assert alpha != beta
    rows = dict(re.findall(r"(row\d+)\[\w+\] = (t\d+)", program))
    assert rows[alpha] != rows[beta]


def _bf16_case(B, L, S, D, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(BF16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    return q, k, v, 1.0 / math.sqrt(D)


@pytest.mark.parametrize("B, L, S, D", [(2, 16, 40, 16), (1, 200, 300, 32), (1, 128, 128, 16)],
                         ids=["below-one-block", "tails", "one-block"])
def test_bf16_causal_attention_matches_numpy(compiled, B, L, S, D):  # noqa: F811
    q, k, v, scale = _bf16_case(B, L, S, D, seed=S)
    out = np.zeros((B, L, D), BF16)
    compiled(causal_bf16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    s = np.where(np.arange(L)[:, None] >= np.arange(S)[None, :], s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bls,bsd->bld", p / p.sum(axis=2, keepdims=True), v.astype(np.float64))
    assert np.abs(out.astype(np.float64) - want).max() <= 2.0 ** -7 * float(np.abs(v.astype(np.float64)).max())


@pytest.mark.parametrize("B, L, S, D", [(1, 300, 600, 16), (2, 128, 256, 32)], ids=["tails", "whole-blocks"])
def test_the_reversed_combine_matches_numpy(compiled, B, L, S, D):  # noqa: F811
    args, bound = _attention_case(B, L, S, D, seed=L + S + 3)
    out = np.zeros((B, L, D), np.float16)
    compiled(REVERSED, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args, causal=True), bound)
