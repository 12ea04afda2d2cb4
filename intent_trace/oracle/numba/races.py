"""The cpu target's race detector for ``parallel`` (spec §5), emitted with ``checks=True``.

Generic (the authority) records per element which points read, wrote or combined it
(:mod:`intent_trace.oracle.generic_races`); the checked cpu build must refuse the same kernels. Two ways
were open: an instrumented *serial* build run for the check, or instrumenting the parallel build itself.
The second is chosen. A serial build would make every checked call (checks are the default) run on one
core and compile a third function; and the instrumented code is small: before the loop of each
``parallel`` run, one int64 record per element of every view that some point of it writes (or both reads
and combines) -- views the kernel only reads, and buffers a point allocates for itself, get none; then
every access of a point to such a view updates its element's record with one compare-exchange
(:mod:`.race_state`), which is correct under ``prange`` as in the serial build. A read records every
element it addresses where the read is made (as generic does), whether or not the fused consumer uses
them all. The record costs a word per element of a written view per ``parallel`` run, and a
compare-exchange per access of it: ``checks=False`` drops it with the other checks.

Nested ``parallel`` runs keep one frame each (their records, their point), and an access updates the
record of every frame that tracks its view, under that frame's point, as generic does. The message is
generic's; an element of a view of rank two or more is named by its row-major flat index (the error
record carries three numbers: the element and the two points' coordinates).
"""
from __future__ import annotations

import contextlib

from ...graph import ops
from ...graph.lowering import ErrorSite
from ...graph.values import walk_region
from ..generic_races import COMBINE, READ, WRITE, conflict_message

MAX_POINTS = 1 << 29  # point ordinals one field of an element's record holds (race_state)
IMPORT_LINE = "RS = lazy_module('intent_trace.oracle.numba.race_state')"
_KIND = {ops.read: READ, ops.load: READ, ops.write: WRITE, ops.unique_store: WRITE, ops.store: WRITE,
         ops.atomic_load: COMBINE, ops.atomic_store: COMBINE, ops.atomic_rmw: COMBINE,
         ops.atomic_compare_exchange: COMBINE, ops.scatter_reduce: COMBINE, ops.masked_read: READ,
         ops.masked_load: READ, ops.masked_write: WRITE, ops.masked_store: WRITE}  # masked: valid lanes only


class Frame:
    """One ``parallel`` being emitted: its domain, its ordinal's name and the record local per view Var."""

    __slots__ = ("domain", "ordinal", "records")

    def __init__(self, domain, ordinal: str, records: dict):
        self.domain, self.ordinal, self.records = domain, ordinal, records


def frames(em) -> list:
    return em.__dict__.setdefault("race_frames", [])


_PLAIN = {ops.read: 1, ops.load: 1, ops.write: 2, ops.store: 2, ops.unique_store: 2}  # first index operand


def _owned(node, point) -> bool:
    """Whether a plain access addresses only elements whose coordinate on some axis is the point itself:
    then accesses of different points never meet on one element."""
    first = _PLAIN.get(node.op)
    if first is None:
        return False
    operands = iter(node.inputs[first:])
    for kind in node.attr("index"):
        x = None if kind == "all" else next(operands)
        if kind == "point" and x is point:
            return True
    return False


def _tracked(em, region) -> list:
    """The view Vars a point of ``region`` may race on: some access writes them, or they are both read
    and combined; never the kernel's In views, buffers the region allocates (each point's own), nor views
    that every access addresses at the point's own coordinate on some axis (``y[row, :]``: disjoint).
    Generic records those too; skipping them here only drops records that can never conflict."""
    kinds, local, shared = {}, set(), set()
    point = region.params[0]
    for node in walk_region(region):
        if node.op is ops.buffer:
            local.update(node.outputs)
        kind = _KIND.get(node.op)
        if kind is not None:
            kinds[node.inputs[0]] = kinds.get(node.inputs[0], 0) | kind
            if not _owned(node, point):
                shared.add(node.inputs[0])
    exempt = {p.var for p in em.graph.params if p.kind == "view" and p.type.access == "In"} | local
    return [v for v, k in kinds.items() if v not in exempt and v in shared and (k & WRITE or k == READ | COMBINE)]


