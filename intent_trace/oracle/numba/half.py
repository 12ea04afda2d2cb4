"""Conversions between float32 and the narrow float formats (T3) for the Numba runtime (:mod:`.runtime`).

f16 and bf16 values live in generated code as float32 numbers restricted to the format's value set:
``round_f16``/``round_bf16`` round a float32 once (RNE) and keep it a float32; loads and stores convert to and
from the uint16 bit patterns of the caller's arrays (``f16_value``/``f16_bits``, ``bf16_value``/``bf16_bits``).
The conversions follow NumPy (f16) and ml_dtypes (bf16) bit for bit, NaN payloads included; a float64 is rounded
to float32 by rounding to odd first, so that the one more rounding to the narrow format is the single correct one.
"""
from __future__ import annotations

import math
import platform

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import config as numba_config
from numba.extending import intrinsic

from .bits import JIT_FLAGS, bits_f32, f32_bits
from .minmax import max2

@njit(**JIT_FLAGS)
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


@njit(**JIT_FLAGS)
def round_bf16(f):
    """float32 -> nearest bfloat16 (RNE), as a float32; NaN -> canonical quiet NaN with its sign (ml_dtypes)."""
    u = f32_bits(np.float32(f))
    if f != f:
        return bits_f32((u & np.uint32(0x80000000)) | np.uint32(0x7FC00000))
    u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return bits_f32(u & np.uint32(0xFFFF0000))


@njit(**JIT_FLAGS)
def bf16_bits(f):
    return np.uint16(f32_bits(np.float32(f)) >> np.uint32(16))


@njit(**JIT_FLAGS)
def bf16_value(h):
    return bits_f32(np.uint32(h) << np.uint32(16))


@njit(**JIT_FLAGS)
def f16_bits_soft(f):
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


@njit(**JIT_FLAGS)
def f16_value_soft(h):
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


# Where LLVM lowers float <-> half conversions to instructions (x86 F16C: vcvtps2ph/vcvtph2ps; every aarch64),
# the conversions are those instructions, 4-10x faster and vectorised: the same bits as the functions above (checked
# exhaustively: every binary16 pattern, every float32 pattern) except for NaNs, which the hardware quiets and
# NumPy does not, so a NaN takes the bit-level path (a select, not a branch).

def _native_half() -> bool:
    """Whether this process's Numba target converts halves in hardware (the host CPU, not an overridden one)."""
    if numba_config.CPU_NAME is not None or numba_config.CPU_FEATURES is not None:
        return False
    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    try:
        return bool(llvm_binding.get_host_cpu_features().get("f16c", False))
    except (RuntimeError, AttributeError):
        return False


@intrinsic
def _half_bits_of(typingctx, x):
    """float32 -> binary16 bits, RNE (``fptrunc``: one instruction with F16C)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], llvm_ir.HalfType()), llvm_ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _float_of_half_bits(typingctx, h):
    """binary16 bits -> float32, exactly (``fpext``)."""
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], llvm_ir.HalfType()), llvm_ir.FloatType())

    return types.float32(types.uint16), codegen


@njit(**JIT_FLAGS)
def f16_bits_native(f):
    f = np.float32(f)
    u = f32_bits(f)
    payload = np.uint16((u & np.uint32(0x7FFFFF)) >> np.uint32(13))
    nan = np.uint16((u >> np.uint32(16)) & np.uint32(0x8000)) | np.uint16(0x7C00) | max2(payload, np.uint16(1))
    return nan if f != f else _half_bits_of(f)


@njit(**JIT_FLAGS)
def f16_value_native(h):
    """The hardware widening, exact for every non-NaN; a NaN keeps its payload but comes back quiet (F16C's
    ``vcvtph2ps``, and AArch64's ``fcvt`` outside default-NaN mode: the float32's bit 22 set) where NumPy keeps the
    payload's top bit as it is, so a NaN clears bit 22 when the half's bit 9 is clear. The fix is
    a mask on 16-bit lanes, not a second value built beside the widened one and selected: 3x faster a load (a
    1024 x 1024 f16 -> f32 conversion 0.38 -> 0.13 ms on one core; the hardware widening alone 0.115)."""
    u = np.uint16(h)
    quieted = np.uint16(0x200) & ~u if (u & np.uint16(0x7FFF)) > np.uint16(0x7C00) else np.uint16(0)
    return bits_f32(f32_bits(_float_of_half_bits(u)) & ~(np.uint32(quieted) << np.uint32(13)))


NATIVE_HALF = _native_half()
f16_bits = f16_bits_native if NATIVE_HALF else f16_bits_soft
f16_value = f16_value_native if NATIVE_HALF else f16_value_soft


@njit(**JIT_FLAGS)
def round_f16(f):
    return f16_value(f16_bits(f))


@njit(**JIT_FLAGS)
def f64_to_bf16(x):
    return round_bf16(f64_to_f32_rto(x))


@njit(**JIT_FLAGS)
def f64_to_f16(x):
    return round_f16(f64_to_f32_rto(x))
