"""Quickstart: write a logical kernel once, trace it, read its graph, run it.

Run as a script (``python examples/quickstart.py``) or paste the cells into a notebook.
"""
# %% A kernel is a plain function over views, scalars and domains: no tiles, threads or layouts.
import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.cli import quiet_third_party_logs  # TileLang logs two INFO lines per compiled kernel


@intent.fn
def softplus(v):
    """A helper: traced inline where it is called; it keeps coordinate provenance intact."""
    return I.log1p(I.exp(v))


@intent.kernel
def scaled_softplus(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], scale: I.f32):
    rows = I.domain(0, x.shape[0])
    cols = I.domain(0, x.shape[1])
    y[rows, cols] = softplus(x[rows, cols]) * scale


@intent.kernel
def reverse_cumsum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    n = x.shape[0]
    # An ordered loop with a carry: walk the coordinates backwards, counting forward.
    def step(ordinal, total):
        i = n - 1 - ordinal  # provenance: a coordinate of the same domain, reversed
        total = total + x[i]
        y[i] = total
        return total

    I.loop(I.domain(0, n), I.cast(0.0, I.f32), step)


def main() -> int:
    # %% Tracing runs the function once on proxies; the result is a typed graph (KIR).
    graph = scaled_softplus.trace()
    print(graph)
    print()
    print(reverse_cumsum.trace())
    print()

    # %% Run on every target this machine can run (intent.targets() lists all of them), and compare with NumPy.
    for target in intent.targets():
        if target not in intent.runnable_targets():
            print(f"{target:>14}: not run here ({intent.compiler.unavailable_reason(target).split(';')[0]})")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    want = (np.log1p(np.exp(x.astype(np.float64))) * 2.0).astype(np.float32)
    v = rng.standard_normal(7).astype(np.float32)
    want_cumsum = np.cumsum(v[::-1].astype(np.float32))[::-1]
    failures = 0
    with quiet_third_party_logs():
        failures = _run_all(x, want, v, want_cumsum)
    return 1 if failures else 0


def _run_all(x, want, v, want_cumsum) -> int:
    failures = 0
    for target in intent.runnable_targets():
        y = np.zeros_like(x)
        intent.compile(scaled_softplus, target=target)(x, y, 2.0)
        err = float(np.max(np.abs(y - want) / np.maximum(np.abs(want), 1e-30)))
        cs = np.zeros_like(v)
        intent.compile(reverse_cumsum, target=target)(v, cs)
        ok = err < 1e-6 and np.array_equal(cs, want_cumsum)
        failures += not ok
        print(f"{target:>14}: scaled_softplus max rel err {err:.1e}, reverse_cumsum "
              f"{'exact' if np.array_equal(cs, want_cumsum) else 'MISMATCH'} -> {'ok' if ok else 'FAIL'}")
    return failures


if __name__ == "__main__":
    raise SystemExit(main())
