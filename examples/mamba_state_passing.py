"""Mamba-style state passing across an explicit, algorithmic chunk axis (spec §9.2's counter-example).

The chunk axis and the per-chunk states are part of the kernel's interface (the host sees the state
entering every chunk), so this is *not* a region scan, whose slice boundaries are unobservable: it
is an ordinary ordered loop over a logical chunk domain with a tensor carry.

    h_in[c] = h               (the state entering chunk c)
    h       = decay[c] * h + chunk_state[c]

The loop is ordered, but each feature's state is a chain of its own: on tilelang-cuda every feature gets a thread
that runs the whole loop on its element (``print(exe.schedule)``: ``carried_lanes``), bit for bit the serial program.
"""
import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def state_passing(chunk_state: I.In[I.f32, ("C", "D")], decay: I.In[I.f32, ("C",)], initial: I.In[I.f32, ("D",)],
                  state_in: I.Out[I.f32, ("C", "D")], final: I.Out[I.f32, ("D",)]):
    chunks = I.domain(0, chunk_state.shape[0])
    features = I.domain(0, chunk_state.shape[1])

    def step(c, h):
        state_in[c, features] = h
        return h * decay[c] + chunk_state[c, features]

    final[features] = I.loop(chunks, initial[features], step)


def reference(chunk_state, decay, initial):
    h = initial.astype(np.float32)
    states = np.empty_like(chunk_state)
    for c in range(chunk_state.shape[0]):
        states[c] = h
        h = (h * decay[c]).astype(np.float32) + chunk_state[c]
    return states, h


def main() -> int:
    print(state_passing.trace())
    rng = np.random.default_rng(0)
    C, D = 6, 8
    chunk_state = rng.standard_normal((C, D)).astype(np.float32)
    decay = rng.uniform(0.5, 1.0, C).astype(np.float32)
    initial = rng.standard_normal(D).astype(np.float32)
    want_states, want_final = reference(chunk_state, decay, initial)
    failures = 0
    for target in intent.runnable_targets():
        states, final = np.zeros((C, D), np.float32), np.zeros(D, np.float32)
        intent.compile(state_passing, target=target)(chunk_state, decay, initial, states, final)
        ok = np.array_equal(states, want_states) and np.array_equal(final, want_final)
        failures += not ok
        print(f"{target:>10}: state passing {'exact' if ok else 'MISMATCH'} -> {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
