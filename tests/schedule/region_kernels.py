"""Region folds for the segmented-fold recogniser (schedule/region.py) and its CUDA program (cuda_region.py): the
flash-attention example's kernels, other folds whose summary rows are independent, and near misses."""
import math

from example_modules import example

import intent_trace as intent
from intent_trace import I

FA = example("flash_attention")
NEG_INF = -math.inf


def rows(v, like):
    return I.reshape(v, (like.shape[0], 1))


@intent.kernel
def attention_single_f16(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("S", "D")], v: I.In[I.f16, ("S", "D")],
                         out: I.Out[I.f16, ("L", "D")], scale: I.f32):
    """The f16 attention without a batch loop (the fold at the top level), output in f32 before the cast."""
    queries = q[:, :]
    L, D = queries.shape
    identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
    m, l, acc = I.region_fold(source=(k[:, :], v[:, :]), axis=0, summarize=FA.summarize_f16, combine=FA.combine,
                              identity=identity, operands=(queries, scale))
    out[:, :] = I.cast(acc / rows(l, acc), I.f16)


@intent.fn
def _key_max(k, q):
    return I.reduce.max(I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32), axis=1)


@intent.kernel
def key_max_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f32, ("B", "L")]):
    """The largest score of each query over the keys: the fold's max is the output (exact reduction needed)."""
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        out[b, :] = I.region_fold(source=k[b, :, :], axis=0, summarize=_key_max, combine=I.maximum,
                                  identity=I.full((queries.shape[0],), NEG_INF, I.f32), operands=(queries,))


@intent.fn
def _score_sum(k, q):
    return I.reduce.sum(I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32), axis=1)


@intent.kernel
def score_sum_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f32, ("B", "L")]):
    """Each query's scores summed over the keys: a fold with a sum only."""
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        out[b, :] = I.region_fold(source=k[b, :, :], axis=0, summarize=_score_sum, combine=lambda x, y: x + y,
                                  identity=I.zeros((queries.shape[0],), I.f32), operands=(queries,))


@intent.kernel
def attention_lse_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                      v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")],
                      lse: I.Out[I.f32, ("B", "L")], scale: I.f32):
    """Attention that also writes each row's log-sum-exp ``m + log(l)``: the max reaches an output."""
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        L, D = queries.shape
        identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
        m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :]), axis=0, summarize=FA.summarize_f16,
                                  combine=FA.combine, identity=identity, operands=(queries, scale))
        out[b, :, :] = I.cast(acc / rows(l, acc), I.f16)
        lse[b, :] = m + I.log(l)


@intent.fn
def _prefix_in_summary(k, q):
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    return I.reduce.sum(I.cumsum(s, axis=1), axis=1)


@intent.kernel
def scan_in_summary(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("S", "D")], out: I.Out[I.f32, ("L",)]):
    out[:] = I.region_fold(source=k[:, :], axis=0, summarize=_prefix_in_summary, combine=lambda x, y: x + y,
                           identity=I.zeros((q.shape[0],), I.f32), operands=(q[:, :],))


@intent.kernel
def computed_source(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("S", "D")], out: I.Out[I.f32, ("L",)]):
    out[:] = I.region_fold(source=k[:, :] * I.cast(2.0, I.f16), axis=0, summarize=_score_sum,
                           combine=lambda x, y: x + y, identity=I.zeros((q.shape[0],), I.f32), operands=(q[:, :],))


@intent.fn
def _rows_total(x):
    return I.reduce.sum(x, axis=0)


@intent.kernel
def column_totals(x: I.In[I.f32, ("S", "N")], out: I.Out[I.f32, ("N",)]):
    """A fold whose summary has no rows besides its own free axis: not row-blocked (its rows are the source's)."""
    out[:] = I.region_fold(source=x[:, :], axis=0, summarize=_rows_total, combine=lambda a, b: a + b,
                           identity=I.zeros((x.shape[1],), I.f32))


SHIFT = 48  # keys a query of the shifted causal mask cannot see: its first 48 rows see none


@intent.fn
def _summarize_shifted(k, v, key_pos, q, scale, query_pos):
    """The causal summary with query i seeing keys 0..i - SHIFT: rows i < SHIFT are fully masked (m = -inf, l = 0)."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    keep = I.reshape(query_pos, (q.shape[0], 1)) >= I.reshape(key_pos + SHIFT, (1, k.shape[0]))
    s = I.select(keep, s, I.full(s.shape, NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp(s - rows(m, s)), I.zeros(s.shape, I.f32))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def _outer_max(b, a):
    """max_j a[i] * b[j] over a slice: a fold with no contraction and no free axis."""
    return I.reduce.max(I.reshape(a, (a.shape[0], 1)) * I.reshape(b, (1, b.shape[0])), axis=1)


@intent.kernel
def outer_max_f32(a: I.In[I.f32, ("L",)], b: I.In[I.f32, ("S",)], out: I.Out[I.f32, ("L",)]):
    """out[i] = max_j a[i] * b[j] (IEEE maximum: NaN wins, -0 < +0): the max is the output, so it is exact."""
    out[:] = I.region_fold(source=b[:], axis=0, summarize=_outer_max, combine=I.maximum,
                           identity=I.full((a.shape[0],), NEG_INF, I.f32), operands=(a[:],))


def batched_attention(summarize, combine, approximate_division: bool = False, positions: bool = False):
    """``attention_f16`` with another summarize or combine (or an approximate final division; ``positions``: the key
    and query positions as the causal example passes them): the segmented fold is derived from whatever the helpers
    say, so each spelling gets a program."""
    @intent.kernel
    def attention_variant(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                          v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
        key_pos, query_pos = I.indices(I.domain(0, k.shape[1])), I.indices(I.domain(0, q.shape[1]))
        for b in I.parallel(I.domain(0, q.shape[0])):
            queries = q[b, :, :]
            L, D = queries.shape
            identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
            source, operands = (k[b, :, :], v[b, :, :]), (queries, scale)
            if positions:
                source, operands = (*source, key_pos), (*operands, query_pos)
            m, l, acc = I.region_fold(source=source, axis=0, summarize=summarize, combine=combine, identity=identity,
                                      operands=operands)
            norm = I.fdiv(acc, rows(l, acc), approximate=True) if approximate_division else acc / rows(l, acc)
            out[b, :, :] = I.cast(norm, I.f16)

    return attention_variant


#: the causal attention with query i seeing keys 0..i - SHIFT
attention_causal_shifted_f16 = batched_attention(_summarize_shifted, FA.combine, positions=True)


@intent.fn
def combine_unguarded(a, b):
    """``combine`` without the empty summary's select: exp(-inf - -inf) is NaN, which only an empty row meets."""
    ma, la, acc_a = a
    mb, lb, acc_b = b
    m = I.maximum(mb, ma)  # the operands the other way round, too
    alpha, beta = I.exp(ma - m), I.exp(mb - m)
    return m, lb * beta + la * alpha, acc_b * rows(beta, acc_b) + acc_a * rows(alpha, acc_a)


@intent.kernel
def score_sum_stated_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("C", "S", "E")],
                         out: I.Out[I.f32, ("B", "L")]):
    """score_sum_f16 with the keys' batch and head extents stated equal to the queries' (I.assume_equal, a
    prologue made on the host before any launch)."""
    I.assume_equal(k.shape[0], q.shape[0])
    I.assume_equal(k.shape[2], q.shape[2])
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        out[b, :] = I.region_fold(source=k[b, :, :], axis=0, summarize=_score_sum, combine=lambda x, y: x + y,
                                  identity=I.zeros((queries.shape[0],), I.f32), operands=(queries,))
