"""Tiled matmuls on tilelang-metal: the contractions :func:`.cuda_matmul.match_matmul` recognises, on Apple's
SIMD-group matrices (``simdgroup_matrix<T, 8, 8>``), chosen per call by the extents as tilelang-cuda's are.

What TileLang 0.1.15 gives Metal (``tilelang/metal/op/gemm/gemm_metal.py``, ``intrinsics/metal_macro_generator.py``):
``T.gemm`` of two shared (threadgroup) tiles into a fragment is :class:`GemmMetalSimdGroup` unless the target has
the ``metal4`` key (Apple M5 and later under macOS 26: cooperative tensors, ``GemmMetal``;
``tvm.target.Target("metal")``, which :mod:`.metal_lower` and a Mac's default both use elsewhere, has not). It
splits the block's tile among the simdgroups (four of 128 threads: 2 x 2, each a 32 x 32 corner of 4 x 4 8 x 8
matrices) and writes, per 8-deep step of the tile's K, ``simdgroup_load`` of each 8 x 8 operand from threadgroup
memory and ``simdgroup_multiply_accumulate(C, A, B, C)``; the fragment is ``simdgroup_float8x8 C_f[...]`` filled with
``make_filled_simdgroup_matrix`` (``T.clear``), and ``T.copy(C_f, C_s)`` into a threadgroup tile is one
``simdgroup_store`` per matrix. f16, bf16 (``simdgroup_bfloat8x8``: MSL 3.1, Apple GPU family 9) and f32 operands all
take this path; f32 is a true f32 product on Metal (no TF32), accumulated in f32.

The program (:func:`tiled`) -- 64 x 64 output tiles, K in steps of 32, 128 threads:

- **Loads** are the threads' own: each thread copies its elements of the A and B tiles from device memory into
  threadgroup memory, reading ``0`` past M, N and K (clamped, in-bounds addresses; each such element adds an exact
  ``+0`` product). The views are declared in their storage dtypes as the general program declares them (f16 and
  bf16 as their uint16 bits: ``view_storage``), so a tile element is the bits reinterpreted (``as_type<half>``), and
  the serial element code below reads the same parameters.
- **Barriers** are written out (``T.sync_threads``), and one more than TileLang's own pass would place: TileLang's
  ``ThreadSync`` does not count a ``simdgroup_store`` into threadgroup memory as a write, so the accumulators' tile
  read right after it raced (the emulator's race detector found it); the barrier at the end of each K step keeps the
  next step's loads (and the accumulator tile, which TileLang overlaps with A's and B's tiles) off the tiles other
  simdgroups still read.
- **Store**: the accumulators go to a threadgroup tile, and each thread takes elements of it: those inside C are
  finished by the shared emitter's element code (:func:`.cuda_epilogue.element_code`: the cast to f16/bf16, or a
  fused epilogue -- bias, activation, residual, scales -- as the serial program's helpers compute it) and stored;
  the rest are not. So tails in M, N and K are masked at any extents, and batched matmuls take the batch entry as
  the grid's third axis.
- **NaN results** (T10: payloads follow T3, and the verifier compares them): an accumulator that ends NaN is
  recomputed by the serial program's own element code (the contraction in ascending k with the target's NaN-aware
  helpers), so its payload is x86's whatever the hardware's MMA gave; every other element is the MMA's, within
  T5's bound (FMA inside contractions, any order: T10).
"""
from __future__ import annotations

import re

import attrs

from ...graph import ops
from ...graph.values import KernelGraph
from ...schedule.plan import Part
from . import cuda_epilogue
from .cuda_matmul import TIR_DTYPE, MatmulMatch, match_matmul
from .dialect import View


@attrs.frozen
class MetalTiling:
    """A threadgroup computes a ``tm`` x ``tn`` tile of C in ``tk``-deep steps with ``threads`` threads (whole
    simdgroups: ``T.gemm`` splits the tile among them)."""

    tm: int = 64
    tn: int = 64
    tk: int = 32
    threads: int = 128


