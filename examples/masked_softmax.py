"""Row softmax over a padded tile, as Triton's fused-softmax tutorial writes it: masked loads and stores.

    BLOCK = the next power of two >= N
    v[r, k] = x[r, k] if k < N else -inf           # I.load(x, (r, cols), valid=k < N, fill=-inf)
    y[r, k] = softmax(v[r, :])[k]  for k < N       # I.store(y, (r, cols), ..., valid=k < N)

The tile is wider than the row (N = 1000 is a multiple of no power of two above it): the lanes past the end
of the row are masked, so they read nothing, are never bounds-checked and write nothing; exp(-inf) = 0 makes
them vanish from the sum (spec §15). Checked against NumPy on every runnable target.
"""
import math

import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def masked_softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], BLOCK: I.Constexpr[int]):
    cols = I.domain(0, BLOCK)  # the padded tile: BLOCK >= N
    inside = I.indices(cols) < x.shape[1]
    for r in I.parallel(I.domain(0, x.shape[0])):
        row = I.load(x, (r, cols), valid=inside, fill=-math.inf)
        e = I.exp(row - I.reduce.max(row, axis=0))
        I.store(y, (r, cols), e / I.reduce.sum(e, axis=0), valid=inside)


def reference(x: np.ndarray) -> np.ndarray:
    """The softmax in float64."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# exp within 2 ulp (T4), a sum of N terms within N ulp-sized steps (T5), one division and the final rounding:
# for rows of N = 1000 about 1000 * 2**-24 relative; 2**-12 leaves room and still catches a wrong row or element
RELATIVE_BOUND = 2.0 ** -12


ROWS, N = 6, 1000
CONSTEXPRS = {"masked_softmax": {"BLOCK": 1 << (N - 1).bit_length()}}  # 1024: the tile main() runs (and tests)


def main() -> int:
    rows, n = ROWS, N
    block = CONSTEXPRS["masked_softmax"]["BLOCK"]
    print(masked_softmax.trace(BLOCK=block))
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    want = reference(x)
    failures = 0
    for target in intent.runnable_targets():
        y = np.full_like(x, np.nan)
        intent.compile(masked_softmax, target=target, BLOCK=block)(x, y)
        err = float(np.max(np.abs(y - want) / want))
        ok = err <= RELATIVE_BOUND
        failures += not ok
        print(f"{target:>10}: masked row softmax (N={n}, BLOCK={block}), max relative error {err:.2e} -> "
              f"{'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
