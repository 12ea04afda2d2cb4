"""A scan along a long axis in one pass on CUDA: decoupled look-back (Merrill & Garland, "Single-pass Parallel Prefix
Scan with Decoupled Look-back", 2016; CUB's ``DeviceScan``), mixed into :class:`.cuda_scan.ScanEmitter`, whose
tile fold, block scan and prefix writes it reuses.

One block a tile of ``threads * unroll`` elements. Each block:

1. takes a **ticket** (an atomic add on word 0 of the zeroed flags workspace ``F``): its tile. Tickets are handed
   out in the order blocks start, so every tile before a block's own has a block that has started it, and a block
   that waits for its predecessors waits for blocks that run: forward progress whatever order the hardware
   schedules blocks in (a block index would not give it: block ``b`` may run before block ``b - 1`` starts);
2. loads its tile striped (coalesced) into shared memory, takes each thread's run of consecutive elements from there
   into registers, folds it in order and scans the runs' totals in the block
   (:meth:`.cuda_scan.ScanEmitter._fold_tile`): the tile's **aggregate**;
3. publishes it with status AGGREGATE (tile 0 publishes its aggregate as its inclusive prefix at once);
4. **looks back** (warp 0): lane ``l`` polls tile ``t - 1 - l``'s status until it is set and
   reads its aggregate or its inclusive prefix; the first lane holding an inclusive prefix (a ballot) ends
   the window, lanes past it take the identity, and the window is folded towards lane 0 with the earlier tile
   always on the left (shuffles down). Without an inclusive prefix in the window the next 32 tiles are read;
5. publishes its **inclusive prefix** (the exclusive prefix combined with its aggregate, status INCLUSIVE), and
   computes its tile's prefixes from the registers of its fold, starting from the exclusive one, into shared
   memory, and stores them striped.

So the source is read once and written once. Every combine keeps the left operand earlier in the axis
(re-associated, never re-ordered: language §8, T10): integer, max/min and any associative combine exact, a float
sum within T5's bound per prefix.

A tile's status: for one 32-bit accumulator (f32, i32, u32: ``_PACKED``) one int64 word, the flag in the high half
and the value's bits in the low half, published with one relaxed 64-bit store and read with one relaxed load
(aggregate then inclusive prefix in the same word: a reader sees one or the other whole), so neither side fences
(the SASS has no MEMBAR or CCTL). Any other accumulator (64-bit, several leaves) keeps int32 flags and its values
in arrays of their own (``A`` aggregates, ``P`` inclusive prefixes, so an aggregate is never overwritten while a
reader may still read it), the values stored before a release store of the flag and read after a relaxed poll and
one acquire fence.

The knobs (``ScanPlan.lookback``, :class:`.cuda_scan.Lookback`; :data:`.cuda_scan.LOOKBACK` the programs' choice,
``tools/scan_ab.py`` times each): the tile (threads x unroll), the staging through shared memory (else each thread
reads and writes its run straight), the window taken at its nearest inclusive prefix (``GridSync.wait(nearest)``),
a back-off between polls and a delay before the first.

Why a tile cost more than its bytes (issue 17: gpuscan1's 256 x 8 moved 128 MB in 0.28 ms, ~0.48 TB/s, where the
two kernels move 192 MB in ~0.14 ms): the program is latency-bound, not bandwidth-bound. By Little's law ~800
resident blocks (6 an SM, 38 registers) at that rate live ~27 us each, ten times one load's and one store's latency.
Everything a block does after its ticket is a chain of dependent steps, and the look-back is the long one: a window
is one L2 round trip (a relaxed 64-bit poll) then a vote and five dependent shuffle-and-add steps (each with the
NaN-preserving add's selects), and a tile whose 32 predecessors hold only aggregates walks on, so a block among
hundreds that finished their folds at about the same time walks many windows, issuing no loads meanwhile. And the
spin (LDG.E.64.STRONG.GPU, YIELD, branch: no back-off) keeps every waiting warp polling the same few L2 lines the
publishing blocks store to. Fewer, larger tiles shorten the chain; sleeping before and between polls leaves the L2
to the loads and stores (CUB's sm_90 float sum does both: 3072-element tiles, 1140 ns before the first poll and
688 ns between polls). Which of these matters how much is for ``tools/scan_ab.py`` to say: its diagnostics time
the same program with no look-back and with the block index for a ticket.

With ``emulated`` (the C target), blocks run one at a time in ticket order, the look-back's lanes are serial loops
and no flag is waited for (:mod:`.grid_sync`): the predecessor has always published its inclusive prefix, and the
window loop is bounded by the tiles before the block, so nothing spins.
"""
from __future__ import annotations