TILING = MetalTiling()
_ISNAN = "static inline int itc_is_nan(float x) { return x != x; }"  # safe math: a NaN compares unequal
_CONSTANT = re.compile(r"\bK(\d+)\b")  # the emitter's constants (K is a reserved prefix: emitter.fresh)


def specializations(graph: KernelGraph, target) -> list:
    """tilelang-metal's tiled programs of ``graph``: the simdgroup-matrix matmul."""
    spec = tiled(graph, target)
    return [] if spec is None else [spec]


def tiled(graph: KernelGraph, target, t: MetalTiling = TILING):
    """The simdgroup-matrix program of a recognised matmul (f16, bf16 or f32 operands; batched or not; with a fused
    epilogue or not), or None. See the module docstring."""
    match = match_matmul(graph)
    if match is None or t.threads % 32 or (t.tm * t.tk) % t.threads or (t.tk * t.tn) % t.threads \
            or (t.tm * t.tn) % t.threads:
        return None
    params, env = cuda_epilogue.declare_params(graph, target, {})  # every view in its storage dtype
    finish = _finish(graph, target, match, env, t)
    if finish is None:
        return None
    setup, body, helpers = finish
    dims = "\n".join(f"d{k} = T.dynamic('d{k}', 'int32')" for k in range(len(graph.extents)))
    program = _PROGRAM.format(
        name=target.name, language=target.language, prelude=repr(target.prelude([*helpers, _ISNAN])), dims=dims,
        params=params, launch=_launch(match, t), operand=TIR_DTYPE[match.dtype], tm=t.tm, tn=t.tn, tk=t.tk,
        threads=t.threads, setup="".join(f"\n        {line}" for line in setup),
        load_a=_load(graph, match, t, "a"), load_b=_load(graph, match, t, "b"),
        a_steps=t.tm * t.tk // t.threads, b_steps=t.tk * t.tn // t.threads, c_steps=t.tm * t.tn // t.threads,
        m=match.m, n=match.n, k=match.k, store="".join(f"\n                {line}" for line in body))
    stored = tuple(k for k, p in enumerate(graph.params)
                   if p.kind == "view" and target.view_storage(p.type.dtype) is not None)
    spec = match.specialization(program, 1, 1, 1, stored, (t.tm, t.tn))
    part = Part("tiled_matmul", _REASON, (("program", spec.name), ("operands", match.dtype),
                                          ("tile", f"{t.tm}x{t.tn}x{t.tk}"), ("threads", t.threads)),
                nodes=tuple(graph.body.nodes))
    return attrs.evolve(spec, part=part)


_REASON = ("a recognised contraction on simdgroup matrices (T.gemm: 8x8 simdgroup_multiply_accumulate): a "
           "threadgroup per output tile, its simdgroups splitting it, K in steps through threadgroup memory, tails "
           "masked, the epilogue fused into the store")


def _launch(match: MatmulMatch, t: MetalTiling) -> str:
    grid = f"T.ceildiv(d{match.n}, {t.tn}), T.ceildiv(d{match.m}, {t.tm})"
    if match.batch is None:
        return f"with T.Kernel({grid}, threads={t.threads}, prelude=PRELUDE) as (bx, by):"
    return f"with T.Kernel({grid}, d{match.batch}, threads={t.threads}, prelude=PRELUDE) as (bx, by, bz):"


