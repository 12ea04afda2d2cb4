"""tilelang-cuda's NaN rules, checked on this machine: NVIDIA arithmetic returns the canonical NaN 0x7FFFFFFF where
x86 (the oracles' machine) returns the first NaN operand quieted, or 0xFFC00000 for an invalid operation. The CUDA
helpers decide NaNs in code around the C body (x86_nans.wrap). Here the CUDA helper text is built as host C++ with
its inner IEEE body made to answer as an NVIDIA GPU does (every NaN result canonical), and the result must equal
NumPy's bit for bit on NaN payloads, invalid operations and ordinary values (the found-on-the-H200 bug: verify
cuda-tilelang reported NaN-payload mismatches for add/sub/mul/div/sqrt/floor/fma)."""
import ctypes
import re

import numpy as np
import pytest
from backends.host_cxx import shared_library

from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import cuda

_GPU_NAN = {"float": "0x7fffffffu", "double": "0x7fffffffffffffffull"}
_BITS = {"float": ("itb_f32", np.float32, np.uint32), "double": ("itb_f64", np.float64, np.uint64)}
_FAMILIES = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "floor": 1, "fma": 3}


def _host(text: str) -> str:
    """The device text as host C++, with each inner ``*_ieee`` body answering NaNs as an NVIDIA GPU does."""
    text = text.replace("static __device__ __forceinline__", "static inline") \
               .replace("__device__ __forceinline__", "static inline")

    def gpu(m):
        t, name, params, expr = m.group(1), m.group(2), m.group(3), m.group(4)
        make = _BITS[t][0]
        return (f"static inline {t} {name}_ieee({params}) {{ {t} r_ = ({expr}); "
                f"return r_ != r_ ? {make}({_GPU_NAN[t]}) : r_; }}")

    return re.sub(r"static inline (float|double) (\w+)_ieee\(([^)]*)\) \{ return (.*); \}", gpu, text)


def _library(dtype: T.DType):
    helpers = []
    for family, arity in _FAMILIES.items():
        name = f"it_{family}_{dtype.name}"
        text = cuda.helper_source(name, family, (dtype,), dtype, (dtype,) * arity)
        assert f"{name}_ieee" in text, name  # the NaN decisions wrap the C body
        helpers.append((name, arity, text))
    t = "float" if dtype.name == "f32" else "double"
    defs = [_host(text) for _, _, text in helpers]
    prelude = _host(C.prelude([], cuda.DEVICE)) + "\n" + "\n".join(
        _host(cuda.DEVICE.render(C.BASE[n])) for n in C.base_helpers(defs, C.BASE))
    runners = [f'extern "C" void run_{name}({", ".join(f"const {t}* {n}" for n in "abc"[:arity])}, {t}* out, long k) '
               f'{{ for (long i = 0; i < k; ++i) out[i] = {name}({", ".join(f"{n}[i]" for n in "abc"[:arity])}); }}'
               for name, arity, _ in helpers]
    source = "\n".join([prelude, *defs, *runners, ""])
    return shared_library(source, "cuda_nans")


def _values(np_float, np_uint):
    finfo = np.finfo(np_float)
    ordinary = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.75, finfo.max, -finfo.max, finfo.tiny, finfo.smallest_subnormal,
                         np.inf, -np.inf], np_float)
    exp_bits = finfo.bits - finfo.nmant - 1
    quiet = np_uint(1) << np_uint(finfo.nmant - 1)
    exp_all = ((np_uint(1) << np_uint(exp_bits)) - np_uint(1)) << np_uint(finfo.nmant)
    nans = np.array([exp_all | quiet | np_uint(5), exp_all | np_uint(3),  # a quiet and a signalling payload
                     exp_all | quiet | np_uint(1 << 20) | (np_uint(1) << np_uint(finfo.bits - 1))], np_uint)
    return np.concatenate([ordinary, nans.view(np_float)])


def _numpy(family, *xs):
    with np.errstate(all="ignore"):
        if family == "fma":
            return None
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "sqrt": np.sqrt,
                "floor": np.floor}[family](*xs)


@pytest.mark.parametrize("dtype", [T.f32, T.f64], ids=str)
def test_cuda_helpers_give_x86_nans_where_the_gpu_gives_its_canonical_nan(dtype):
    t = "float" if dtype.name == "f32" else "double"
    _, np_float, np_uint = _BITS[t]
    lib = _library(dtype)
    v = _values(np_float, np_uint)
    grids = {1: (v,), 2: tuple(g.ravel() for g in np.meshgrid(v, v, indexing="ij"))}
    for family, arity in _FAMILIES.items():
        if family == "fma":  # x86's fma: the first NaN operand of (a, b, c), quieted; else the default NaN if invalid
            a, b, c = (g.ravel() for g in np.meshgrid(v, v, v, indexing="ij"))
            with np.errstate(all="ignore"):
                want = np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(np.isnan(c), c, a * b + c)))
            want = want.astype(np_float).view(np_uint)
            quiet = np_uint(1) << np_uint(np.finfo(np_float).nmant - 1)
            nan_in = np.isnan(a) | np.isnan(b) | np.isnan(c)
            want = np.where(nan_in, want | quiet, want)
            args = (a, b, c)
        else:
            args = grids[arity]
            want = np.asarray(_numpy(family, *args), np_float).view(np_uint)
        args = [np.ascontiguousarray(x, np_float) for x in args]
        out = np.empty(len(args[0]), np_float)
        ptr = ctypes.POINTER(ctypes.c_float if t == "float" else ctypes.c_double)
        getattr(lib, f"run_it_{family}_{dtype.name}")(*(x.ctypes.data_as(ptr) for x in args), out.ctypes.data_as(ptr),
                                                      ctypes.c_long(len(out)))
        got = out.view(np_uint)
        if family == "fma":  # NaN operands and 0 * inf only: elsewhere NumPy's a*b + c rounds (and overflows) twice
            a, b = (x.view(np_float) for x in args[:2])
            mask = np.isnan(a) | np.isnan(b) | np.isnan(args[2]) | (np.isinf(a) & (b == 0)) | ((a == 0) & np.isinf(b))
        else:
            mask = np.ones(len(got), bool)
        bad = np.flatnonzero((got != want) & mask)
        assert bad.size == 0, (family, [(hex(int(args[0].view(np_uint)[i])), hex(int(got[i])), hex(int(want[i])))
                                        for i in bad[:5]])
