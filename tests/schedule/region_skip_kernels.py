"""Causal-style folds for the masked-block proof (schedule/region_skip.py) and the skip in the CUDA program
(cuda_region_skip.py): comparisons of the row and source coordinates in each direction, and near misses the proof
must refuse (an additive mask, a data mask, an unguarded P, a finite sentinel)."""
import math

import intent_trace as intent
from intent_trace import I
from schedule.region_kernels import FA, batched_attention, rows

NEG_INF = -math.inf


def _scores(k, q, scale):
    return I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale


def _masked_summary(s, keep, v):
    """``summarize_causal``'s tail: masked scores -inf, P re-selected to 0 there, P V in f16."""
    s = I.select(keep, s, I.full(s.shape, NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp(s - rows(m, s)), I.zeros(s.shape, I.f32))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


def _grid(q, k, query_pos, key_pos):
    return I.reshape(query_pos, (q.shape[0], 1)), I.reshape(key_pos, (1, k.shape[0]))


@intent.fn
def _anti_causal(k, v, key_pos, q, scale, query_pos):
    """Query i sees keys i.. (``key >= query``, written key first): the blocks before the diagonal are empty."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    return _masked_summary(_scores(k, q, scale), kp >= qp, v)


@intent.fn
def _strict(k, v, key_pos, q, scale, query_pos):
    """Query i sees keys 0..i-1 (``query > key``)."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    return _masked_summary(_scores(k, q, scale), qp > kp, v)


@intent.fn
def _causal_and_data(k, v, key_pos, q, scale, query_pos):
    """The causal mask and-ed with a mask of the data (scores above -4): false wherever the causal one is."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    s = _scores(k, q, scale)
    return _masked_summary(s, (qp >= kp) & (s > -4.0), v)


@intent.fn
def _additive(k, v, key_pos, q, scale, query_pos):
    """The causal mask as an additive bias (0 or -inf added to the scores): a masked score is s + -inf, which is
    NaN for s = +inf, so nothing is known of a masked block without K."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    s = _scores(k, q, scale)
    s = s + I.select(qp >= kp, I.zeros(s.shape, I.f32), I.full(s.shape, NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def _data_mask(k, v, key_pos, q, scale, query_pos):
    """A mask of the data only (scores above -4): no coordinate comparison."""
    s = _scores(k, q, scale)
    return _masked_summary(s, s > -4.0, v)


@intent.fn
def _unguarded(k, v, key_pos, q, scale, query_pos):
    """The causal mask on the scores only: P = exp(-inf - -inf) = NaN in a fully masked block, so l is NaN there."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    s = I.select(qp >= kp, _scores(k, q, scale), I.full((q.shape[0], k.shape[0]), NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def _sentinel(k, v, key_pos, q, scale, query_pos):
    """Masked scores a finite -1e30, as many FlashAttention codes write them: a fully masked block's m is -1e30, not
    the identity's -inf."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    keep = qp >= kp
    s = I.select(keep, _scores(k, q, scale), I.full((q.shape[0], k.shape[0]), -1e30, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp(s - rows(m, s)), I.zeros(s.shape, I.f32))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


anti_causal_f16 = batched_attention(_anti_causal, FA.combine, positions=True)
strict_causal_f16 = batched_attention(_strict, FA.combine, positions=True)
causal_and_data_f16 = batched_attention(_causal_and_data, FA.combine, positions=True)
additive_causal_f16 = batched_attention(_additive, FA.combine, positions=True)
data_mask_f16 = batched_attention(_data_mask, FA.combine, positions=True)
unguarded_causal_f16 = batched_attention(_unguarded, FA.combine, positions=True)
sentinel_causal_f16 = batched_attention(_sentinel, FA.combine, positions=True)


@intent.kernel
def causal_single_f16(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("S", "D")], v: I.In[I.f16, ("S", "D")],
                      out: I.Out[I.f16, ("L", "D")], scale: I.f32):
    """The causal example without a batch loop (its flags are one per source block, no batch axis)."""
    key_pos, query_pos = I.indices(I.domain(0, k.shape[0])), I.indices(I.domain(0, q.shape[0]))
    queries = q[:, :]
    L, D = queries.shape
    identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
    m, l, acc = I.region_fold(source=(k[:, :], v[:, :], key_pos), axis=0, summarize=FA.summarize_causal,
                              combine=FA.combine, identity=identity, operands=(queries, scale, query_pos))
    out[:, :] = I.cast(acc / rows(l, acc), I.f16)


@intent.fn
def _causal_score_max(k, key_pos, q, query_pos):
    """max over the keys a query sees of its scores: a masked block's max is -inf, the identity, whatever K holds."""
    qp, kp = _grid(q, k, query_pos, key_pos)
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    return I.reduce.max(I.select(qp >= kp, s, I.full(s.shape, NEG_INF, I.f32)), axis=1)


@intent.kernel
def causal_score_max_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                         out: I.Out[I.f32, ("B", "L")]):
    """out[b, i] = max_{j <= i} q[b, i] . k[b, j] (-inf where row i sees no key): nothing need be finite to skip."""
    key_pos, query_pos = I.indices(I.domain(0, k.shape[1])), I.indices(I.domain(0, q.shape[1]))
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        out[b, :] = I.region_fold(source=(k[b, :, :], key_pos), axis=0, summarize=_causal_score_max,
                                  combine=I.maximum, identity=I.full((queries.shape[0],), NEG_INF, I.f32),
                                  operands=(queries, query_pos))
