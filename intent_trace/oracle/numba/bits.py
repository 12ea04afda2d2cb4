"""Bit reinterpretations for the Numba runtime helpers (:mod:`.runtime`, :mod:`.half`): a value's bits as another
type of the same width, one LLVM bitcast each (Numba has no reinterpreting cast of scalars).

Each helper first converts its operand to the exact source width (``f32_bits`` of a float64 rounds it to float32
first), so a caller never bitcasts a value of the wrong width.
"""
from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.extending import intrinsic

JIT_FLAGS = dict(cache=True, error_model="numpy", nogil=True)  # every runtime helper's (cached, no exceptions)


def _typed(target, source):
    """The bits of a value converted to ``source`` (the conversion ``np.float32(x)`` etc. makes: Numba's cast), as
    ``target``. An intrinsic: two instructions in the caller, nothing compiled on its own (an njit wrapper around
    the bitcast cost a compile, a cache entry and a link per operand type: issue 19)."""
    @intrinsic
    def reinterpret(typingctx, value):
        operand = types.unliteral(value)
        if not isinstance(operand, (types.Integer, types.Float, types.Boolean)):
            return None

        def codegen(context, builder, signature, args):
            exact = context.cast(builder, args[0], signature.args[0], source)
            return builder.bitcast(exact, context.get_value_type(target))

        return target(operand), codegen

    return reinterpret


_U8, _I8, _U16, _I16 = types.uint8, types.int8, types.uint16, types.int16
_U32, _I32, _F32, _U64, _I64, _F64 = types.uint32, types.int32, types.float32, types.uint64, types.int64, types.float64
f32_bits = _typed(types.uint32, _F32)
f64_bits = _typed(types.uint64, _F64)
bits_f32 = _typed(types.float32, _U32)
bits_f64 = _typed(types.float64, _U64)
i32_bits_f32 = _typed(types.float32, _I32)
i64_bits_f64 = _typed(types.float64, _I64)
f32_bits_i32 = _typed(types.int32, _F32)
f64_bits_i64 = _typed(types.int64, _F64)
u8_as_i8 = _typed(types.int8, _U8)
i8_as_u8 = _typed(types.uint8, _I8)
u16_as_i16 = _typed(types.int16, _U16)
i16_as_u16 = _typed(types.uint16, _I16)
u32_as_i32 = _typed(types.int32, _U32)
i32_as_u32 = _typed(types.uint32, _I32)
u64_as_i64 = _typed(types.int64, _U64)
i64_as_u64 = _typed(types.uint64, _I64)


def _key32(magnitude: bool):
    """A float32's order key (``magnitude`` False: the bits as a signed integer, the magnitude bits flipped for
    negative values) or its magnitude bits, as an int32 (:mod:`.select_reduce`). In int32, not the int64 Numba
    widens int32 arithmetic to: a max over int64 lanes vectorises at half the width (8 lanes a 512-bit vector,
    with a sign extension per value)."""
    @intrinsic
    def key(typingctx, value):
        operand = types.unliteral(value)
        if not isinstance(operand, (types.Integer, types.Float)):
            return None

        def codegen(context, builder, signature, args):
            int32 = ir.IntType(32)
            bits = builder.bitcast(context.cast(builder, args[0], signature.args[0], _F32), int32)
            low = ir.Constant(int32, 0x7FFFFFFF)
            if magnitude:
                return builder.and_(bits, low)
            return builder.xor(bits, builder.and_(builder.ashr(bits, ir.Constant(int32, 31)), low))

        return _I32(operand), codegen

    return key


order_key32 = _key32(magnitude=False)
magnitude32 = _key32(magnitude=True)
