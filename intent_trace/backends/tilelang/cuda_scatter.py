"""scatter_reduce on CUDA (and Metal, whose atomics are :mod:`.metal_atomics`'): a grid over the updates, each applied
with one device atomic (the schedule pass's :class:`~intent_trace.schedule.indexed.Scatter`).

Thread ``bx * threads + tx`` takes update ``j`` (its coordinates and value are the shared emitter's element code,
so they are the serial program's) and combines it into the destination's element with the atomic helpers of
:mod:`.cuda_atomics`: an integer add is the native ``atomicAdd`` (wrap-around, exact in any order); every other
combine -- an f32 add, maximum, minimum, and, or, xor -- is a compare-and-swap loop around the *same* combine
helper the serial program calls (one RNE f32 addition with x86's NaN rules, IEEE maximum/minimum with NaN and
signed zeros), so each update is the oracle's and only the order of collisions is the hardware's, which the
language leaves open (spec §13, T10: float sums are checked against T5's bound, everything else is exact).

**The screened native f32 add** (``ScatterPlan.screen``): CUDA's ``atomicAdd`` on a float in global memory
(``red.global.add.f32``) rounds to nearest even but flushes subnormal operands and results to zero and returns the
hardware's canonical NaN, so it is not the serial add in general. It is exactly the serial add while every value a
destination element holds is a finite multiple of 2^-126 (or an infinity no update can meet with its opposite):
then no operand or result of any addition is subnormal (a nonzero multiple of 2^-126 is at least 2^-126) and no
NaN arises, and the sum of two multiples of 2^-126, rounded, is again one. A first kernel screens the updates'
values and the destination's initial values with a sufficient test (zero, or finite with a biased exponent of at
least 24, i.e. |x| >= 2^-103, whose ulp is at least 2^-126) and raises a flag (``E[3]``, the error record's third
value, which no check of this program records) when one fails; the scatter kernel then takes ``atomicAdd`` where
the flag is down and the compare-and-swap loop where it is up: every update is the oracle's addition either way.
The flag only ever goes up, so an error record that ``launch`` reuses across calls after a call with subnormal
values keeps later calls on the CAS loop (exact, slower). Screened: an f32 add whose values are a whole read of a
rank-1 f32 view into a rank-1 destination (index_add_'s shape); other scatters take the CAS loop.

A coordinate outside the destination is cpu's ``IndexError`` under checks (the first failing thread claims the
record and leaves; no barrier waits on it, and nothing is committed) and is masked without checks (no write,
T10 "Checks"). With ``emulated`` a block's threads are a serial loop (the C target runs the same mapping; its
atomic helpers are plain read-modify-writes).
"""
from __future__ import annotations

import contextlib

import attrs

from ...graph import ops
from ...schedule import indexed
from ...graph.lowering import ErrorSite
from . import extern
from .cuda_grid import GridEmitter, block_count, extent_names, kernel_line, recognised
from .emitter import as_index
from .memory import at
from .storage import ERROR_PARAM

THREADS = indexed.THREADS
MAX_BLOCKS = 1 << 30  # one update per thread: the grid covers every update (CUDA allows 2^31 - 1 blocks)
_COMBINE = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor"}


@attrs.frozen
class ScatterPlan:
    """The launch of a :class:`~intent_trace.schedule.indexed.Scatter`: ``total`` the updates' count (an int64
    expression of extent names)."""

    scatter: indexed.Scatter = attrs.field(eq=False)
    total: str
    threads: int = THREADS
    emulated: bool = False
    #: the screened native add: (the values' parameter, the destination's, the values' count, the destination's),
    #: or None (the CAS loop for every update)
    screen: tuple | None = None
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
        if self.screen is not None:
            how = ("atomicAdd where a first kernel finds every value and initial element a finite multiple of "
                   "2^-126 (no subnormal, no NaN), else a compare-and-swap loop around the combine")
        return self.scatter.part(graph, updates=self.total, threads=self.threads, atomic=how)

    def launch(self, prelude: str | None) -> str:
        head = kernel_line(self.blocks(), self.threads, self.emulated, prelude if self.screen is None else None)
        if self.screen is None:
            return head
        return "\n".join([*_screen_kernel(self, prelude), "    " + head])


SCREEN_BLOCKS = 1024  # the screen's grid strides over the values and the destination
FLAG = f"{ERROR_PARAM}[3]"  # the screen's flag: the error record's third value, which no check here records


