"""Numba helpers that generated kernels call: the numerics chapter in scalar form.

Numba's defaults differ from the chapter (Python floor division, int32 + int32 -> int64,
float -> int casts of NaN, no bfloat16), so every rule that needs care is one small njit
function here. f16 and bf16 values live in generated code as float32 numbers restricted to the
format's value set: ``round_f16``/``round_bf16`` round a float32 once (RNE) and keep it a
float32; loads and stores convert to and from the uint16 bit patterns of the caller's arrays.
Bit-level conversions follow NumPy (f16) and ml_dtypes (bf16) exactly, NaNs included, so the
CPU oracle agrees with the generic interpreter bit for bit.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from ..cephes import I0_A, I0_B

_JIT = dict(cache=True, error_model="numpy", nogil=True)


def _reinterpret(target):
    @intrinsic
    def reinterpret(typingctx, value):
        sig = target(value)

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return sig, codegen

    return reinterpret


def _typed(raw, source):
    """Wrap a raw bitcast so its operand is first converted to the exact source width."""
    @njit(**_JIT)
    def reinterpret(x):
        return raw(source(x))

    return reinterpret


_U8, _I8, _U16, _I16 = np.uint8, np.int8, np.uint16, np.int16
_U32, _I32, _F32, _U64, _I64, _F64 = np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64
f32_bits = _typed(_reinterpret(types.uint32), _F32)
f64_bits = _typed(_reinterpret(types.uint64), _F64)
bits_f32 = _typed(_reinterpret(types.float32), _U32)
bits_f64 = _typed(_reinterpret(types.float64), _U64)
i32_bits_f32 = _typed(_reinterpret(types.float32), _I32)
i64_bits_f64 = _typed(_reinterpret(types.float64), _I64)
f32_bits_i32 = _typed(_reinterpret(types.int32), _F32)
f64_bits_i64 = _typed(_reinterpret(types.int64), _F64)
u8_as_i8 = _typed(_reinterpret(types.int8), _U8)
i8_as_u8 = _typed(_reinterpret(types.uint8), _I8)
u16_as_i16 = _typed(_reinterpret(types.int16), _U16)
i16_as_u16 = _typed(_reinterpret(types.uint16), _I16)
u32_as_i32 = _typed(_reinterpret(types.int32), _U32)
i32_as_u32 = _typed(_reinterpret(types.uint32), _I32)
u64_as_i64 = _typed(_reinterpret(types.int64), _U64)
i64_as_u64 = _typed(_reinterpret(types.uint64), _I64)


# --- T2 integers -------------------------------------------------------------------------------

@njit(**_JIT)
def idiv_u(a, b):
    if b == 0:
        return a - a
    return a // b


@njit(**_JIT)
def imod_u(a, b):
    if b == 0:
        return a - a
    return a % b


@njit(**_JIT)
def shl(a, b, bits):
    if b < 0 or b >= bits:
        return a - a
    return a << b


@njit(**_JIT)
def shr_s(a, b, bits):
    if b < 0 or b >= bits:
        return a - a - 1 if a < 0 else a - a
    return a >> b


@njit(**_JIT)
def shr_u(a, b, bits):
    if b >= bits:
        return a - a
    return a >> b


@njit(**_JIT)
def ipow_s(a, b):
    """Exact modulo 2^64 (the caller narrows); negative exponents: 0 except bases 1 and -1."""
    if b < 0:
        if a == 1:
            return np.int64(1)
        if a == -1:
            return np.int64(1) if b % 2 == 0 else np.int64(-1)
        return np.int64(0)
    result = np.uint64(1)
    base = i64_as_u64(np.int64(a))
    e = np.uint64(b)
    while e:
        if e & np.uint64(1):
            result = result * base
        base = base * base
        e = e >> np.uint64(1)
    return u64_as_i64(result)


@njit(**_JIT)
def ipow_u(a, b):
    result = np.uint64(1)
    base = np.uint64(a)
    e = np.uint64(b)
    while e:
        if e & np.uint64(1):
            result = result * base
        base = base * base
        e = e >> np.uint64(1)
    return result


# --- T3 conversions ----------------------------------------------------------------------------

@njit(**_JIT)
def f2i(x, lo, hi):
    """Float -> signed integer: truncate, saturate, NaN -> 0 (returns int64; the caller narrows)."""
    if x != x:
        return np.int64(0)
    t = np.trunc(np.float64(x))
    if t <= np.float64(lo):
        return np.int64(lo)
    if t >= np.float64(hi):
        return np.int64(hi)
    return np.int64(t)


@njit(**_JIT)
def f2u(x, hi):
    if x != x:
        return np.uint64(0)
    t = np.trunc(np.float64(x))
    if t <= 0.0:
        return np.uint64(0)
    if t >= np.float64(hi):
        return np.uint64(hi)
    return np.uint64(t)


@njit(**_JIT)
def f64_to_f32_rto(x):
    """float64 -> float32 rounded to odd (so one more rounding to a narrower format is exact)."""
    y = np.float32(x)
    if not math.isfinite(x):
        return y
    if math.isinf(y):
        y = np.float32(3.4028234663852886e38) if x > 0 else np.float32(-3.4028234663852886e38)
    elif abs(np.float64(y)) > abs(x):
        y = bits_f32(f32_bits(y) - np.uint32(1)) if y != 0 else y
    if np.float64(y) != x:
        y = bits_f32(f32_bits(y) | np.uint32(1))
    return y


@njit(**_JIT)
def round_bf16(f):
    """float32 -> nearest bfloat16 (RNE), as a float32; NaN -> canonical quiet NaN with its sign (ml_dtypes)."""
    u = f32_bits(np.float32(f))
    if f != f:
        return bits_f32((u & np.uint32(0x80000000)) | np.uint32(0x7FC00000))
    u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return bits_f32(u & np.uint32(0xFFFF0000))


@njit(**_JIT)
def bf16_bits(f):
    return np.uint16(f32_bits(np.float32(f)) >> np.uint32(16))


@njit(**_JIT)
def bf16_value(h):
    return bits_f32(np.uint32(h) << np.uint32(16))


@njit(**_JIT)
def f16_bits(f):
    """float32 -> binary16 bits, RNE with subnormals; NaN keeps its top payload bits (as NumPy)."""
    u = f32_bits(np.float32(f))
    sign = np.uint16((u >> np.uint32(16)) & np.uint32(0x8000))
    exp = (u >> np.uint32(23)) & np.uint32(0xFF)
    man = u & np.uint32(0x7FFFFF)
    if exp == np.uint32(0xFF):
        if man == 0:
            return sign | np.uint16(0x7C00)
        payload = np.uint16(man >> np.uint32(13))
        if payload == 0:
            payload = np.uint16(1)
        return sign | np.uint16(0x7C00) | payload
    e = np.int64(exp) - 127 + 15
    if e >= 31:
        return sign | np.uint16(0x7C00)
    if e <= 0:
        if e < -10:
            return sign
        m = np.uint64(man | np.uint32(0x800000))
        shift = np.uint64(14 - e)
        half = np.uint64(1) << (shift - np.uint64(1))
        rest = m & ((np.uint64(1) << shift) - np.uint64(1))
        q = m >> shift
        if rest > half or (rest == half and (q & np.uint64(1))):
            q += np.uint64(1)
        return sign | np.uint16(q)
    q = np.uint32((np.uint32(e) << np.uint32(10)) | (man >> np.uint32(13)))
    rest = man & np.uint32(0x1FFF)
    if rest > np.uint32(0x1000) or (rest == np.uint32(0x1000) and (q & np.uint32(1))):
        q += np.uint32(1)  # may carry into the exponent, up to infinity: still correct
    return sign | np.uint16(q)


@njit(**_JIT)
def f16_value(h):
    """binary16 bits -> float32, exactly (NaN payload shifted, not quieted, as NumPy)."""
    h = np.uint32(h)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exp = (h >> np.uint32(10)) & np.uint32(0x1F)
    man = h & np.uint32(0x3FF)
    if exp == np.uint32(0x1F):
        return bits_f32(sign | np.uint32(0x7F800000) | (man << np.uint32(13)))
    if exp == 0:
        v = np.float32(np.float64(man) * 5.960464477539063e-08)  # man * 2^-24, exact
        return -v if sign else v
    return bits_f32(sign | ((exp + np.uint32(112)) << np.uint32(23)) | (man << np.uint32(13)))


@njit(**_JIT)
def round_f16(f):
    return f16_value(f16_bits(f))


@njit(**_JIT)
def f64_to_bf16(x):
    return round_bf16(f64_to_f32_rto(x))


@njit(**_JIT)
def f64_to_f16(x):
    return round_f16(f64_to_f32_rto(x))


@njit(**_JIT)
def i64_to_f64_rto(v):
    """int64 -> float64 rounded to odd beyond 2^53 (exact below), for one later rounding."""
    if -9007199254740992 <= v <= 9007199254740992:
        return np.float64(v)
    neg = v < 0
    mag = np.uint64(-v) if neg else np.uint64(v)
    shift = np.uint64(0)
    while (mag >> shift) >= np.uint64(1 << 53):
        shift += np.uint64(1)
    q = mag >> shift
    if mag & ((np.uint64(1) << shift) - np.uint64(1)):
        q = q | np.uint64(1)
    r = np.float64(q) * 2.0 ** np.float64(shift)
    return -r if neg else r


@njit(**_JIT)
def u64_to_f64_rto(v):
    if v <= np.uint64(9007199254740992):
        return np.float64(v)
    shift = np.uint64(0)
    while (v >> shift) >= np.uint64(1 << 53):
        shift += np.uint64(1)
    q = v >> shift
    if v & ((np.uint64(1) << shift) - np.uint64(1)):
        q = q | np.uint64(1)
    return np.float64(q) * 2.0 ** np.float64(shift)


# --- T3/T4 floating helpers --------------------------------------------------------------------

@njit(**_JIT)
def fmax(a, b):
    """IEEE 754-2019 maximum: NaN if either is NaN (the first NaN), -0 < +0.

    Written as a chain of selects, not early returns: every operand is cheap to evaluate, so LLVM turns each
    conditional into a select and a row max's unrolled accumulators become straight-line code (1.5x faster
    than the branching form on a 4096x1024 row max, bit for bit the same result)."""
    r = a if a > b else b
    r = (b if math.copysign(1.0, a) < 0 else a) if a == b else r
    r = b if b != b else r
    return a if a != a else r


@njit(**_JIT)
def fmin(a, b):
    """IEEE 754-2019 minimum: NaN if either is NaN (the first NaN), -0 < +0 (selects, as :func:`fmax`)."""
    r = a if a < b else b
    r = (a if math.copysign(1.0, a) < 0 else b) if a == b else r
    r = b if b != b else r
    return a if a != a else r


# Order keys (select_reduce): a float's bits as a signed integer, the magnitude bits flipped for negative values,
# are ordered as the floats are under IEEE 754-2019 maximum (-0 < +0); NaNs are told apart by their magnitude
# bits (above those of inf). Integer max/min reductions of keys vectorise where float selects do not.

@njit(**_JIT)
def order_key32(x):
    b = np.int64(f32_bits_i32(np.float32(x)))
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@njit(**_JIT)
def from_order_key32(k):
    return i32_bits_f32(np.int32(k ^ ((k >> 31) & 0x7FFFFFFF)))


@njit(**_JIT)
def magnitude32(x):
    return np.int64(f32_bits(np.float32(x)) & np.uint32(0x7FFFFFFF))


@njit(**_JIT)
def order_key64(x):
    b = f64_bits_i64(np.float64(x))
    return b ^ ((b >> 63) & 0x7FFFFFFFFFFFFFFF)


@njit(**_JIT)
def from_order_key64(k):
    return i64_bits_f64(k ^ ((k >> 63) & 0x7FFFFFFFFFFFFFFF))


@njit(**_JIT)
def magnitude64(x):
    return u64_as_i64(f64_bits(np.float64(x)) & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(**_JIT)
def neg32(x):
    return bits_f32(f32_bits(x) ^ np.uint32(0x80000000))


@njit(**_JIT)
def abs32(x):
    return bits_f32(f32_bits(x) & np.uint32(0x7FFFFFFF))


@njit(**_JIT)
def neg64(x):
    return bits_f64(f64_bits(x) ^ np.uint64(0x8000000000000000))


@njit(**_JIT)
def abs64(x):
    return bits_f64(f64_bits(x) & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(**_JIT)
def ftz(x, tiny):
    if x != 0 and abs(x) < tiny:
        return x * 0  # zero of the same sign
    return x


@njit(**_JIT)
def lgamma(x):
    if x != x:
        return x
    if math.isinf(x):
        return math.inf
    if x <= 0 and x == math.floor(x):
        return math.inf
    return math.lgamma(x)


@njit(**_JIT)
def sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(**_JIT)
def rsqrt(x):
    return 1.0 / math.sqrt(x)


_I0_A, _I0_B = np.array(I0_A), np.array(I0_B)  # read as constants when Numba compiles i0


@njit(**_JIT)
def _chbevl(x, v):
    b0, b1, b2 = v[0], 0.0, 0.0
    for i in range(1, len(v)):
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + v[i]
    return 0.5 * (b0 - b2)


@njit(**_JIT)
def i0(x):
    """Modified Bessel I0 in float64: Cephes' Chebyshev expansions, as generic's np.i0 (oracle/cephes.py)."""
    if x != x:
        return x
    ax = abs(x)
    if math.isinf(ax):
        return math.inf
    if ax <= 8.0:
        return math.exp(ax) * _chbevl(ax / 2.0 - 2.0, _I0_A)
    return math.exp(ax) * _chbevl(32.0 / ax - 2.0, _I0_B) / math.sqrt(ax)


@intrinsic
def fma(typingctx, a, b, c):
    """llvm.fma: a*b + c rounded once (hardware FMA or libm's correctly rounded fallback)."""
    sig = a(a, b, c)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return sig, codegen


@njit(**_JIT)
def fma_rto(a, b, c):
    """a*b + c for operands of at most 24 significant bits, in float64 rounded to odd, so that
    rounding the result once more (to f32/f16/bf16) is the single correct rounding."""
    p = a * b  # exact: at most 48 significant bits
    s = p + c
    if not math.isfinite(s):
        return s
    bv = s - p
    err = (p - (s - bv)) + (c - bv)
    if err != 0.0:
        u = f64_bits(s)
        if (u & np.uint64(1)) == 0:
            u = u + np.uint64(1) if (err > 0) == (s > 0) else u - np.uint64(1)
        s = bits_f64(u)
    return s


@njit(**_JIT)
def exp2(x):
    return np.exp2(x)


# exp without a libm call, so that LLVM vectorises the loops it stands in (an `exp` call in a loop is scalarised:
# 8 scalar `expf` calls per 8-lane vector without SVML, which pip's llvmlite is built without). For f16/bf16
# (and below, the float32 kernel's constants): exp of a float32 value in float64, rounded once to the format
# (T4: computed in f32 and rounded once; the same bits as rounding glibc's double `exp`, on 4M samples):
# - n = round(x log2 e), r = x - n ln2 with ln2 in two parts (|r| <= ln2 / 2; the product n * LN2_HI is exact),
# - exp(r) by its Taylor series to r^12 / 12! (truncation below 2^-47 relative for |r| <= 0.35),
# - times 2^n built from its exponent bits: |n| <= 150 after the clamp, a normal float64.
# The clamp to [-104, 89] is exact where it matters: exp(89) rounds to inf and exp(-104) to +0 in float32, so
# +-inf come out as inf and +0. A NaN operand gives itself quieted (x + x), as NumPy's exp does.
_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 0.6931471803691238, 1.9082149292705877e-10


@njit(**_JIT)
def exp_f64_of_f32(x):
    """exp(x) of a float32 (or f16/bf16 value) as a float64 within 2^-46 relative: one rounding makes the format's."""
    c = min(max(np.float64(x), -104.0), 89.0)
    n = np.floor(c * _LOG2E + 0.5)
    r = (c - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.6666666666666666e-01 + r * (4.1666666666666664e-02 + r * (
        8.3333333333333332e-03 + r * (1.3888888888888889e-03 + r * (1.9841269841269841e-04 + r * (
            2.4801587301587302e-05 + r * (2.7557319223985893e-06 + r * (2.7557319223985888e-07 + r * (
                2.5052108385441720e-08 + r * 2.0876756987868100e-09)))))))))))
    return p * i64_bits_f64((np.int64(n) + 1023) << 52)


