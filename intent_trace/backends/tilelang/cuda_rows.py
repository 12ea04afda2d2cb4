"""Row groups on CUDA (and Metal, the same program in its spelling: :mod:`.metal_grid`): a warp or a thread block per
row, a cooperative reduction per level (warp shuffles), the row's pointwise producers and consumers fused (the
schedule pass's :class:`~intent_trace.schedule.rows.RowGroup`). A shuffle is the target's (``lanes.shuffle``:
``T.shfl_xor`` on CUDA, a ``simd_shuffle_xor`` helper on Metal), so "warp" below is Metal's simdgroup too.

The program is the shared lowering's (:class:`.emitter.TileLangEmitter`: every element, every combine is the code
the serial program writes, with the same helpers, so numerics come from one place); :class:`RowEmitter` changes
only where that code runs. Three programs (:attr:`RowPlan.tiers`), the first whose rows fit chosen at run time on
the row length (the extents are dynamic):

- **a warp per row** when its 32 lanes' slots hold the row (1024 f32 elements): 8 rows a block, the grid
  ``ceildiv(rows, 8)`` blocks; the lanes' butterfly alone combines the row (no shared memory, no barrier);
- **a block per row on chip** when the block's 256 threads' slots hold it (8192 f32 elements);
- **a block per row, a pass per level** for longer rows: each reduction re-reads the row from global memory, so
  rows of any length run.

A thread ``tx`` of a row's threads takes elements ``tx, tx + threads, ...`` (coalesced: the threads of a warp read
neighbouring elements). On chip it first loads every one of them into its slots (registers: the slot loops are
unrolled, so every index is a constant; all its loads are in flight before the first combine), and every level's
fold and the final write read the slots; a reduction's computed source that a later pass uses again (softmax's
``exp(x - max)``) is kept in slots by its fold. Each later pass is one loop over the chunks whose iteration holds
both parts of its chunk (the code for a chunk the row fills, and for the one it ends in), so a thread holds what
it has still to read and what it has filled, not both buffers whole; on CUDA the kernel's launch bound asks ptxas
for the blocks an SM can hold with the registers that takes (:mod:`.cuda_rows_slots`). Each fold starts from the
identity with the reduce's own combine; a butterfly of warp shuffles (``T.shfl_xor``: :mod:`.cuda_rows_combine`)
gives every lane its warp's total and, a block per row, the first warp combines the warps' totals the same way
(shared memory, two ``T.sync_threads`` per reduction); every thread reads the row's result. The final write is one
more strided pass (a write of the row) or the first lane's (one value per row). On CUDA a block's row is loaded
with streaming loads, which ptxas cannot issue again in a later pass (:func:`.cuda_rows_slots.streaming`). The load
phase (:mod:`.cuda_rows_load`) applies a read's one unary op (an f16 row's cast to f32) to its slots once; where a
block holds several rows (a warp each), the values of the columns alone (a weight and its decode) are computed once
per block into shared memory before the rows' guard (:mod:`.cuda_rows_columns`).

Re-association and re-ordering are what ``reduce`` allows (language §7, T10): a parallel sum differs from the
serial order within T5's bound; max, min, argmax and integer results are the serial program's exactly. On chip a
thread folds its slots into one accumulator per slot of a chunk (4 independent chains, then a tree of them:
:func:`.cuda_rows_combine.chunk_lanes`), so both on-chip tiers group a thread's elements the same way; a pass over
memory (rows longer than the slots hold) folds them in one chain.

On CUDA and its emulation each tier computes the row with fast helper bodies (no x86 NaN decisions) and, where a
stored value or a reduction result is NaN, again with the careful ones (:mod:`.cuda_rows_nan`: ``RowPlan.nan_fast``).

With ``emulated`` the threads of a row are serial loops, one per phase between barriers, and a shuffle is a phase
of its own that exchanges the lanes' values through local buffers (a block's warp rows one after another): the C
target runs the same mapping, each lane combining the same pair in the same order, on the CPU (tests and
``tools/pytest_plugins``).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph import ops
from ...graph.lowering import assemble, leaf_values
from ...graph.values import Var, walk_region
from ...schedule import rows as schedule_rows
from . import cuda_butterfly
from . import cuda_rows_columns as columns_of
from . import cuda_rows_combine as row_combine
from . import cuda_rows_load as row_load
from . import cuda_rows_nan as row_nan
from . import cuda_rows_slots as slots_of
from .accumulate import accumulators, combine
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter

THREADS = schedule_rows.THREADS
WARP = cuda_butterfly.WARP
UNROLL = slots_of.UNROLL  # elements a thread reads before it combines any (its reads in flight)
#: The reads a thread has in flight in a pass over a row too long for its slots: the kernel's registers are sized
#: for the slots anyway (one kernel holds every tier), so a pass unrolls up to this many (16 f32: 4096 a chunk).
PASS_UNROLL = 16


@attrs.frozen
class RowPlan:
    """A row group's launch: ``rows`` and ``cols`` are the extent names of the rows and the row's elements."""

    group: schedule_rows.RowGroup = attrs.field(eq=False)
    rows: str
    cols: str
    threads: int = THREADS
    emulated: bool = False
    slots: int = 0  # the row's elements a thread holds in registers (0: every pass reads the row from memory)
    #: CUDA's launch bound: the blocks an SM must hold at once (ptxas caps a thread's registers to fit them;
    #: :func:`.cuda_rows_slots.min_blocks`), 0 for none
    min_blocks: int = 0
    streamed: bool = False  # CUDA's: the slots loaded with streaming loads (:func:`.cuda_rows_slots.streaming`)
    nan_fast: bool = False  # each row computed by fast helpers, a row with a NaN output again (:mod:`.cuda_rows_nan`)

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def tiers(self) -> tuple:
        """The row's programs, the first whose rows fit chosen at run time on the row's length: (threads per
        row, slots per thread, the longest row or None). A warp per row (several rows a block, no barriers) when
        its lanes' slots hold the row, then the block's, then a pass over memory per reduction level."""
        on_chip = ((WARP, self.slots, WARP * self.slots), (self.threads, self.slots, self.threads * self.slots))
        return (*(on_chip if self.slots else ()), (self.threads, 0, None))

    def part(self, graph):
        """The schedule's part: the group's, with the rows held on chip by warp or by block (the tiers)."""
        cols = graph.extents[self.group.cols].extent.name
        tiers = [f"{'a warp' if width == WARP else 'a block'} per row if {cols} <= {cap}"
                 for width, _, cap in self.tiers[:-1]]
        extra = {"on_chip": ", ".join(tiers)} if tiers else {}
        if self.nan_fast:
            extra["nan"] = row_nan.describe(self)
        if self.min_blocks:
            extra["resident"] = f"{self.min_blocks} blocks an SM"
        return self.group.part(graph, self.threads, **extra)

    def grid(self) -> str:
        """The blocks: a block's rows for the first tier whose rows fit (a run-time choice on the row length)."""
        blocks = self.rows
        for width, _, cap in reversed(self.tiers[:-1]):
            if width != self.threads:
                each = f"T.ceildiv({self.rows}, T.int64({self.threads // width}))"
                blocks = f"T.if_then_else({self.cols} <= T.int64({cap}), {each}, {blocks})"
        return blocks

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
        return f"with T.Kernel(T.max({self.grid()}, T.int64(1)){threads}{extra}) as bx:"


