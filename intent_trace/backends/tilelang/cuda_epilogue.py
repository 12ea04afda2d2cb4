"""A contraction's pointwise consumer fused into the tiled matmul: the epilogue's element code, from the shared emitter.

A tiled matmul (:mod:`.cuda_matmul`) ends with an accumulator tile (a register fragment on tensor cores, a thread's
register block on CUDA cores). When the graph's one write stores a pointwise expression of the contraction -- a bias
``b[n]`` or a per-row ``r[m]`` aligned by broadcasts and reshapes, a residual ``r[m, n]``, scale scalars, an
activation, a cast -- that expression is applied to each accumulator element before the single store, instead of a
second kernel (or the one-thread general program) reading the product back.

The element code is the shared lowering's (:class:`.emitter.TileLangEmitter` with the graph's own rules), evaluated
at the element's output coordinates with the contraction's value bound to the accumulator element: every op is the
helper call the serial program makes, so the epilogue's numerics come from one place. Coordinates are clamped into
the output (a tail tile's elements past M or N read an in-bounds element and are never stored), so every read the
epilogue makes is in bounds.

Over a tile (:func:`.cuda_matmul._tile_loop`: a rolled loop, each thread its columns) the element code's bindings are
placed by what they vary with (:func:`levels`): a per-column read such as a bias once before the loop, a per-row term
once a row, the rest per element, one renamed copy per column a thread takes (:func:`renamed`).

What qualifies (:func:`epilogue_nodes`): besides the contraction, its operands' reads, full domains and the write,
only :data:`EPILOGUE_OPS` (pointwise math, broadcasts, reshapes) and whole-axis reads of In views other than the
operands and the output; nothing with an effect, no division that may round differently from IEEE's.
"""
from __future__ import annotations

import re

import attrs

from ... import types as DT
from ...graph import ops
from ...graph.patterns import match
from ...graph.traits import POINTWISE
from ...graph.values import KernelGraph, Var
from .cuda_access import APPROXIMATE_DIV
from .emitter import Lazy, Scalar, TileLangEmitter, View
from .cuda_epilogue_helpers import CAST_ENCODE
from .rules import REJECTED, RULES
from .scalar_rules import call, tir_dtype
from .views import encode

#: What an epilogue computes with besides reads: pointwise math, and the broadcasts and reshapes that align a
#: per-row, per-column or per-element operand with the accumulator.
EPILOGUE_OPS = POINTWISE | {ops.broadcast, ops.reshape}


def is_epilogue_op(node) -> bool:
    """Whether ``node`` may be part of a fused epilogue (pure, elementwise up to alignment, IEEE division)."""
    return node.op in EPILOGUE_OPS and not node.op.effects and match(APPROXIMATE_DIV, node, {}) is None


@attrs.frozen
class Element:
    """The epilogue's code for one output element: ``setup`` lines run once before the element loop (constants),
    ``body`` lines per element (unindented), ``value`` the expression stored (in the output's storage dtype when
    ``encoded``), ``helpers`` the prelude definitions the code calls."""

    setup: tuple
    body: tuple
    value: str
    helpers: tuple


def declare_params(graph: KernelGraph, target, names: dict) -> tuple:
    """(the kernel's parameter list, {param var: emitter value}) of a tiled program: the parameters ``names``
    gives a name ({param index: name}: the matmul's operands and output) in their value dtypes (what ``T.gemm``
    and the tile copies take), every other view in its storage dtype as the general program declares it
    (``view_storage``), so the shared element code reads it as it does there."""
    params, env = [], {}
    for k, p in enumerate(graph.params):
        t = p.type
        if p.kind == "view":
            shape = tuple(f"d{graph_extent(graph, e)}" for e in t.shape)
            if k in names:
                name, storage = names[k], None
                dtype = _VALUE_TIR[t.dtype.name]
            else:
                name, storage = f"p{k}", target.view_storage(t.dtype)
                dtype = storage or tir_dtype(t.dtype)
            params.append(f"{name}: T.Tensor(({', '.join(shape or ('1',))},), {dtype!r})")
            env[p.var] = View(name, shape, t.dtype, p.name, rank0=not shape, storage=storage)
        else:
            storage = target.scalar_storage(t.dtype)
            tir = tir_dtype(t.dtype)
            name = f"p{k}"
            params.append(f"{name}: T.{storage or tir}")
            env[p.var] = Scalar(f"T.Cast({tir!r}, {name})" if storage else name)
    return ", ".join(params), env


def graph_extent(graph: KernelGraph, extent) -> int:
    return next(k for k, ev in enumerate(graph.extents) if ev.extent is extent)


#: the TIR dtype of each operand and output dtype the tiled programs declare (tiles hold f16/bf16 as themselves)
_VALUE_TIR = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def epilogue_nodes(graph: KernelGraph, contract, write, operand_reads, prologue=()) -> tuple | None:
    """The nodes of the epilogue between ``contract`` and ``write`` (program order), or None when a node is not
    one an epilogue may hold. Reads are allowed of In views other than the operands' and the output; ``prologue``:
    nodes made on the host before any launch (schedule.prologue), part of no program."""
    skip = {id(contract), id(write), *(id(n) for n in operand_reads), *(id(n) for n in prologue)}
    operand_views = {n.inputs[0] for n in operand_reads}
    out = []
    for node in graph.body.nodes:
        if id(node) in skip or node.op is ops.domain:
            continue
        if node.op is ops.read:
            view = node.inputs[0]
            p = next((p for p in graph.params if p.var is view), None)
            if p is None or p.type.access != "In" or view in operand_views:
                return None
        elif not is_epilogue_op(node):
            return None
        out.append(node)
    return tuple(out)


