"""Numba helpers that generated kernels call: the numerics chapter in scalar form.

Numba's defaults differ from the chapter (Python floor division, int32 + int32 -> int64,
float -> int casts of NaN, no bfloat16), so every rule that needs care is one small njit
function here (bit reinterpretations in :mod:`.bits`, the f16/bf16 conversions in :mod:`.half`,
the vector lanes of float sums in :mod:`.lanes`, all reachable from here). Bit-level conversions
follow NumPy (f16) and ml_dtypes (bf16) exactly, NaNs included, so the CPU oracle agrees with the
generic interpreter bit for bit (float sums excepted: they are summed in :mod:`.lanes`' order).
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core.registry import cpu_target as _cpu_target
from numba.core import types
from numba.core.typing.npydecl import parse_dtype as ty_parse_dtype, parse_shape as ty_parse_shape
from numba.core.imputils import impl_ret_new_ref, lower_builtin
from numba.extending import intrinsic, type_callable
from numba.np.arrayobj import _empty_nd_impl, _parse_empty_args

from ..cephes import I0_A, I0_B
# The reinterpretations and the narrow-float conversions live in their own modules; generated code reaches every
# helper through this one (``R.f16_bits``).
from .bits import (JIT_FLAGS, bits_f32, bits_f64, f32_bits, f32_bits_i32, f64_bits, f64_bits_i64,  # noqa: F401
                   i8_as_u8, i16_as_u16, i32_as_u32, i32_bits_f32, i64_as_u64, i64_bits_f64, magnitude32,
                   order_key32, u8_as_i8, u16_as_i16, u32_as_i32, u64_as_i64)
from .half import (NATIVE_HALF, bf16_bits, bf16_value, f16_bits, f16_bits_native, f16_bits_soft,  # noqa: F401
                   f16_value, f16_value_native, f16_value_soft, f64_to_bf16, f64_to_f16, f64_to_f32_rto, round_bf16,
                   round_f16)
from .lane_contract import lane_row  # noqa: F401
from .lanes import lanes_add, lanes_array, lanes_axpy, lanes_fill, lanes_load, lanes_store, lanes_sum  # noqa: F401
from .minmax import max2, min2  # noqa: F401
from .outlined_call import call_outlined  # noqa: F401
from .prefetch import prefetch_row  # noqa: F401


# --- T2 integers -------------------------------------------------------------------------------

@njit(**JIT_FLAGS)
def idiv_u(a, b):
    if b == 0:
        return a - a
    return a // b


@njit(**JIT_FLAGS)
def imod_u(a, b):
    if b == 0:
        return a - a
    return a % b


@njit(**JIT_FLAGS)
def shl(a, b, bits):
    if b < 0 or b >= bits:
        return a - a
    return a << b


@njit(**JIT_FLAGS)
def shr_s(a, b, bits):
    if b < 0 or b >= bits:
        return a - a - 1 if a < 0 else a - a
    return a >> b


@njit(**JIT_FLAGS)
def shr_u(a, b, bits):
    if b >= bits:
        return a - a
    return a >> b


@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
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

@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
def f2u(x, hi):
    if x != x:
        return np.uint64(0)
    t = np.trunc(np.float64(x))
    if t <= 0.0:
        return np.uint64(0)
    if t >= np.float64(hi):
        return np.uint64(hi)
    return np.uint64(t)


@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
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

@njit(**JIT_FLAGS)
def fmax(a, b):
    """IEEE 754-2019 maximum: NaN if either is NaN (the first NaN), -0 < +0.

    Written as a chain of selects, not early returns: every operand is cheap to evaluate, so LLVM turns each
    conditional into a select and a row max's unrolled accumulators become straight-line code (1.5x faster
    than the branching form on a 4096x1024 row max, bit for bit the same result)."""
    r = a if a > b else b
    r = (b if math.copysign(1.0, a) < 0 else a) if a == b else r
    r = b if b != b else r
    return a if a != a else r


@njit(**JIT_FLAGS)
def fmin(a, b):
    """IEEE 754-2019 minimum: NaN if either is NaN (the first NaN), -0 < +0 (selects, as :func:`fmax`)."""
    r = a if a < b else b
    r = (a if math.copysign(1.0, a) < 0 else b) if a == b else r
    r = b if b != b else r
    return a if a != a else r


# Order keys (select_reduce): a float's bits as a signed integer, the magnitude bits flipped for negative values,
# are ordered as the floats are under IEEE 754-2019 maximum (-0 < +0); NaNs are told apart by their magnitude
# bits (above those of inf). Integer max/min reductions of keys vectorise where float selects do not. The float32
# keys (bits.order_key32, bits.magnitude32) are int32 intrinsics.

@njit(**JIT_FLAGS)
def from_order_key32(k):
    return i32_bits_f32(np.int32(k ^ ((k >> 31) & 0x7FFFFFFF)))


@njit(**JIT_FLAGS)
def order_key64(x):
    b = f64_bits_i64(np.float64(x))
    return b ^ ((b >> 63) & 0x7FFFFFFFFFFFFFFF)


@njit(**JIT_FLAGS)
def from_order_key64(k):
    return i64_bits_f64(k ^ ((k >> 63) & 0x7FFFFFFFFFFFFFFF))


@njit(**JIT_FLAGS)
def magnitude64(x):
    return u64_as_i64(f64_bits(np.float64(x)) & np.uint64(0x7FFFFFFFFFFFFFFF))


@intrinsic
def opaque(typingctx, x):
    """``x`` through an empty inline asm that LLVM may hoist (it reads no memory) but cannot see through.

    :func:`neg32`'s sign mask goes through it: LLVM turns an xor of a float's bits with a constant sign mask into
    ``fneg``, and then sinks ``fneg(x * y)`` into one factor, ``(-x) * y`` or ``x * (-y)``, which is equal for
    every number but not for a NaN (IEEE leaves the sign of an operation's NaN free; T3 does not): ``-(x * s)``
    with ``s`` a NaN returned s's NaN unflipped. An integer xor with a value LLVM does not know stays one."""
    sig = x(x)

    def codegen(context, builder, signature, args):
        (v,) = args
        call = builder.call(ir.InlineAsm(ir.FunctionType(v.type, [v.type]), "", "=r,0", side_effect=False), [v])
        call.attributes.add("nounwind")
        call.attributes.add("readnone")  # hoisted out of loops, which then vectorise
        return call

    return sig, codegen


@njit(**JIT_FLAGS)
def neg32(x):
    return bits_f32(f32_bits(x) ^ opaque(np.uint32(0x80000000)))  # never an fneg LLVM could move (opaque)


@njit(**JIT_FLAGS)
def abs32(x):
    return bits_f32(f32_bits(x) & np.uint32(0x7FFFFFFF))


@njit(**JIT_FLAGS)
def neg64(x):
    return bits_f64(f64_bits(x) ^ opaque(np.uint64(0x8000000000000000)))


@njit(**JIT_FLAGS)
def abs64(x):
    return bits_f64(f64_bits(x) & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(**JIT_FLAGS)
def ftz(x, tiny):
    if x != 0 and abs(x) < tiny:
        return x * 0  # zero of the same sign
    return x


@njit(**JIT_FLAGS)
def lgamma(x):
    if x != x:
        return x + x  # quieted, its payload kept (T3)
    if math.isinf(x):
        return math.inf
    if x <= 0 and x == math.floor(x):
        return math.inf
    return math.lgamma(x)


@njit(**JIT_FLAGS)
def sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(**JIT_FLAGS)
def rsqrt(x):
    return 1.0 / math.sqrt(x)


_I0_A, _I0_B = np.array(I0_A), np.array(I0_B)  # read as constants when Numba compiles i0


@njit(**JIT_FLAGS)
def _chbevl(x, v):
    b0, b1, b2 = v[0], 0.0, 0.0
    for i in range(1, len(v)):
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + v[i]
    return 0.5 * (b0 - b2)


@njit(**JIT_FLAGS)
def i0(x):
    """Modified Bessel I0 in float64: Cephes' Chebyshev expansions, as generic's np.i0 (oracle/cephes.py)."""
    if x != x:
        return x + x  # quieted, its payload kept (T3)
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


@njit(**JIT_FLAGS)
def fma_nan(a, b, c):
    """:func:`fma` with x86's NaN rule in the order a, b, c (T3): the first NaN operand, quieted (``x + x``). The
    hardware's order is its instruction form's (vfmadd132/213/231), and LLVM swaps a and b freely: with b loop
    invariant, b's NaN won over a's."""
    r = fma(a, b, c)
    if r == r:
        return r
    return a + a if a != a else (b + b if b != b else (c + c if c != c else r))


@njit(**JIT_FLAGS)
def fma_rto(a, b, c):
    """a*b + c for operands of at most 24 significant bits, in float64 rounded to odd, so that
    rounding the result once more (to f32/f16/bf16) is the single correct rounding."""
    if a != a or b != b or c != c:  # the first NaN of a, b, c, quieted (T3); ``p + c`` below may be commuted
        return a + a if a != a else (b + b if b != b else c + c)
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


@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
def exp_f64_of_f32(x):
    """exp(x) of a float32 (or f16/bf16 value) as a float64 within 2^-46 relative: one rounding makes the format's."""
    c = min2(max2(np.float64(x), -104.0), 89.0)
    n = np.floor(c * _LOG2E + 0.5)
    r = (c - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.6666666666666666e-01 + r * (4.1666666666666664e-02 + r * (
        8.3333333333333332e-03 + r * (1.3888888888888889e-03 + r * (1.9841269841269841e-04 + r * (
            2.4801587301587302e-05 + r * (2.7557319223985893e-06 + r * (2.7557319223985888e-07 + r * (
                2.5052108385441720e-08 + r * 2.0876756987868100e-09)))))))))))
    return p * i64_bits_f64((np.int64(n) + 1023) << 52)


