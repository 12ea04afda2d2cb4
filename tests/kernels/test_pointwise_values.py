"""T3 floating arithmetic: correct rounding, no implicit FMA, signed zeros, NaN payloads, IEEE max/min.

References are exact rational arithmetic (``fractions.Fraction``) rounded once to the target
format by :func:`round_fraction` below (written here, independent of the library), NumPy float64
for IEEE special cases, and hand-computed values.
"""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from float_reference import FMT, max_finite, pow2, round_fraction

FLOATS = [I.f16, I.bf16, I.f32, I.f64]
NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64}
UINT = {I.f16: np.uint16, I.bf16: np.uint16, I.f32: np.uint32, I.f64: np.uint64}
WIDTH = {I.f16: 16, I.bf16: 16, I.f32: 32, I.f64: 64}
# (precision p including the hidden bit, minimum normal exponent, maximum exponent)


def ids(dtypes):
    return [str(d) for d in dtypes]


def min_subnormal(dt) -> float:
    p, emin, _ = FMT[dt]
    return 2.0 ** (emin - (p - 1))


def min_normal(dt) -> float:
    return 2.0 ** FMT[dt][1]


def arr(values, dt) -> np.ndarray:
    """Python floats that are exactly representable in ``dt`` -> array (checked)."""
    wide = np.array(values, dtype=np.float64)
    out = wide.astype(np.float32).astype(NP[dt]) if dt is I.bf16 else wide.astype(NP[dt])
    back = out.astype(np.float64)
    assert np.array_equal(back, wide, equal_nan=True), "test input not representable"
    return out


def from_bits(bits, dt) -> np.ndarray:
    return np.array([int(b) for b in bits], dtype=UINT[dt]).view(NP[dt])


def bits_of(a: np.ndarray) -> list:
    a = np.asarray(a)
    return [int(v) for v in np.ascontiguousarray(a).reshape(-1).view(UINT_BY_ITEMSIZE[a.dtype.itemsize])]


UINT_BY_ITEMSIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def as_floats(a: np.ndarray) -> list:
    return [float(v) for v in np.asarray(a).reshape(-1)]


def assert_floats(got: np.ndarray, want: list, dt, inputs=()):
    """NaN where ``want`` is NaN; otherwise the same bits (so the sign of zero counts)."""
    got_f = as_floats(got)
    bad = []
    for i, (g, w) in enumerate(zip(got_f, want)):
        if math.isnan(w):
            ok = math.isnan(g)
        else:
            ok = g == w and math.copysign(1.0, g) == math.copysign(1.0, w)
        if not ok:
            bad.append((tuple(x[i] for x in inputs), g, w))
    assert len(got_f) == len(want)
    assert not bad, f"{len(bad)} mismatches ((inputs), got, want) in {dt}, first: {bad[:5]}"


def bit_fields(dt):
    width = WIDTH[dt]
    m = FMT[dt][0] - 1
    ew = width - 1 - m
    return width, ew, m


def make_floats(dt, signs, exps, mants) -> np.ndarray:
    width, ew, m = bit_fields(dt)
    bits = [(int(s) << (width - 1)) | (int(e) << m) | int(f) for s, e, f in zip(signs, exps, mants)]
    return from_bits(bits, dt)


def specials(dt) -> list:
    return [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 3.0, -1.5, min_subnormal(dt),
            -min_subnormal(dt), min_normal(dt), -min_normal(dt), max_finite(dt), -max_finite(dt)]


def sample(dt, n: int, seed: int) -> np.ndarray:
    """Random floats of ``dt``: every bit pattern, values near one, near the subnormal range, near overflow."""
    rng = np.random.default_rng(seed)
    width, ew, m = bit_fields(dt)
    emax_field = (1 << ew) - 2
    bias = (1 << (ew - 1)) - 1
    raw = from_bits([int(v) for v in rng.integers(0, 2**width, n, dtype=np.uint64)], dt)
    mant = [int(v) for v in rng.integers(0, 2**m, 3 * n, dtype=np.uint64)]
    signs = rng.integers(0, 2, 3 * n)
    near_one = make_floats(dt, signs[:n], rng.integers(bias - 4, bias + 5, n), mant[:n])
    tiny = make_floats(dt, signs[n:2 * n], rng.integers(0, 3, n), mant[n:2 * n])
    huge = make_floats(dt, signs[2 * n:], rng.integers(emax_field - 3, emax_field + 1, n), mant[2 * n:])
    return np.concatenate([raw, near_one, tiny, huge])


