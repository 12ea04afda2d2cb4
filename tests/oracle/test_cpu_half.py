"""binary16 conversions of the cpu runtime, in hardware where the machine has it (oracle/numba/half.py, issue 19).

f16 <-> f32 conversions run as LLVM ``fpext``/``fptrunc`` (x86 F16C, aarch64) with NaNs on the bit-level path
(the hardware quiets signalling NaNs, NumPy does not). Reference: NumPy's own conversions, bit for bit, on every
binary16 pattern and on a sweep of float32 patterns (every 61st, plus the rounding and overflow edges and NaN
payloads of both signs), for the bit-level functions and, where the machine converts in hardware, the native ones;
the public names are the native functions exactly where it does.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from intent_trace.oracle.numba import half

IMPLS = [(half.f16_value_soft, half.f16_bits_soft)]
if half.NATIVE_HALF:
    IMPLS.append((half.f16_value_native, half.f16_bits_native))


def _mapper(fn):
    @njit
    def apply(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    return apply


def _float32_sweep() -> np.ndarray:
    sweep = np.arange(0, 2**32, 61, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x33000000, 0x33000001, 0x387FC000, 0x387FE000, 0x477FE000, 0x477FF000, 0x477FEFFF,
                      0x7F800000, 0xFF800000, 0x7F800001, 0xFFBFFFFF, 0x7FC00000, 0x7F802000, 0xFFC02000,
                      0x00000001, 0x80000000], np.uint32)  # ties, subnormal and overflow edges, NaNs
    return np.concatenate([sweep, edges])


def test_every_binary16_pattern_widens_as_numpy_does():
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    want = h.view(np.float16).astype(np.float32).view(np.uint32)
    for value, _ in IMPLS:
        got = np.empty(h.size, np.float32)
        _mapper(value)(h, got)
        assert np.array_equal(got.view(np.uint32), want), value


def test_float32_patterns_narrow_as_numpy_does():
    bits = _float32_sweep()
    with np.errstate(over="ignore", invalid="ignore"):
        want = bits.view(np.float32).astype(np.float16).view(np.uint16)
    for _, narrow in IMPLS:
        got = np.empty(bits.size, np.uint16)
        _mapper(narrow)(bits.view(np.float32), got)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (narrow, [hex(b) for b in bits[bad[:5]]])


def test_the_public_conversions_are_native_exactly_where_the_machine_converts_halves():
    assert (half.f16_bits is half.f16_bits_native) == half.NATIVE_HALF
    assert (half.f16_value is half.f16_value_native) == half.NATIVE_HALF
    assert (half.f16_bits is half.f16_bits_soft) != half.NATIVE_HALF