# float32 exp in float32 arithmetic (16 lanes a 512-bit vector, not the 8 of the float64 evaluation above), for
# the f32 kernels; f16/bf16 keep the float64 value rounded once (T4: computed in f32 and rounded once, which one
# rounding of a value within 2^-46 is). Within 1 ulp of the correctly rounded exp on every float32 (checked
# exhaustively over [-104.5, 89.5], where the clamp does not decide: 0.77% of results 1 ulp away, none further;
# T4 allows 2). 26 vector operations per 16 values where a Fast2Sum evaluation (0.09% 1 ulp away) took 35:
# - n = round(x log2 e) to nearest even, exactly (one FMA adding 1.5 * 2^23 rounds the exact product to an
#   integer in the low mantissa bits, which are also n's bits); r_hi = x - n * L1 with one FMA, exact: x and
#   n * L1 are multiples of 2^-25 when n != 0 (then |x| >= 0.34) and |r_hi| < 1/2; r = r_hi - n * L2 rounded
#   once (L1 + L2 = ln 2 to 2^-50): within 2^-26 of x - n ln 2, |r| <= 0.3466;
# - exp(r) = 1 + s, s = r + r^2 q(r) with q of degree 4 fitted minimax to (e^r - 1 - r) / r^2 on |r| <= 0.3467
#   (relative error 2^-28 with its float32 coefficients); the error before the last rounding is below 0.7 ulp
#   of 1 + s (r's 2^-26, s's rounding 2^-26, q's), so the result is within 1.2 ulp of exp and, being a float,
#   within 1 ulp of the correctly rounded value (2 would need 1.5);
# - times 2^n as two exact powers 2^b 2^a (a = n clamped to [-126, 127], b = n - a in [-24, 1]): the first
#   product is exact (a normal float32), so a subnormal or overflowing result is rounded once. Each power is built
#   in float arithmetic and one shift: a + (1.5 * 2^23 + 127) holds a + 127 in its low mantissa bits, which the
#   shift by 23 moves into the exponent field (the rest shifts out), 4 operations fewer than integer arithmetic on
#   n's bits (and the same bits on every float32: checked exhaustively against that formulation).
# The clamp to [-175.5, 89] is exact where it matters (exp(89) overflows; below -103.98 every exp rounds to +0).
# Its low end gives n = -253, b = -127, whose power's bits are all zero: +0 times p times 2^a is +0 with no
# subnormal operation. Clamped at -104 (n = -150), a masked score (-inf, as attention's causal mask writes)
# rounded p 2^-150 to +0 through a subnormal product: a microcode assist on x86 cores without FTZ, 16x slower
# (5.9 against 0.36 ms a million values; half of a causal attention's scores are masked). The same bits on every
# float32 as the -104 clamp (checked exhaustively: every input in [-175.5, -104] still gives +0).
# A NaN operand passes the clamp (min2/max2 return a NaN first operand) and every operation after it, the
# powers' bits aside (never NaN: their mantissa is zero), so the result is the operand quieted with its payload
# (x + x), without a compare and select per value: 22 vector operations per 16 values, 12% faster than the 26.
# The constants are read through kept (below): a vector loop holds them in registers instead of reloading each
# as a broadcast memory operand every iteration (the same bits as constants on all 2^32 float32 inputs).
_F32 = np.float32
_LOG2E_F, _L1_F = _F32(_LOG2E), _F32(math.log(2.0))
_L2_F = _F32(math.log(2.0) - float(_L1_F))
_MINUS_L1_F, _MINUS_L2_F = -_L1_F, -_L2_F
_LOW = _F32(-175.5)  # n = round(-175.5 log2 e) = -253: exp's +0 without a subnormal product (above)
_ROUNDER = _F32(1.5 * 2.0**23)  # x + _ROUNDER rounds x (|x| < 2^22) to an integer, held in the low mantissa bits
_BIASED_ROUNDER = _F32(1.5 * 2.0**23 + 127)  # n + this holds n + 127 (the biased exponent of 2^n) in its low bits
_P2, _P3, _P4, _P5, _P6 = (_F32(float.fromhex(h)) for h in (
    "0x1.fffffcp-2", "0x1.555492p-3", "0x1.5558f2p-5", "0x1.123a0cp-7", "0x1.6a23f0p-10"))