def _load(graph: KernelGraph, match: MatmulMatch, t: MetalTiling, which: str) -> str:
    """One element of a thread's share of the A (``which`` "a") or B tile: its bits from device memory (clamped
    into the view), or 0 past the view's rows or columns."""
    if which == "a":
        param, rows, cols, r0, c0, width = match.a, match.m, match.k, f"by * {t.tm}", f"ko * {t.tk}", t.tk
        tile = "A_s"
    else:
        param, rows, cols, r0, c0, width = match.b, match.k, match.n, f"ko * {t.tk}", f"bx * {t.tn}", t.tn
        tile = "B_s"
    operand = TIR_DTYPE[match.dtype]
    r, c = f"{r0} + (s * {t.threads} + tx) // {width}", f"{c0} + (s * {t.threads} + tx) % {width}"
    z = "" if match.batch is None else "bz, "
    element = f"p{param}[{z}T.min({r}, d{rows} - 1), T.min({c}, d{cols} - 1)]"
    inside = f"{r} < d{rows} and {c} < d{cols}"
    if graph.params[param].type.dtype.name == "f32":
        value = f"T.if_then_else({inside}, {element}, T.float32(0))"
    else:  # f16/bf16 views hold their bits (view_storage); +0 as bits too (no half literal for a bfloat)
        value = f"T.reinterpret(T.if_then_else({inside}, {element}, T.uint16(0)), {operand!r})"
    return f"{tile}[(s * {t.threads} + tx) // {width}, (s * {t.threads} + tx) % {width}] = {value}"


def _finish(graph: KernelGraph, target, match: MatmulMatch, env: dict, t: MetalTiling):
    """(setup lines, per-element lines, helper definitions) of the store: the accumulator element ``acc[0]`` (a NaN
    recomputed by the serial program's element code) finished by the shared emitter and stored into C; None when
    the emitter cannot write either as straight-line element code."""
    contract = next(n for n in graph.body.nodes if n.op is ops.contract).outputs[0]
    index = ["eb", "em", "en"] if match.batch is not None else ["em", "en"]
    out_view = env[graph.params[match.c].var]
    finish = cuda_epilogue.element_code(graph, target, env, contract, "acc[0]", index, match.written, out_view, None)
    # the contraction alone, as the serial program computes it (its loop over K), into an f32 "view"
    acc_view = View("acc", out_view.shape, contract.type.dtype, "acc")
    serial = cuda_epilogue.element_code(graph, target, env, contract, None, index, contract, acc_view, None)
    if finish is None or serial is None:
        return None

    def own(line: str) -> str:  # the serial code's constants renamed: both element codes number theirs from K0
        return _CONSTANT.sub(r"KS\1", line)

    z = ["eb = T.Cast('int64', bz)"] if match.batch is not None else []
    body = [*z, f"em = T.Cast('int64', by * {t.tm} + ei)", f"en = T.Cast('int64', bx * {t.tn} + ej)",
            "acc[0] = C_s[ei, ej]",
            "if T.call_extern('int32', 'itc_is_nan', acc[0]) != 0:  # the serial program's payload (T10)",
            *(f"    {own(line)}" for line in serial.body), f"    acc[0] = {own(serial.value)}",
            *finish.body, f"p{match.c}[{', '.join(index)}] = {finish.value}"]
    setup = [*finish.setup, *(own(line) for line in serial.setup)]
    helpers = list(dict.fromkeys([*finish.helpers, *serial.helpers]))
    return setup, body, helpers


_PROGRAM = '''# Generated by intent_trace (target {name}): tiled matmul (simdgroup matrices) of a KIR graph.
import {language} as T

PRELUDE = {prelude}

{dims}


@T.prim_func
def kernel({params}):
    {launch}
        A_s = T.alloc_shared(({tm}, {tk}), {operand!r})
        B_s = T.alloc_shared(({tk}, {tn}), {operand!r})
        C_f = T.alloc_fragment(({tm}, {tn}), 'float32')
        C_s = T.alloc_shared(({tm}, {tn}), 'float32')
        acc = T.alloc_local((1,), 'float32')
        tx = T.get_thread_binding(){setup}
        T.clear(C_f)
        for ko in T.serial(T.ceildiv(d{k}, {tk})):
            for s in T.serial({a_steps}):
                {load_a}
            for s in T.serial({b_steps}):
                {load_b}
            T.sync_threads()
            T.gemm(A_s, B_s, C_f)
            T.sync_threads()
        T.copy(C_f, C_s)
        T.sync_threads()
        for s in T.serial({c_steps}):
            ei = (s * {threads} + tx) // {tn}
            ej = (s * {threads} + tx) % {tn}
            if by * {tm} + ei < d{m} and bx * {tn} + ej < d{n}:{store}
'''