# float32 exp in float32 arithmetic (16 lanes a 512-bit vector, not the 8 of the float64 evaluation above: 3x
# faster on 4M elements), for the f32 kernels; f16/bf16 keep the float64 value rounded once (T4: computed in f32
# and rounded once, which one rounding of a value within 2^-46 is). Within 1 ulp of the correctly rounded exp on
# every float32 (checked exhaustively: 2^32 patterns, 0.09% of them 1 ulp away, none further; T4 allows 2):
# - n = round(x log2 e); r_hi = x - n * L1 with one FMA, exact: x and n * L1 are multiples of 2^-25 when n != 0
#   (then |x| >= 0.34) and |r_hi| < 1/2; r_lo = -n * L2 (L1 + L2 = ln 2 to 2^-50); r + e = r_hi + r_lo exactly;
# - exp(r + e) = 1 + r + r^2 q(r) + e (1 + r), q the Taylor series of (e^r - 1 - r) / r^2 to r^6 / 8!
#   (truncation 2^-32 for |r| <= 0.35), the leading 1 + r split exactly (Fast2Sum) so that the one rounding of
#   the small terms costs 1/16 ulp and the sum's last rounding 1/2 ulp;
# - times 2^n as two exact powers 2^a 2^b (a = n >> 1): the first product is exact (a normal float32), so a
#   subnormal or overflowing result is rounded once. The clamp to [-104, 89] keeps |n| <= 150 and is exact
#   where it matters (exp(89) overflows, exp(-104) rounds to +0); a NaN operand gives itself quieted (x + x).
_F32 = np.float32
_LOG2E_F, _L1_F = _F32(_LOG2E), _F32(math.log(2.0))
_L2_F = _F32(math.log(2.0) - float(_L1_F))
_Q2, _Q3, _Q4, _Q5, _Q6, _Q7, _Q8 = (_F32(1.0 / math.factorial(k)) for k in range(2, 9))


