"""Float add reductions in the fixed lane order of :mod:`.lanes` (issue 19): what the emitter writes.

A reduce whose combine is the float ``add`` of its two parameters and nothing else (``reduce.sum`` of f32/f64
values; f16/bf16 sources are cast to f32 first, T5's default accumulator) is emitted as

    block = R.lane_block(identity); lanes = R.lanes_fill(identity)
    (outer reduced loops)
        for b in range((n + 255) // 256):      # blocks of BLOCK values along the innermost reduced axis
            base = b * 256; count = min(256, n - base)
            for j in range(count): block[j] = element(base + j)
            lanes += block[0:64], ..., block[192:256]   (lanes_add; lanes_add_part with count - q*W for a short block)
    acc = R.lanes_sum(lanes)

The element loop's trip count is not a constant, so LLVM vectorises the element code instead of unrolling it,
and its indices are ``b * 256 + j`` over ranges from 0, so LLVM sees them non-negative (Numba's wraparound of a
negative index would otherwise make every load a gather). The same code runs in the serial and parallel
builds and in both spellings of a row kernel (whole-tensor row groups, ``for r in I.parallel(rows)``), so every
build sums in the same order on every machine (the order and its T5 bound: :mod:`.lanes`). Only f32 and f64
accumulators: an explicit f16/bf16 accumulator rounds every add to its format (the general path).
"""
from __future__ import annotations

import re

from ... import types as T
from ...graph import ops
from .lanes import BLOCK, LANES_BY_BITS

_WIDTH = {"f32": LANES_BY_BITS[32], "f64": LANES_BY_BITS[64]}  # by KIR dtype name


def lane_width(node) -> int | None:
    """The lane count when ``node`` (a reduce) sums one f32/f64 leaf by ``add`` of its two parameters with no
    captures; else None."""
    (region,) = node.regions
    if len(region.nodes) != 1 or len(node.inputs) != 2 or len(region.params) != 2:
        return None
    (inner,) = region.nodes
    leaves = T.leaf_types(node.attr("types")[0])
    if inner.op is not ops.add or len(leaves) != 1 or leaves[0].dtype.name not in _WIDTH:
        return None
    if len(inner.inputs) != 2 or set(inner.inputs) != set(region.params) or len(set(inner.inputs)) != 2:
        return None
    if tuple(region.results) != tuple(inner.outputs):
        return None
    if T.leaf_types(node.inputs[0].type)[0].dtype != leaves[0].dtype:
        return None
    return _WIDTH[leaves[0].dtype.name]


def lanes_start(em, acc: str) -> tuple:
    """Before the reduced loops: the block and the lanes, every lane ``acc`` (the identity)."""
    return em.assign(f"R.lane_block({acc})", "b"), em.assign(f"R.lanes_fill({acc})", "v")


def lanes_run(em, state: tuple, width: int, count: str, element) -> None:
    """One run of ``count`` elements along the innermost reduced axis into the lanes (``element(k)`` emits
    position ``k``'s value and returns its expression). Where the element is a plain read of a local array
    along its last axis (:func:`_local_row`), the run reads that row directly (:func:`_run_row`)."""
    block, lanes = state
    start = len(em.lines)
    b = em.fresh("k")
    with em.block(f"for {b} in range(({count} + {BLOCK - 1}) // {BLOCK}):"):
        base = em.assign(f"{b} * {BLOCK}", "n")
        filled = em.assign(f"R.min2({BLOCK}, {count} - {base})", "n")
        j = em.fresh("k")
        with em.block(f"for {j} in range({filled}):"):
            mark = len(em.lines)
            x = element(f"{base} + {j}")
            row = _local_row(em.lines[mark:], x, f"{base} + {j}")
            em.line(f"{block}[{j}] = {x}")
        with em.block(f"if {filled} == {BLOCK}:"):
            for q in range(0, BLOCK, width):
                em.line(f"{lanes} = R.lanes_add({lanes}, {block}, {q})")
        with em.block("else:"):
            for q in range(0, BLOCK, width):
                em.line(f"{lanes} = R.lanes_add_part({lanes}, {block}, {q}, {filled} - {q})")
    if row is not None:
        del em.lines[start:]  # only our own lines: the element emitted nothing but its one assignment
        _run_row(em, state, width, count, row)


def _local_row(lines: list, x: str, k: str) -> str | None:
    """The 1-D row expression when the element code ``lines`` (returning ``x``) only reads ``NAME[i, ..., k]``
    (``x = NAME[...]``, or ``t = NAME[...]`` then ``x = t``): a local array (:meth:`allocate`'s ``aN`` names:
    C-contiguous) or a kernel argument (``argN``: any strides, :func:`.lanes.lanes_add` checks them) read at
    the run position ``k`` along its last axis, its other indices independent of ``k``. Else None."""
    if len(lines) == 2 and lines[1].strip() == f"{x} = {lines[0].split(' = ', 1)[0].strip()}":
        x, lines = lines[0].split(" = ", 1)[0].strip(), lines[:1]
    if len(lines) != 1:
        return None
    m = re.fullmatch(rf"\s*{re.escape(x)} = (a\d+|arg\d+)\[(?:(.*), )?{re.escape(k)}\]", lines[0])
    if m is None:
        return None
    name, prefix = m.group(1), m.group(2)
    if prefix is None:
        return name
    if not re.fullmatch(r"[\w ,]*", prefix) or any(v in re.split(r"[ ,]+", prefix) for v in k.split(" + ")):
        return None
    return f"{name}[{prefix}]"


def _run_row(em, state: tuple, width: int, count: str, row: str) -> None:
    """A run read straight from ``row``, a 1-D array of at least ``count`` values: full vectors are added from the
    row itself (a copy loop into the block would be a ``memcpy`` call per block: LLVM recognises it), the rest
    through the block. Lane ``k mod W`` gets element ``k`` as in the block loop, so both give the same sum."""
    block, lanes = state
    q = em.fresh("k")
    with em.block(f"for {q} in range({count} // {width}):"):
        em.line(f"{lanes} = R.lanes_add({lanes}, {row}, {q} * {width})")
    done = em.assign(f"({count} // {width}) * {width}", "n")
    j = em.fresh("k")
    with em.block(f"for {j} in range({count} - {done}):"):
        em.line(f"{block}[{j}] = {row}[{done} + {j}]")
    em.line(f"{lanes} = R.lanes_add_part({lanes}, {block}, 0, {count} - {done})")


def lanes_finish(em, state: tuple, acc: str) -> None:
    """After the reduced loops: ``acc`` becomes the halving sum of the lanes."""
    em.line(f"{acc} = R.lanes_sum({state[1]})")
