"""NaN accumulators of the tensor-core matmul (:func:`.cuda_matmul.tensor_core`) recomputed by the serial program.

``T.gemm`` is ``wgmma`` on Hopper. The PTX ISA leaves its "accumulation order, rounding and handling of subnormal
inputs" unspecified (``wgmma.mma_async``, "Precision and rounding"), so not even which of several NaN products wins is
defined, and NVIDIA arithmetic returns its canonical NaN (``0x7FFFFFFF``) rather than an operand's payload or x86's
default NaN (``0xFFC00000``: ``inf * 0``, ``inf - inf``). T10 asks for the serial program's payloads. As the f32 program
on CUDA cores does (:func:`.cuda_matmul_simt.simt`), the product's hot loop stays as it is and only a NaN pays: after the
K loop, each accumulator element (one compare each, in the thread that holds it) that is NaN is computed again by the
serial program's helpers -- ``s = 0; s = add(s, mul(a[k], b[k]))`` over k in order, each operand decoded from its
bits and widened to f32 as the serial program reads it -- and the fused epilogue, whose element code is already the
serial program's, starts from it. A plain matmul with an f16/bf16 output converts its tile in ``T.copy``; a NaN's
bits are then written over the converted element (the serial program's cast, ``encode``d), after a barrier.
In the plain program only a tile holding a NaN runs the recomputing loop (unrolled once per fragment element): one
compare per element sets a flag of the tile first. The fused epilogue's loop is rolled
(:func:`.cuda_matmul._tile_loop`: a thread's 8 accumulators of a row a pass), so there one branch on whether any of
the 8 is a NaN guards the recomputation of each (:func:`element_fix`, :func:`any_nan`).
"""
from __future__ import annotations

import attrs

from ... import types as DT
from . import c, cuda
from .cuda_region_tiles import CANONICAL, IS_NAN
from .dialect import View, decode, encode
from .emitter import TileLangEmitter
from .rules import REJECTED, RULES

_IS_NAN = "itr_is_nan"  # cuda_region_tiles.IS_NAN
_HALF = {"f16": "float16", "bf16": "bfloat16"}


@attrs.frozen
class Fix:
    """The loop that recomputes NaN accumulators: ``setup`` lines before the K loop (its local), ``lines`` after it
    (unindented), ``helpers`` the prelude definitions they call."""

    setup: tuple
    lines: tuple
    helpers: tuple
    element: tuple = ()  # fused: the recomputation of the element in fa[0] at tile coordinates (ei, ej)


def recompute(graph, target, match, t, acc: str, dest: str | None) -> Fix:
    """The fix of the plain program's accumulator tile ``acc`` (``acc[i, j]``: a fragment), over the tile at block
    ``(by, bx[, bz])``: a NaN element inside C becomes the serial program's sum, written back to ``acc`` (``dest``
    None) or, cast as the serial program casts it, to the staged output tile ``dest``."""
    em = TileLangEmitter(graph, target, RULES, REJECTED, checks=False)
    # Only a tile holding a NaN runs the recomputation: one compare per element sets the tile's flag, and the
    # recomputing loop (its serial K loop unrolled once per fragment element) runs behind one uniform branch. In
    # the hot path that loop cost the f16 program half its speed on the H100 (4096^3: 0.39 ms against 0.20 ms
    # with the flag). The barriers: every thread has read the previous tile's flag before it is cleared, and has
    # cleared it before any sets it (a persistent block runs several tiles).
    lines = ["T.sync_threads()", "nan_s[0] = 0", "T.sync_threads()",
             f"for fi, fj in T.Parallel({t.tm}, {t.tn}):",
             f"    if T.call_extern('int32', {_IS_NAN!r}, {acc}[fi, fj]) != 0:",
             "        nan_s[0] = 1",
             "T.sync_threads()"]
    if dest is None:
        store = f"{acc}[fi, fj] = fs[0]"
    elif match.out == "f32":
        store = f"{dest}[fi, fj] = fs[0]"
    else:
        out = getattr(DT, match.out)
        cast = f"T.call_extern('float32', {em.helper('cast', (DT.f32, out), out, (DT.f32,))!r}, fs[0])"
        bits = encode(em, View(dest, (), out, dest, storage="uint16"), cast)
        store = f"{dest}[fi, fj] = T.reinterpret({bits}, {_HALF[match.out]!r})"
    lines += ["if nan_s[0] != 0:  # the serial program, for this tile's NaN elements",
              f"    for fi, fj in T.Parallel({t.tm}, {t.tn}):",
              *(f"        {line}" for line in _recomputed(em, match, t, ("A", "B"), "fi", "fj", f"{acc}[fi, fj]",
                                                          store))]
    setup = ("fs = T.alloc_local((1,), 'float32')", "nan_s = T.alloc_shared((1,), 'int32')")
    return Fix(setup, tuple(lines), _helpers(em, False))