@intrinsic
def kept(typingctx, value):
    """``value`` (a compile-time constant) read from a global LLVM may not fold, so a loop keeps it in a register.

    Folded into a vector loop, each constant of :func:`exp_f32` became a broadcast memory operand reloaded every
    iteration (LLVM folds constant-pool loads into the instructions before it could hoist them). Read as an
    invariant load of a non-local global instead, the value is loop-invariant but unknown: LICM hoists the load,
    the vectoriser splats it once before the loop, and the loop body reads registers (exp_f32's loop 8-9% faster
    on this project's AVX-512 VM, 0.234 -> 0.216 us a row of 1024 floats; softmax 4096x1024 about 3-7%). The
    load is dereferenceable, so a use under a condition can still be speculated and if-converted as a constant
    would (an opaque inline-asm copy, tried first, cannot be). The global is ``linkonce_odr`` (one copy however
    many modules define it, and not local, so nothing proves it unwritten and folds it back) and holds exactly
    the constant, so the value, and every result, is unchanged. A value that is not an LLVM constant is
    returned as it is."""
    def codegen(context, builder, sig, args):
        constant = args[0]
        if not isinstance(constant, ir.Constant):
            return constant
        module = builder.module
        name = "it_kept_%s_%s" % (constant.type, constant.get_reference())
        name = "".join(ch if ch.isalnum() or ch == "_" else "_%02x" % ord(ch) for ch in name)
        variable = module.globals.get(name)
        if variable is None:
            variable = ir.GlobalVariable(module, constant.type, name)
            variable.linkage = "linkonce_odr"
            variable.initializer = constant
            variable.align = context.get_abi_alignment(constant.type)
        load = builder.load(variable, align=variable.align)
        load.set_metadata("invariant.load", module.add_metadata([]))
        return load

    return value(value), codegen