def operand_pairs(dt, seed: int, n: int = 48):
    """Cartesian product of special values, then random pairs (shuffled so classes mix)."""
    sp = specials(dt)
    a = [x for x in sp for _ in sp]
    b = [y for _ in sp for y in sp]
    rng = np.random.default_rng(seed + 1000)
    pool_a = sample(dt, n, seed)
    pool_b = sample(dt, n, seed + 1)
    perm = rng.permutation(len(pool_b))
    # random pairs: same class (near each other in magnitude) and shuffled classes
    a += as_floats(pool_a) + as_floats(pool_a)
    b += as_floats(pool_b) + as_floats(pool_b[perm])
    return a, b


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


# --- kernels ----------------------------------------------------------------------------------

BINOPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "fdiv": lambda a, b: I.fdiv(a, b), "maximum": I.maximum,
          "minimum": I.minimum, "pow": lambda a, b: a ** b,
          "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
          "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
COMPARES = ("eq", "ne", "lt", "le", "gt", "ge")
TERNOPS = {"fma": I.fma, "mul_add": lambda a, b, c: a * b + c, "add_mul": lambda a, b, c: c + a * b,
           "mul_sub": lambda a, b, c: a * b - c}
UNOPS = {"neg": lambda a: -a, "abs": lambda a: abs(a), "I.abs": I.abs, "floor": I.floor}

_KERNELS: dict = {}


def binary_kernel(op, dt):
    key = ("b", op, dt)
    if key not in _KERNELS:
        fn = BINOPS[op]
        out_dt = I.bool if op in COMPARES else dt

        @intent.kernel
        def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], out: I.Out[out_dt, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = fn(a[d], b[d])

        _KERNELS[key] = k
    return _KERNELS[key]


def ternary_kernel(op, dt):
    key = ("t", op, dt)
    if key not in _KERNELS:
        fn = TERNOPS[op]

        @intent.kernel
        def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], c: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = fn(a[d], b[d], c[d])

        _KERNELS[key] = k
    return _KERNELS[key]