from .accumulate import accumulators, combine
from .cuda_reduce import WARP, ReduceEmitter
from .grid_sync import AGGREGATE, INCLUSIVE, GridSync
from .storage import Workspace


#: accumulators whose value packs with its flag into one 64-bit status word: (to its 32 bits, from them)
_PACKED = {"float32": ("T.reinterpret({}, 'uint32')", "T.reinterpret({}, 'float32')"),
           "int32": ("T.Cast('uint32', {})", "T.Cast('int32', {})"), "uint32": ("{}", "{}")}


class LookbackMixin:
    """The single-pass program (the module docstring); mixed into the scan emitter."""

    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super(ReduceEmitter, self).run_region(region, params)
        self.check_output()
        tiles = f"{self.plan.size}/{self.plan.tile}+1"  # a tile's status and values, one more for an empty axis
        dtypes = [self.tir(t.dtype) for t in self.types]
        self.packed = _PACKED.get(dtypes[0]) if len(dtypes) == 1 else None
        flags = Workspace(f"W{len(self.workspaces)}", (tiles,), "int64" if self.packed else "int32",
                          " for the ticket and the tiles' status of a scan", zeroed=True)
        self.workspaces.append(flags)
        self.values = {}
        for flag in () if self.packed else (AGGREGATE, INCLUSIVE):  # packed: the value is in the status word
            self.values[flag] = []
            for d in dtypes:
                space = Workspace(f"W{len(self.workspaces)}", (tiles,), d,
                                  " for the tiles' aggregates and inclusive prefixes of a scan")
                self.workspaces.append(space)
                self.values[flag].append(space.name)
        self._single_pass(GridSync(self, flags.name, self.plan.emulated, wide=self.packed is not None,
                                   backoff_ns=self.plan.lookback.backoff_ns))
        return []

    def _single_pass(self, sync: GridSync) -> None:
        plan = self.plan
        dtypes = self._setup()
        view = self.env[plan.found.write.inputs[0]]
        if plan.lookback.staged:
            self.staged = [self._stage_buffer(d) for _, d in self.reads]  # the tile's source, element-ordered
            self.staged_out = self._stage_buffer(self.tir(view.dtype))  # its prefixes
        if plan.emulated:
            ticket = sync.ticket()
        else:
            seen = self.assign("T.alloc_shared((1,), 'int32')", "s")
            with self.block(f"if {self.tx} == 0:"):
                self.line(f"{seen}[0] = {sync.ticket()}")
            self.sync()
            ticket = f"{seen}[0]"
        # max(.., 0): TVM's bounds analysis then knows the tile starts at or past 0 (no second guard a load)
        t = self.assign(f"T.Cast('int64', T.max({ticket}, 0))", "t")
        tile = self.assign(f"{t} * T.int64({plan.tile})", "o")
        excl, total = self._fold_tile(tile)
        if plan.emulated:
            prefix = self._emulated_look_back(sync, t, total)
        else:
            prefix = self._look_back(sync, t, total, dtypes)
        self._prefixes(tile, prefix, excl)
        self.node = None

    # -- the tile through shared memory -------------------------------------------------------------------------
    # A thread's run is UNROLL consecutive elements: read straight from the source, a warp's load instruction spans
    # 32 runs (1 KiB, 8 cache lines, 4 bytes of each 32-byte sector), 8 L1 wavefronts for one line's worth of bytes.
    # So the tile is loaded striped (element v * threads + tx: a warp reads 128 contiguous bytes), through shared
    # memory, and each thread takes its run from there; the prefixes leave the same way. Shared positions are padded
    # by one word in 32 (position p at p + p // 32), so a thread's run and a warp's stripe both hit 32 banks.
    def _stage_buffer(self, dtype: str) -> str:
        size = self.plan.tile + self.plan.tile // WARP
        space = "local" if self.plan.emulated else "shared"
        return self.assign(f"T.alloc_{space}(({size},), {dtype!r})", "g")

    @staticmethod
    def _padded(p: str) -> str:
        return f"{p} + {p} // {WARP}"

    def _run_position(self, tx: str, at: str) -> str:
        """The position in the tile of slot ``at`` of thread ``tx``'s run (emulated, ``at`` is already it)."""
        return at if self.plan.emulated else f"{tx} * {self.plan.unroll} + {at}"

    def _striped(self, tile: str, body) -> None:
        """A phase over the tile striped across the threads: ``body(position, index)`` for each element in range."""
        plan = self.plan
        with self.phase() as tx:
            v = self.fresh("v")
            with self.block(f"for {v} in T.unroll({plan.unroll}):"):
                e = self.assign(f"{v} * {plan.threads} + {tx}", "e")
                j = self.assign(f"{tile} + T.Cast('int64', {e})", "j")
                with self.block(f"if {j} < {plan.size}:"):
                    body(e, j)
        self.sync()

    def stage_tile(self, tile: str) -> None:
        if not self.plan.lookback.staged:
            return super().stage_tile(tile)

        def load(e, j):
            for (value, _), buffer in zip(self.reads, self.staged):
                self.line(f"{buffer}[{self._padded(e)}] = {self.elem(value, [j])}")

        self._striped(tile, load)

    def load_run(self, tx: str, at: str, j: str) -> None:
        if not self.plan.lookback.staged:
            return super().load_run(tx, at, j)
        p = self.assign(self._run_position(tx, at), "e")
        for slot, buffer in zip(self.slots, self.staged):
            self.line(f"{slot}[{at}] = {buffer}[{self._padded(p)}]")

    def write_prefix(self, tx: str, at: str, j: str, value: str) -> None:
        if not self.plan.lookback.staged:
            return super().write_prefix(tx, at, j, value)
        p = self.assign(self._run_position(tx, at), "e")
        self.line(f"{self.staged_out}[{self._padded(p)}] = {value}")

    def unstage_tile(self, tile: str) -> None:
        if not self.plan.lookback.staged:
            return super().unstage_tile(tile)
        view = self.env[self.plan.found.write.inputs[0]]
        self.sync()
        self._striped(tile, lambda e, j: self.line(f"{view.name}[{j}] = {self.staged_out}[{self._padded(e)}]"))

    # -- the tiles' statuses --------------------------------------------------------------------------------------
    def _publish(self, sync, t: str, flag: int, values: list) -> None:
        """Tile ``t``'s status ``flag`` with its values: one status word, or the values then the flag."""
        if self.packed:
            bits = self.packed[0].format(values[0])
            sync.publish(t, f"T.shift_left(T.Cast('int64', {flag}), T.int64(32)) + T.Cast('int64', {bits})")
            return
        for space, value in zip(self.values[flag], values):
            self.line(f"{space}[{t}] = {value}")
        sync.publish(t, str(flag))

    def _status(self, sync, j: str, nearest: bool = False) -> tuple:
        """(a local holding tile ``j``'s flag once it is set, its values: expressions read after the flag);
        ``nearest``: a window's, set up to its nearest inclusive prefix (:meth:`.GridSync.wait`)."""
        if self.packed:
            word = sync.wait(j, nearest)
            flag = self.variable("int32", f"T.Cast('int32', T.shift_right({word}, T.int64(32)))", "f")
            return flag, [self.packed[1].format(f"T.Cast('uint32', T.bitwise_and({word}, T.int64(0xFFFFFFFF)))")]
        flag = sync.wait(j, nearest)
        at = f"T.max({j}, T.int64(0))"
        return flag, [f"T.if_then_else({flag} == {INCLUSIVE}, {p}[{at}], {a}[{at}])"
                      for a, p in zip(self.values[AGGREGATE], self.values[INCLUSIVE])]

    def _publish_aggregate(self, sync, t: str, total: list) -> None:
        """Tile ``t``'s aggregate, or for tile 0 its inclusive prefix (nothing is before it)."""
        with self.block(f"if {t} == T.int64(0):"):
            self._publish(sync, "T.int64(0)", INCLUSIVE, total)
        with self.block("else:"):
            self._publish(sync, t, AGGREGATE, total)

    def _publish_inclusive(self, sync, t: str, prefix: list, total: list) -> None:
        with self.block(f"if {t} > T.int64(0):"):
            scan = self.plan.found.scan
            values = [self.assign(v, "x") for v in combine(self, scan, self.acc_t, prefix, total, [], [])]
            self._publish(sync, t, INCLUSIVE, values)

    # -- the look-back --------------------------------------------------------------------------------------------
    def _look_back(self, sync, t: str, total: list, dtypes: list) -> list:
        """Warp 0 publishes the aggregate, looks back 32 tiles at a time and publishes the inclusive prefix; the
        exclusive prefix comes back through shared memory to every thread."""
        scan, acc_t, lane = self.plan.found.scan, self.acc_t, self.lane
        shared = [self.assign(f"T.alloc_shared((1,), {d!r})", "s") for d in dtypes]
        with self.block(f"if {self.tx} < {WARP}:"):
            with self.block(f"if {lane} == 0:"):
                self._publish_aggregate(sync, t, total)
            prefix = accumulators(self, self.types, self.ident)
            if self.plan.lookback.delay_ns:  # tile 0 looks nowhere
                with self.block(f"if {t} > T.int64(0):"):
                    sync.sleep(self.plan.lookback.delay_ns)
            w = self.fresh("w")
            with self.block(f"for {w} in T.serial(T.ceildiv({t}, T.int64({WARP}))):"):
                j = self.variable("int64", f"{t} - T.int64(1) - {w} * T.int64({WARP}) - T.Cast('int64', {lane})", "j")
                flag, values = self._status(sync, j, self.plan.lookback.nearest)
                k = sync.first(f"{flag} == {INCLUSIVE}")  # the nearest tile holding an inclusive prefix
                window = accumulators(self, self.types, [f"T.if_then_else({lane} <= {k}, {v}, {i})"
                                                         for v, i in zip(values, self.ident)])
                step = 1
                while step < WARP:  # lane l folds lane l + step's value (earlier tiles) on its left
                    mine = [self.assign(x, "x") for x in window]
                    other = [self.assign(self.target.lanes.shuffle(self, "down", m, step, d), "x")
                             for m, d in zip(mine, dtypes)]
                    new = combine(self, scan, acc_t, other, mine, [], [])
                    for name, value in zip(window, self._select(f"{lane} + {step} < {WARP}", new, mine)):
                        self.line(f"{name} = {value}")
                    step *= 2
                current = [self.assign(p, "x") for p in prefix]
                for name, value in zip(prefix, combine(self, scan, acc_t, window, current, [], [])):
                    self.line(f"{name} = {value}")  # lane 0's: the window is earlier than what it had
                with self.block(f"if {k} < {WARP}:"):
                    self.line("break")
            with self.block(f"if {lane} == 0:"):
                self._publish_inclusive(sync, t, prefix, total)
                for buffer, value in zip(shared, prefix):
                    self.line(f"{buffer}[0] = {value}")
        self.sync()
        return [self.assign(f"{b}[0]", "x") for b in shared]

    def _emulated_look_back(self, sync, t: str, total: list) -> list:
        """The same steps with the warp's lanes as serial loops: the first lane holding an inclusive prefix, then
        the window folded from that lane down to lane 0 (earliest tile first)."""
        scan, acc_t = self.plan.found.scan, self.acc_t
        self._publish_aggregate(sync, t, total)
        prefix = accumulators(self, self.types, self.ident)
        w = self.fresh("w")
        with self.block(f"for {w} in T.serial(T.ceildiv({t}, T.int64({WARP}))):"):
            first = self.variable("int32", str(WARP), "k")
            lane = self.fresh("l")

            def tile_of(lane_index: str) -> str:
                return self.variable("int64", f"{t} - T.int64(1) - {w} * T.int64({WARP}) - T.Cast('int64', "
                                              f"{lane_index})", "j")

            with self.block(f"for {lane} in T.serial({WARP}):"):
                flag, _ = self._status(sync, tile_of(lane))
                with self.block(f"if {flag} == {INCLUSIVE} and {first} == {WARP}:"):
                    self.line(f"{first} = {lane}")
            window = accumulators(self, self.types, self.ident)
            m = self.fresh("m")
            with self.block(f"for {m} in T.serial({WARP}):"):
                back = self.assign(f"{WARP - 1} - {m}", "l")
                with self.block(f"if {back} <= {first}:"):
                    _, values = self._status(sync, tile_of(back))
                    self._combine_into(scan, acc_t, window, [self.assign(v, "x") for v in values])
            current = [self.assign(p, "x") for p in prefix]
            for name, value in zip(prefix, combine(self, scan, acc_t, window, current, [], [])):
                self.line(f"{name} = {value}")
            with self.block(f"if {first} < {WARP}:"):
                self.line("break")
        self._publish_inclusive(sync, t, prefix, total)
        return [self.assign(p, "x") for p in prefix]
