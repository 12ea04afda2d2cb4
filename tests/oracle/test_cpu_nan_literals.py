"""NaN literals on the cpu target keep their bits (sign, quiet/signalling bit, payload), as generic does.

A NaN's sign and payload exist only in its bits; a float spelling of it in generated source
(``float('nan')``) is +NaN. Each literal here comes from a float64 bit pattern (a Python float keeps
any), the tracer rounds it to the kernel's dtype (T1), and the kernel's output must hold exactly the bits
the traced literal holds, whether it is stored as an operand (a ``Literal``) or as a ``constant`` node.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph.values import Literal

F64_NANS = {
    "+qnan": 0x7FF8000000000000, "-qnan": 0xFFF8000000000000,
    "+qnan-low-payload": 0x7FF8000000000001, "-qnan-payload": 0xFFFA5A5A5A5A5A5A,
    "+qnan-f32-payload": 0x7FF8000020000000, "-qnan-all-ones": 0xFFFFFFFFFFFFFFFF,
    "+snan": 0x7FF0000000000001, "-snan-high-payload": 0xFFF4000000000000,
    "+snan-f16-payload": 0x7FF0040000000000, "-snan-all-ones": 0xFFF7FFFFFFFFFFFF,
}
DTYPES = {"f32": (I.f32, np.float32, np.uint32), "f64": (I.f64, np.float64, np.uint64),
          "f16": (I.f16, np.float16, np.uint16), "bf16": (I.bf16, None, np.uint16)}


def _nan(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _kernel(value: float, dt):
    @intent.kernel
    def k(x: I.In[dt, ("N",)], y: I.Out[dt, (3,)], z: I.Out[dt, (2,)]):
        y[0] = value  # a Literal operand of the write
        z[:] = I.full((2,), value, dt)  # the fill of a full
    return k


def _literal_bits(graph, uint) -> set:
    found = set()
    for node in graph.walk():
        values = [x.value for x in node.inputs if isinstance(x, Literal) and x.type.dtype.is_float]
        if node.attr("value") is not None:
            values.append(node.attr("value"))
        found.update(int(np.asarray(v).view(uint)) for v in values)
    return found


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(F64_NANS))
def test_cpu_nan_literal_keeps_its_bits(name, dtype):
    dt, _, uint = DTYPES[dtype]
    k = _kernel(_nan(F64_NANS[name]), dt)
    graph = k.trace()
    (want,) = _literal_bits(graph, uint)  # one literal, as the tracer rounded it
    assert want >> (8 * np.dtype(uint).itemsize - 1) == F64_NANS[name] >> 63  # the rounding kept the sign
    x = np.zeros(1, dt.np)
    y, z = np.zeros(3, dt.np), np.zeros(2, dt.np)
    intent.compile(k, target="cpu")(x, y, z)
    assert int(y.view(uint)[0]) == want and [int(b) for b in z.view(uint)] == [want] * 2
    theirs = np.zeros(3, dt.np), np.zeros(2, dt.np)
    intent.compile(k, target="generic")(x, *theirs)
    assert theirs[0][:1].tobytes() == y[:1].tobytes() and theirs[1].tobytes() == z.tobytes()