def unary_kernel(op, dt):
    key = ("u", op, dt)
    if key not in _KERNELS:
        fn = UNOPS[op]

        @intent.kernel
        def k(a: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = fn(a[d])

        _KERNELS[key] = k
    return _KERNELS[key]


def run_binary(run, op, dt, a, b):
    a = a if isinstance(a, np.ndarray) else arr(a, dt)
    b = b if isinstance(b, np.ndarray) else arr(b, dt)
    out = np.zeros(a.shape, dtype=bool if op in COMPARES else NP[dt])
    run(binary_kernel(op, dt), a, b, out)
    return out


def run_ternary(run, op, dt, a, b, c):
    a, b, c = (v if isinstance(v, np.ndarray) else arr(v, dt) for v in (a, b, c))
    out = np.zeros(a.shape, dtype=NP[dt])
    run(ternary_kernel(op, dt), a, b, c, out)
    return out


def run_unary(run, op, dt, a):
    a = a if isinstance(a, np.ndarray) else arr(a, dt)
    out = np.zeros(a.shape, dtype=NP[dt])
    run(unary_kernel(op, dt), a, out)
    return out


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


# --- signs and payloads ------------------------------------------------------------------------

def payload_bits(dt) -> list:
    width, ew, m = bit_fields(dt)
    sign = 1 << (width - 1)
    exp_all = ((1 << ew) - 1) << m
    quiet = 1 << (m - 1)
    return [exp_all | quiet, exp_all | quiet | 1, exp_all | 1, exp_all | (quiet >> 1) | 5,  # qNaN, payload, sNaN
            sign | exp_all | quiet | 3, sign | exp_all | 2, exp_all, sign | exp_all,  # -NaNs, +-inf
            0, sign, 1, sign | 1, (1 << m) - 1, 1 << m, sign | (1 << m) | 12345 % (1 << m),  # zeros, subnormals
            0x3C00 if WIDTH[dt] == 16 else (1 << (m + ew - 1)) - (1 << m)]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_neg_flips_sign_bit_also_of_nan(run, dt):
    bits = payload_bits(dt)
    sign = 1 << (WIDTH[dt] - 1)
    got = run_unary(run, "neg", dt, from_bits(bits, dt))
    assert bits_of(got) == [b ^ sign for b in bits]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("op", ["abs", "I.abs"])
def test_abs_clears_sign_bit_also_of_nan(run, op, dt):
    bits = payload_bits(dt)
    sign = 1 << (WIDTH[dt] - 1)
    got = run_unary(run, op, dt, from_bits(bits, dt))
    assert bits_of(got) == [b & ~sign for b in bits]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_floor_keeps_negative_zero(run, dt):
    s = min_subnormal(dt)
    vals = [-0.0, 0.0, -0.5, 0.5, -s, s, -1.0, -1.5, 2.5, math.inf, -math.inf, max_finite(dt), -max_finite(dt),
            -3.75, 7.0]
    got = run_unary(run, "floor", dt, vals)
    want = [v if (v == 0 or not math.isfinite(v)) else float(math.floor(v)) for v in vals]
    assert_floats(got, want, dt, (vals,))
    nan = run_unary(run, "floor", dt, [math.nan])
    assert math.isnan(float(nan[0]))


_SELECT: dict = {}


def select_kernel(dt):
    if dt not in _SELECT:
        @intent.kernel
        def k(p: I.In[I.bool, ("N",)], x: I.In[dt, ("N",)], y: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
            d = I.domain(0, x.shape[0])
            out[d] = I.select(p[d], x[d], y[d])

        _SELECT[dt] = k
    return _SELECT[dt]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_select_preserves_payload_and_signed_zero(run, dt):
    bits = payload_bits(dt)
    other = bits[::-1]
    pred = np.array([i % 3 != 1 for i in range(len(bits))])
    out = np.zeros(len(bits), dtype=NP[dt])
    run(select_kernel(dt), pred, from_bits(bits, dt), from_bits(other, dt), out)
    assert bits_of(out) == [b if p else o for p, b, o in zip(pred, bits, other)]


_BITCAST: dict = {}


def bitcast_kernel(src, dst):
    if (src, dst) not in _BITCAST:
        @intent.kernel
        def k(a: I.In[src, ("N",)], out: I.Out[dst, ("N",)], back: I.Out[src, ("N",)]):
            d = I.domain(0, a.shape[0])
            u = I.bitcast(a[d], dst)
            out[d] = u
            back[d] = I.bitcast(u, src)

        _BITCAST[(src, dst)] = k
    return _BITCAST[(src, dst)]


BITCAST_PAIRS = [(I.f16, I.u16), (I.f16, I.i16), (I.bf16, I.u16), (I.bf16, I.f16), (I.f32, I.u32),
                 (I.f32, I.i32), (I.f64, I.u64), (I.f64, I.i64)]


@pytest.mark.parametrize("src,dst", BITCAST_PAIRS, ids=[f"{a}-{b}" for a, b in BITCAST_PAIRS])
def test_bitcast_preserves_payload(run, src, dst):
    bits = payload_bits(src)
    a = from_bits(bits, src)
    dst_np = {I.u16: np.uint16, I.i16: np.int16, I.f16: np.float16, I.u32: np.uint32, I.i32: np.int32,
              I.u64: np.uint64, I.i64: np.int64}[dst]
    out = np.zeros(len(bits), dtype=dst_np)
    back = np.zeros(len(bits), dtype=NP[src])
    run(bitcast_kernel(src, dst), a, out, back)
    assert bits_of(out) == bits
    assert bits_of(back) == bits


# --- IEEE maximum / minimum ---------------------------------------------------------------------

def ref_max(x, y, is_max):
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == 0 and y == 0:
        neg_x, neg_y = math.copysign(1, x) < 0, math.copysign(1, y) < 0
        if is_max:
            return -0.0 if neg_x and neg_y else 0.0
        return -0.0 if neg_x or neg_y else 0.0
    return max(x, y) if is_max else min(x, y)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_ieee(run, op, dt):
    a, b = operand_pairs(dt, seed=13)
    got = run_binary(run, op, dt, arr(a, dt), arr(b, dt))
    assert_floats(got, [ref_max(x, y, op == "maximum") for x, y in zip(a, b)], dt, (a, b))


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_maximum_minimum_signed_zero_and_nan_hand_values(run, dt):
    nan, inf = math.nan, math.inf
    a = [-0.0, 0.0, -0.0, 0.0, nan, 1.0, nan, -inf, inf]
    b = [0.0, -0.0, -0.0, 0.0, 1.0, nan, nan, nan, -inf]
    assert_floats(run_binary(run, "maximum", dt, a, b), [0.0, 0.0, -0.0, 0.0, nan, nan, nan, nan, inf], dt)
    assert_floats(run_binary(run, "minimum", dt, a, b), [-0.0, -0.0, -0.0, 0.0, nan, nan, nan, nan, -inf], dt)


# --- pow (C99 special cases) ---------------------------------------------------------------------

POW_CASES = [  # C99 F.9.4.4 and exact small cases: (x, y, want)
    (2.0, 0.0, 1.0), (math.nan, 0.0, 1.0), (math.nan, -0.0, 1.0), (1.0, math.nan, 1.0), (1.0, math.inf, 1.0),
    (-1.0, math.inf, 1.0), (-1.0, -math.inf, 1.0), (0.0, -3.0, math.inf), (-0.0, -3.0, -math.inf),
    (0.0, -2.0, math.inf), (-0.0, -2.0, math.inf), (-0.0, -math.inf, math.inf), (0.0, 3.0, 0.0),
    (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (-8.0, 1.0 / 3, math.nan), (-2.0, 0.5, math.nan),
    (0.5, -math.inf, math.inf), (2.0, -math.inf, 0.0), (0.5, math.inf, 0.0), (2.0, math.inf, math.inf),
    (-math.inf, -3.0, -0.0), (-math.inf, -2.0, 0.0), (-math.inf, 3.0, -math.inf), (-math.inf, 2.0, math.inf),
    (math.inf, -1.0, 0.0), (math.inf, 0.5, math.inf), (math.nan, 1.0, math.nan), (2.0, math.nan, math.nan),
    (2.0, 3.0, 8.0), (-2.0, 3.0, -8.0), (3.0, 2.0, 9.0), (4.0, 0.5, 2.0), (2.0, -1.0, 0.5),
]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_pow_float_follows_c99_special_cases(run, dt):
    cases = POW_CASES
    x = [c[0] for c in cases]
    y = [round_fraction(Fraction(c[1]), dt) if math.isfinite(c[1]) else c[1] for c in cases]
    got = run_binary(run, "pow", dt, x, y)
    assert_floats(got, [c[2] for c in cases], dt, (x, y))


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


# --- rank-0 tensors and runtime scalars -----------------------------------------------------------

@intent.kernel
def _rank0_signs(x: I.In[I.f32, ()], s: I.f32, neg_x: I.Out[I.f32, ()], abs_x: I.Out[I.f32, ()],
                 neg_s: I.Out[I.f32, ()], abs_s: I.Out[I.f32, ()]):
    neg_x[()] = -x[()]
    abs_x[()] = abs(x[()])
    neg_s[()] = -s
    abs_s[()] = I.abs(s)


@pytest.mark.parametrize("value", [-2.5, 0.0, -0.0, math.inf, math.nan], ids=str)
def test_neg_abs_of_rank0_tensor_and_scalar(run, value):
    x = np.array(value, dtype=np.float32)
    outs = [np.full((), 7.0, np.float32) for _ in range(4)]
    run(_rank0_signs, x, value, *outs)
    want = [-value, abs(value), -value, abs(value)]
    for o, w in zip(outs, want):
        assert o.shape == ()
        assert_floats(o, [w] if not math.isnan(value) else [math.nan], I.f32)
    if math.isnan(value):
        assert [bits_of(o)[0] >> 31 for o in outs] == [1, 0, 1, 0]