@njit(**_JIT)
def exp_f32(x):
    c = min(max(x, _F32(-104.0)), _F32(89.0))
    n = np.floor(c * _LOG2E_F + _F32(0.5))
    hi = fma(n, -_L1_F, c)
    lo = n * -_L2_F
    r = hi + lo
    e = (hi - r) + lo
    q = fma(fma(fma(fma(fma(fma(_Q8, r, _Q7), r, _Q6), r, _Q5), r, _Q4), r, _Q3), r, _Q2)
    t = fma(r * r, q, fma(e, r, e))
    h = _F32(1.0) + r
    p = h + (((_F32(1.0) - h) + r) + t)
    k = np.int32(n)
    a = k >> np.int32(1)
    y = (p * i32_bits_f32((a + np.int32(127)) << np.int32(23))) * i32_bits_f32((k - a + np.int32(127)) << np.int32(23))
    return x + x if x != x else y


# Numba emits `nsw` (no signed wrap) on int64 arithmetic, so an overflowing int64 add is undefined
# behaviour to LLVM (constant folding then gives nonsense). T2 wants wrap-around: 64-bit signed
# arithmetic goes through uint64, whose operations wrap.

@njit(**_JIT)
def add_i64(a, b):
    return u64_as_i64(i64_as_u64(a) + i64_as_u64(b))


