"""tilelang-cuda's device atomics (cuda_atomics.py) run on this machine: the CUDA helper text, built as host C++
with ``atomicCAS`` as a plain compare-and-swap and ``__threadfence`` as nothing, must leave memory and return
exactly what tilelang-c's serial read-modify-writes do (the reference numerics, checked against generic by the
kernel suite), for every op, dtype and memory order, at every byte offset of a 32-bit word (the 8- and 16-bit
elements are swapped inside their word: the neighbouring bytes must come back unchanged)."""
import ctypes

import numpy as np
import pytest
from backends.host_cxx import shared_library

from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import cuda, cuda_atomics

DTYPES = (T.i8, T.u8, T.i16, T.u16, T.i32, T.u32, T.i64, T.u64, T.f32)
INT_OPS = ("load", "store", "exchange", "add", "max", "min", "and", "or", "xor", "cas")
F32_OPS = ("load", "store", "exchange", "add", "max", "min", "cas")
ORDERS = {"load": "acquire", "store": "release", "cas": "seq_cst_relaxed"}
SHIM = """#include <stdint.h>
#include <string.h>
#include <math.h>
static inline unsigned int atomicCAS(unsigned int* p, unsigned int e, unsigned int d) {
  unsigned int o = *p; if (o == e) *p = d; return o; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long e, unsigned long long d) {
  unsigned long long o = *p; if (o == e) *p = d; return o; }
static inline void __threadfence() {}
"""
TIR = {"i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32",
       "i64": "int64", "u64": "uint64", "f32": "float32"}


def _helpers(d, op):
    family = f"atomic_{op}_{ORDERS.get(op, 'relaxed')}"
    name = f"it_{family}_{d.name}"
    combine = None if op in ("load", "store", "exchange", "cas") else f"it_{op}_{d.name}"
    args = {"load": (TIR[d.name],), "cas": (TIR[d.name], d, d)}.get(op, (TIR[d.name], d))
    ret = T.i32 if op == "store" else d
    return name, family, args, ret, combine


def _library():
    c_defs, cuda_defs, runners = [], [], []
    for d in DTYPES:
        t = C.C_TYPE[d.name]
        for op in (F32_OPS if d.is_float else INT_OPS):
            name, family, args, ret, combine = _helpers(d, op)
            if combine is not None:
                for defs, module in ((c_defs, C), (cuda_defs, cuda)):
                    text = module.helper_source(combine, op, (d,), d, (d, d))
                    if text not in defs:
                        defs.append(text)
            c_defs.append(C.extern_source(name, family, (d,), ret, args, combine))
            cuda_defs.append(cuda.extern_source(name, family, (d,), ret, args, combine))
            for ns in ("cc", "cu"):
                runners.append(f'extern "C" long long {ns}_{name}(void* mem, long long off, {t} a, {t} b) {{ '
                               f'{t}* p = ({t}*)((char*)mem + off); {C.C_TYPE[ret.name]} r = {ns}::{name}('
                               f'{", ".join(["p", "a", "b"][:len(args)])}); long long out = 0; '
                               f'memcpy(&out, &r, sizeof r); return out; }}')
    for d in DTYPES:  # the CAS helpers themselves, with any expected value (a lost race, single-threaded)
        t = C.C_TYPE[d.name]
        runners.append(f'extern "C" long long cas_{d.name}(void* mem, long long off, unsigned long long eb, '
                       f'unsigned long long wb) {{ {t} e, w; memcpy(&e, &eb, sizeof e); memcpy(&w, &wb, sizeof w); '
                       f'{t} r = cu::itc_cas_{d.name}(({t}*)((char*)mem + off), e, w); long long out = 0; '
                       f'memcpy(&out, &r, sizeof r); return out; }}')
    host = cuda.prelude(cuda_defs).replace("static __device__ __forceinline__", "static inline") \
                                  .replace("__device__ __forceinline__", "static inline") \
                                  .replace("#define itc_return() return\n", "")
    c_text = C.prelude([x.replace('extern "C" inline', "static inline") for x in c_defs])
    source = "\n".join([SHIM, "namespace cc {", c_text, "}", "namespace cu {", host, "}", *runners, ""])
    return shared_library(source, "cuda_atomics"), source


