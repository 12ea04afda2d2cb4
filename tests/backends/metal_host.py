"""Run tilelang-metal's helper bodies on this machine, as C++, next to tilelang-c's (the reference numerics).

Metal Shading Language helpers are C++ with a few Metal spellings; a small shim (``as_type``, ``metal::fma``,
the address-space keywords, Metal's integer type names) makes them host C++. Each helper is compiled twice in
one shared library, the C body in namespace ``cc`` and the Metal body in namespace ``mtl`` (both preludes whole,
each in its namespace), with a runner per helper that maps it over arrays. Built with tilelang-c's compiler
flags (no -fwrapv: the Metal bodies must not rely on it), so host IEEE arithmetic stands in for a Metal build
with fast math off. This is the only way to check the Metal numerics without a Mac.
"""
from __future__ import annotations

import ctypes

import numpy as np
from backends.host_cxx import FLAGS, shared_library

from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import metal as M

SHIM = """#include <stdint.h>
#include <string.h>
#include <math.h>
typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint; typedef unsigned long ulong;
template <typename T, typename U> static inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs equal sizes"); T t; memcpy(&t, &u, sizeof t); return t;
}
namespace metal { static inline float fma(float a, float b, float c) { return fmaf(a, b, c); }
// Metal's library as the host's libm (as the emulator's itm_library.h has it): Apple's bits are not reproduced
#define ITM_MATH1(N) static inline float N(float x) { return ::N##f(x); }
#define ITM_MATH(NS) namespace NS { ITM_MATH1(exp) ITM_MATH1(exp2) ITM_MATH1(log) ITM_MATH1(sin) ITM_MATH1(cos) \
  ITM_MATH1(asin) ITM_MATH1(tanh) static inline float rsqrt(float x) { return 1.0f / ::sqrtf(x); } \
  static inline float pow(float x, float y) { return ::powf(x, y); } }
ITM_MATH(precise) ITM_MATH(fast)
}
#define thread
#define device
#define constant const
"""
NP = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64,
      "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f32": np.float32, "f16": np.float32,
      "bf16": np.float32}


class Helper:
    """One helper: ``name``, its C and Metal definitions, its operand and result dtypes."""

    def __init__(self, family: str, dtypes: tuple, ret: T.DType, args: tuple):
        self.family, self.dtypes, self.ret, self.args = family, dtypes, ret, args
        self.name = "it_" + "_".join((family, *(d.name for d in dtypes)))
        self.c = C.helper_source(self.name, family, dtypes, ret, args)
        self.metal = M.helper_source(self.name, family, dtypes, ret, args)
        assert self.c is not None and self.metal is not None, self.name

    def runner(self, ns: str, ctype) -> str:
        params = ", ".join(f"const {ctype(t)}* {n}" for t, n in zip(self.args, "abc"))
        call = ", ".join(f"{n}[i]" for n in "abc"[:len(self.args)])
        return (f'extern "C" void {ns}_{self.name}({params}, {ctype(self.ret)}* out, long n) '
                f"{{ for (long i = 0; i < n; ++i) out[i] = {ns}::{self.name}({call}); }}")


def build(helpers: list, extra: str = "") -> ctypes.CDLL:
    """Compile the helpers' C and Metal bodies into one library (cached by its text) and load it."""
    c_defs = [h.c.replace('extern "C" inline', "static inline") for h in helpers]
    c_prelude = C.prelude(c_defs).replace("#include <string.h>\n#include <math.h>\n#include <stdint.h>\n", "")
    text = "\n".join([SHIM, "namespace cc {", c_prelude, "}", "namespace mtl {", M.prelude([h.metal for h in helpers]),
                      "}", *(h.runner("cc", C._c) for h in helpers), *(h.runner("mtl", M._m) for h in helpers),
                      extra, ""])
    return shared_library(text, "metal_host", FLAGS)


def run(lib: ctypes.CDLL, helper: Helper, *inputs) -> tuple:
    """(the C result, the Metal result) of ``helper`` over the input arrays (converted to its operand dtypes)."""
    arrays = [np.ascontiguousarray(np.asarray(x).astype(NP[t.name])) for x, t in zip(inputs, helper.args)]
    n = len(arrays[0])
    out = []
    for ns in ("cc", "mtl"):
        result = np.zeros(n, NP[helper.ret.name])
        fn = getattr(lib, f"{ns}_{helper.name}")
        fn(*(a.ctypes.data_as(ctypes.c_void_p) for a in arrays), result.ctypes.data_as(ctypes.c_void_p),
           ctypes.c_long(n))
        out.append(result)
    return tuple(out)


def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind in "fb" else x


def ulps(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Distance between float32 arrays in units in the last place (NaN to NaN: 0; NaN to a number: 2^40)."""
    def ordered(a):
        u = bits(a.astype(np.float32)).astype(np.int64)
        return np.where(u >> 31, -(u & 0x7FFFFFFF), u)
    d = np.abs(ordered(x) - ordered(y))
    nx, ny = np.isnan(x), np.isnan(y)
    return np.where(nx & ny, 0, np.where(nx | ny, 1 << 40, d))
