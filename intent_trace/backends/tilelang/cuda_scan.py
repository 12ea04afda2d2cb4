"""Scans along a long axis on CUDA (and Metal, in its spelling: :mod:`.metal_grid`), the schedule pass's
:class:`~intent_trace.schedule.scan.AxisScan`. On CUDA (and its emulation on the C target) one pass with decoupled
look-back (:mod:`.cuda_scan_lookback`, ``ScanPlan.single_pass``: the source read once, a block a tile); on Metal,
whose threadgroups cannot wait for each other (:mod:`.grid_sync`), the two-kernel reduce-then-scan over contiguous
segments described here, whose tile fold, block scan and prefix writes the single pass reuses. Shuffles are the
target's (``lanes.shuffle``: ``T.shfl_up`` on CUDA, a ``simd_shuffle_up`` helper on Metal).

The axis is cut into tiles of ``threads * UNROLL`` consecutive elements; ``G = min(tiles, BLOCKS)`` blocks each own a
contiguous run of ``ceil(tiles / G)`` tiles. In a tile, thread ``tx`` owns the UNROLL consecutive elements
``tx * UNROLL ...`` (so the threads' runs are in element order), folds them in order, and the block scans the
threads' totals in thread order (warp shuffles up, then the warps' totals through shared memory): each thread gets
the combine of every element before its run, the block the tile's total. Two kernels, launched in order:

1. **the totals**: each block folds its tiles in order into its total, stored in the workspace ``W``;
2. **the scan**: each block combines the totals of the blocks before it, in order (its threads fold runs of the
   totals, scanned the same way), then scans each of its tiles: a thread's running value starts from the block's
   carry combined with its exclusive prefix, and each element's prefix is written as it is combined (before it
   for an exclusive scan).

In both, a thread's run is read into registers before any element is folded (its loads all in flight: a
combine's NaN branch would otherwise hold the next load), and the second kernel writes the prefixes from those
registers: each kernel reads the source once.

Every combine keeps the left operand earlier in the axis: the scan is re-associated, never re-ordered (language
§8, T10), so any associative combine is right; a floating sum is within T5's bound per prefix, and integer, max
and min scans are the serial program's exactly. With ``emulated`` the threads of a block are serial loops, one
per phase between barriers, and each shuffle step a phase through local buffers (the C target runs the same
mapping on the CPU).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph.lowering import leaf_values
from ...schedule import scan as schedule_scan
from . import cuda_reduce
from .accumulate import accumulators, combine
from .cuda_reduce import WARP, ReduceEmitter, computed_in_body, reduce_plan
from .cuda_scan_lookback import LookbackMixin
from .emitter import Aggregate
from .storage import Workspace

THREADS = 256
UNROLL = 4  # a thread's run of consecutive elements in a tile
BLOCKS = 1024  # the grid's most blocks: their totals are one tile of the carry's fold (THREADS * UNROLL)


@attrs.frozen(slots=True)
class Lookback:
    """The single pass's knobs (:mod:`.cuda_scan_lookback`), one value so that an A/B run (``tools/scan_ab.py``)
    can time each and :data:`LOOKBACK` names the one the programs use.

    ``threads * unroll`` is the tile: the look-back's chain of statuses is one link a tile, so a larger tile is
    a shorter chain (fewer windows to walk) and fewer polls, at more registers and shared memory a block.
    ``staged``: the tile loaded and stored striped through shared memory (a warp's 128 contiguous bytes), else
    each thread reads and writes its run straight (32 runs a load instruction). ``nearest``: the window is taken
    once every lane up to the nearest inclusive prefix has a status (a warp-wide poll), instead of once all 32
    have one. ``backoff_ns``: ``__nanosleep`` between polls of a status not yet set (0: spin), so the waiting
    warps leave the L2 to the tiles' loads and stores; ``delay_ns``: a sleep before the first poll, while the
    predecessors' statuses reach the L2. (CUB's sm_90 tuning of a float sum: 128 x 24, 688 ns between polls,
    1140 ns before the first: cub/device/dispatch/tuning/tuning_scan.cuh.)"""

    threads: int = 256
    unroll: int = 8
    staged: bool = True
    nearest: bool = False
    backoff_ns: int = 0
    delay_ns: int = 0

    def __attrs_post_init__(self):
        if self.threads % WARP or not WARP <= self.threads <= WARP * WARP:
            raise ValueError(f"a look-back block of {self.threads} threads: a multiple of {WARP}, at most "
                             f"{WARP * WARP} (its warps' totals are one warp's scan)")
        if self.unroll < 1 or self.backoff_ns < 0 or self.delay_ns < 0:
            raise ValueError(f"a look-back's unroll must be at least 1 and its sleeps at least 0 ns: {self}")

    @property
    def tile(self) -> int:
        return self.threads * self.unroll


#: the single pass the CUDA programs use: CUB's sm_90 tile for a float sum (128 x 24) with its sleep before a tile's
#: first window, no back-off between polls. tools/scan_ab.py on one H100 (2026-12-06, sixth session; cumsum 16M f32,
#: docs/gpu-scan_ab-2026-12-06-h100-session6.jsonl): this 0.825x torch.cumsum, CUB's tuning with the 688 ns back-off
#: 0.796, 512 x 16 0.807, the two kernels 0.681, the tile read without staging 0.252 (the first single pass's 0.326:
#: uncoalesced runs, not the look-back); each tile scanned alone (no look-back, wrong: the floor) 1.11
LOOKBACK = Lookback(128, 24, delay_ns=1140)


@attrs.frozen
class ScanPlan:
    """A scan's launch: ``size`` is the extent name of the scanned axis."""

    found: schedule_scan.AxisScan = attrs.field(eq=False)
    size: str
    threads: int = THREADS
    unroll: int = UNROLL
    blocks: int = BLOCKS
    emulated: bool = False
    single_pass: bool = False  # one block a tile, decoupled look-back (cuda_scan_lookback)
    lookback: Lookback = LOOKBACK  # its knobs (threads and unroll are copied into the fields above)

    @property
    def node(self):
        return None

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def tile(self) -> int:
        return self.threads * self.unroll

    @property
    def emitter(self):
        return LookbackEmitter if self.single_pass else ScanEmitter

    def tiles(self) -> str:
        return f"T.ceildiv({self.size}, T.int64({self.tile}))"

    def grid(self) -> str:
        if self.single_pass:  # a block a tile (at least one: an empty axis still launches)
            return f"T.max({self.tiles()}, T.int64(1))"
        return f"T.min(T.max({self.tiles()}, T.int64(1)), T.int64({self.blocks}))"

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        threads = "" if self.emulated else f", threads={self.threads}"
        return f"with T.Kernel({self.grid()}{threads}{extra}) as bx:"

    def final_launch(self) -> str:
        threads = "" if self.emulated else f", threads={self.threads}"
        return f"with T.Kernel({self.grid()}{threads}) as bx:"

    def part(self, graph):
        if self.single_pass:
            return self.found.part(graph, blocks="one a tile", threads=self.threads, per_thread=self.unroll,
                                   passes=1, form="one pass, decoupled look-back (an atomic ticket a tile)")
        return self.found.part(graph, blocks=f"up to {self.blocks}", threads=self.threads, per_thread=self.unroll,
                               passes=2, form="reduce-then-scan, two kernels (blocks cannot wait for each other)")


