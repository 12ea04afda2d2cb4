"""The cpu target's float32 exp on every float32 where its scaling by 2^n splits the power or its result leaves the
normal range, and on every NaN pattern (runtime.exp_f32, issue 19).

exp_f32 multiplies its polynomial by 2^b then 2^a (a = n clamped to [-126, 127], b = n - a): b != 0 exactly where
the result is subnormal, underflows to zero or overflows, so those inputs are taken whole here, not sampled as the
every-target sweep (tests/kernels/test_exp_sweep.py) samples them. A NaN operand is not selected apart: it runs
through the polynomial, so every NaN bit pattern (both signs, quiet and signalling) is checked to come out as
itself quieted. The reference is NumPy's float64 exp rounded once to float32 (within 1 ulp, as the sweep holds
the cpu target), and for NaNs the pattern with its quiet bit set.
"""
from __future__ import annotations

import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def exp_all(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.exp(x[:])


def _every_float(lo: float, hi: float) -> np.ndarray:
    """Every float32 in [lo, hi] (both of one sign)."""
    assert (lo < 0) == (hi < 0)
    a, b = (int(v) for v in np.array([lo, hi], np.float32).view(np.int32))
    return np.arange(min(a, b), max(a, b) + 1, dtype=np.int64).astype(np.int32).view(np.float32)


def _ordered(bits):
    b = bits.astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def test_split_powers_and_range_edges_within_one_ulp():
    # results subnormal or rounding to zero (n <= -127: b < 0), the clamp at -104, overflow (n = 128: b = 1)
    x = np.concatenate([_every_float(-87.0, -105.0), _every_float(88.0, 89.5),
                        _every_float(-0.5, -1e-3)[::97], _every_float(1e-3, 0.5)[::97]])
    y = np.zeros_like(x)
    intent.compile(exp_all, target="cpu")(x, y)
    with np.errstate(over="ignore", under="ignore"):
        ref = np.exp(x.astype(np.float64)).astype(np.float32)
    distance = np.abs(_ordered(y.view(np.int32)) - _ordered(ref.view(np.int32)))
    assert distance.max() <= 1, x[int(np.argmax(distance))]
    assert (y == 0).any() and (0 < y).any() and (y < np.finfo(np.float32).tiny).any() and np.isinf(y).any()


def test_every_nan_pattern_comes_out_quieted():
    mantissas = np.arange(1, 1 << 23, dtype=np.uint32)
    bits = np.concatenate([0x7F800000 | mantissas, 0xFF800000 | mantissas]).astype(np.uint32)
    y = np.zeros(bits.size, np.float32)
    intent.compile(exp_all, target="cpu")(bits.view(np.float32), y)
    assert np.array_equal(y.view(np.uint32), bits | np.uint32(0x400000))


def test_every_float_far_below_underflow_gives_positive_zero():
    """Every float32 in [-176, -104] (across the clamp at -175.5, whose power of two is +0: no subnormal product
    for a masked score), the largest finite magnitudes and -inf: exp is +0 (bits 0) for each, as exp(x) < 2^-151
    there. With the float32 just above ln(2^-150), the last that rounds to zero, and the first that does not."""
    edge = np.float32(np.log(2.0**-150))  # -103.97208
    x = np.concatenate([_every_float(-104.0, -176.0), np.array([-np.inf, -3.4028235e38, -1e10, -1e3, -175.5],
                                                               np.float32)])
    y = np.full_like(x, np.nan)
    intent.compile(exp_all, target="cpu")(x, y)
    assert (y.view(np.uint32) == 0).all(), x[int(np.argmax(y.view(np.uint32) != 0))]
    around = _every_float(float(edge) - 1e-4, float(edge) + 1e-4)
    z = np.zeros_like(around)
    intent.compile(exp_all, target="cpu")(around, z)
    with np.errstate(under="ignore"):
        ref = np.exp(around.astype(np.float64)).astype(np.float32)
    assert np.array_equal(z.view(np.uint32), ref.view(np.uint32)) and (z == 0).any() and (z > 0).any()