@njit(**JIT_FLAGS)
def exp_f32(x):
    c = min2(max2(x, kept(_LOW)), kept(_F32(89.0)))
    rounder = kept(_ROUNDER)
    t = fma(c, kept(_LOG2E_F), rounder)
    n = t - rounder
    r = fma(n, kept(_MINUS_L2_F), fma(n, kept(_MINUS_L1_F), c))
    q = fma(fma(fma(fma(kept(_P6), r, kept(_P5)), r, kept(_P4)), r, kept(_P3)), r, kept(_P2))
    p = kept(_F32(1.0)) + fma(r * r, q, r)
    a = min2(max2(n, kept(_F32(-126.0))), kept(_F32(127.0)))
    biased = kept(_BIASED_ROUNDER)
    power_a = i32_bits_f32(f32_bits_i32(a + biased) << np.int32(23))
    power_b = i32_bits_f32(f32_bits_i32((n - a) + biased) << np.int32(23))
    return (p * power_b) * power_a


# Numba emits `nsw` (no signed wrap) on int64 arithmetic, so an overflowing int64 add is undefined
# behaviour to LLVM (constant folding then gives nonsense). T2 wants wrap-around: 64-bit signed
# arithmetic goes through uint64, whose operations wrap.

@njit(**JIT_FLAGS)
def add_i64(a, b):
    return u64_as_i64(i64_as_u64(a) + i64_as_u64(b))


@njit(**JIT_FLAGS)
def sub_i64(a, b):
    return u64_as_i64(i64_as_u64(a) - i64_as_u64(b))


