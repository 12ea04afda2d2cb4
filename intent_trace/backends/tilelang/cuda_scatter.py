"""scatter_reduce on CUDA (and Metal, whose atomics are :mod:`.metal_atomics`'): a grid over the updates, each applied
with one device atomic (the schedule pass's :class:`~intent_trace.schedule.indexed.Scatter`).

Thread ``bx * threads + tx`` takes update ``j`` (its coordinates and value are the shared emitter's element code,
so they are the serial program's) and combines it into the destination's element with the atomic helpers of
:mod:`.cuda_atomics`: an integer add is the native ``atomicAdd`` (wrap-around, exact in any order); every other
combine -- an f32 add, maximum, minimum, and, or, xor -- is a compare-and-swap loop around the *same* combine
helper the serial program calls (one RNE f32 addition with x86's NaN rules, IEEE maximum/minimum with NaN and
signed zeros), so each update is the oracle's and only the order of collisions is the hardware's, which the
language leaves open (spec §13, T10: float sums are checked against T5's bound, everything else is exact).

A coordinate outside the destination is cpu's ``IndexError`` under checks (the first failing thread claims the
record and leaves; no barrier waits on it, and nothing is committed) and is masked without checks (no write,
T10 "Checks"). With ``emulated`` a block's threads are a serial loop (the C target runs the same mapping; its
atomic helpers are plain read-modify-writes).
"""
from __future__ import annotations

import contextlib

import attrs

from ...graph import ops
from ...graph.traits import POINTWISE
from ...schedule import indexed
from ...schedule.prologue import prologue
from . import extern
from .cuda_grid import GridEmitter, block_count, kernel_line
from .emitter import as_index
from .memory import at

THREADS = indexed.THREADS
MAX_BLOCKS = 1 << 30  # one update per thread: the grid covers every update (CUDA allows 2^31 - 1 blocks)
_ELEMENT_OPS = POINTWISE | {ops.read, ops.domain, ops.indices, ops.broadcast, ops.full, ops.reshape}
_COMBINE = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor"}


@attrs.frozen
class ScatterPlan:
    """The launch of a :class:`~intent_trace.schedule.indexed.Scatter`: ``total`` the updates' count (an int64
    expression of extent names)."""

    scatter: indexed.Scatter = attrs.field(eq=False)
    total: str
    threads: int = THREADS
    emulated: bool = False
    mapping = "atomic_scatter"

    @property
    def native(self) -> bool:
        """An integer add: the native atomic (no CAS loop)."""
        return self.scatter.kind == "add" and self.scatter.dtype != "f32"

    def blocks(self) -> str:
        return block_count(self.total, self.threads, MAX_BLOCKS)

    @property
    def emitter(self):
        return ScatterEmitter

    def part(self, graph):
        how = "atomicAdd" if self.native else "a compare-and-swap loop around the combine"
        return self.scatter.part(graph, updates=self.total, threads=self.threads, atomic=how)

    def launch(self, prelude: str | None) -> str:
        return kernel_line(self.blocks(), self.threads, self.emulated, prelude)


def _total(graph, shape) -> str | None:
    names = {id(ev.extent): f"d{k}" for k, ev in enumerate(graph.extents)}
    parts = [f"T.int64({s})" if isinstance(s, int) else names.get(id(s)) for s in shape]
    return None if None in parts else " * ".join(parts) or "T.int64(1)"


def scatter_plan(graph, emulated: bool = False) -> ScatterPlan | None:
    got = indexed.recognise_scatter(graph)
    if not isinstance(got, indexed.Scatter):
        return None
    pro = prologue(graph)  # checked before any launch (schedule.prologue): no check of this program
    if any(n.op not in _ELEMENT_OPS and n not in pro for n in graph.body.nodes[:-1]):
        return None
    total = _total(graph, got.node.attr("type").shape)
    return None if total is None else ScatterPlan(got, total, THREADS, emulated)


class ScatterEmitter(GridEmitter):
    """The shared emitter with the scatter's updates placed on the grid, one device atomic each."""

    def run_node(self, node):
        if node is not self.plan.scatter.node:
            return super().run_node(node)
        outer, self.node = self.node, node
        try:
            self._scatter(node)
        finally:
            self.node = outer
        return None

    def _scatter(self, node) -> None:
        plan = self.plan
        dest, values, *index = (self.operand(x) for x in node.inputs)
        valid = (index.pop(), node.inputs[-1]) if node.attr("has_valid") else None
        out_t = node.attr("type")
        d = node.inputs[0].type.dtype
        kind = plan.scatter.kind
        with self.phase() as tx:
            j = self.assign(f"T.Cast('int64', bx) * T.int64({plan.threads}) + T.Cast('int64', {tx})", "j")
            self.in_grid = True  # a failed check claims the error record (threads fail at once)
            try:
                with self.block(f"if {j} < {plan.total}:"), contextlib.ExitStack() as lane:
                    idx = self.unflatten(j, self.shape(out_t))
                    if valid is not None:  # an invalid lane is neither bounds-checked nor applied (spec §15)
                        lane.enter_context(self.block(f"if {at(self, valid[0], valid[1].type, idx, out_t)}:"))
                    coords, inside = [], []
                    for axis, (ix, x) in enumerate(zip(index, node.inputs[2:])):
                        n = as_index(dest.shape[axis])
                        c = self.assign(as_index(at(self, ix, x.type, idx, out_t)), "j")
                        self.check(f"{c} < T.int64(0) or {c} >= {n}", IndexError,
                                   f"{{view}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}", c, n,
                                   view=dest.label)
                        coords.append(c)
                        inside.append(f"{c} >= T.int64(0) and {c} < {n}")
                    new = self.assign(at(self, values, node.inputs[1].type, idx, out_t), "x")
                    if inside and not self.checks:  # without checks an update outside the destination is not applied
                        lane.enter_context(self.block(f"if {' and '.join(inside)}:"))  # (T10)
                    self._apply(dest, d, kind, coords, new)
            finally:
                self.in_grid = False

    def _apply(self, dest, d, kind: str, coords: list, new: str) -> None:
        """One device atomic combining ``new`` into the destination's element at ``coords``."""
        addr = extern.address(dest.name, coords if not dest.rank0 else ["0"])
        storage = dest.storage or self.tir(d)
        combine = self.helper(_COMBINE[kind], (d,), d, (d, d))  # defined before the atomic helper calling it
        family = "atomic_iadd_relaxed" if self.plan.native else f"atomic_{kind}_relaxed"
        self.line(f"T.evaluate({extern.call(self, family, (d,), d, (storage, d), addr, new, combine=combine)})")