def _size(shape) -> str:
    return " * ".join(["np.int64(1)", *(f"np.int64({s})" for s in shape)])


@contextlib.contextmanager
def parallel_frame(em, region, domain, ordinal: str, parallel: bool = True):
    """Around the emission of one ``parallel`` loop: allocate its records (before the loop) and track the
    region's accesses while its body is emitted. Nothing for a ``for`` loop (``parallel`` false), without
    checks, or when no view can race."""
    tracked = _tracked(em, region) if em.checks and parallel else []
    if not tracked:
        yield
        return
    if IMPORT_LINE not in em.constant_lines:
        em.constant_lines.insert(0, IMPORT_LINE)
    em.check(f"{domain.length} > {MAX_POINTS}",
             ErrorSite(ValueError, f"a parallel of {{0}} points is too long for the race check (at most {MAX_POINTS} "
                                   f"points); compile with checks=False"), domain.length)
    records = {}
    for var in tracked:
        view = em.env[var]
        records[var] = em.allocate((f"({_size(view.shape)})",), "np.int64",
                                   f"the race record of {view.label}", fill="0", prefix="rr")
    stack = frames(em)
    stack.append(Frame(domain, ordinal, records))
    try:
        yield
    finally:
        stack.pop()


def _flat(coords: list, shape: tuple) -> str:
    flat = "np.int64(0)"
    for c, n in zip(coords, shape):
        flat = f"({flat} * np.int64({n}) + np.int64({c}))"
    return flat


def _coordinate(domain, ordinal: str) -> str:
    return f"(np.int64({domain.start}) + np.int64({ordinal}) * np.int64({domain.step}))"


def note(em, view_var, view, coords: list, kind: int) -> None:
    """Emit the record update of the element at ``coords`` of ``view`` in every frame tracking it."""
    stack = frames(em)
    if not stack:
        return
    flat = None
    for frame in stack:
        rec = frame.records.get(view_var)
        if rec is None:
            continue
        if flat is None:
            flat = em.assign(_flat(coords, view.shape), "rf")
        rc = em.assign(f"RS.record({rec}, {flat}, np.int64({frame.ordinal}), {kind})", "rc")
        with em.block(f"if {rc} >= 0:"):
            _conflict(em, view, kind, rc, flat, frame)


def _conflict(em, view, kind: int, rc: str, flat: str, frame) -> None:
    """Record the conflict (the first one of the run) and leave, as a failed check does."""
    element = "{0}" if len(view.shape) == 1 else "{0} (row-major flat index)"
    first = len(em.error_sites) + 1
    for partner in (WRITE, COMBINE, READ):  # which of its kinds the message names first: generic's order
        site = ErrorSite(RuntimeError, conflict_message("{label}", element, "{1}", partner, "{2}", kind),
                         label=view.label)
        if em.node is not None and em.node.loc is not None:
            site.note = f"in op `{em.node.op.name}` at {em.node.loc!r}"
        em.error_sites.append(site)
    partner = f"({rc} >> np.int64(4))"
    with em.block("if err[0] == 0:"):
        em.line(f"err[0] = {first} + (0 if {rc} & 2 else (1 if {rc} & 4 else 2))")
        em.line(f"err[1] = {flat}")
        em.line(f"err[2] = {_coordinate(frame.domain, partner)}")
        em.line(f"err[3] = {_coordinate(frame.domain, frame.ordinal)}")
    em.line("continue" if em.prange_depth else "return")


def note_region(em, view_var, view, shape: tuple, coords_at, kind: int) -> None:
    """Record every element a read (or another access of a region) addresses: one loop nest over its shape;
    ``coords_at(idx)`` writes the coordinates of the element at ``idx``."""
    if not any(view_var in frame.records for frame in frames(em)):
        return
    with em.loop_nest(shape, parallel=False) as idx:
        note(em, view_var, view, coords_at(idx), kind)