@njit(**JIT_FLAGS)
def mul_i64(a, b):
    return u64_as_i64(i64_as_u64(a) * i64_as_u64(b))


@njit(**JIT_FLAGS)
def neg_i64(a):
    return u64_as_i64(np.uint64(0) - i64_as_u64(a))


@njit(**JIT_FLAGS)
def shl_i64(a, b):
    if b < 0 or b >= 64:
        return np.int64(0)
    return u64_as_i64(i64_as_u64(a) << np.uint64(b))


@njit(**JIT_FLAGS)
def abs_i64(a):
    return neg_i64(a) if a < 0 else a


@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
def imod_s(a, b):
    """Remainder with the dividend's sign (any signed width); x % 0 = 0."""
    if b == 0 or b == -1:
        return a - a
    return a - idiv_s(a, b) * b


# --- allocation inside a parallel loop ---------------------------------------------------------------
# A prange body allocates through these calls, never through np.empty/np.full: Numba's parfor pass hoists a
# loop-invariant np.empty out of the parallel loop and reuses the buffer for every iteration, which a loop
# carry then reads while it is overwritten (see NumbaEmitter.allocate). A call is never hoisted.

def alloc_empty(shape, dtype):
    """``np.empty(shape, dtype)``; in compiled code, Numba's own lowering of it (``_empty_nd_impl``: the NRT
    allocation, the negative and overflowing extent checks) written into the caller (:func:`_alloc_empty_type`):
    the ``np.empty`` overload and an njit helper around it were compiled in every process with a fresh cache
    (0.55 of a first ``attention_f16`` call's 5.4 CPU s). A plain function, so generated code also runs as Python."""
    return np.empty(shape, dtype=dtype)


@type_callable(alloc_empty)
def _alloc_empty_type(context):
    def typer(shape, dtype):
        ndim, element = ty_parse_shape(shape), ty_parse_dtype(dtype)
        return None if ndim is None or element is None else types.Array(element, ndim, "C")

    return typer


@lower_builtin(alloc_empty, types.Any, types.Any)
def _alloc_empty_lower(context, builder, signature, args):
    arrtype, shapes = _parse_empty_args(context, builder, signature, args)
    return impl_ret_new_ref(context, builder, arrtype, _empty_nd_impl(context, builder, arrtype, shapes)._getvalue())


@njit(**JIT_FLAGS)
def contiguous(a):
    """``np.ascontiguousarray(a)`` (``a`` itself when it is C-contiguous), compiled once into the disk cache (Numba
    compiles ``np.ascontiguousarray`` again in every process)."""
    return np.ascontiguousarray(a)


@njit(**JIT_FLAGS)
def gemm(a, b, out):
    """``out = a @ b`` by Numba's ``np.dot`` (SciPy's BLAS gemm) for 2-D ``a``, ``b``, ``out``, compiled once into the
    disk cache: Numba compiles its ``np.dot`` glue again in every process that calls it (0.35-0.5 CPU-s of a first
    ``attention_f16`` call whose other helpers were cached)."""
    np.dot(a, b, out)


@njit(**JIT_FLAGS)
def alloc_full(shape, fill):
    """An array of ``fill``'s type (the caller converts it), every element ``fill``."""
    return np.full(shape, fill)


# --- allocation limits ---------------------------------------------------------------------------------------------

@njit(**JIT_FLAGS)
def exceeds(err, site, elements, itemsize, limit):
    """Whether ``elements`` (a float64 count: a product of int64 extents may overflow, a float only rounds) of
    ``itemsize`` bytes exceed the call's allocation limit; if so the error record of ``site`` is written (its
    values: the elements, the bytes, the limit). One call in place of the record's stores keeps every checked
    allocation of a kernel two statements long (Numba's compile time grows with a function's statements)."""
    nbytes = elements * itemsize
    if nbytes > limit:
        err[0] = site
        err[1] = np.int64(min2(elements, 9.0e18))
        err[2] = np.int64(min2(nbytes, 9.0e18))
        err[3] = np.int64(limit)
        return True
    return False


# Generated code reaches this module through ``lazy_module`` (lazy.py): it is first imported inside Numba's typing
# of a kernel, by the attribute access that resolves ``R.<helper>``. Numba's typing context knows the intrinsics
# registered since its last refresh (minmax, outlined_call, bits) only after another refresh, which the
# enclosing compile made before this import: refresh it now, so the access that triggered the import resolves.
_cpu_target.typing_context.refresh()
_cpu_target.target_context.refresh()
