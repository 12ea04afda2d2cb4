"""FlashAttention as a logical kernel: QK and PV are explicit contracts; a region fold abstracts only
the legal contiguous segmentation of the key/value source (spec §9.1).

Each slice of keys/values is summarised by (row max m, row sum l, unnormalised output acc); two
summaries combine by rescaling to the larger max. Nothing here says how big a slice is or how the
work maps to hardware: that is the compiler's choice, and the laws make every choice agree.
"""
import math

import numpy as np

import intent_trace as intent
from intent_trace import I

NEG_INF = -math.inf


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
def rescale(m_old, m_new):
    """exp(m_old - m_new), with an empty summary (m = -inf) contributing nothing instead of NaN."""
    return I.select(m_old == NEG_INF, I.zeros(m_old.shape, I.f32), I.exp(m_old - m_new))


@intent.fn
def combine(a, b):
    ma, la, acc_a = a
    mb, lb, acc_b = b
    m = I.maximum(ma, mb)
    alpha, beta = rescale(ma, m), rescale(mb, m)
    return m, la * alpha + lb * beta, acc_a * rows(alpha, acc_a) + acc_b * rows(beta, acc_b)


@intent.kernel
def attention(q: I.In[I.f32, ("L", "D")], k: I.In[I.f32, ("S", "D")], v: I.In[I.f32, ("S", "D")],
              out: I.Out[I.f32, ("L", "D")], scale: I.f32):
    queries = q[:, :]
    L, D = queries.shape
    identity = (I.full((L,), NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
    m, l, acc = I.region_fold(source=(k[:, :], v[:, :]), axis=0, summarize=summarize, combine=combine,
                              identity=identity, operands=(queries, scale))
    out[:, :] = acc / rows(l, acc)


def reference(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


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
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
