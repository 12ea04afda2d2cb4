"""Row softmax written as most users write it: one `parallel` iteration per row.

    y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))

Each row is independent (`I.parallel`); the row's max and sum are `I.reduce` builtins, so a target may
reduce in any order (T10). The tests, the verifier's defaults tests and `benchmarks/gpu.py` use this kernel.
"""
import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def softmax_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        row = x[r, cols]
        e = I.exp(row - I.reduce.max(row, axis=0))
        y[r, cols] = e / I.reduce.sum(e, axis=0)


def reference(x: np.ndarray) -> np.ndarray:
    """The softmax in float64."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# exp within 2 ulp (T4), a sum of N terms within N ulp-sized steps (T5), one division and the final rounding:
# for rows of N = 13 about 2**-20 relative; 2**-17 leaves room and still catches a wrong row or element
RELATIVE_BOUND = 2.0 ** -17


def main() -> int:
    print(softmax_rows.trace())
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 13)) * 4).astype(np.float32)
    want = reference(x)
    failures = 0
    for target in intent.runnable_targets():
        y = np.full_like(x, np.nan)
        intent.compile(softmax_rows, target=target)(x, y)
        err = float(np.max(np.abs(y - want) / want))
        ok = err <= RELATIVE_BOUND
        failures += not ok
        print(f"{target:>10}: row softmax, max relative error {err:.2e} -> {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
