"""Shared by the tilelang-c tests: run a kernel on generic and on tilelang-c and compare bit for bit."""
import functools
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from backends.cuda_ptx import assemble
from conftest import bits_equal

import metal_source

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.target import build

TARGET = "tilelang-c"


def run_both(kernel, *args, **constexprs):
    """Run on generic and on tilelang-c from equal copies of ``args``; assert every output agrees bit for bit."""
    g = kernel.trace(**constexprs)
    ref = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    got = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    metal = metal_source.CHECK.submit(kernel, constexprs)  # Metal source too (metal_source.py)
    intent.compile(kernel, target="generic", **constexprs)(*ref)
    build(g, target=TARGET)(*got)
    if metal is not None:
        metal.wait()
    for p, r, t in zip(g.params, ref, got):
        if p.kind == "view" and p.type.access != "In":
            assert bits_equal(r, t), _diff(p.name, r, t, args)
    return dict(zip((p.name for p in g.params), got))


def _diff(name, r, t, args) -> str:
    r, t = np.asarray(r), np.asarray(t)
    if r.shape != t.shape or r.dtype != t.dtype:
        return f"{name}: {r.dtype}{r.shape} vs {t.dtype}{t.shape}"
    u = np.dtype(f"u{r.dtype.itemsize}")
    bad = np.argwhere(r.reshape(r.shape or (1,)).view(u) != t.reshape(t.shape or (1,)).view(u))
    first = [tuple(int(i) for i in b) for b in bad[:6]]
    return f"{name}: {len(bad)} elements differ, first at {first}: generic {[r[f] for f in first]} " \
           f"tilelang-c {[t[f] for f in first]}"


def f32_bits(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def f64_bits(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).view(np.float64)


F32_EDGES = np.concatenate([
    np.array([0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 3.0, 0.1, -0.1, 2.5, -2.5, 255.5, -0.75, 1e10, -1e10, 2.0**31,
              -2.0**31, 2.0**63, 2.0**64, 3.0e38, np.inf, -np.inf, np.nan, 7.0, 2.0**-126, 1e-45, -1e-45,
              1.1754942e-38, 2.0**24 + 2], dtype=np.float32),
    f32_bits([0x7FC00001, 0xFFC00000, 0x7F800001, 0x7F7FFFFF]),  # NaN payload, negative NaN, sNaN, max finite
])
F64_EDGES = np.concatenate([
    np.array([0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 3.0, 0.1, -0.1, 2.5, 255.5, 1e300, -1e300, 2.0**63, -2.0**63,
              2.0**64, 2.0**31, -2.0**31 - 0.5, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
              2.0**53 + 2, 1e-310], dtype=np.float64),
    f64_bits([0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000001]),
])


F16_EDGES = np.array([0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE00, 0x7C01,
                      0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C01, 0x4248, 0x5640, 0x2E66, 0xC500, 0x6800],
                     np.uint16).view(np.float16)
BF16_EDGES = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x3F00, 0x7F80, 0xFF80, 0x7FC0, 0x7FC1, 0xFFC0, 0x7F81,
                       0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F81, 0x4049, 0x42C8, 0x3DCD, 0xC0A0, 0x4F00],
                      np.uint16).view(ml_dtypes.bfloat16)
EDGES = {I.f32: F32_EDGES, I.f64: F64_EDGES, I.f16: F16_EDGES, I.bf16: BF16_EDGES}


def int_edges(np_dtype) -> np.ndarray:
    info = np.iinfo(np_dtype)
    bits = info.bits
    vals = {int(info.min), int(info.min) + 1, -3, -2, -1, 0, 1, 2, 3, 7, bits - 1, bits, bits + 1,
            int(info.max) // 2, int(info.max) // 2 + 1, int(info.max) - 1, int(info.max)}
    return np.array(sorted(v for v in vals if info.min <= v <= info.max), dtype=object).astype(np_dtype)


def all_pairs(values: np.ndarray):
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    return a, b


@functools.lru_cache(maxsize=32)  # a pure function of the text; lowering a row program takes seconds
def cuda_source(program: str) -> str:
    """The CUDA source TileLang generates for a tilelang-cuda program text on sm_90a, on this machine (no GPU: the
    text is lowered, not compiled), under the target's pass configuration for the program."""
    import linecache

    import tvm
    from tvm.target import Target

    import tilelang
    from intent_trace.backends.tilelang import cuda

    name = f"<cuda {hash(program)}>"
    linecache.cache[name] = (len(program), None, program.splitlines(True), name)
    namespace: dict = {}
    exec(compile(program, name, "exec"), namespace)  # noqa: S102  (generated text)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    with tvm.transform.PassContext(config=dict(cuda.pass_configs(program))), target:
        return tilelang.lower(namespace["kernel"], target=target).kernel_source


_ASSEMBLED: dict = {}  # (CUDA source, std) -> cuda_ptx.Assembled or None


def assembled(source: str, std: str = "c++17"):
    """``cuda_ptx.assemble(source, ..., std)``: the PTX and ptxas' report (None where this machine has no nvcc),
    memoised on the source text (nvcc's report of a text does not change within a session): nvcc for sm_90a takes
    seconds a program, and several tests read the same program's report (the streaming-load and the ptxas test of
    one row kernel). One nvcc run gives both, as fast as the report alone."""
    key = (source, std)
    if key not in _ASSEMBLED:
        with tempfile.TemporaryDirectory(prefix="cuda_ptx_") as directory:
            _ASSEMBLED[key] = assemble(source, Path(directory), std)
    return _ASSEMBLED[key]


# A rank-1 pointwise chain of two reads (benchmarks/gpu.py's chain4): the flat nest's subject, grouped on CUDA.
@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


# Two grid-planning subjects: a pure write nest, and one whose scan needs a buffer per element.
@intent.kernel
def affine(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = x[:, :] * 1.5 - 0.25


@intent.kernel
def row_prefix_max(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M",)]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m] = I.reduce.max(I.cumsum(x[m, n], axis=1), axis=1)  # the scan needs a buffer of N per element


@intent.kernel
def widening_lookup(table: I.In[I.f16, ("V", "D")], ids: I.In[I.i64, ("T",)], out: I.Out[I.f32, ("T", "D")]):
    """An embedding lookup whose rows are widened as they are read: a flat nest, each element's id read and checked
    (the plain lookup, ``benchmarks/zoo_kernels.embedding_f16``, is a row gather: cuda_gather)."""
    token = I.reshape(ids[:], (ids.shape[0], 1))
    feature = I.reshape(I.indices(I.domain(0, table.shape[1])), (1, table.shape[1]))
    out[:, :] = I.cast(I.gather(table[:, :], (token, feature)), I.f32)


def mapped_compiler(target: str, monkeypatch, emulated, mapping: str, mapped_targets=("tilelang-c", "tilelang-cuda")):
    """``compiled(kernel)`` for a test of one CUDA mapping: the kernel built for ``target``, on tilelang-c with the
    target value ``emulated`` (the C target running the CUDA mapping, a block's threads one after another); on a
    target of ``mapped_targets`` the test fails unless the general program is ``mapping``."""
    from intent_trace.backends.tilelang import target as tl_target
    from intent_trace.backends.tilelang import targets

    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, emulated)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel):
        exe = intent.compile(kernel, target=target)
        if target in mapped_targets:
            assert exe.schedule.general.mapping == mapping, exe.schedule
        return exe

    return compiled
