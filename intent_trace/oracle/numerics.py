"""Reference numerics over NumPy: the rules of types-numerics-and-effects.md, T2-T4, spelled out.

NumPy's defaults differ from the chapter in places (floor division, shifts past the width,
float -> int casts, maximum of signed zeros, double rounding into bfloat16); each function here
implements the chapter's rule directly and says which rule it is.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

from .. import types as T
from ..floatbits import round_f64, round_int

NARROW = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))  # float data computed in float32 (T1)


def errstate():
    """No floating-point warnings: overflow, NaN and division by zero are results (T2, T4), not errors."""
    return np.errstate(all="ignore")


def widen(x: np.ndarray) -> np.ndarray:
    """f16/bf16 -> f32 exactly (compute narrow floats in f32 and round once, T3/T4)."""
    return x.astype(np.float32) if x.dtype in NARROW else x


def finish(r: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round a wider float result to ``dtype`` once."""
    r = np.asarray(r)
    if r.dtype == dtype:
        return r
    if r.dtype == np.float64:
        return round_f64(r, dtype)
    return r.astype(dtype)


# --- T2 integer arithmetic -------------------------------------------------------------------

def int_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating division; x // 0 = 0; INT_MIN // -1 = INT_MIN."""
    dtype = a.dtype
    with errstate():
        zero = b == 0
        safe = np.where(zero, 1, b).astype(dtype)
        if np.issubdtype(dtype, np.signedinteger):
            neg1 = safe == -1
            safe = np.where(neg1, 1, safe).astype(dtype)
            q = np.floor_divide(a, safe)
            r = a - q * safe
            q = np.where((r != 0) & ((a < 0) != (safe < 0)), q + 1, q)
            q = np.where(neg1, np.negative(a), q)
        else:
            q = np.floor_divide(a, safe)
        return np.where(zero, 0, q).astype(dtype)


def int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the dividend's sign; x % 0 = 0."""
    with errstate():
        q = int_floordiv(a, b)
        r = (a - q * b).astype(a.dtype)
        return np.where(b == 0, 0, r).astype(a.dtype)


def shl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < bits)
    with errstate():
        amount = np.where(valid, b, 0).astype(a.dtype)
        return np.where(valid, np.left_shift(a, amount), 0).astype(a.dtype)


def shr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Arithmetic for signed, logical for unsigned; amounts outside [0, bits) give the fill."""
    bits = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < bits)
    with errstate():
        amount = np.where(valid, b, 0).astype(a.dtype)
        fill = np.where(a < 0, -1, 0) if np.issubdtype(a.dtype, np.signedinteger) else 0
        return np.where(valid, np.right_shift(a, amount), fill).astype(a.dtype)


def int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact modulo 2^bits by repeated squaring; negative exponents give 0 except bases 1 and -1."""
    dtype = a.dtype
    unsigned = np.dtype(f"u{dtype.itemsize}")
    base = a.astype(unsigned)
    e = np.where(b < 0, 0, b).astype(np.uint64)
    base, e = np.broadcast_arrays(base, e)
    result = np.ones(base.shape, dtype=unsigned)
    base, e = base.copy(), e.copy()
    with errstate():
        while np.any(e):
            odd = (e & 1).astype(bool)
            result = np.where(odd, result * base, result).astype(unsigned)
            base = (base * base).astype(unsigned)
            e >>= np.uint64(1)
    out = result.astype(dtype)
    if np.issubdtype(dtype, np.signedinteger):
        negexp = b < 0
        special = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        out = np.where(negexp, special, out).astype(dtype)
    return out


# --- T3 floating arithmetic --------------------------------------------------------------------

