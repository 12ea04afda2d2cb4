"""Causal linear attention as a region scan (spec §9.2).

out[t] = q[t] @ sum_{s <= t} k[s]^T v[s]. A slice's transition is the sum of its k^T v; transitions
compose by addition and apply to a running state by addition; each slice emits its outputs from the
state it receives plus its own causal (masked) part. The slice boundaries are unobservable: the
absolute positions needed for the causal mask come in as a source component (I.indices).
"""
import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.fn
def transition(q, k, v, pos):
    return I.matmul(k, v, transpose_lhs=True, acc_dtype=I.f32)  # sum over the slice of k^T v: [D, D]


@intent.fn
def emit(q, k, v, pos, state):
    n = pos.shape[0]
    causal = I.reshape(pos, (n, 1)) >= I.reshape(pos, (1, n))  # absolute positions: t >= s
    scores = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    within = I.matmul(I.select(causal, scores, I.zeros(scores.shape, I.f32)), v, acc_dtype=I.f32)
    return I.matmul(q, state, acc_dtype=I.f32) + within


@intent.kernel
def linear_attention(q: I.In[I.f32, ("L", "D")], k: I.In[I.f32, ("L", "D")], v: I.In[I.f32, ("L", "D")],
                     out: I.Out[I.f32, ("L", "D")], final: I.Out[I.f32, ("D", "D")]):
    t = I.domain(0, q.shape[0])
    D = q.shape[1]
    zero = I.zeros((D, D), I.f32)
    outputs, state = I.region_scan(
        source=(q[:, :], k[:, :], v[:, :], I.indices(t)), axis=0,
        summarize=transition, combine=lambda a, b: a + b, identity=zero,
        initial_state=zero, apply=lambda tr, s: s + tr, emit=emit)
    out[:, :] = outputs
    final[:, :] = state


@intent.kernel
def linear_attention_batched(q: I.In[I.f32, ("B", "L", "D")], k: I.In[I.f32, ("B", "L", "D")],
                             v: I.In[I.f32, ("B", "L", "D")], out: I.Out[I.f32, ("B", "L", "D")],
                             final: I.Out[I.f32, ("B", "D", "D")]):
    """The same scan per batch entry (batch * heads): entries are independent, so a parallel loop."""
    for b in I.parallel(I.domain(0, q.shape[0])):
        t = I.domain(0, q.shape[1])
        zero = I.zeros((q.shape[2], q.shape[2]), I.f32)
        outputs, state = I.region_scan(
            source=(q[b, :, :], k[b, :, :], v[b, :, :], I.indices(t)), axis=0,
            summarize=transition, combine=lambda x, y: x + y, identity=zero,
            initial_state=zero, apply=lambda tr, s: s + tr, emit=emit)
        out[b, :, :] = outputs
        final[b, :, :] = state


def reference(q, k, v):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    states = np.cumsum(np.einsum("ld,le->lde", k, v), axis=0)
    return np.einsum("ld,lde->le", q, states), states[-1]


def main(L: int = 600, D: int = 8) -> int:
    print(linear_attention.trace())
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, D)).astype(np.float32) for _ in range(3))
    want_out, want_final = reference(q, k, v)
    failures = 0
    for target in intent.runnable_targets():
        out, final = np.zeros((L, D), np.float32), np.zeros((D, D), np.float32)
        intent.compile(linear_attention, target=target)(q, k, v, out, final)
        err = max(float(np.max(np.abs(out - want_out)) / np.max(np.abs(want_out))),
                  float(np.max(np.abs(final - want_final)) / np.max(np.abs(want_final))))
        ok = err < 1e-4
        failures += not ok
        print(f"{target:>10}: max relative error vs float64 reference {err:.1e} -> {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
