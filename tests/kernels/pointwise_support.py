"""Shared by test_pointwise_rounding.py and test_pointwise_specials.py: float formats and bit fields, operand
generators (special values, random bit patterns), the bitwise float check, and one-op elementwise kernels."""
import math

import ml_dtypes
import numpy as np

from intent_trace import I
from float_reference import FMT, max_finite
from one_op_kernels import one_op_kernel

FLOATS = [I.f16, I.bf16, I.f32, I.f64]
NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64}
UINT = {I.f16: np.uint16, I.bf16: np.uint16, I.f32: np.uint32, I.f64: np.uint64}
WIDTH = {I.f16: 16, I.bf16: 16, I.f32: 32, I.f64: 64}


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

def binary_kernel(op, dt):
    return one_op_kernel(BINOPS[op], dt, I.bool if op in COMPARES else dt, 2)


def ternary_kernel(op, dt):
    return one_op_kernel(TERNOPS[op], dt, dt, 3)


def unary_kernel(op, dt):
    return one_op_kernel(UNOPS[op], dt, dt, 1)


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
