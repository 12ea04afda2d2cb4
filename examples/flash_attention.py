"""FlashAttention as a logical kernel: QK and PV are explicit contracts; a region fold abstracts only
the legal contiguous segmentation of the key/value source (spec §9.1).

Each slice of keys/values is summarised by (row max m, row sum l, unnormalised output acc); two
summaries combine by rescaling to the larger max. Nothing here says how big a slice is or how the
work maps to hardware: that is the compiler's choice, and the laws make every choice agree. On
tilelang-cuda every kernel here except the f32 one becomes a tile program derived from these helpers
(``print(exe.schedule)``: ``segmented_fold``): blocks of 128 queries a program, keys in pipelined blocks
of 128, both contracts on tensor cores, the summary and combine in registers.
"""
import math

import numpy as np

import intent_trace as intent
from intent_trace import I

NEG_INF = -math.inf
LOG2E = math.log2(math.e)


@intent.fn
def rows(v, like):
    """[L] -> [L, 1] so a per-row value broadcasts across a row of ``like``."""
    return I.reshape(v, (like.shape[0], 1))


@intent.fn
def summarize(k, v, q, scale):
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale  # QK: [L, S_slice]
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(p, v, acc_dtype=I.f32)  # PV: [L, D]


@intent.fn
def summarize_f16(k, v, q, scale):
    """``summarize`` for f16 operands: the contracts run on f16 and accumulate in f32; P is rounded to f16
    before the PV contract (so every target, tensor cores included, computes the same product)."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def summarize_fast(k, v, q, scale_log2):
    """``summarize_f16`` as FlashAttention writes it: the scores carry scale * log2(e) (the kernel folds it in), so
    2^(s - m) is e^(scale * qk - max) and the exponentials are ``I.exp2(..., approximate=True, flush_to_zero=True)``
    as FlashAttention compiles them (fast math): within 2 ulp (T4), a subnormal result a zero (its f16 P is zero
    either way), the hardware's ``ex2.approx.ftz`` instruction on a GPU (T10)."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale_log2
    m = I.reduce.max(s, axis=1)
    p = I.exp2(s - rows(m, s), approximate=True, flush_to_zero=True)
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def summarize_fma(k, v, q, scale_log2):
    """``summarize_fast`` with the score scaled and the row max subtracted in one ``I.fma``, as FlashAttention's FFMA
    does: the max is of the unscaled scores (max(s) * c is max(s * c) for c > 0: rounding is monotone), carried in
    log2 units as ``combine_fast`` wants; ``m * -c`` (not ``-(m * c)``) keeps one NaN payload a row."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    m = I.reduce.max(s, axis=1)
    p = I.exp2(I.fma(s, scale_log2, rows(m, s) * -scale_log2), approximate=True, flush_to_zero=True)
    return m * scale_log2, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def summarize_causal(k, v, key_pos, q, scale, query_pos):
    """``summarize_f16`` with the causal mask: query i sees key j only when j <= i. The positions are absolute
    (a source component and an operand, never the slice's own coordinates: spec §9.1); a row of the slice
    that sees no key gives the empty summary (m = -inf, l = 0, acc = 0), which ``combine`` ignores."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    keep = I.reshape(query_pos, (q.shape[0], 1)) >= I.reshape(key_pos, (1, k.shape[0]))
    s = I.select(keep, s, I.full(s.shape, NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp(s - rows(m, s)), I.zeros(s.shape, I.f32))  # masked: 0, not exp(-inf + inf)
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def summarize_causal_fast(k, v, key_pos, q, scale_log2, query_pos):
    """``summarize_causal`` spelled as ``summarize_fast`` (FlashAttention's causal kernel): scores carrying
    scale * log2(e), an approximate, flushing ``exp2`` a score. (Not ``summarize_fma``'s form: its maximum leaves the
    block as ``m * scale_log2``, whose value on a block past the diagonal (-inf times an operand) the skip's proof
    cannot know, so every block would be computed.)"""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale_log2
    keep = I.reshape(query_pos, (q.shape[0], 1)) >= I.reshape(key_pos, (1, k.shape[0]))
    s = I.select(keep, s, I.full(s.shape, NEG_INF, I.f32))
    m = I.reduce.max(s, axis=1)
    p = I.select(keep, I.exp2(s - rows(m, s), approximate=True, flush_to_zero=True), I.zeros(s.shape, I.f32))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


def merge(a, b, scale_of):
    """Two summaries rescaled to the larger max; ``scale_of(m_old, m_new)`` is the exponential of their difference,
    with an empty summary (m = -inf) contributing nothing instead of NaN."""
    ma, la, acc_a = a
    mb, lb, acc_b = b
    m = I.maximum(ma, mb)
    alpha, beta = scale_of(ma, m), scale_of(mb, m)
    return m, la * alpha + lb * beta, acc_a * rows(alpha, acc_a) + acc_b * rows(beta, acc_b)


@intent.fn
def rescale(m_old, m_new):
    """exp(m_old - m_new), with an empty summary (m = -inf) contributing nothing instead of NaN."""
    return I.select(m_old == NEG_INF, I.zeros(m_old.shape, I.f32), I.exp(m_old - m_new))


@intent.fn
def rescale_fast(m_old, m_new):
    """2^(m_old - m_new) (maxima of scores in log2 units), approximate and flushing as in ``summarize_fast``."""
    return I.select(m_old == NEG_INF, I.zeros(m_old.shape, I.f32),
                    I.exp2(m_old - m_new, approximate=True, flush_to_zero=True))


@intent.fn
def combine(a, b):
    return merge(a, b, rescale)


@intent.fn
def combine_fast(a, b):
    return merge(a, b, rescale_fast)


@intent.kernel
def attention(q: I.In[I.f32, ("L", "D")], k: I.In[I.f32, ("S", "D")], v: I.In[I.f32, ("S", "D")],
              out: I.Out[I.f32, ("L", "D")], scale: I.f32):
    queries = q[:, :]
    L, D = queries.shape
    identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
    m, l, acc = I.region_fold(source=(k[:, :], v[:, :]), axis=0, summarize=summarize, combine=combine,
                              identity=identity, operands=(queries, scale))
    out[:, :] = acc / rows(l, acc)


def attend_f16(q, k, v, out, summarize, combine, scale, causal=False):
    """The batched (batch * heads = B) f16 fold the kernels below share: per batch entry the keys and values folded
    with ``summarize``/``combine``, summaries in f32, the output rounded to f16 once. ``causal``: the absolute key
    and query positions join the source and the operands (``summarize`` masks with them)."""
    if causal:
        key_pos, query_pos = I.indices(I.domain(0, k.shape[1])), I.indices(I.domain(0, q.shape[1]))
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        L, D = queries.shape
        identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
        source, operands = (k[b, :, :], v[b, :, :]), (queries, scale)
        if causal:
            source, operands = source + (key_pos,), operands + (query_pos,)
        m, l, acc = I.region_fold(source=source, axis=0, summarize=summarize, combine=combine, identity=identity,
                                  operands=operands)
        out[b, :, :] = I.cast(acc / rows(l, acc), I.f16)


@intent.kernel
def attention_f16(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")], v: I.In[I.f16, ("B", "S", "D")],
                  out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
    """Batched (batch * heads = B) f16 attention: the same fold per batch entry, summaries in f32."""
    attend_f16(q, k, v, out, summarize_f16, combine, scale)


@intent.kernel
def attention_f16_fast(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                       v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
    """``attention_f16`` written the way FlashAttention is: log2(e) folded into the scale, approximate exp2."""
    attend_f16(q, k, v, out, summarize_fast, combine_fast, scale * LOG2E)


@intent.kernel
def attention_f16_fma(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                      v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
    """``attention_f16_fast`` with one ``I.fma`` a score (``summarize_fma``); needs a positive ``scale``."""
    attend_f16(q, k, v, out, summarize_fma, combine_fast, scale * LOG2E)


@intent.kernel
def attention_f16_causal(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                         v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
    """``attention_f16`` with the causal mask (query i attends keys 0..i)."""
    attend_f16(q, k, v, out, summarize_causal, combine, scale, causal=True)


@intent.kernel
def attention_f16_causal_fast(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                              v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
    """``attention_f16_causal`` written the way FlashAttention is (``summarize_causal_fast``)."""
    attend_f16(q, k, v, out, summarize_causal_fast, combine_fast, scale * LOG2E, causal=True)


def reference(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def reference_f16(q, k, v, scale, causal=False):
    """Batched, with P rounded to f16 before PV as ``summarize_f16`` says (the sum l is of the unrounded P);
    ``causal``: query i attends keys 0..i."""
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.arange(s.shape[1])[:, None] >= np.arange(s.shape[2])[None, :], s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    acc = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
    return acc / p.sum(axis=2, keepdims=True)


def main(L: int = 64, S: int = 600, D: int = 16) -> int:
    print(attention.trace())
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((L, D), (S, D), (S, D)))
    scale = 1.0 / math.sqrt(D)
    want = reference(q, k, v, scale)
    failures = 0
    for target in intent.runnable_targets():
        out = np.zeros((L, D), np.float32)
        intent.compile(attention, target=target)(q, k, v, out, scale)
        err = float(np.max(np.abs(out - want)))
        ok = err < 1e-4
        failures += not ok
        print(f"{target:>10}: max abs error vs float64 softmax(QK^T)V {err:.1e} -> {'ok' if ok else 'FAIL'}")
    # the batched f16 kernel: P rounded to f16 where the kernel says, any segmentation (each p rounded relative to
    # its own slice's max), then the output rounded to f16: within (2^-10 + 2^-11) max|v| of the reference
    q, k, v = (rng.standard_normal(shape).astype(np.float16) for shape in ((3, L, D), (3, S, D), (3, S, D)))
    want = reference_f16(q, k, v, scale)
    bound = 2.0**-9 * float(np.abs(v).max())
    causal = reference_f16(q, k, v, scale, causal=True)
    for kernel in (attention_f16, attention_f16_fast, attention_f16_fma, attention_f16_causal):
        for target in intent.runnable_targets():
            out = np.zeros((3, L, D), np.float16)
            intent.compile(kernel, target=target)(q, k, v, out, scale)
            expected = causal if kernel is attention_f16_causal else want
            err = float(np.max(np.abs(out.astype(np.float64) - expected)))
            failures += err >= bound
            print(f"{target:>10}: {kernel.name} max abs error vs float64 with P in f16 {err:.1e} "
                  f"-> {'ok' if err < bound else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
