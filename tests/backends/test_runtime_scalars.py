"""A runtime scalar parameter of every dtype reaches the kernel with its value, edge values included, on every
executable target (tilelang-c passed u8/u16 scalars to TileLang's wrapper, which has no ctypes type for them)."""
import ml_dtypes
import numpy as np
import pytest
from conftest import bits_equal

import intent_trace as intent
from intent_trace import I

_NP = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
       "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
       "f32": np.float32, "f64": np.float64}


def _edges(name: str) -> list:
    d = _NP[name]
    if name == "bool":
        return [False, True]
    if np.issubdtype(d, np.integer):
        info = np.iinfo(d)
        return [d(0), d(info.max), d(info.min), d(1), d(info.max - 1)]
    info = ml_dtypes.finfo(d) if name == "bf16" else np.finfo(d)
    # bf16 travels as a Python float (its exact value): NumPy has no bfloat16 scalar type the binder accepts
    wrap = float if name == "bf16" else d
    return [wrap(v) for v in (0.0, -0.0, float(info.max), float(info.min), float(info.smallest_subnormal), 1.0,
                               float("inf"), float("-inf"))]


_KERNELS = {}


def _kernel(name: str):
    if name not in _KERNELS:
        dtype = getattr(I, "bool_" if name == "bool" else name)

        @intent.kernel
        def echo(y: I.Out[dtype, (1,)], w: I.Out[I.f64, (1,)], s: dtype):
            y[0] = s  # the bits
            w[0] = I.cast(s, I.f64)  # the value, as the kernel sees it

        _KERNELS[name] = echo
    return _KERNELS[name]


@pytest.mark.parametrize("name", list(_NP))
def test_runtime_scalar_of_every_dtype_keeps_its_value(run, name):
    for value in _edges(name):
        y, w = np.zeros(1, _NP[name]), np.full(1, np.nan)
        run(_kernel(name), y, w, value)
        expected = np.asarray([value], dtype=_NP[name])
        assert bits_equal(y, expected), (name, value, y)
        assert bits_equal(w, expected.astype(np.float64)), (name, value, w)