def element_fix(graph, target, match, t, emulated: bool = False, operands: tuple = ("A", "B")) -> Fix:
    """The fix inside a fused epilogue's loop (:mod:`.cuda_epilogue`; :func:`.cuda_matmul.tensor_core` and its
    emulation): ``Fix.element`` recomputes the element the loop holds in the local ``fa[0]`` (at tile coordinates
    ``ei, ej``) where it is a NaN inside C; the accumulator tile is never written. ``operands``: the parameter names
    of A and B. (On the H100 the epilogue program whose fix wrote its wgmma accumulators back ran at 0.53 ms
    against the plain matmul's 0.20.)"""
    em = TileLangEmitter(graph, target, RULES, REJECTED, checks=False)
    element = tuple(_recomputed(em, match, t, operands, "ei", "ej", "fa[0]", "fa[0] = fs[0]"))
    setup = ("fs = T.alloc_local((1,), 'float32')", "fa = T.alloc_local((1,), 'float32')")
    return Fix(setup, (), _helpers(em, emulated), element)


def any_nan(values) -> str:
    """Whether any of ``values`` (f32 expressions) is a NaN: the one branch before a fused epilogue's recomputation."""
    return " or ".join(f"T.call_extern('int32', {_IS_NAN!r}, {v}) != 0" for v in values)


def _recomputed(em, match, t, operands: tuple, i: str, j: str, value: str, store: str) -> list:
    """Element ``(i, j)``'s recomputation: ``store`` of the serial sum where ``value`` is a NaN inside C."""
    return [f"if {inside(match, t, i, j)} and T.call_extern('int32', {_IS_NAN!r}, {value}) != 0:",
            *(f"    {line}" for line in serial_sum(em, match, t, operands, i, j)), f"    {store}"]


def _helpers(em, emulated: bool) -> tuple:
    spelling = c.C_SPELLING if emulated else cuda.DEVICE
    return (*em.helpers.values(), IS_NAN.format(fn=spelling.function))


def inside(match, t, i: str = "fi", j: str = "fj") -> str:
    """Whether tile element ``(i, j)`` is an element of C."""
    return (f"T.Cast('int64', by) * T.int64({t.tm}) + T.Cast('int64', {i}) < T.Cast('int64', d{match.m}) and "
            f"T.Cast('int64', bx) * T.int64({t.tn}) + T.Cast('int64', {j}) < T.Cast('int64', d{match.n})")


def serial_sum(em, match, t, operands: tuple = ("A", "B"), i: str = "fi", j: str = "fj") -> list:
    """``fs[0] = `` the serial program's sum of products at tile element ``(i, j)`` (operands decoded from their
    bits and widened to f32 as it reads them, added in ascending k from +0)."""
    f32, d = DT.f32, getattr(DT, match.dtype)
    add, mul = (em.helper(op, (f32,), f32, (f32, f32)) for op in ("add", "mul"))
    z = "bz, " if match.batch is not None else ""

    def operand(name: str, at: str) -> str:
        bits = View(name, (), d, name, storage="uint16")
        value = decode(em, bits, f"T.reinterpret({name}[{z}{at}], 'uint16')")  # (emulated: stored as uint16)
        return f"T.call_extern('float32', {em.helper('cast', (d, f32), f32, (d,))!r}, {value})"

    row = f"T.Cast('int64', by) * T.int64({t.tm}) + T.Cast('int64', {i})"
    col = f"T.Cast('int64', bx) * T.int64({t.tn}) + T.Cast('int64', {j})"
    a, b = operand(operands[0], f"{row}, T.Cast('int64', fk)"), operand(operands[1], f"T.Cast('int64', fk), {col}")
    return ["fs[0] = T.float32(0)", f"for fk in T.serial(d{match.k}):",
            f"    fs[0] = T.call_extern('float32', {add!r}, fs[0], T.call_extern('float32', {mul!r}, {a}, {b}))"]


def hardware_product(graph, target, match, t, operands: tuple) -> Fix:
    """The emulation's tensor-core product (:func:`.cuda_matmul.emulated`): each element of C in tile ``C_e`` the
    serial sum with a NaN made NVIDIA arithmetic's canonical one, so :func:`recompute` is what gives the payloads."""
    em = TileLangEmitter(graph, target, RULES, REJECTED, checks=False)
    product = serial_sum(em, match, t, operands)
    lines = [f"for fi, fj in T.grid({t.tm}, {t.tn}):", f"    if {inside(match, t)}:",
             *(f"        {line}" for line in product),
             "        C_e[fi, fj] = T.call_extern('float32', 'itr_canonical', fs[0])"]
    return Fix((), tuple(lines), (*em.helpers.values(), CANONICAL.format(fn=c.C_SPELLING.function)))