def _values(d, rng, n):
    if d.is_float:
        pool = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e38, 1e-45, 7.0], np.float32)
        return np.concatenate([pool, rng.standard_normal(n).astype(np.float32) * 100])
    info = np.iinfo(d.np)
    edges = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2], dtype=d.np)
    return np.concatenate([edges, rng.integers(info.min, info.max, n, dtype=d.np, endpoint=True)])


def test_the_cuda_atomics_share_one_cas_helper_per_dtype_and_fence_by_order():
    _, source = _library()
    for d in DTYPES:
        assert source.count(f"itc_cas_{d.name}({C.C_TYPE[d.name]}* q") == 1
    assert "__threadfence(); " in cuda_atomics.atomic_body("load", ("acquire",), T.i32, None)
    assert "__threadfence" not in cuda_atomics.atomic_body("add", ("relaxed",), T.i32, "it_add_i32")
    assert cuda_atomics.atomic_body("cas", ("seq_cst", "relaxed"), T.i32, None).count("__threadfence") == 2


@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_cuda_atomics_match_the_serial_read_modify_writes(d):
    lib, _ = _library()
    rng = np.random.default_rng(d.bits + len(d.name))
    size = d.bits // 8
    values = _values(d, rng, 40)
    ctype = {"f32": ctypes.c_float, "u64": ctypes.c_uint64, "u32": ctypes.c_uint32, "u16": ctypes.c_uint16,
             "u8": ctypes.c_uint8}.get(d.name, {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32,
                                                 8: ctypes.c_int64}[size])
    for op in (F32_OPS if d.is_float else INT_OPS):
        name = _helpers(d, op)[0]
        for fn in (getattr(lib, f"cc_{name}"), getattr(lib, f"cu_{name}")):
            fn.restype = ctypes.c_longlong
            fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctype, ctype]
        for k in range(60):
            base = rng.integers(0, 256, 16, dtype=np.uint8)
            off = int(rng.integers(0, 8 // size)) * size  # every aligned offset in two words
            old = values[k % len(values)]
            base[off:off + size] = np.array([old], d.np).view(np.uint8)
            a = values[int(rng.integers(len(values)))]
            b = values[int(rng.integers(len(values)))]
            if op == "cas" and k % 3 == 0:
                a = old  # the swap happens
            mem_c, mem_cu = base.copy(), base.copy()
            r_c = getattr(lib, f"cc_{name}")(mem_c.ctypes.data, off, ctype(a.item()), ctype(b.item()))
            r_cu = getattr(lib, f"cu_{name}")(mem_cu.ctypes.data, off, ctype(a.item()), ctype(b.item()))
            assert r_c == r_cu and np.array_equal(mem_c, mem_cu), (op, d, off, old, a, b, r_c, r_cu, mem_c, mem_cu)


@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_the_cas_helper_swaps_only_on_equal_bits_and_keeps_the_neighbours(d):
    lib, _ = _library()
    size = d.bits // 8
    rng = np.random.default_rng(7 * size)
    fn = getattr(lib, f"cas_{d.name}")
    fn.restype = ctypes.c_longlong
    fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_uint64, ctypes.c_uint64]  # bit patterns
    for off in range(0, 8, size):
        base = rng.integers(0, 256, 16, dtype=np.uint8)
        cur = int.from_bytes(base[off:off + size].tobytes(), "little")
        other = cur ^ 1
        mem = base.copy()
        found = fn(mem.ctypes.data, off, other, 0x5A)  # a different expected value: no swap
        assert found & ((1 << d.bits) - 1) == cur and np.array_equal(mem, base)
        found = fn(mem.ctypes.data, off, cur, 0x5A)  # the expected value: swapped, neighbours unchanged
        want = base.copy()
        want[off:off + size] = np.frombuffer((0x5A).to_bytes(size, "little"), np.uint8)
        assert found & ((1 << d.bits) - 1) == cur and np.array_equal(mem, want)
