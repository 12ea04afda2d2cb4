"""exp over a sweep of every float format's bit patterns, on every executable target (numerics T4, T3 NaNs).

The cpu target computes float32 exp without a libm call (``runtime.exp_f32``: a Cody-Waite reduction and a
float32 polynomial, so that LLVM vectorises the loops it stands in; checked on every float32 in [-104.5, 89.5]
to be within 1 ulp of the correctly rounded value); f16/bf16 are computed in f32 and rounded once. The
reference is independent: NumPy's float64 ``exp`` rounded once to the format (ml_dtypes for bf16). T4 allows
2 ulp; every target but a GPU's vendor library (T10) is held to 1 here, so a polynomial with a lost term or a
wrong reduction constant fails. NaN operands give themselves quieted; +-inf, +-0, overflow and
gradual underflow are covered by the sweep (every 997th float32 pattern, every f16/bf16 pattern) and named
below.
"""
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.verification.kernel_bounds import VENDOR_ULPS

FORMATS = {"f32": (I.f32, np.float32, np.uint32, 32), "f16": (I.f16, np.float16, np.uint16, 16),
           "bf16": (I.bf16, ml_dtypes.bfloat16, np.uint16, 16)}
NAMED_F32 = [0.0, -0.0, 1.0, -1.0, 88.72283, 88.72284, 88.7229, 89.0, 1e30, np.inf, -np.inf, -87.33654,
             -87.33655, -103.27893, -103.97208, -103.972084, -104.0, -1e30, 1e-45, -1e-45, 0.3465736, -0.3465736,
             0.34657362, 0.6931472, 1e-8]


def _kernel(dt):
    @intent.kernel
    def exp_all(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        y[:] = I.exp(x[:])

    return exp_all


def _inputs(name):
    _, np_t, bits_t, width = FORMATS[name]
    if width == 16:
        return np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np_t)
    sweep = np.arange(0, 2 ** 32, 997, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([sweep, np.array(NAMED_F32, np.float32)])


def _ordered(bits, width):
    """Bit patterns as integers in float order (so that ulp distance is a difference)."""
    b = bits.astype(np.int64)
    sign = np.int64(1) << (width - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_exp_is_within_one_ulp_of_the_rounded_exact_value(run, target, name):
    """One ulp of the correctly rounded value; on a GPU target's f32, the vendor library's documented bound (T10:
    CUDA's ``expf`` is 2 ulp in the CUDA C Programming Guide's table, kernel_bounds.VENDOR_ULPS). A 16-bit format
    rounds the f32 value once, so it stays within one of its own ulps there too."""
    dt, np_t, bits_t, width = FORMATS[name]
    x = _inputs(name)
    y = np.zeros_like(x)
    run(_kernel(dt), x, y)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.exp(x.astype(np.float64)).astype(np_t)
    nan = np.isnan(x.astype(np.float32))
    got_bits, ref_bits = y.view(bits_t), ref.view(bits_t)
    distance = np.abs(_ordered(got_bits[~nan], width) - _ordered(ref_bits[~nan], width))
    worst = int(np.argmax(distance))
    bound = VENDOR_ULPS.get(target, {}).get("exp", 1) if name == "f32" else 1
    assert distance.max() <= bound, (x[~nan][worst], y[~nan][worst], ref[~nan][worst])
    if name == "bf16":  # computed in f32 (T4): the f32 NaN, quieted, converted as ml_dtypes converts it
        wide = x[nan].astype(np.float32).view(np.uint32) | np.uint32(0x400000)
        expected = wide.view(np.float32).astype(np_t).view(bits_t)
    else:  # each NaN itself, quieted
        expected = x.view(bits_t)[nan] | {"f32": 0x400000, "f16": 0x200}[name]
    assert np.array_equal(got_bits[nan], expected)
    assert nan.sum() > 0 and np.isinf(y[~nan]).any() and (y[~nan] == 0).any()  # the sweep reaches the edges


def test_exp_edges_on_f32(run):
    x = np.array([np.inf, -np.inf, 0.0, -0.0, 88.72283, 88.72284, -103.97208, -104.0], np.float32)
    y = np.full_like(x, 7.0)
    run(_kernel(I.f32), x, y)
    assert y[0] == np.inf and y[1] == 0 and not np.signbit(y[1]) and y[2] == 1 and y[3] == 1
    assert np.isfinite(y[4]) and y[4] > np.float32(3.4027e38)  # the last float32 below overflow
    assert y[5] == np.inf and y[6] == np.float32(1e-45) and y[7] == 0
