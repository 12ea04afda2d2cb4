"""A scan along a long axis in one pass on CUDA: decoupled look-back (Merrill & Garland, "Single-pass Parallel Prefix
Scan with Decoupled Look-back", 2016; CUB's ``DeviceScan``), mixed into :class:`.cuda_scan.ScanEmitter`, whose
tile fold, block scan and prefix writes it reuses.

One block a tile of ``threads * unroll`` elements. Each block:

1. takes a **ticket** (an atomic add on word 0 of the zeroed flags workspace ``F``): its tile. Tickets are handed
   out in the order blocks start, so every tile before a block's own has a block that has started it, and a block
   that waits for its predecessors waits for blocks that run: forward progress whatever order the hardware
   schedules blocks in (a block index would not give it: block ``b`` may run before block ``b - 1`` starts);
2. folds its tile (each thread's run read into registers, then folded in order) and scans the runs' totals in the
   block (:meth:`.cuda_scan.ScanEmitter._fold_tile`): the tile's **aggregate**;
3. publishes it: ``A[t]``, then flag ``F[1 + t] = AGGREGATE`` (a release store after the value; tile 0 publishes its
   aggregate as its inclusive prefix at once);
4. **looks back** (warp 0): lane ``l`` waits for tile ``t - 1 - l``'s flag (an acquire load until it is set) and
   reads its aggregate or its inclusive prefix ``P``; the first lane holding an inclusive prefix (a ballot) ends
   the window, lanes past it take the identity, and the window is folded towards lane 0 with the earlier tile
   always on the left (shuffles down). Without an inclusive prefix in the window the next 32 tiles are read;
5. publishes its **inclusive prefix** ``P[t]`` = the exclusive prefix combined with its aggregate (flag
   ``INCLUSIVE``), and writes its tile's prefixes from the registers of its fold, starting from the exclusive one.

So the source is read once and written once. Every combine keeps the left operand earlier in the axis
(re-associated, never re-ordered: language §8, T10): integer, max/min and any associative combine exact, a float
sum within T5's bound per prefix. The statuses are flag words of their own and the values separate arrays (``A``,
``P``), so an aggregate's value is never overwritten by the inclusive prefix while a reader may still read it.

With ``emulated`` (the C target), blocks run one at a time in ticket order, the look-back's lanes are serial loops
and no flag is waited for (:mod:`.grid_sync`): the predecessor has always published its inclusive prefix, and the
window loop is bounded by the tiles before the block, so nothing spins.
"""
from __future__ import annotations

from .accumulate import accumulators, combine
from .cuda_reduce import WARP, ReduceEmitter
from .grid_sync import AGGREGATE, INCLUSIVE, GridSync
from .storage import Workspace


