"""Row groups on CUDA: one thread block per row, a cooperative reduction per pass, the row's pointwise producers and
consumers fused (the schedule pass's :class:`~intent_trace.schedule.rows.RowGroup`).

The program is the shared lowering's (:class:`.emitter.TileLangEmitter`: every element, every combine is the code
the serial program writes, with the same helpers, so numerics come from one place); :class:`RowEmitter` changes
only where that code runs:

- the launch is a grid of ``max(rows, 1)`` blocks of :data:`THREADS` threads; block ``bx`` is row ``bx``;
- each reduction is a pass over its row: thread ``tx`` folds elements ``tx, tx + THREADS, ...`` (coalesced: the
  threads of a warp read neighbouring elements) from the identity with the reduce's own combine, stores its
  partial in shared memory, and a tree of ``log2(THREADS)`` steps (``T.sync_threads`` between them) combines the
  partials; every thread then reads the row's result. A row is re-read from global memory by each pass, so rows
  of any length run (a row never has to fit on chip);
- the final write is one more strided pass (a write of the row) or thread 0's (one value per row).

Re-association and re-ordering are what ``reduce`` allows (language §7, T10): a parallel sum differs from the
serial order within T5's bound; max, min, argmax and integer results are the serial program's exactly.

With ``emulated`` the threads of a block are serial loops, one per phase between barriers (shared memory becomes a
local buffer), so the C target runs the same mapping on the CPU (tests and ``tools/pytest_plugins``).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph import ops
from ...graph.lowering import assemble, leaf_values
from ...schedule import rows as schedule_rows
from .accumulate import accumulators, combine
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter

THREADS = schedule_rows.THREADS


@attrs.frozen
class RowPlan:
    """A row group's launch: ``rows`` and ``cols`` are the extent names of the rows and the row's elements."""

    group: schedule_rows.RowGroup = attrs.field(eq=False)
    rows: str
    cols: str
    threads: int = THREADS
    emulated: bool = False

    @property
    def node(self):
        """The parallel loop whose iterations are the blocks (parallel form), or None (tensor form)."""
        return self.group.loop

    @property
    def emitter(self):
        return RowEmitter

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        threads = "" if self.emulated else f", threads={self.threads}"
        # at least one block: CUDA refuses a zero grid (no rows: the block does nothing)
        return f"with T.Kernel(T.max({self.rows}, T.int64(1)){threads}{extra}) as bx:"


def row_plan(graph, emulated: bool = False) -> RowPlan | None:
    """The row-group launch of ``graph``, or None (:func:`~intent_trace.schedule.rows.recognise` says why)."""
    group = schedule_rows.recognise(graph)
    if not isinstance(group, schedule_rows.RowGroup):
        return None
    return RowPlan(group, f"d{group.rows}", f"d{group.cols}", THREADS, emulated)


class RowEmitter(TileLangEmitter):
    """The shared emitter with a row group's reductions, unit-axis reshapes and final write placed on a block."""

    def __init__(self, graph, target, rules, rejected, checks=True, nest=None, grid=None):
        plan = grid
        super().__init__(graph, target, rules, rejected, checks, nest=None,
                         grid=plan if plan.node is not None else None)
        self.plan = plan
        self.grid_planned = True  # a workspace would be one buffer for every thread: the plan is then refused
        group = plan.group
        self.row_nodes = {id(n) for n in (*group.reductions, *group.reshapes)}
        # a row's reductions are scalars per block, computed once: nothing is held for re-reading
        self.materialized = frozenset()
        self.snapshots = type(self.snapshots)()
        self.row = None  # the row index (tensor form; the parallel form's row is the loop's point)
        self.tx = None  # this thread's binding (CUDA)
        self.shared: dict = {}  # id(reduce node) -> one buffer of partials per accumulator leaf

    # -- where the code runs ---------------------------------------------------------------------------------
    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super().run_region(region, params)
        self._prologue()
        if self.plan.node is not None:  # the parallel loop's iterations are the blocks (grid_iteration)
            return super().run_region(region, params)
        self.row = self.assign("T.Cast('int64', bx)", "r")
        with self.block(f"if {self.row} < {self.plan.rows}:"):
            return super().run_region(region, params)

    def _prologue(self) -> None:
        plan = self.plan
        if not plan.emulated:
            self.tx = self.assign("T.get_thread_binding()", "tx")
        alloc = "T.alloc_local" if plan.emulated else "T.alloc_shared"
        for node in plan.group.reductions:
            (acc_t,) = node.attr("types")
            self.shared[id(node)] = [self.assign(f"{alloc}(({plan.threads},), {self.tir(t.dtype)!r})", "s")
                                     for t in T.leaf_types(acc_t)]

    @contextlib.contextmanager
    def grid_iteration(self, grid, length: str):
        """The parallel loop's iteration of this block (its row)."""
        o = self.assign("T.Cast('int64', bx)", "o")
        self.in_grid = True
        try:
            with self.block(f"if {o} < {length}:"):
                self.loop_stack.append(("for", [], None, self.depth))
                yield o
                self.loop_stack.pop()
        finally:
            self.in_grid = False

    @contextlib.contextmanager
    def phase(self, count: int | None = None):
        """Code every thread ``tx < count`` of the block runs between two barriers: on CUDA this thread (under a
        guard for fewer than all), emulated a serial loop over the threads."""
        count = self.plan.threads if count is None else count
        if self.plan.emulated:
            tx = self.fresh("tx")
            with self.block(f"for {tx} in T.serial({count}):"):
                yield tx
        elif count == self.plan.threads:
            yield self.tx
        else:
            with self.block(f"if {self.tx} < {count}:"):
                yield self.tx

    def sync(self) -> None:
        if not self.plan.emulated:
            self.line("T.sync_threads()")

    @contextlib.contextmanager
    def strided(self, tx: str):
        """This thread's elements of the row: ``tx, tx + threads, ...`` below the row's length."""
        n, k = self.plan.threads, self.fresh("k")
        with self.block(f"for {k} in T.serial(T.ceildiv({self.plan.cols}, T.int64({n}))):"):
            j = self.assign(f"{k} * T.int64({n}) + T.Cast('int64', {tx})", "j")
            with self.block(f"if {j} < {self.plan.cols}:"):
                yield j

    def position(self) -> list:
        """The row's index among the kept axes of a reduction (tensor form) or none (parallel form)."""
        return [] if self.row is None else [self.row]

    # -- the nodes a row group places ----------------------------------------------------------------------
    def run_node(self, node):
        if id(node) not in self.row_nodes:
            return super().run_node(node)
        outer, self.node = self.node, node
        try:
            args = [self.operand(x) for x in node.inputs]
            value = self._reduce(node, args) if node.op is ops.reduce else self._unit_reshape(node, args)
        finally:
            self.node = outer
        (out,) = node.outputs
        self.env[out] = value
        self.bind_dims(out, value)

    def _unit_reshape(self, node, args):
        """A reshape that adds or drops unit axes (the recogniser proved the sizes agree): the same elements."""
        (x,) = args
        old_t, new_t = node.inputs[0].type, node.outputs[0].type
        old = [k for k, s in enumerate(getattr(old_t, "shape", ())) if not (isinstance(s, int) and s == 1)]
        new = [k for k, s in enumerate(new_t.shape) if not (isinstance(s, int) and s == 1)]
        rank = len(getattr(old_t, "shape", ()))

        def elem(idx):
            src = ["0"] * rank
            for a, b in zip(old, new):
                src[a] = idx[b]
            return self.elem(x, src)

        return Lazy(self.shape(new_t), elem)

    def _reduce(self, node, args):
        source, identity = args
        (acc_t,) = node.attr("types")
        acc_types = T.leaf_types(acc_t)
        pos, shared, step = self.position(), self.shared[id(node)], self.plan.threads // 2
        inits = [self.assign(self.elem(v, pos), "x") for v in leaf_values(identity, Aggregate)]
        with self.phase() as tx:  # each thread folds its strided slice of the row
            accs = accumulators(self, acc_types, inits)
            with self.strided(tx) as j:
                items = [self.elem(v, [*pos, j]) for v in leaf_values(source, Aggregate)]
                current = [self.assign(a, "x") for a in accs]
                for name, value in zip(accs, combine(self, node, acc_t, current, items, [], pos)):
                    self.line(f"{name} = {value}")
            for buffer, acc in zip(shared, accs):
                self.line(f"{buffer}[{tx}] = {acc}")
        self.sync()
        while step:  # the partials combined in a tree: thread tx takes tx + step
            with self.phase(step) as tx:
                lhs = [self.assign(f"{b}[{tx}]", "x") for b in shared]
                rhs = [self.assign(f"{b}[{tx} + {step}]", "x") for b in shared]
                for buffer, value in zip(shared, combine(self, node, acc_t, lhs, rhs, [], pos)):
                    self.line(f"{buffer}[{tx}] = {value}")
            self.sync()
            step //= 2
        results = [self.assign(f"{b}[0]", "r") for b in shared]
        if self.row is None:
            return assemble(acc_t, [Scalar(r) for r in results], Aggregate)
        shape = (self.plan.rows,)
        return assemble(acc_t, [Lazy(shape, lambda idx, r=r: r) for r in results], Aggregate)

    @contextlib.contextmanager
    def loop_nest(self, shape):
        if self.node is not self.plan.group.write:
            with super().loop_nest(shape) as idx:
                yield idx
            return
        pos = self.position()
        if self.plan.group.row_write:  # the row, strided over the threads
            with self.phase() as tx, self.strided(tx) as j:
                yield [*pos, j]
        elif self.plan.emulated:
            yield pos
        else:  # one value per row: thread 0 writes it
            with self.block(f"if {self.tx} == 0:"):
                yield pos