def scan_plan(graph, emulated: bool = False, single_pass: bool = False,
              lookback: Lookback = LOOKBACK) -> ScanPlan | None:
    """The scan's launch, or None; ``single_pass``: one block a tile with decoupled look-back (its knobs
    ``lookback``), where the target's blocks can wait for each other (CUDA, and its emulation on the C target)."""
    found = schedule_scan.recognise(graph)
    if not isinstance(found, schedule_scan.AxisScan):
        return None
    if single_pass:
        return ScanPlan(found, f"d{found.axis}", threads=lookback.threads, unroll=lookback.unroll,
                        emulated=emulated, single_pass=True, lookback=lookback)
    assert BLOCKS <= THREADS * UNROLL  # the carry's fold reads every block's total in one tile
    return ScanPlan(found, f"d{found.axis}", emulated=emulated)


def multi_block(graph, emulated: bool = False, single_pass: bool = True, lookback: Lookback = LOOKBACK):
    """The multi-block plan of ``graph``: a full reduction's or a scan's, or None. ``single_pass``: the target's
    blocks can wait for each other (:mod:`.grid_sync`), so a scan is one pass (``lookback``: its knobs) and a full
    reduction one kernel where :data:`.cuda_reduce.ONE_KERNEL` says it pays."""
    if single_pass:
        reduce = reduce_plan(graph, emulated, cuda_reduce.ONE_KERNEL, cuda_reduce.MEASURED_FASTER)
    else:
        reduce = reduce_plan(graph, emulated, False)
    return reduce or scan_plan(graph, emulated, single_pass, lookback)