class LookbackMixin:
    """The single-pass program (the module docstring); mixed into the scan emitter."""

    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super(ReduceEmitter, self).run_region(region, params)
        self.check_output()
        tiles = f"{self.plan.size}/{self.plan.tile}+1"  # a tile's status and values, one more for an empty axis
        flags = Workspace(f"W{len(self.workspaces)}", (tiles,), "int32",
                          " for the ticket and the tiles' status flags of a scan", zeroed=True)
        self.workspaces.append(flags)
        values = {}
        for kind in ("A", "P"):
            values[kind] = []
            for t in self.types:
                space = Workspace(f"W{len(self.workspaces)}", (tiles,), self.tir(t.dtype),
                                  " for the tiles' aggregates and inclusive prefixes of a scan")
                self.workspaces.append(space)
                values[kind].append(space.name)
        self._single_pass(GridSync(self, flags.name, self.plan.emulated), values["A"], values["P"])
        return []

    def _single_pass(self, sync: GridSync, aggregates: list, inclusive: list) -> None:
        plan = self.plan
        dtypes = self._setup()
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
            prefix = self._emulated_look_back(sync, t, total, aggregates, inclusive)
        else:
            prefix = self._look_back(sync, t, total, aggregates, inclusive, dtypes)
        self._prefixes(tile, prefix, excl)
        self.node = None

    # -- publishing ---------------------------------------------------------------------------------------------
    def _publish_aggregate(self, sync, t: str, total: list, aggregates: list, inclusive: list) -> None:
        """Tile ``t``'s aggregate, or for tile 0 its inclusive prefix (nothing is before it)."""
        with self.block(f"if {t} == T.int64(0):"):
            for space, value in zip(inclusive, total):
                self.line(f"{space}[0] = {value}")
            sync.publish("T.int64(0)", INCLUSIVE)
        with self.block("else:"):
            for space, value in zip(aggregates, total):
                self.line(f"{space}[{t}] = {value}")
            sync.publish(t, AGGREGATE)

    def _publish_inclusive(self, sync, t: str, prefix: list, total: list, inclusive: list) -> None:
        with self.block(f"if {t} > T.int64(0):"):
            scan = self.plan.found.scan
            for space, value in zip(inclusive, combine(self, scan, self.acc_t, prefix, total, [], [])):
                self.line(f"{space}[{t}] = {value}")
            sync.publish(t, INCLUSIVE)

    def _status_value(self, flag: str, j: str, aggregates: list, inclusive: list) -> list:
        """Tile ``j``'s published values (its inclusive prefix or its aggregate, as its flag says)."""
        at = f"T.max({j}, T.int64(0))"
        return [f"T.if_then_else({flag} == {INCLUSIVE}, {p}[{at}], {a}[{at}])" for a, p in zip(aggregates, inclusive)]

    # -- the look-back --------------------------------------------------------------------------------------------
    def _look_back(self, sync, t: str, total: list, aggregates: list, inclusive: list, dtypes: list) -> list:
        """Warp 0 publishes the aggregate, looks back 32 tiles at a time and publishes the inclusive prefix; the
        exclusive prefix comes back through shared memory to every thread."""
        scan, acc_t, lane = self.plan.found.scan, self.acc_t, self.lane
        shared = [self.assign(f"T.alloc_shared((1,), {d!r})", "s") for d in dtypes]
        with self.block(f"if {self.tx} < {WARP}:"):
            with self.block(f"if {lane} == 0:"):
                self._publish_aggregate(sync, t, total, aggregates, inclusive)
            prefix = accumulators(self, self.types, self.ident)
            w = self.fresh("w")
            with self.block(f"for {w} in T.serial(T.ceildiv({t}, T.int64({WARP}))):"):
                j = self.variable("int64", f"{t} - T.int64(1) - {w} * T.int64({WARP}) - T.Cast('int64', {lane})", "j")
                flag = sync.wait(j)
                k = sync.first(f"{flag} == {INCLUSIVE}")  # the nearest tile holding an inclusive prefix
                window = accumulators(self, self.types, [
                    f"T.if_then_else({lane} <= {k}, {v}, {i})"
                    for v, i in zip(self._status_value(flag, j, aggregates, inclusive), self.ident)])
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
                self._publish_inclusive(sync, t, prefix, total, inclusive)
                for buffer, value in zip(shared, prefix):
                    self.line(f"{buffer}[0] = {value}")
        self.sync()
        return [self.assign(f"{b}[0]", "x") for b in shared]

    def _emulated_look_back(self, sync, t: str, total: list, aggregates: list, inclusive: list) -> list:
        """The same steps with the warp's lanes as serial loops: the first lane holding an inclusive prefix, then
        the window folded from that lane down to lane 0 (earliest tile first)."""
        scan, acc_t = self.plan.found.scan, self.acc_t
        self._publish_aggregate(sync, t, total, aggregates, inclusive)
        prefix = accumulators(self, self.types, self.ident)
        w = self.fresh("w")
        with self.block(f"for {w} in T.serial(T.ceildiv({t}, T.int64({WARP}))):"):
            first = self.variable("int32", str(WARP), "k")
            lane = self.fresh("l")

            def tile_of(lane_index: str) -> str:
                return self.variable("int64", f"{t} - T.int64(1) - {w} * T.int64({WARP}) - T.Cast('int64', "
                                              f"{lane_index})", "j")

            with self.block(f"for {lane} in T.serial({WARP}):"):
                flag = sync.wait(tile_of(lane))
                with self.block(f"if {flag} == {INCLUSIVE} and {first} == {WARP}:"):
                    self.line(f"{first} = {lane}")
            window = accumulators(self, self.types, self.ident)
            m = self.fresh("m")
            with self.block(f"for {m} in T.serial({WARP}):"):
                back = self.assign(f"{WARP - 1} - {m}", "l")
                with self.block(f"if {back} <= {first}:"):
                    j = tile_of(back)
                    values = [self.assign(v, "x") for v in self._status_value(sync.wait(j), j, aggregates,
                                                                             inclusive)]
                    self._combine_into(scan, acc_t, window, values)
            current = [self.assign(p, "x") for p in prefix]
            for name, value in zip(prefix, combine(self, scan, acc_t, window, current, [], [])):
                self.line(f"{name} = {value}")
            with self.block(f"if {first} < {WARP}:"):
                self.line("break")
        self._publish_inclusive(sync, t, prefix, total, inclusive)
        return [self.assign(p, "x") for p in prefix]