def _unsafe(x: str) -> str:
    """Whether f32 ``x`` fails the screen: not zero, and not finite with a biased exponent of at least 24."""
    bits = f"T.reinterpret({x}, 'uint32')"
    exp = f"(({bits} >> T.uint32(23)) & T.uint32(255))"
    return (f"({bits} & T.uint32(2147483647)) != T.uint32(0) and "
            f"({exp} < T.uint32(24) or {exp} == T.uint32(255))")


def _screen_kernel(plan: ScatterPlan, prelude: str | None) -> list:
    """The first kernel's lines: any value or initial destination element that fails the screen raises the flag
    (a plain store: every writer writes 1)."""
    values, dest, k, n = plan.screen
    if plan.emulated:
        return [kernel_line("1", plan.threads, True, prelude, "bz"),
                *(line for buf, m in ((values, k), (dest, n)) for line in (
                    f"        for z in T.serial({m}):",
                    f"            if {_unsafe(f'{buf}[z]')}:",
                    f"                {FLAG} = T.int64(1)"))]
    total = f"T.max({k}, {n})"
    blocks = block_count(total, plan.threads, SCREEN_BLOCKS)
    lines = [kernel_line(blocks, plan.threads, False, prelude, "bz"), "        tz = T.get_thread_binding()",
             f"        for s in T.serial(T.ceildiv({total}, {blocks} * T.int64({plan.threads}))):",
             f"            z = (s * {blocks} + T.Cast('int64', bz)) * T.int64({plan.threads}) + T.Cast('int64', tz)"]
    for buf, m in ((values, k), (dest, n)):
        lines += [f"            if z < {m}:", f"                if {_unsafe(f'{buf}[z]')}:",
                  f"                    {FLAG} = T.int64(1)"]
    return lines


def _total(graph, shape) -> str | None:
    parts = extent_names(graph, shape)
    return None if parts is None else " * ".join(parts) or "T.int64(1)"


def scatter_plan(graph, emulated: bool = False, screen: bool = False) -> ScatterPlan | None:
    """The scatter's grid plan, or None; ``screen``: the screened native f32 add where it applies (CUDA's; Metal's
    atomics are :mod:`.metal_atomics`')."""
    got = recognised(graph, indexed.recognise_scatter, indexed.Scatter, 1)
    total = _total(graph, got.node.attr("type").shape) if got is not None else None
    if total is None:
        return None
    return ScatterPlan(got, total, THREADS, emulated, _screened(graph, got) if screen else None)


def _screened(graph, got: indexed.Scatter) -> tuple | None:
    """The screen's buffers and counts when the native add may serve: an f32 add of a whole read of a rank-1 f32
    view into a rank-1 destination, else None."""
    if got.kind != "add" or got.dtype != "f32" or got.node.attr("has_valid") or got.dest.type.rank != 1:
        return None
    read = next((n for n in graph.body.nodes if got.node.inputs[1] in n.outputs), None)
    names = {p.var: f"p{k}" for k, p in enumerate(graph.params)}
    if read is None or read.op is not ops.read or set(read.attr("index")) != {"all"} or read.inputs[0] not in names:
        return None
    view = read.inputs[0].type
    if view.rank != 1 or view.dtype.name != "f32":
        return None
    k, n = (_total(graph, t.shape) for t in (view, got.dest.type))
    return None if None in (k, n) else (names[read.inputs[0]], names[got.dest.var], k, n)


class ScatterEmitter(GridEmitter):
    """The shared emitter with the scatter's updates placed on the grid, one device atomic each."""

    def run_node(self, node):
        if node is not self.plan.scatter.node:
            return super().run_node(node)
        self.emit_at(node, self._scatter)
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
        call = f"T.evaluate({extern.call(self, family, (d,), d, (storage, d), addr, new, combine=combine)})"
        if self.plan.screen is None:
            self.line(call)
            return
        self._keep_record()
        with self.block(f"if {self.flag(f'{FLAG} == T.int64(0)')}:"):  # screened: no subnormal, no NaN
            self.atomic_add(f"{dest.name}[{', '.join(coords)}]", f"T.Cast('float32', {new})")
        with self.block("else:"):
            self.line(call)

    def _keep_record(self) -> None:
        """The screen's flag lives in the error record: a program without checks still takes one (a site that no
        thread records, so the executable passes the record and never raises)."""
        if not self.error_sites:
            self.error_sites.append(ErrorSite(RuntimeError, "internal: the scatter screen's flag (never raised)"))