class ScanEmitter(ReduceEmitter):
    """The shared emitter with a scan's folds and prefixes placed on a grid of blocks."""

    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super(ReduceEmitter, self).run_region(region, params)
        dims = dict(self.dim_names)
        self.check_output()
        self.totals = []
        for t in self.types:
            space = Workspace(f"W{len(self.workspaces)}", (str(self.plan.blocks),), self.tir(t.dtype),
                              " for the block totals of a scan")
            self.workspaces.append(space)
            self.totals.append(space.name)
        self._kernel(final=False)
        self.depth -= 1
        self.env = {k: v for k, v in self.env.items() if not computed_in_body(k, self.graph)}
        self.dim_names, self.memo = dict(dims), [{}]
        with self.block(self.plan.final_launch()):
            self._kernel(final=True)
        self.depth += 1
        return []

    def check_output(self) -> None:
        """The accumulator's type and leaves; a LoweringError for an output dtype stored as another."""
        scan = self.plan.found.scan
        view = self.env[self.plan.found.write.inputs[0]]
        if self.target.view_storage(view.dtype) is not None:
            raise self.reject(f"the scan's output dtype {view.dtype} is stored as another (not mapped yet)", scan)
        self.acc_t = scan.inputs[1].type
        self.types = T.leaf_types(self.acc_t)

    def _setup(self) -> list:
        """A kernel's start: the thread's binding, the block scan's buffers, the source's producers, the identity
        and the registers of a thread's run. Returns the accumulators' TIR dtypes."""
        plan, found = self.plan, self.plan.found
        scan = found.scan
        self.node = scan
        self.bind_thread()
        if not plan.emulated:
            self.lane = self.assign(f"{self.tx} % {WARP}", "l")
            self.warp = self.assign(f"{self.tx} // {WARP}", "w")
        dtypes = [self.tir(t.dtype) for t in self.types]
        self.buffers = self._scan_buffers(dtypes)
        for node in found.pre:
            self.run_node(node)
        self.node = scan
        self.source = self.operand(scan.inputs[0])
        self.ident = [self.assign(self.elem(v, []), "x") for v in leaf_values(self.operand(scan.inputs[1]),
                                                                               Aggregate)]
        # the source's reads of a thread's run, in registers from the fold to the prefixes (emulated, every
        # thread's: the phases are loops of their own)
        self.reads = self._source_reads(found.pre)
        held = plan.unroll * (plan.threads if plan.emulated else 1)
        self.slots = [self.assign(f"T.alloc_local(({held},), {d!r})", "f") for _, d in self.reads]
        return dtypes

    def _fold_tile(self, tile: str):
        """Each thread's run of the tile at ``tile`` read into registers, then folded in order, and the block's
        scan of the runs' totals (:meth:`block_scan`)."""
        scan = self.plan.found.scan
        self.stage_tile(tile)
        with self.phase() as tx:
            acc = accumulators(self, self.types, self.ident)

            def use(element):
                at, j = element
                self.seed_reads(self.reads, self.slots, at, [j])
                self._combine_into(scan, self.acc_t, acc, self._items(j))

            def load(element):
                at, j = element
                self.load_run(tx, at, j)

            self.loaded_first(lambda: self.run_of(tile, tx), load, use)
            self.store_thread(self.buffers, tx, acc)
        return self.block_scan(acc)

    # hooks where the single pass stages a tile through shared memory (cuda_scan_lookback)
    def stage_tile(self, tile: str) -> None:
        """Before the fold's phase: nothing (each thread reads its run from the source)."""

    def load_run(self, tx: str, at: str, j: str) -> None:
        """Element ``j`` of thread ``tx``'s run into its registers (slot ``at``)."""
        self.load_reads(self.reads, self.slots, at, [j])

    def write_prefix(self, tx: str, at: str, j: str, value: str) -> None:
        view = self.env[self.plan.found.write.inputs[0]]
        self.line(f"{view.name}[{j}] = {value}")

    def unstage_tile(self, tile: str) -> None:
        """After the prefixes' phase: nothing (each thread wrote its run)."""

    def _kernel(self, final: bool) -> None:
        plan, found = self.plan, self.plan.found
        scan = found.scan
        dtypes = self._setup()
        g = self.assign(plan.grid(), "g")
        b = self.assign("T.Cast('int64', bx)", "b")
        per = self.assign(f"T.ceildiv({plan.tiles()}, {g})", "q")
        count = self.assign(f"T.max(T.min({per}, {plan.tiles()} - {b} * {per}), T.int64(0))", "n")
        if final:  # the combine of every earlier block's total, in order
            with self.phase() as tx:
                acc = accumulators(self, self.types, self.ident)
                totals = [self.assign(f"T.alloc_local(({plan.unroll},), {d!r})", "f") for d in dtypes]
                v = self.fresh("u")
                flat = f"T.Cast('int64', {tx}) * T.int64({plan.unroll}) + T.Cast('int64', {v})"

                def load(i):
                    for slot, w in zip(totals, self.totals):
                        self.line(f"{slot}[{v}] = {w}[{i}]")

                def use(_):
                    self._combine_into(scan, self.acc_t, acc, [f"{slot}[{v}]" for slot in totals])

                # every total loaded before any is combined
                self.loaded_first(lambda: self.unrolled(v, plan.unroll, flat, "i", b), load, use)
                self.store_thread(self.buffers, tx, acc)
            _, total = self.block_scan(acc)
            carry = accumulators(self, self.types, total)
        else:
            carry = accumulators(self, self.types, self.ident)
        k = self.fresh("k")
        with self.block(f"for {k} in T.serial({count}):"):
            tile = self.assign(f"({b} * {per} + {k}) * T.int64({plan.tile})", "o")
            excl, total = self._fold_tile(tile)
            if final:
                self._prefixes(tile, carry, excl)
            self._combine_into(scan, self.acc_t, carry, total)
        if not final:
            with self.first_thread():
                for w, c in zip(self.totals, carry):
                    self.line(f"{w}[bx] = {c}")
        self.node = None

    def _items(self, j: str) -> list:
        return [self.elem(v, [j]) for v in leaf_values(self.source, Aggregate)]

    def _prefixes(self, tile: str, carry: list, excl) -> None:
        """Each thread's run again, from the carry and its exclusive prefix: every element's prefix written."""
        scan = self.plan.found.scan
        inclusive = self.plan.found.inclusive
        with self.phase() as tx:
            start = combine(self, scan, self.acc_t, [self.assign(c, "x") for c in carry], excl(tx), [], [])
            run = accumulators(self, self.types, start)
            with self.run_of(tile, tx) as (at, j):
                self.seed_reads(self.reads, self.slots, at, [j])  # read once, by the fold: in registers
                items = [self.assign(x, "x") for x in self._items(j)]
                if not inclusive:
                    self.write_prefix(tx, at, j, run[0])
                self._combine_into(scan, self.acc_t, run, items)
                if inclusive:
                    self.write_prefix(tx, at, j, run[0])
        self.unstage_tile(tile)

    @contextlib.contextmanager
    def run_of(self, tile: str, tx: str):
        """Thread ``tx``'s UNROLL consecutive elements of the tile starting at ``tile``, each under a guard: yields
        (the element's slot in the registers holding the run, its index)."""
        v, unroll = self.fresh("u"), self.plan.unroll
        with self.block(f"for {v} in T.unroll({unroll}):"):
            j = self.assign(f"{tile} + T.Cast('int64', {tx}) * T.int64({unroll}) + T.Cast('int64', {v})", "j")
            with self.block(f"if {j} < {self.plan.size}:"):
                yield (f"{tx} * {unroll} + {v}" if self.plan.emulated else v), j

    # -- the block's scan of its threads' values ---------------------------------------------------------------
    def _scan_buffers(self, dtypes: list) -> dict:
        plan = self.plan
        if plan.emulated:
            local = lambda n, p: [self.assign(f"T.alloc_local(({n},), {d!r})", p) for d in dtypes]  # noqa: E731
            return {"now": local(plan.threads, "s"), "new": local(plan.threads, "s"), "ex": local(plan.threads, "e"),
                    "wt": local(plan.warps, "s"), "wt2": local(plan.warps, "s")}
        shared = lambda p: [self.assign(f"T.alloc_shared(({plan.warps},), {d!r})", p) for d in dtypes]  # noqa: E731
        return {"warp": shared("s"), "scanned": shared("s")}

    def store_thread(self, buffers, tx: str, accs: list) -> None:
        if self.plan.emulated:
            for buffer, acc in zip(buffers["now"], accs):
                self.line(f"{buffer}[{tx}] = {acc}")

    def block_scan(self, accs: list):
        """(``excl(tx)``: the combine of the values of the threads before ``tx``, in order, as expressions for a
        later phase; the block's total, in thread order)."""
        if self.plan.emulated:
            return self._emulated_scan()
        return self._shuffle_scan(accs)

    def _select(self, cond: str, new: list, old: list) -> list:
        return [self.assign(f"T.if_then_else({cond}, {a}, {b})", "x") for a, b in zip(new, old)]

    def _shuffle_scan(self, accs: list):
        scan, acc_t, warps = self.plan.found.scan, self.acc_t, self.plan.warps
        lane, warp, tx = self.lane, self.warp, self.tx
        inc = accumulators(self, self.types, [self.assign(a, "x") for a in accs])
        dtypes = [self.tir(t.dtype) for t in self.types]

        def shuffle(value: str, step: int, dtype: str) -> str:
            return self.target.lanes.shuffle(self, "up", value, step, dtype)

        def steps(names: list, width: int) -> None:
            step = 1
            while step < width:  # Hillis-Steele: lane l combines lane l - step's value on its left
                mine = [self.assign(n, "x") for n in names]
                other = [self.assign(shuffle(m, step, d), "x") for m, d in zip(mine, dtypes)]
                new = combine(self, scan, acc_t, other, mine, [], [])
                for name, value in zip(names, self._select(f"{lane} >= {step}", new, mine)):
                    self.line(f"{name} = {value}")
                step *= 2

        steps(inc, WARP)
        with self.block(f"if {lane} == {WARP - 1}:"):
            for buffer, value in zip(self.buffers["warp"], inc):
                self.line(f"{buffer}[{warp}] = {value}")
        self.sync()
        with self.block(f"if {tx} < {WARP}:"):  # the first warp scans the warps' totals
            first = [self.assign(f"T.if_then_else({lane} < {warps}, {b}[{lane} % {warps}], {i})", "x")
                     for b, i in zip(self.buffers["warp"], self.ident)]
            totals = accumulators(self, self.types, first)
            steps(totals, warps)
            with self.block(f"if {tx} < {warps}:"):
                for buffer, value in zip(self.buffers["scanned"], totals):
                    self.line(f"{buffer}[{tx}] = {value}")
        self.sync()
        total = [self.assign(f"{b}[{warps - 1}]", "r") for b in self.buffers["scanned"]]
        before = [self.assign(f"T.if_then_else({warp} > 0, {b}[T.max({warp} - 1, 0)], {i})", "x")
                  for b, i in zip(self.buffers["scanned"], self.ident)]
        up = [self.assign(shuffle(n, 1, d), "x") for n, d in zip(inc, dtypes)]
        left = self._select(f"{lane} > 0", up, self.ident)
        excl = combine(self, scan, acc_t, before, left, [], [])
        self.sync()  # every thread has read the buffers before the next scan writes them
        return (lambda tx: excl), total

    def _emulated_scan(self):
        scan, acc_t, warps = self.plan.found.scan, self.acc_t, self.plan.warps
        bufs = self.buffers
        now, new = bufs["now"], bufs["new"]

        def steps(now, new, width: int, count: int, lane_of):
            step = 1
            while step < width:
                with self.phase(count) as tx:
                    lane = self.assign(lane_of(tx), "l")
                    with self.block(f"if {lane} >= {step}:"):
                        mine = [self.assign(f"{b}[{tx}]", "x") for b in now]
                        other = [self.assign(f"{b}[{tx} - {step}]", "x") for b in now]
                        for buffer, value in zip(new, combine(self, scan, acc_t, other, mine, [], [])):
                            self.line(f"{buffer}[{tx}] = {value}")
                    with self.block("else:"):
                        for buffer, source in zip(new, now):
                            self.line(f"{buffer}[{tx}] = {source}[{tx}]")
                now, new = new, now
                step *= 2
            return now, new

        now, new = steps(now, new, WARP, self.plan.threads, lambda tx: f"T.floormod({tx}, {WARP})")
        with self.phase(warps) as tx:  # the warps' totals: each warp's last lane
            for buffer, source in zip(bufs["wt"], now):
                self.line(f"{buffer}[{tx}] = {source}[{tx} * {WARP} + {WARP - 1}]")
        wt, _ = steps(bufs["wt"], bufs["wt2"], warps, warps, lambda tx: tx)
        with self.phase() as tx:
            w, lane = self.assign(f"T.floordiv({tx}, {WARP})", "w"), self.assign(f"T.floormod({tx}, {WARP})", "l")
            before = [self.assign(f"T.if_then_else({w} > 0, {b}[T.max({w} - 1, 0)], {i})", "x")
                      for b, i in zip(wt, self.ident)]
            left = [self.assign(f"T.if_then_else({lane} > 0, {b}[T.max({tx} - 1, 0)], {i})", "x")
                    for b, i in zip(now, self.ident)]
            for buffer, value in zip(bufs["ex"], combine(self, scan, acc_t, before, left, [], [])):
                self.line(f"{buffer}[{tx}] = {value}")
        total = [self.assign(f"{b}[{warps - 1}]", "r") for b in wt]
        return (lambda tx: [self.assign(f"{b}[{tx}]", "x") for b in bufs["ex"]]), total


class LookbackEmitter(LookbackMixin, ScanEmitter):
    """The single-pass scan (:mod:`.cuda_scan_lookback`) over the two-kernel emitter's tile fold and prefixes."""