def float_binary(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with errstate():
        wa, wb = widen(a), widen(b)
        return finish(first_nan(fn(wa, wb), (wa, wb)), a.dtype)


def first_nan(r: np.ndarray, operands) -> np.ndarray:
    """``r`` with each NaN that an operand carries replaced by the first NaN operand, quieted (T3, x86's rule). NumPy's
    add and multiply loops are compiled as commutative: where two NaNs meet, their SIMD body keeps the first operand's
    payload but the scalar tail and a broadcast scalar keep the second's, so the payload depended on the position."""
    r = np.asarray(r)
    if r.dtype.kind != "f" or not np.isnan(r).any():
        return r
    unsigned = np.dtype(f"u{r.dtype.itemsize}")
    quiet = np.array(1 << (np.finfo(r.dtype).nmant - 1), dtype=unsigned)
    picked = r.copy()
    for x in reversed(operands):  # the last assignment is the first operand's
        x = np.broadcast_to(np.asarray(x, dtype=r.dtype), r.shape)
        picked = np.where(np.isnan(x), (x.view(unsigned) | quiet).view(r.dtype), picked)
    return picked


def float_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C99 pow, computed in f64 (exact inputs) and rounded once; within the T4 bound."""
    with errstate():
        return finish(np.power(a.astype(np.float64), b.astype(np.float64)), a.dtype)


def ieee_maximum(a: np.ndarray, b: np.ndarray, is_max: bool = True) -> np.ndarray:
    """IEEE 754-2019 maximum/minimum: NaN if either is NaN, -0 < +0."""
    with errstate():
        r = np.maximum(a, b) if is_max else np.minimum(a, b)
        if a.dtype.kind == "f" or a.dtype in NARROW:
            both_zero = (a == 0) & (b == 0)
            pick_a = np.signbit(a) != is_max  # max prefers +0, min prefers -0
            r = np.where(both_zero, np.where(pick_a, a, b), r)
            r = np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))
        return np.asarray(r).astype(a.dtype)


def sign_bit_op(x: np.ndarray, op: str) -> np.ndarray:
    """neg/abs of floats as bit operations: exact for every value, NaN payloads included."""
    ubits = np.dtype(f"u{x.dtype.itemsize}")
    sign = np.array(1 << (x.dtype.itemsize * 8 - 1), dtype=ubits)
    u = np.ascontiguousarray(x).view(ubits)  # (at least 1-d: reshape back below)
    out = (u ^ sign) if op == "neg" else (u & ~sign)
    return out.astype(ubits).view(x.dtype).reshape(x.shape)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a*b + c`` rounded once: exact rational arithmetic, then one RNE rounding."""
    dtype = a.dtype
    with errstate():
        a64, b64, c64 = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
        naive = first_nan(a64 * b64 + c64, (a64, b64, c64))  # x86 (vfmadd): the first NaN of a, b, c (T3)
    out = np.empty(a64.shape, dtype=np.float64)
    flat_out = out.reshape(-1)
    for k, (x, y, z, n) in enumerate(zip(a64.reshape(-1), b64.reshape(-1), c64.reshape(-1), naive.reshape(-1))):
        if math.isnan(x) or math.isnan(y) or math.isnan(z):
            flat_out[k] = n  # the first NaN operand, quieted; so fma(0, inf, qNaN) keeps c's payload (IEEE 754-2019
            continue  # §7.2(c), §6.2.3), as hardware FMA does
        if not (math.isfinite(x) and math.isfinite(y)):
            flat_out[k] = n  # inf/NaN products: IEEE gives the same as the unfused expression
            continue
        if not math.isfinite(z):
            flat_out[k] = z  # a finite exact product never cancels an infinity
            continue
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            flat_out[k] = n  # the sign of an exact zero follows IEEE addition of the rounded terms
            continue
        flat_out[k] = _fraction_round_to_odd(exact) if dtype != np.float64 else _fraction_to_f64(exact)
    return finish(out, dtype) if dtype != np.float64 else out


def _fraction_to_f64(q: Fraction) -> float:
    try:
        return float(q)  # correctly rounded (integer division)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _fraction_round_to_odd(q: Fraction) -> float:
    """f64 nearest toward zero, with the last bit set when inexact (for one later rounding)."""
    f = _fraction_to_f64(q)
    if math.isinf(f):
        return f
    if Fraction(f) == q:
        return f
    if abs(Fraction(f)) > abs(q):
        f = math.nextafter(f, 0.0)
    bits = np.array(f, dtype=np.float64).view(np.uint64) | np.uint64(1)
    return float(bits.view(np.float64))


# --- T3 conversions ----------------------------------------------------------------------------

def cast(x: np.ndarray, target: T.DType) -> np.ndarray:
    src = x.dtype
    dst = target.np
    if src == dst:
        return x.copy()
    if target.is_bool:
        return (x != 0) if src.kind != "f" and src not in NARROW else (widen(x) != 0)
    if src == np.bool_:
        return x.astype(dst)
    src_float = src.kind == "f" or src in NARROW
    if target.is_float:
        if src_float:
            return round_f64(x.astype(np.float64), dst)
        return round_int(x, dst)
    # -> integer
    if src_float:
        return float_to_int(x, target)
    with errstate():
        return x.astype(dst)  # integer -> integer wraps modulo 2^bits


def float_to_int(x: np.ndarray, target: T.DType) -> np.ndarray:
    """Truncate toward zero, saturate at the range, NaN -> 0."""
    v = np.trunc(x.astype(np.float64))
    lo, hi = target.min, target.max
    dst = target.np
    with errstate():
        out = np.where(np.isnan(v), 0, v)
        too_low = out <= float(lo)
        too_high = out >= float(hi)  # float(hi) may round up past hi (i64/u64): compare with >=
        safe = np.where(too_low | too_high, 0, out).astype(dst)
        res = np.where(too_low, np.array(lo, dtype=dst), np.where(too_high, np.array(hi, dtype=dst), safe))
    return res.astype(dst)


def bitcast(x: np.ndarray, target: T.DType) -> np.ndarray:
    return np.ascontiguousarray(x).view(target.np).reshape(x.shape)


# --- T4 math library -----------------------------------------------------------------------------

def _vectorize(fn):
    vf = np.vectorize(fn, otypes=[np.float64])

    def apply(x):
        return vf(x) if x.size else x.astype(np.float64)
    return apply


def _lgamma(v: float) -> float:
    if math.isnan(v):
        return v
    if math.isinf(v):
        return math.inf
    if v <= 0 and v == math.floor(v):
        return math.inf
    return math.lgamma(v)


def _i0(x):
    with errstate():
        r = np.i0(x)
    return np.where(np.isinf(x), np.inf, r)


def _sigmoid(x):
    with errstate():
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


def _rsqrt(x):
    with errstate():
        return 1.0 / np.sqrt(x)


UNARY_F64 = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "lgamma": _vectorize(_lgamma), "sin": np.sin,
    "asin": np.arcsin, "cos": np.cos, "erf": _vectorize(math.erf), "erfc": _vectorize(math.erfc), "i0": _i0,
    "rsqrt": _rsqrt, "sqrt": np.sqrt, "sigmoid": _sigmoid, "exp2": np.exp2, "tanh": np.tanh,
    "expm1": np.expm1,
}


def unary_math(name: str, x: np.ndarray, flush_to_zero: bool = False) -> np.ndarray:
    """Computed in f64 from exact inputs and rounded once: within T4's bounds (sqrt exact). A NaN operand gives
    itself back, quieted (T3: its payload and sign are values; x86's libm does so for every function here, but
    NumPy's SIMD ``tanh`` returns its canonical NaN, which the oracle must not)."""
    if name == "floor":
        return np.floor(x)  # exact; keeps -0.0
    if name == "abs":
        return sign_bit_op(x, "abs") if x.dtype.kind == "f" or x.dtype in NARROW else np.abs(x)
    if flush_to_zero:
        x = flush_subnormals(x)
    with errstate():
        wide = x.astype(np.float64)  # a NaN's payload kept (quieted by the conversion from a narrower format)
        r = finish(np.where(np.isnan(wide), wide + 0.0, UNARY_F64[name](wide)), x.dtype)  # + 0: quiets an f64 sNaN
    return flush_subnormals(r) if flush_to_zero else r


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(x.dtype).tiny if x.dtype not in NARROW else ml_dtypes.finfo(x.dtype).tiny
    return np.where((x != 0) & (np.abs(x) < tiny), np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)
