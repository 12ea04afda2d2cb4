"""Bit reinterpretations for the Numba runtime helpers (:mod:`.runtime`, :mod:`.half`): a value's bits as another
type of the same width, one LLVM bitcast each (Numba has no reinterpreting cast of scalars).

Each helper first converts its operand to the exact source width (``f32_bits`` of a float64 rounds it to float32
first), so a caller never bitcasts a value of the wrong width.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

JIT_FLAGS = dict(cache=True, error_model="numpy", nogil=True)  # every runtime helper's (cached, no exceptions)


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
    @njit(**JIT_FLAGS)
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