def element_code(graph: KernelGraph, target, env: dict, contract_var: Var, acc: str | None, index: list,
                 written: Var, out_view: View, reinterpret: str | None, rounded: Var | None = None) -> Element | None:
    """The epilogue's element code: the graph's nodes (but the write) run by the shared emitter with the
    contraction's value bound to ``acc`` (the accumulator element) and evaluated at ``index`` (the element's output
    coordinates, already clamped in bounds). ``value`` is encoded for ``out_view``'s storage; ``reinterpret`` names
    the dtype the stored bits are reinterpreted as (a tile of f16 values) or None. None when the emitter would need
    anything but straight-line element code (a buffer, a check, a loop).

    ``acc=None`` (the C target's emulation, :func:`emulated`): the contraction is the shared emitter's own too, its
    element the serial program's loop over K (the serial program's bits), so the only loop allowed is that one.

    ``rounded``: the f32 value whose cast is ``written`` (:func:`.cuda_epilogue_helpers.rounded_store`): the cast is
    not emitted and the store rounds and encodes that value in one helper (``target`` must define its family)."""
    em = TileLangEmitter(graph, target, RULES, REJECTED, checks=False)
    for k, ev in enumerate(graph.extents):
        em.env[ev] = Scalar(f"d{k}")
        em.dim_names[ev.extent] = f"d{k}"
    em.env.update(env)
    em.depth = 0
    shape = tuple(f"d{graph_extent(graph, e)}" for e in contract_var.type.shape)
    for node in graph.body.nodes:
        if node.op is ops.write or (rounded is not None and written in node.outputs):
            continue  # the write; a cast the store makes itself
        if contract_var in node.outputs and acc is not None:
            em.env[contract_var] = Lazy(shape, lambda idx: acc)
            continue
        if contract_var in node.outputs:  # emulated: the serial element, computed where the epilogue reads it
            em.materialized = em.materialized - {contract_var}
            em.snapshots = type(em.snapshots)(v for v in em.snapshots if v is not contract_var)
        if any(v in em.snapshots or v in em.materialized for v in node.outputs):
            return None  # it would be held in a buffer
        em.run_node(node)
    setup = len(em.lines)
    if rounded is not None:
        value = em.elem(em.env[rounded], list(index))
        stored = call(em, CAST_ENCODE, (DT.f32, out_view.dtype), DT.u16, (DT.f32,), value)
    else:
        stored = encode(em, out_view, em.elem(em.env[written], list(index)))
    if reinterpret is not None:
        stored = f"T.reinterpret({stored}, {reinterpret!r})"
    body, before = em.lines[setup:], em.lines[:setup]  # before: the extents' products a reshape names
    loops = [line for line in body if line.lstrip().startswith(("for ", "if ", "while ")) or "alloc" in line]
    if em.error_sites or em.workspaces or em.heap or len(loops) > (0 if acc is not None else 2) or any(
            line.startswith(" ") or line.endswith(":") or "alloc" in line for line in before):
        return None  # emulated: the contraction's carry (one alloc_var) and its loop over K
    return Element((*em.constant_lines, *before), tuple(body), stored, tuple(em.helpers.values()))


# -- the element code over a tile: bindings hoisted out of the row loop, copies for a thread's columns -------------

_LITERAL = re.compile(r"('[^']*')")  # a string literal of the element code (a helper's or a dtype's name)
_NAME = re.compile(r"[A-Za-z_]\w*")
_BINDING = re.compile(r"([A-Za-z_]\w*) = (.+)")


def names(text: str) -> set:
    """The identifiers ``text`` mentions outside its string literals."""
    return {n for k, part in enumerate(_LITERAL.split(text)) if k % 2 == 0 for n in _NAME.findall(part)}


def renamed(line: str, to: dict) -> str:
    """``line`` with each identifier in ``to`` (outside string literals) replaced by its new name."""
    parts = _LITERAL.split(line)
    return "".join(part if k % 2 else _NAME.sub(lambda m: to.get(m[0], m[0]), part) for k, part in enumerate(parts))


@attrs.frozen
class Levels:
    """The element code's bindings by what they depend on (each in program order): ``constant`` on nothing that
    varies over the tile, ``column`` on the column alone, ``row`` on the row alone, ``element`` on the accumulator
    or on both."""

    constant: tuple
    column: tuple
    row: tuple
    element: tuple


def levels(body: tuple, column: set, row: set, element: set) -> Levels | None:
    """Loop-invariant code motion over the element code, whose lines are single bindings ``name = expr`` (None when
    one is not): each binding at the outermost level of a tile's loops it can be computed at, given the names that
    vary with the ``column``, the ``row`` and the ``element`` (the accumulator).

    Why here and not in nvcc: a read the emitter clamps into the view (a bias ``b[min(n, N - 1)]``) reaches CUDA
    guarded by TileLang's safe-access pass (``if (1 <= N)``), and nvcc hoists no guarded load out of a loop; over a
    tile whose thread keeps its columns, such a read (and its decode) is made once per column, a per-row read once
    per row."""
    kinds = {**{n: {"column"} for n in column}, **{n: {"row"} for n in row}, **{n: {"element"} for n in element}}
    out = {"constant": [], "column": [], "row": [], "element": []}
    for line in body:
        bound = _BINDING.fullmatch(line)
        if bound is None:
            return None
        deps = set().union(*(kinds.get(n, set()) for n in names(bound[2])))
        level = ("element" if "element" in deps or {"row", "column"} <= deps else
                 next(iter(deps)) if deps else "constant")
        kinds[bound[1]] = {level} if level != "constant" else set()
        out[level].append(line)
    return Levels(**{k: tuple(v) for k, v in out.items()})


def bound_names(lines) -> list:
    """The names the bindings among ``lines`` define, in order."""
    return [m[1] for m in map(_BINDING.fullmatch, lines) if m is not None]
