"""T3 floating arithmetic: + - * / correctly rounded, comparisons, no implicit FMA (fma rounds once),
literals and runtime scalars rounded to nearest even.

References are exact rational arithmetic (``fractions.Fraction``) rounded once to the target
format by :func:`float_reference.round_fraction` (independent of the library), NumPy float64
for IEEE special cases, and hand-computed values.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from float_reference import FMT, max_finite, pow2, round_fraction
from pointwise_support import (COMPARES, FLOATS, NP, arr, as_floats, assert_floats, ids, min_normal, min_subnormal,
                               operand_pairs, run_binary, run_ternary, sample, specials)


# --- references -------------------------------------------------------------------------------

_F64 = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
_EXACT = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y}


def ref_binary(op: str, x: float, y: float, dt) -> float:
    """Correctly rounded IEEE result of ``x op y`` in ``dt``."""
    if math.isfinite(x) and math.isfinite(y) and not (op == "div" and y == 0):
        exact = _EXACT[op](Fraction(x), Fraction(y))
        if exact != 0:
            return round_fraction(exact, dt)
    with np.errstate(all="ignore"):  # special operands and exact zeros: exact in float64, signs by IEEE
        return float(_F64[op](np.float64(x), np.float64(y)))


def ref_fma(x: float, y: float, z: float, dt) -> float:
    if math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact != 0:
            return round_fraction(exact, dt)
        product_negative = (math.copysign(1, x) * math.copysign(1, y)) < 0
        if x * y == 0 and z == 0:  # two zeros: -0 only when both are -0
            return -0.0 if product_negative and math.copysign(1, z) < 0 else 0.0
        return 0.0  # exact cancellation of nonzero terms rounds to +0 (RNE)
    if math.isfinite(x) and math.isfinite(y):
        return z  # a finite product plus an infinity or NaN (the product itself never overflows here)
    with np.errstate(all="ignore"):  # an infinite or NaN factor: the product is exactly inf or NaN
        prod = np.float64(x) * np.float64(y)
        return float(prod + np.float64(z))


def test_round_fraction_reference_agrees_with_hand_values():
    """The test's own rounding function (used as the reference below) on known cases."""
    assert round_fraction(Fraction(1) + pow2(-24), I.f32) == 1.0  # tie -> even
    assert round_fraction(Fraction(1) + 3 * pow2(-24), I.f32) == 1.0 + 2.0**-22
    assert round_fraction(Fraction(1) + pow2(-8) + pow2(-30), I.bf16) == 1.0 + 2.0**-7
    assert round_fraction(pow2(-150), I.f32) == 0.0  # tie between 0 and 2^-149 -> 0
    assert round_fraction(3 * pow2(-150), I.f32) == 2.0**-148
    assert round_fraction(Fraction(65520), I.f16) == math.inf
    assert round_fraction(Fraction(65519), I.f16) == 65504.0
    assert math.copysign(1, round_fraction(-pow2(-200), I.f32)) == -1


# --- + - * / correctly rounded ------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arith_is_correctly_rounded(run, op, dt):
    a, b = operand_pairs(dt, seed=FMT[dt][0] + len(op))
    got = run_binary(run, op, dt, from_floats(a, dt), from_floats(b, dt))
    assert_floats(got, [ref_binary(op, x, y, dt) for x, y in zip(a, b)], dt, (a, b))


def from_floats(values, dt) -> np.ndarray:
    return arr(values, dt)