def row_plan(graph, emulated: bool = False, bounded: bool = True) -> RowPlan | None:
    """The row-group launch of ``graph``, or None (:func:`~intent_trace.schedule.rows.recognise` says why);
    ``bounded``: CUDA's program, with its launch bound and streaming loads (Metal has neither: a threadgroup's
    registers are its compiler's)."""
    group = schedule_rows.recognise(graph)
    if not isinstance(group, schedule_rows.RowGroup):
        return None
    count = slots_of.slots(group)
    held = slots_of.live_registers(graph, group, count)
    bound = slots_of.min_blocks(THREADS, held) if bounded and not emulated else 0
    cuda = bounded and not emulated
    fast = bounded and row_nan.NAN_FAST_PATH and row_nan.eligible(graph, group)  # not Metal's: no fast bodies
    return RowPlan(group, f"d{group.rows}", f"d{group.cols}", THREADS, emulated, count, bound, cuda, fast)


class RowEmitter(TileLangEmitter):
    """The shared emitter with a row group's reductions, unit-axis reshapes and final write placed on a block."""

    def __init__(self, graph, target, rules, rejected, checks=True, nest=None, grid=None):
        plan = grid
        super().__init__(graph, target, rules, rejected, checks, nest=None,
                         grid=plan if plan.node is not None else None)
        self.plan = plan
        self.helper_prefix = row_nan.prefix(plan, self.helper_prefix)  # outside the fast program: the careful's
        self.grid_planned = True  # a workspace would be one buffer for every thread: the plan is then refused
        group = plan.group
        self.row_nodes = {id(n) for n in group.reshapes}
        self.levels = {id(n): level for n, level in zip(group.reductions, group.levels)}  # 1 + levels read
        # a row's reductions are scalars per block, computed once: nothing is held for re-reading
        self.materialized = frozenset()
        self.snapshots = type(self.snapshots)()
        self.row = None  # the row index (tensor form; the parallel form's row is the loop's point)
        self.tx = None  # this thread's binding (CUDA)
        self.shared: dict = {}  # id(reduce node) -> one buffer of partials per accumulator leaf
        self.part = "main"  # the part of the row the write is emitting (strided)
        # rows that fit on chip: every element read is loaded once into this thread's registers (slots) and each
        # pass reads them there; ``on_chip`` while the region's on-chip copy is emitted
        self.reads = {id(n): n for n in group.element_reads}
        self.width, self.slots = plan.threads, 0  # the tier being emitted: threads per row, slots per thread
        self.lane = None  # this thread's lane among its row's (CUDA)
        self.cache: dict = {}  # what a read reads (slots_of.read_key) -> its slots' buffer
        self.loaded: set = set()  # the buffers this tier loads
        self.loads: list = []  # (read node, buffer, the global read's value): the load phase still to emit
        self.applies = {id(op): read for read in group.element_reads  # op -> the read whose slots it replaces
                        for op in [slots_of.applied(graph, group).get(id(read))] if op is not None}
        self.applied: list = []  # (op node, the slots, its value): applied by the load phase (cuda_rows_load)
        self.raw: dict = {}  # read key -> the slots of its stored bits, for a read decoded from them (f16, bf16)
        self.slot = None  # the slot of the element ``strided`` yields (on chip)
        self.within = None  # its place in its chunk: which of a fold's chunk accumulators takes it (on chip)
        self.chunk = None  # the chunk loop's variable while :meth:`chunks` is open (on chip)
        self.write_lane = None  # the lane of the row write's phase (strided in loop_nest)
        self.held = slots_of.held_sources(graph, group)  # id(reduce node) -> its source, kept in slots for later passes
        self.held_buffers: dict = {}  # id(reduce node) -> the slots of its source
        # id(reduce node) -> values its fold keeps in slots (:meth:`_kept`: not where weights are read from memory)
        self.kept = slots_of.held_operands(graph, group) if group.columns or not group.reads_columns else {}
        self.kept_buffers: dict = {}  # such a value -> its slots
        self.columns: dict = {}  # id(per-column var) -> its block buffer (:mod:`.cuda_rows_columns`)
        self.placed: set = set()  # the ids of the nodes this tier emitted before the row's guard
        self.fast = None  # the fast program's flag while it is written (:mod:`.cuda_rows_nan`)
        self.slot_dtypes: dict = {}  # a slots buffer's name -> its dtype

    @property
    def on_chip(self) -> bool:
        return self.slots > 0

    @property
    def _streaming(self) -> bool:
        """Loads of a block's row streamed (CUDA): there ptxas re-issued them (:func:`.cuda_rows_slots.streaming`).
        A warp's row keeps the read-only loads: none is re-issued there, and the streaming loads' addresses (one
        64-bit register a chunk, not one base and its offsets) spilled."""
        return self.plan.streamed and self.width == self.plan.threads

    # -- where the code runs ---------------------------------------------------------------------------------
    def run_region(self, region, params=()) -> list:
        if region is self.graph.body:
            self._prologue()
            tiers, results = self.plan.tiers, []
            for k, (width, slots, cap) in enumerate(tiers):
                header = "else:" if cap is None else f"{'if' if k == 0 else 'elif'} {self.plan.cols} <= T.int64({cap}):"
                for node in walk_region(region):  # each tier computes every value of the graph again
                    for v in node.outputs:
                        self.env.pop(v, None)
                self.width, self.slots, self.loaded = width, slots, set()
                with self.block(header) if len(tiers) > 1 else contextlib.nullcontext():
                    results = self._run_tier(region, params)
            self.width, self.slots = self.plan.threads, 0
            return results
        if self.plan.node is not None and region is self.plan.node.regions[0]:
            return self._run_row(region, params)
        return super().run_region(region, params)

    def _run_tier(self, region, params) -> list:
        """The graph's program for one tier: every tier takes each thread's elements in the same order
        (``strided``) and combines the threads' partials with the same shuffles."""
        if not self.plan.emulated:
            self.lane = self.tx if self.width == self.plan.threads else \
                self.assign(f"{self.tx} % {self.width}", "l")
        if self.plan.node is not None:  # the parallel loop's iterations are the rows (grid_iteration)
            return super().run_region(region, params)
        self.placed = columns_of.hoist(self, self.plan, self.columns)
        with self.row_of_block() as row:
            self.row = row
            with self.block(f"if {self.row} < {self.plan.rows}:"):
                return self._run_row(region, params)

    def _run_row(self, region, params) -> list:
        """The row's program: with a NaN fast path, fast then careful where a NaN came (:mod:`.cuda_rows_nan`)."""
        if row_nan.tier_fast(self):
            return row_nan.run(self, region, params)
        return self.run_by_level(region, params)

    @contextlib.contextmanager
    def row_of_block(self):
        """This thread's row: the block's (a block per row), or its warp's among the block's rows -- emulated,
        a serial loop over them (each row's phases run after the previous row's)."""
        per_block = self.plan.threads // self.width
        if per_block == 1:
            yield self.assign("T.Cast('int64', bx)", "r")
        elif self.plan.emulated:
            g = self.fresh("g")
            with self.block(f"for {g} in T.serial({per_block}):"):
                yield self.assign(f"T.Cast('int64', bx) * T.int64({per_block}) + T.Cast('int64', {g})", "r")
        else:
            yield self.assign(f"T.Cast('int64', bx) * T.int64({per_block}) + "
                              f"T.Cast('int64', {self.tx} // {self.width})", "r")

    def run_by_level(self, region, params) -> list:
        """The row's region with the reductions of each level next to each other (a stable reordering of pure
        nodes by the level of the reductions they read: the final write stays last), so that one pass over the
        row folds them all (:meth:`_reduce_level`)."""
        for var, value in zip(region.params, params):
            self.env[var] = value
        depends, keyed = {}, []
        for node in region.nodes:
            below = max((depends.get(x, 0) for x in node.inputs if isinstance(x, Var)), default=0)
            level = self.levels.get(id(node))
            key, out = (2 * level - 1, level) if level is not None else (2 * below, below)
            depends.update((v, out) for v in node.outputs)
            keyed.append((key, node))
        for _, node in sorted(keyed, key=lambda pair: pair[0]):
            if id(node) in self.placed:  # emitted before the row's guard (cuda_rows_columns)
                continue
            self.run_node(node)
            if self.row is not None:
                self._once_per_row(node)
        return [self.operand(r) for r in region.results]

    def _prologue(self) -> None:
        plan = self.plan
        if plan.min_blocks:  # registers capped so that this many blocks fit an SM (__launch_bounds__)
            self.line(f"T.annotate_min_blocks_per_sm({plan.min_blocks})")
        if not plan.emulated:
            self.tx = self.assign("T.get_thread_binding()", "tx")
        for node in plan.group.reductions:
            (acc_t,) = node.attr("types")
            dtypes = [self.tir(t.dtype) for t in T.leaf_types(acc_t)]
            if plan.emulated:  # every thread's register, twice: a shuffle reads the values before any is replaced
                self.shared[id(node)] = tuple([self.assign(f"T.alloc_local(({plan.threads},), {d!r})", "s")
                                               for d in dtypes] for _ in range(2))
            else:  # one partial per warp, and the row's result
                self.shared[id(node)] = [self.assign(f"T.alloc_shared(({plan.warps + 1},), {d!r})", "s")
                                         for d in dtypes]
        if plan.slots:  # a thread's slots (registers: every index is a constant once the loops are unrolled)
            size = plan.slots * (plan.threads if plan.emulated else 1)
            for node in slots_of.distinct_reads(plan.group):
                (t,) = T.leaf_types(node.outputs[0].type)
                buffer = self._slots(size, self.tir(t.dtype), "c")
                self.cache[slots_of.read_key(node)] = buffer
                view = self.operand(node.inputs[0])
                if getattr(view, "storage", None) and self.dialect.decode(self, view, "x") != "x":
                    self.raw[slots_of.read_key(node)] = self._slots(size, view.storage, "b")
            self.columns = columns_of.buffers(self, plan)
            for key, var in self.held.items():
                (t,) = T.leaf_types(var.type)
                self.held_buffers[key] = self._slots(size, self.tir(t.dtype), "h")
            for var in (v for values in self.kept.values() for v in values):
                (t,) = T.leaf_types(var.type)
                self.kept_buffers[var] = self._slots(size, self.tir(t.dtype), "h")

    def _slots(self, size: int, dtype: str, prefix: str) -> str:
        """A thread's slots: ``size`` elements of ``dtype`` (registers), their dtype kept (:mod:`.cuda_rows_nan`)."""
        name = self.assign(f"T.alloc_local(({size},), {dtype!r})", prefix)
        self.slot_dtypes[name] = dtype
        return name

    @contextlib.contextmanager
    def grid_iteration(self, grid, length: str):
        """The parallel loop's iteration of this block (its row) or of this warp (:meth:`row_of_block`)."""
        self.in_grid = True
        try:
            with self.row_of_block() as o, self.block(f"if {o} < {length}:"):
                self.loop_stack.append(("for", [], None, self.depth))
                yield o
                self.loop_stack.pop()
        finally:
            self.in_grid = False

    @contextlib.contextmanager
    def phase(self, count: int | None = None):
        """Code every thread ``lane < count`` of the row's runs between two barriers: on CUDA this thread (under a
        guard for fewer than all), emulated a serial loop over the lanes. Yields the lane."""
        count = self.width if count is None else count
        if self.plan.emulated:
            tx = self.fresh("tx")
            with self.block(f"for {tx} in T.serial({count}):"):
                yield tx
        elif count == self.width:
            yield self.lane
        else:
            with self.block(f"if {self.lane} < {count}:"):
                yield self.lane

    def sync(self) -> None:
        if not self.plan.emulated:
            self.line("T.sync_threads()")

    def parts(self) -> tuple:
        return ("whole", "edge") if self.on_chip else ("main", "tail")

    @contextlib.contextmanager
    def chunks(self, tx: str):
        """On chip, the loop over a pass's chunks, inside which each part (:meth:`strided`) emits its code for the
        chunk: a chunk's slots are read by this iteration alone, so a pass that reads some slots and fills others
        (softmax's sum: ``x`` in, ``exp(x - max)`` out) holds only the chunks it has not reached and the ones it
        has filled. As two loops (the whole chunks', then the edge's) every slot stayed live until the edge loop
        had passed it: both buffers at once, 96 registers a thread, half the resident warps. Off chip nothing."""
        if not self.on_chip:
            yield
            return
        c = self.fresh("c")
        with self.block(f"for {c} in T.unroll({self.slots // UNROLL}):"):
            self.chunk = c
            try:
                yield
            finally:
                self.chunk = None

    @contextlib.contextmanager
    def strided(self, tx: str, part: str):
        """This thread's elements of the row, ``tx, tx + threads, ...``, in two parts: ``"main"``, the chunks of
        ``threads * u`` elements the row holds whole, unrolled (each thread issues its ``u`` loads before it waits
        on any: a thread has that many reads in flight; ``u`` is UNROLL, or up to PASS_UNROLL where the kernel
        holds slots), and ``"tail"``, the rest, each under a guard.
        On chip, every slot unrolled, chunks of UNROLL slots in two parts: ``"whole"``, a chunk the row fills for
        every thread (one uniform branch per chunk, no branch per element: the chunk's code is straight, its
        loads and stores scheduled freely), and ``"edge"``, the one chunk the row ends in, each element under its
        own guard (one uniform test per chunk); ``self.slot`` is the element's register. Inside :meth:`chunks`
        the part is the open chunk's (both parts of a chunk in one iteration); else the part loops over the
        chunks itself (the load phase: every whole chunk's loads issued before the edge's, all in flight). The
        chunks come in the slots' order (the edge is the last chunk the row reaches)."""
        n, u, cols = self.width, UNROLL, self.plan.cols
        if part in ("whole", "edge"):
            with (contextlib.nullcontext() if self.chunk is not None else self.chunks(tx)):
                c, v = self.chunk, self.fresh("u")
                start = f"T.Cast('int64', {c}) * T.int64({n * u})"
                end = f"T.Cast('int64', {c} + 1) * T.int64({n * u})"
                test = f"{end} <= {cols}" if part == "whole" else f"{start} < {cols} and {cols} < {end}"
                with self.block(f"if {test}:"), self.block(f"for {v} in T.unroll({u}):"):
                    slot, self.within = f"{c} * {u} + {v}", v
                    j = self.assign(f"T.Cast('int64', {slot}) * T.int64({n}) + T.Cast('int64', {tx})", "j")
                    self.slot = f"{tx} * {self.plan.slots} + {slot}" if self.plan.emulated else slot
                    if part == "whole":
                        yield j
                    else:
                        with self.block(f"if {j} < {cols}:"):
                            yield j
            return
        u = min(max(self.plan.slots, UNROLL), PASS_UNROLL)
        chunks = f"T.floordiv({cols}, T.int64({n * u}))"
        k = self.fresh("k")
        if part == "main":
            v = self.fresh("u")
            with self.block(f"for {k} in T.serial({chunks}):"), self.block(f"for {v} in T.unroll({u}):"):
                yield self.assign(f"({k} * T.int64({u}) + T.Cast('int64', {v})) * T.int64({n}) + "
                                  f"T.Cast('int64', {tx})", "j")
            return
        done = self.assign(f"{chunks} * T.int64({n * u})", "n")
        with self.block(f"for {k} in T.serial(T.ceildiv({cols} - {done}, T.int64({n}))):"):
            j = self.assign(f"{done} + {k} * T.int64({n}) + T.Cast('int64', {tx})", "j")
            with self.block(f"if {j} < {cols}:"):
                yield j

    def position(self) -> list:
        """The row's index among the kept axes of a reduction (tensor form) or none (parallel form)."""
        return [] if self.row is None else [self.row]

    # -- the nodes a row group places ----------------------------------------------------------------------
    def run_node(self, node):
        if node is self.plan.group.write:  # the fast program tests each value it stores (cuda_rows_nan)
            with row_nan.stored(self, node):
                return self._run_node(node)
        return self._run_node(node)

    def _run_node(self, node):
        group = self.plan.group
        if node is group.write and group.row_write:  # the write rule once per part of each chunk (strided)
            with self.phase() as self.write_lane, self.chunks(self.write_lane):
                for self.part in self.parts():
                    super().run_node(node)
            self.write_lane = None
            return None
        if self.on_chip and id(node) in self.reads:  # the value: this thread's slot of it
            super().run_node(node)
            (out,) = node.outputs
            key = slots_of.read_key(node)
            buffer, source, raw = self.cache[key], self.env[out], self.raw.get(key)
            if buffer not in self.loaded:  # the same view and index read again: the same slots
                self.loaded.add(buffer)  # (a read of stored bits: loaded as they are, decoded after every load)
                load = source if raw is None and not self._streaming else \
                    row_load.stored(self, node, buffer, raw, self._streaming)
                self.loads.append((node, buffer, load))
            value = Lazy(source.shape, lambda idx, b=buffer: f"{b}[{self.slot}]")
            self.env[out] = value
            self.bind_dims(out, value)
            return None
        if self.on_chip and id(node) in self.applies:  # computed once into its read's slots (cuda_rows_load)
            super().run_node(node)
            (out,) = node.outputs
            buffer = self.cache[slots_of.read_key(self.applies[id(node)])]
            self.applied.append((node, buffer, self.env[out]))
            value = Lazy(self.env[out].shape, lambda idx, b=buffer: f"{b}[{self.slot}]")
            self.env[out] = value
            self.bind_dims(out, value)
            return None
        if node.op is ops.reduce and id(node) in self.levels:
            if node.outputs[0] not in self.env:  # the first of its level: the level's one pass
                level = self.levels[id(node)]
                self._reduce_level([n for n in group.reductions if self.levels[id(n)] == level])
            return None
        if id(node) not in self.row_nodes:
            return super().run_node(node)
        outer, self.node = self.node, node
        try:
            value = self._unit_reshape(node, [self.operand(x) for x in node.inputs])
        finally:
            self.node = outer
        (out,) = node.outputs
        self.env[out] = value
        self.bind_dims(out, value)

    def _once_per_row(self, node) -> None:
        """A value of the rows alone (tensor form: RMSNorm's ``rsqrt(mean_square + eps)``, log-softmax's
        ``log(sum)``) computed once per row, here, at the row's level: as a lazy value every element of the final
        write computed it again (a division and a reciprocal square root per element). The serial program computes
        it for every row too, whatever the row's length."""
        rows = (self.plan.rows,)
        for out in node.outputs:
            value = self.env.get(out)
            if isinstance(value, Lazy) and tuple(value.shape) == rows:
                outer, self.node = self.node, node
                try:
                    name = self.lazy_elem(value, [self.row])
                    if not name.isidentifier():  # an expression: held in a local (a reduction's result is a name)
                        name = self.assign(name, "q")
                finally:
                    self.node = outer
                hoisted = Lazy(rows, lambda idx, n=name: n)
                self.env[out] = hoisted
                self.bind_dims(out, hoisted)

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

    def _reduce_level(self, nodes: list) -> None:
        """The reductions of one level in one pass over the row: each thread folds its strided slice into every
        reduction's accumulators (the row's elements read once, shared by the producers they feed), then each
        reduction's partials are combined (:func:`.cuda_rows_combine.shuffles`)."""
        pos, outer = self.position(), self.node
        if self.loads:  # on chip, before the first fold: every element read into its slots (all loads in flight)
            row_load.load_phase(self, self.loads, self.applied)
            self.loads, self.applied = [], []
        folds = []
        for node in nodes:
            self.node = node
            source, identity = (self.operand(x) for x in node.inputs)
            (acc_t,) = node.attr("types")
            folds.append((node, acc_t, source, [self.assign(self.elem(v, pos), "x")
                                                for v in leaf_values(identity, Aggregate)]))
        with self.phase() as tx:  # each thread folds its strided slice of the row
            accs = [accumulators(self, T.leaf_types(acc_t), inits) for _, acc_t, _, inits in folds]
            lanes = [row_combine.chunk_lanes(self, acc_t, inits) if self.on_chip else None
                     for _, acc_t, _, inits in folds]
            with self.chunks(tx):
                for part in self.parts():
                    with self.strided(tx, part) as j:
                        for (node, acc_t, source, _), names, lane in zip(folds, accs, lanes):
                            self.node = node
                            items = [self.elem(v, [*pos, j]) for v in leaf_values(source, Aggregate)]
                            if self.on_chip and id(node) in self.held:  # the later passes read it from its slots
                                self.line(f"{self.held_buffers[id(node)]}[{self.slot}] = {items[0]}")
                            for var in self._kept(node):  # computed for items: kept for the later passes
                                self.line(f"{self.kept_buffers[var]}[{self.slot}] = "
                                          f"{self.elem(self.env[var], [*pos, j])}")
                            into = names if lane is None else [f"{b}[{self.within}]" for b in lane]
                            current = [self.assign(a, "x") for a in into]
                            for name, value in zip(into, combine(self, node, acc_t, current, items, [], pos)):
                                self.line(f"{name} = {value}")
            for (node, acc_t, _, _), names, lane in zip(folds, accs, lanes):
                if lane is not None:  # the chunk's accumulators in a tree, into the thread's
                    self.node = node
                    row_combine.fold_lanes(self, node, acc_t, pos, names, lane)
            if self.plan.emulated:
                for (node, *_), names in zip(folds, accs):
                    for buffer, acc in zip(self.shared[id(node)][0], names):
                        self.line(f"{buffer}[{tx}] = {acc}")
        for (node, acc_t, _, _), names in zip(folds, accs):
            self.node = node
            if self.plan.emulated:
                results = row_combine.emulated_shuffles(self, node, acc_t, pos)
            else:
                results = row_combine.shuffles(self, node, acc_t, pos, names)
            if self.row is None:
                value = assemble(acc_t, [Scalar(r) for r in results], Aggregate)
            else:
                value = assemble(acc_t, [Lazy((self.plan.rows,), lambda idx, r=r: r) for r in results], Aggregate)
            row_nan.reduced(self, acc_t, results)
            (out,) = node.outputs
            self.env[out] = value
            self.bind_dims(out, value)
            if not self.on_chip:
                continue
            held = [(self.held[id(node)], self.held_buffers[id(node)])] if id(node) in self.held else []
            for var, buffer in [*held, *((v, self.kept_buffers[v]) for v in self._kept(node))]:
                # the later passes read it from the slots the fold filled
                self.env[var] = Lazy(self.env[var].shape, lambda idx, b=buffer: f"{b}[{self.slot}]")
        self.node = outer

    def _kept(self, node) -> tuple:
        """The values the fold of ``node`` keeps in slots for later passes (:func:`.cuda_rows_slots.held_operands`),
        on chip, and not in a tier whose write reads per-column values from memory: there ptxas for sm_90a spilled
        16 bytes a thread in layer norm's write (a block's row: its weight and bias loads in flight beside the kept
        ``x - mean``); a warp's rows read them from the block's buffer (:mod:`.cuda_rows_columns`)."""
        if not self.on_chip or (self.plan.group.reads_columns and not self.placed):
            return ()
        return self.kept.get(id(node), ())

    @contextlib.contextmanager
    def loop_nest(self, shape):
        if self.node is not self.plan.group.write:
            with super().loop_nest(shape) as idx:
                yield idx
            return
        pos = self.position()
        if self.plan.group.row_write:  # the row, strided over the threads (run_node writes each part)
            with self.strided(self.write_lane, self.part) as j:
                yield [*pos, j]
        elif self.plan.emulated:
            yield pos
        else:  # one value per row: its first lane writes it
            with self.block(f"if {self.lane} == 0:"):
                yield pos