@njit(**_JIT)
def sub_i64(a, b):
    return u64_as_i64(i64_as_u64(a) - i64_as_u64(b))


@njit(**_JIT)
def mul_i64(a, b):
    return u64_as_i64(i64_as_u64(a) * i64_as_u64(b))


@njit(**_JIT)
def neg_i64(a):
    return u64_as_i64(np.uint64(0) - i64_as_u64(a))


@njit(**_JIT)
def shl_i64(a, b):
    if b < 0 or b >= 64:
        return np.int64(0)
    return u64_as_i64(i64_as_u64(a) << np.uint64(b))


@njit(**_JIT)
def abs_i64(a):
    return neg_i64(a) if a < 0 else a


@njit(**_JIT)
def idiv_s(a, b):
    """Truncating signed division (any width; the caller narrows); x // 0 = 0; INT_MIN // -1 wraps to INT_MIN."""
    if b == 0:
        return a - a
    if b == -1:
        return neg_i64(np.int64(a))
    q = a // b
    if a - q * b != 0 and ((a < 0) != (b < 0)):
        q += 1
    return q


@njit(**_JIT)
def imod_s(a, b):
    """Remainder with the dividend's sign (any signed width); x % 0 = 0."""
    if b == 0 or b == -1:
        return a - a
    return a - idiv_s(a, b) * b


# --- allocation inside a parallel loop ---------------------------------------------------------------
# A prange body allocates through these calls, never through np.empty/np.full: Numba's parfor pass hoists a
# loop-invariant np.empty out of the parallel loop and reuses the buffer for every iteration, which a loop
# carry then reads while it is overwritten (see NumbaEmitter.allocate). A call is never hoisted.

@njit(**_JIT)
def alloc_empty(shape, dtype):
    return np.empty(shape, dtype=dtype)


@njit(**_JIT)
def alloc_full(shape, fill):
    """An array of ``fill``'s type (the caller converts it), every element ``fill``."""
    return np.full(shape, fill)