@pytest.mark.parametrize("dt", [I.f16, I.bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_narrow_arith_equals_f32_result_rounded_once(run, op, dt):
    """f16/bf16: the f32 result (NumPy, exact inputs) rounded once by NumPy/ml_dtypes from float32."""
    a, b = operand_pairs(dt, seed=7 + len(op))
    a, b = arr(a, dt), arr(b, dt)
    with np.errstate(all="ignore"):
        want = _F64[op](a.astype(np.float32), b.astype(np.float32)).astype(NP[dt])
    got = run_binary(run, op, dt, a, b)
    assert_floats(got, as_floats(want), dt, (as_floats(a), as_floats(b)))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_fdiv_default_equals_division(run, dt):
    a, b = operand_pairs(dt, seed=77)
    got = run_binary(run, "fdiv", dt, arr(a, dt), arr(b, dt))
    assert_floats(got, [ref_binary("div", x, y, dt) for x, y in zip(a, b)], dt, (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_arith_special_values_hand_table(run, dt):
    inf, nan, big = math.inf, math.nan, max_finite(dt)
    cases = [  # (op, x, y, want)
        ("sub", inf, inf, nan), ("add", inf, -inf, nan), ("mul", 0.0, inf, nan), ("div", 0.0, 0.0, nan),
        ("div", inf, inf, nan), ("div", 1.0, 0.0, inf), ("div", -1.0, 0.0, -inf), ("div", 1.0, -0.0, -inf),
        ("mul", big, 2.0, inf), ("mul", -big, 2.0, -inf), ("add", big, big, inf), ("add", -0.0, -0.0, -0.0),
        ("add", -0.0, 0.0, 0.0), ("sub", -0.0, 0.0, -0.0), ("sub", 0.0, 0.0, 0.0), ("sub", 3.0, 3.0, 0.0),
        ("sub", -3.0, -3.0, 0.0), ("mul", -0.0, 5.0, -0.0), ("mul", -0.0, -5.0, 0.0), ("div", 0.0, -3.0, -0.0),
        ("div", 1.0, inf, 0.0), ("div", -1.0, inf, -0.0), ("add", nan, 1.0, nan), ("mul", nan, 0.0, nan),
        ("add", 1.0, 0.5, 1.5), ("div", 1.0, 4.0, 0.25), ("mul", 3.0, -0.5, -1.5),
    ]
    for op in ("add", "sub", "mul", "div"):
        sel = [c for c in cases if c[0] == op]
        got = run_binary(run, op, dt, [c[1] for c in sel], [c[2] for c in sel])
        assert_floats(got, [c[3] for c in sel], dt, ([c[1] for c in sel], [c[2] for c in sel]))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_subnormals_are_kept(run, dt):
    s, n = min_subnormal(dt), min_normal(dt)
    assert_floats(run_binary(run, "mul", dt, [s, -s, 3 * s, s, n], [1.0, 1.0, 0.5, 0.5, 0.5]),
                  [s, -s, 2 * s, 0.0, n / 2], dt)  # 1.5 s ties to even 2 s; 0.5 s ties to 0
    assert_floats(run_binary(run, "add", dt, [s, n, -s], [s, -s, 0.0]), [2 * s, n - s, -s], dt)
    assert_floats(run_binary(run, "sub", dt, [n, s], [s, s]), [n - s, 0.0], dt)
    assert_floats(run_binary(run, "div", dt, [n, s, -s], [4.0, 1.0, 2.0]), [n / 4, s, -0.0], dt)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("op", COMPARES)
def test_float_comparisons(run, op, dt):
    a, b = operand_pairs(dt, seed=5)
    py = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
          "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[op]
    got = run_binary(run, op, dt, arr(a, dt), arr(b, dt))
    assert got.tolist() == [py(x, y) for x, y in zip(a, b)]  # Python float comparisons are IEEE
    hand = run_binary(run, op, dt, [math.nan, math.nan, -0.0, min_subnormal(dt)], [math.nan, 1.0, 0.0, 0.0])
    want = {"eq": [False, False, True, False], "ne": [True, True, False, True], "lt": [False, False, False, False],
            "le": [False, False, True, False], "gt": [False, False, False, True], "ge": [False, False, True, True]}
    assert hand.tolist() == want[op]


# --- FMA: only when written --------------------------------------------------------------------

# a*b is inexact and c cancels its rounded value: unfused gives 0, fused gives the rounding error.
NO_FMA_CASES = {
    I.f16: (1 + 2.0**-10, 1 + 2.0**-10, -(1 + 2.0**-9), 2.0**-20),
    I.bf16: (1 + 2.0**-7, 1 + 2.0**-7, -(1 + 2.0**-6), 2.0**-14),
    I.f32: (1 + 2.0**-23, 1 + 2.0**-23, -(1 + 2.0**-22), 2.0**-46),
    I.f64: (1 + 2.0**-52, 1 + 2.0**-52, -(1 + 2.0**-51), 2.0**-104),
}


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_mul_add_is_not_fused(run, dt):
    a, b, c, err = NO_FMA_CASES[dt]
    for op in ("mul_add", "add_mul"):
        assert_floats(run_ternary(run, op, dt, [a, -a], [b, b], [c, -c]), [0.0, 0.0], dt)
    assert_floats(run_ternary(run, "mul_sub", dt, [a], [b], [-c]), [0.0], dt)
    assert_floats(run_ternary(run, "fma", dt, [a, -a], [b, b], [c, -c]), [err, -err], dt)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_mul_add_rounds_twice_random(run, dt):
    rng = np.random.default_rng(9)
    a = sample(dt, 40, 1)
    b = sample(dt, 40, 2)
    c = -(a.astype(np.float64) * b.astype(np.float64))  # near-cancelling addends expose fusion
    c = np.where(rng.random(c.shape) < 0.5, c, sample(dt, 40, 3).astype(np.float64))
    c = arr([round_fraction(Fraction(v), dt) if math.isfinite(v) else v for v in c], dt)
    av, bv, cv = as_floats(a), as_floats(b), as_floats(c)
    want = [ref_binary("add", ref_binary("mul", x, y, dt), z, dt) for x, y, z in zip(av, bv, cv)]
    assert_floats(run_ternary(run, "mul_add", dt, a, b, c), want, dt, (av, bv, cv))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_fma_rounds_once(run, dt):
    rng = np.random.default_rng(10)
    a = sample(dt, 40, 4)
    b = sample(dt, 40, 5)
    c = -(a.astype(np.float64) * b.astype(np.float64))
    c = np.where(rng.random(c.shape) < 0.5, c, sample(dt, 40, 6).astype(np.float64))
    c = arr([round_fraction(Fraction(v), dt) if math.isfinite(v) else v for v in c], dt)
    sp = specials(dt)
    av = as_floats(a) + [x for x in sp for _ in sp]
    bv = as_floats(b) + [y for _ in sp for y in sp]
    cv = as_floats(c) + [sp[(i * 7) % len(sp)] for i in range(len(sp) ** 2)]
    want = [ref_fma(x, y, z, dt) for x, y, z in zip(av, bv, cv)]
    assert_floats(run_ternary(run, "fma", dt, av, bv, cv), want, dt, (av, bv, cv))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_fma_signed_zero_results(run, dt):
    a = [0.0, -0.0, -0.0, 2.0, 3.0]
    b = [1.0, 1.0, 1.0, -1.5, 1.0]
    c = [-0.0, -0.0, 0.0, 3.0, -3.0]
    assert_floats(run_ternary(run, "fma", dt, a, b, c), [0.0, -0.0, 0.0, 0.0, 0.0], dt)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_fma_near_overflow_rounds_once(run, dt):
    """Results at the top of the range: the exact sum decides (no intermediate overflow, RNE at max)."""
    p, _, emax = FMT[dt]
    big = max_finite(dt)
    half_ulp = 2.0 ** (emax - p)  # half the spacing just below 2^(emax+1)
    a = [big, big, big, -big, big]
    b = [1.0, 1.0, 2.0, 2.0, -1.0]
    c = [half_ulp / 2, half_ulp, -big, 0.0, -half_ulp]
    want = [big, math.inf, big, -math.inf, -math.inf]  # exact ties at max + half ulp round to even (= overflow)
    assert_floats(run_ternary(run, "fma", dt, a, b, c), want, dt, (a, b, c))


# --- literals and runtime scalars round to nearest even -------------------------------------------

def literal_kernel(dt, lit):
    @intent.kernel
    def k(a: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] * lit

    return k


@pytest.mark.parametrize("dt,lit,want", [
    (I.bf16, 1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-7),  # a single rounding (double rounding would give 1.0)
    (I.bf16, 1 + 2.0**-8, 1.0),
    (I.f16, 1 + 2.0**-11, 1.0), (I.f16, 1 + 3 * 2.0**-11, 1 + 2.0**-9), (I.f16, 65519.0, 65504.0),
    (I.f32, 0.1, float(np.float32(0.1))), (I.f32, 1 + 2.0**-24 + 2.0**-50, 1 + 2.0**-23),
    (I.f32, 1e-46, 0.0), (I.f32, 3 * 2.0**-150, 2.0**-148), (I.f64, 0.1, 0.1),
], ids=lambda v: str(v))
def test_float_literal_rounds_to_nearest_even(run, dt, lit, want):
    out = np.zeros(2, dtype=NP[dt])
    run(literal_kernel(dt, lit), arr([1.0, -1.0], dt), out)
    assert_floats(out, [want, -want], dt)


@pytest.mark.parametrize("dt,lit", [(I.f16, 65520.0), (I.f16, 1e6), (I.bf16, 1e39), (I.f32, 1e39),
                                    (I.f32, -3.5e38)], ids=lambda v: str(v))
def test_float_literal_that_overflows_is_a_trace_error(dt, lit):
    with pytest.raises(intent.TraceError):
        intent.trace(literal_kernel(dt, lit))


_SCALAR: dict = {}


def scalar_kernel(dt):
    if dt not in _SCALAR:
        @intent.kernel
        def k(a: I.In[dt, ("N",)], s: dt, out: I.Out[dt, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = a[d] * s

        _SCALAR[dt] = k
    return _SCALAR[dt]


@pytest.mark.parametrize("dt,value,want", [
    (I.bf16, 1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-7), (I.f16, 1 + 3 * 2.0**-11, 1 + 2.0**-9),
    (I.f32, 1 + 2.0**-24 + 2.0**-50, 1 + 2.0**-23), (I.f32, 0.1, float(np.float32(0.1))),
    (I.f32, 16777217, 16777216.0), (I.f64, 2**53 + 1, 2.0**53), (I.f32, 2**60 + 2**36 + 1, 2.0**60 + 2**37),
    (I.f32, 2**63 + 2**39 + 1, 2.0**63 + 2**40), (I.bf16, 2**64 + 2**56 + 1, 2.0**64 + 2**57),
], ids=lambda v: str(v))
def test_runtime_scalar_rounds_to_nearest_even(run, dt, value, want):
    out = np.zeros(1, dtype=NP[dt])
    run(scalar_kernel(dt), arr([1.0], dt), value, out)
    assert_floats(out, [want], dt)


def test_mixed_float_dtypes_are_a_trace_error():
    @intent.kernel
    def k(a: I.In[I.f32, ("N",)], b: I.In[I.f16, ("N",)], out: I.Out[I.f32, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] + b[d]

    with pytest.raises(intent.TraceError, match="I.cast"):
        intent.trace(k)
