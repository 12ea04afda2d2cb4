"""Float add reductions in the fixed lane order of :mod:`.lanes` (issue 19): what the emitter writes.

A reduce whose combine is the float ``add`` of its two parameters and nothing else (``reduce.sum`` of f32/f64
values; f16/bf16 sources are cast to f32 first, T5's default accumulator) is emitted as

    lanes = R.lanes_array(identity); R.lanes_store(R.lanes_fill(identity), lanes, 0)
    (outer reduced loops)
        for q in range(n // W):                  # whole vectors of the run along the innermost reduced axis
            base = q * W
            for j in range(W): lanes[j] += element(base + j)
        done = n // W * W
        for j in range(n - done): lanes[j] += element(done + j)
    acc = R.lanes_sum(R.lanes_load(lanes, 0))

``lanes`` is a stack array of the W lanes. The inner loop's trip count is the constant W, so LLVM vectorises the
element code, unrolls the vector loop whole and keeps the W accumulators in registers (scalar replacement of the
array): no value goes through memory. An earlier form computed 256 elements into a stack block and added it
to a register vector W at a time; the store and reload of every element made the second pass of a layer norm
(``sum((x - mean)**2)`` over a row held in L1) five times as slow, 0.67 ms of 2.8 over 4096 rows of 1024 f32.
The indices are ``q * W + j`` over ranges from 0, so LLVM sees them non-negative (Numba's wraparound of a
negative index would otherwise make every load a gather). The same code runs in the serial and parallel
builds and in both spellings of a row kernel (whole-tensor row groups, ``for r in I.parallel(rows)``), so every
build sums in the same order on every machine (the order and its T5 bound: :mod:`.lanes`). Only f32 and f64
accumulators: an explicit f16/bf16 accumulator rounds every add to its format (the general path).
"""
from __future__ import annotations

import re

from ... import types as T
from ...graph import ops
from .lanes import LANES_BY_BITS

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


def lanes_start(em, acc: str) -> str:
    """Before the reduced loops: the lanes (a stack array of W values), every lane ``acc`` (the identity)."""
    lanes = em.assign(f"R.lanes_array({acc})", "b")
    em.line(f"R.lanes_store(R.lanes_fill({acc}), {lanes}, 0)")
    return lanes


def lanes_run(em, lanes: str, width: int, count: str, element) -> None:
    """One run of ``count`` elements along the innermost reduced axis into the lanes (``element(k)`` emits
    position ``k``'s value and returns its expression): whole vectors of W, then the tail one element a lane.
    Where the element is a plain read of a local array along its last axis (:func:`_local_row`), the whole vectors
    are read from that row directly (:func:`_row_vectors`)."""
    start = len(em.lines)
    q = em.fresh("k")
    with em.block(f"for {q} in range({count} // {width}):"):
        base = em.assign(f"{q} * {width}", "n")
        j = em.fresh("k")
        with em.block(f"for {j} in range({width}):"):
            mark = len(em.lines)
            x = element(f"{base} + {j}")
            row = _local_row(em.lines[mark:], x, f"{base} + {j}")
            em.line(f"{lanes}[{j}] += {x}")
    if row is not None:
        del em.lines[start:]  # only our own lines: the element emitted nothing but its one assignment
        _row_vectors(em, lanes, width, count, row)

        def element(k: str) -> str:  # the tail reads the row too
            return f"{row}[{k}]"

    done = em.assign(f"({count} // {width}) * {width}", "n")
    j = em.fresh("k")
    with em.block(f"for {j} in range({count} - {done}):"):
        em.line(f"{lanes}[{j}] += {element(f'{done} + {j}')}")


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


def _row_vectors(em, lanes: str, width: int, count: str, row: str) -> None:
    """The whole vectors of a run read straight from ``row``, a 1-D array of at least ``count`` values (any stride):
    added from the row itself into a register vector of the lanes (:func:`.lanes.lanes_add` reads a strided row at
    its stride). Lane ``k mod W`` gets element ``k`` as in the element loop."""
    v = em.assign(f"R.lanes_load({lanes}, 0)", "v")
    q = em.fresh("k")
    with em.block(f"for {q} in range({count} // {width}):"):
        em.line(f"{v} = R.lanes_add({v}, {row}, {q} * {width})")
    em.line(f"R.lanes_store({v}, {lanes}, 0)")


def lanes_finish(em, lanes: str, acc: str) -> None:
    """After the reduced loops: ``acc`` becomes the halving sum of the lanes."""
    em.line(f"{acc} = R.lanes_sum(R.lanes_load({lanes}, 0))")
