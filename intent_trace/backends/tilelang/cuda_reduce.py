"""Full reductions on CUDA (and Metal, in its spelling: :mod:`.metal_grid`): a grid of blocks folds the source into
partials, and the last block to finish (CUDA) or a second kernel (Metal) combines them and runs the consumers (the
schedule pass's :class:`~intent_trace.schedule.reduce.FullReduction`). Shuffles are the target's (``lanes.shuffle``).

Two kernels launched in order on one stream (TileLang writes both from one ``prim_func``), or one
(``ReducePlan.one_kernel``): after its partial, each block's thread 0 takes an atomic (acq_rel) ticket (a workspace
zeroed per call, :mod:`.grid_sync`); the block whose ticket is the last (``G - 1``) knows every partial is stored,
fences, and runs the final pass below in place of the second kernel: the partials folded in block order, as the
second kernel folds them, so results are the same. Metal has two (its threadgroups have no device-scope fence);
CUDA could have one and has two too, since one measured slower (:data:`ONE_KERNEL`):

1. **the grid**: ``G = min(ceil(n / (threads * UNROLL)), BLOCKS)`` blocks of ``threads``. The source's ``n``
   elements are chunks of ``threads * UNROLL``; block ``b`` takes chunks ``b, b + G, ...`` (a grid-stride loop, so
   any ``n`` runs on at most BLOCKS blocks, every one resident at once on an H200), and in a chunk thread ``tx``
   takes elements ``tx, tx + threads, ...`` (coalesced: a warp reads 32 neighbours), unrolled, its reads into a
   register array before any is folded, so each thread has UNROLL reads in flight
   (:meth:`ReduceEmitter._prefetched`). The chunk no block holds whole (the tail) is folded under a guard per
   element by the next block in turn. The producers of the source (pointwise ops of whole-axis reads)
   are the shared emitter's element code at each element (fused: computed where they are read). The block's
   threads combine their accumulators with warp shuffles (a butterfly of ``T.shfl_xor``) and the warps' totals
   through shared memory; thread 0 stores the block's partial in the workspace ``W`` (one slot per block, one
   buffer per accumulator leaf).
2. **the final pass**: one block folds the G partials the same way, and its thread 0 runs the consumers (casts,
   arithmetic on the results) and the final write.

Every fold starts from the reduce's identity with its own combine (the serial program's helpers, so NaN
propagation, -0 and integer wrap-around are the serial program's per combine). Re-association and re-ordering
are what ``reduce`` allows (language §7, T10): a floating sum is within T5's bound of the exact one; max, min,
arg_reduce and integer results are the serial program's exactly. An empty source launches one block whose
partial is the identity.

With ``emulated`` the threads of a block are serial loops, one per phase between barriers, and a shuffle is a
phase of its own exchanging the lanes' values through local buffers: the C target runs the same mapping, each
lane combining the same pair in the same order, on the CPU (tests and ``tools/pytest_plugins``).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph import ops
from ...graph.lowering import assemble, leaf_values
from ...schedule import reduce as schedule_reduce
from .accumulate import accumulators, combine
from .cuda_butterfly import WARP, emulated_butterflies, shuffles
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter
from .grid_sync import GridSync
from .scalar_rules import constant_expr
from .storage import Workspace

THREADS = 256  # a block's threads
UNROLL = 8  # elements a thread reads before it combines any (its reads in flight)
#: The grid's most blocks, so the size of the partials' workspace: 132 SMs of an H200 hold 8 blocks of 256
#: threads each, so every block is resident at once and the grid-stride loop balances the work.
BLOCKS = 1024
#: Whether CUDA's full reductions run as one kernel (the last block to take a ticket folds the partials) where the
#: target's blocks can wait for each other. Measured by ``tools/scan_ab.py`` on one H100 (16M f32 sums, side by side
#: with torch.sum, docs/gpu-scan_ab-2026-12-06-h100-session6.jsonl): one kernel 0.88x torch, two kernels 1.02x. The
#: ticket must start at zero on every call (launches on several streams may overlap, so no call may count on the last
#: one resetting it), and its per-call zero fill costs about what the second kernel's launch saves and more.
ONE_KERNEL = False
#: why a CUDA plan with ``one_kernel`` False is two kernels (the schedule's ``form`` says it)
MEASURED_FASTER = "(measured faster on CUDA than one kernel, whose ticket needs a zero fill each call)"
NO_FENCE = "(no device-scope fence between threadgroups)"


@attrs.frozen
class ReducePlan:
    """A full reduction's launch: ``sizes`` are the extent names of the source's axes."""

    reduction: schedule_reduce.FullReduction = attrs.field(eq=False)
    sizes: tuple
    threads: int = THREADS
    unroll: int = UNROLL
    blocks: int = BLOCKS
    emulated: bool = False
    one_kernel: bool = True  # the last block folds the partials (grid_sync); False: a second kernel does
    why_two: str = NO_FENCE  # the reason ``form`` gives for two kernels

    @property
    def node(self):
        return None  # no parallel loop: the emitter maps no loop of the graph onto threads

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def total(self) -> str:
        return " * ".join(self.sizes)

    @property
    def emitter(self):
        return ReduceEmitter

    def grid(self) -> str:
        """The grid's blocks: enough for one chunk each, at least one, at most BLOCKS."""
        chunk = self.threads * self.unroll
        return (f"T.min(T.max(T.ceildiv({self.total}, T.int64({chunk})), T.int64(1)), "
                f"T.int64({self.blocks}))")

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        threads = "" if self.emulated else f", threads={self.threads}"
        return f"with T.Kernel({self.grid()}{threads}{extra}) as bx:"

    def final_launch(self) -> str:
        """The second kernel's header (the prelude is the module's, given once with the first)."""
        threads = "" if self.emulated else f", threads={self.threads}"
        return f"with T.Kernel(1{threads}) as bx:"

    def part(self, graph):
        form = ("one kernel, the last block to take the atomic ticket folds the partials" if self.one_kernel else
                f"two kernels, partials then a final block {self.why_two}")
        return self.reduction.part(graph, blocks=f"up to {self.blocks}", threads=self.threads,
                                   per_thread=self.unroll, passes=2, form=form)


def reduce_plan(graph, emulated: bool = False, one_kernel: bool = True, why_two: str = NO_FENCE) -> ReducePlan | None:
    """The full-reduction launch of ``graph``, or None (:func:`~intent_trace.schedule.reduce.recognise` says
    why). ``one_kernel``: in one kernel, where the target's blocks can wait for each other (:mod:`.grid_sync`);
    else two, for the reason ``why_two``."""
    found = schedule_reduce.recognise(graph)
    if not isinstance(found, schedule_reduce.FullReduction):
        return None
    return ReducePlan(found, tuple(f"d{a}" for a in found.axes), emulated=emulated, one_kernel=one_kernel,
                      why_two=why_two)


class BlockMixin:
    """A block's threads cooperating: phases between barriers, and a combine of every thread's value into one
    (warp butterflies, then the warps' totals), on CUDA or emulated. Mixed into an emitter that has ``plan``
    (``threads``, ``warps``, ``emulated``) and ``tx`` (this thread's binding, CUDA)."""

    @contextlib.contextmanager
    def phase(self, count: int | None = None):
        """Code every thread ``tx < count`` runs between two barriers: on CUDA this thread (under a guard for
        fewer than all), emulated a serial loop over the threads. Yields the thread index."""
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

    @staticmethod
    def loaded_first(loop, load, use) -> None:
        """``loop()`` (a context manager yielding an element) written twice: ``load(element)`` in the first copy,
        the element's reads into registers, ``use(element)`` in the second, its fold from them. The combine
        helpers branch on NaN, and a load written after a branch waits for it: folded as they are read, a
        thread had one load in flight (the SASS: LDG, FADD, BRA, LDG, ...); loaded first, all of them."""
        for step in (load, use):
            with loop() as element:
                step(element)

    @contextlib.contextmanager
    def unrolled(self, v: str, count, flat: str, name: str, bound: str | None):
        """``for v in T.unroll(count)``: yields the element's flat index ``flat``, held in a local named after
        ``name``, under a guard that it lies below ``bound`` (when one is given)."""
        with self.block(f"for {v} in T.unroll({count}):"):
            i = self.assign(flat, name)
            with self.block(f"if {i} < {bound}:") if bound else contextlib.nullcontext():
                yield i

    def sync(self) -> None:
        if not self.plan.emulated:
            self.line("T.sync_threads()")

    def bind_thread(self) -> None:
        self.tx = None if self.plan.emulated else self.assign("T.get_thread_binding()", "tx")

    def block_buffers(self, dtypes: list):
        """The buffers a block combine exchanges values through: one partial per warp and the block's result
        (CUDA, shared memory), or every thread's register twice (emulated)."""
        plan = self.plan
        if plan.emulated:
            return tuple([self.assign(f"T.alloc_local(({plan.threads},), {d!r})", "s") for d in dtypes]
                         for _ in range(2))
        return [self.assign(f"T.alloc_shared(({plan.warps + 1},), {d!r})", "s") for d in dtypes]

    def store_thread(self, buffers, tx: str, accs: list) -> None:
        """Emulated: this thread's accumulators into its slots (the block combine reads them there)."""
        if self.plan.emulated:
            for buffer, acc in zip(buffers[0], accs):
                self.line(f"{buffer}[{tx}] = {acc}")

    def block_combine(self, node, acc_t, buffers, accs: list) -> list:
        """Every thread's accumulators combined into the block's: expressions every thread may read after."""
        if self.plan.emulated:
            return self._emulated_combine(node, acc_t, buffers)
        return self._shuffles(node, acc_t, buffers, accs)

    # The partials are combined in two butterflies: within each warp (lane ^ 16, ^ 8, ... ^ 1, so every lane
    # ends with its warp's total), then, in the first warp, across the warps' totals. Each lane combines (its
    # value, its partner's) with the reduce's own combine. Two barriers: after the warps' totals are stored, after
    # the block's result is.
    def _shuffles(self, node, acc_t, shared, accs: list) -> list:
        return shuffles(self, node, acc_t, shared, accs, self.plan.threads)

    def _emulated_combine(self, node, acc_t, buffers) -> list:
        """The same butterflies, one phase per step (:func:`.cuda_butterfly.emulated_butterflies`)."""
        return emulated_butterflies(self, node, acc_t, buffers, self.plan.threads, self.plan.warps)

    @contextlib.contextmanager
    def first_thread(self):
        """Code only thread 0 runs (emulated: the block's one serial program after its phases)."""
        if self.plan.emulated:
            yield
        else:
            with self.block(f"if {self.tx} == 0:"):
                yield


def _storage(dtype: str) -> str:
    """A workspace's TIR dtype: bool travels as bytes (TileLang's host wrappers mistype bool buffers)."""
    return "uint8" if dtype == "bool" else dtype


class ReduceEmitter(BlockMixin, TileLangEmitter):
    """The shared emitter with a full reduction's folds placed on a grid and a final block."""

    def __init__(self, graph, target, rules, rejected, checks=True, nest=None, grid=None):
        super().__init__(graph, target, rules, rejected, checks, nest=None, grid=None)
        self.plan = grid
        self.grid_planned = True  # any workspace but the partials would be one buffer for every thread: refused
        self.materialized = frozenset()  # every element is read once, where it is folded
        self.snapshots = type(self.snapshots)()
        self.tx = None
        self.partials: dict = {}  # id(reduce node) -> the workspaces of its partials, one per accumulator leaf

    def run_node(self, node):
        if node.op is ops.reshape:  # the recogniser admits only a reshape to its own shape: the same elements
            (out,) = node.outputs
            self.env[out] = self.operand(node.inputs[0])
            return None
        return super().run_node(node)

    def constant(self, value, dtype):
        """A constant's expression where it is used: the program has two kernels, so no constant is bound once in
        the first (its bits helper is one call)."""
        self.tir(dtype)
        return constant_expr(self, value, dtype)

    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super().run_region(region, params)
        dims = dict(self.dim_names)
        red = self.plan.reduction
        for node in red.reductions:
            (acc_t,) = node.attr("types")
            spaces = []
            for t in T.leaf_types(acc_t):
                space = Workspace(f"W{len(self.workspaces)}", (str(self.plan.blocks),), _storage(self.tir(t.dtype)),
                                  " for the partials of a full reduction")
                self.workspaces.append(space)
                spaces.append(space.name)
            self.partials[id(node)] = spaces
        if self.plan.one_kernel:
            ticket = Workspace(f"W{len(self.workspaces)}", ("1",), "int32", " for the ticket of a full reduction",
                               zeroed=True)
            self.workspaces.append(ticket)
            buffers = self._grid_pass()
            with self._last_block(GridSync(self, ticket.name, self.plan.emulated)):
                self.env = {k: v for k, v in self.env.items() if not computed_in_body(k, self.graph)}
                self.memo = [{}]
                self._final_pass(buffers)
            return []
        self._grid_pass()
        self.depth -= 1  # the second kernel, after the first
        self.env = {k: v for k, v in self.env.items() if not computed_in_body(k, self.graph)}
        self.dim_names, self.memo = dict(dims), [{}]
        with self.block(self.plan.final_launch()):
            self._final_pass()
        self.depth += 1
        return []

    @contextlib.contextmanager
    def _last_block(self, sync: GridSync):
        """The code only the block that takes the last ticket runs: every block's partial is then stored (thread 0
        stored it before its ticket, an acq_rel atomic), and a fence in each of its threads orders their reads of
        the partials after the ticket."""
        last = self.fresh("last")
        if self.plan.emulated:  # one block at a time, in ticket order
            t = sync.ticket()
            self.line(f"{last} = T.alloc_var('bool', init=T.Cast('int64', {t}) == {self.plan.grid()} - T.int64(1))")
        else:
            seen = self.assign("T.alloc_shared((1,), 'int32')", "s")
            with self.first_thread():  # the ticket's release: this block's partial (thread 0's store) before it
                self.line(f"{seen}[0] = {sync.ticket(ordered=True)}")
            self.sync()
            self.line(f"{last} = T.alloc_var('bool', init=T.Cast('int64', {seen}[0]) == {self.plan.grid()} - "
                      f"T.int64(1))")
        with self.block(f"if {last}:"):
            sync.fence()  # every partial's store before this thread's reads of them
            yield

    # -- the two kernels -----------------------------------------------------------------------------------------
    def _grid_pass(self) -> dict:
        """The grid's fold; returns the block combine's buffers (the last block's final fold uses them again)."""
        plan, red = self.plan, self.plan.reduction
        self.bind_thread()
        buffers = {id(n): self.block_buffers(self._dtypes(n)) for n in red.reductions}
        for node in red.pre:
            self.run_node(node)
        g = self.assign(plan.grid(), "g")
        b = self.assign("T.Cast('int64', bx)", "b")
        chunk = plan.threads * plan.unroll
        folds = self._folds()
        reads = self._source_reads(red.pre)
        with self.phase() as tx:
            accs = [accumulators(self, T.leaf_types(acc_t), inits) for _, acc_t, _, inits in folds]
            slots = [self.assign(f"T.alloc_local(({plan.unroll},), {d!r})", "f") for _, d in reads]
            t = self.assign(f"T.Cast('int64', {tx})", "t")
            chunks = self.assign(f"T.floordiv({plan.total}, T.int64({chunk}))", "n")
            k = self.fresh("k")

            def fold(idx):
                self._fold(folds, accs, idx)

            with self.block(f"for {k} in T.serial(T.floordiv({chunks} + {g} - T.int64(1) - {b}, {g})):"):
                self._prefetched(lambda u: f"(({k} * {g} + {b}) * T.int64({plan.unroll}) + T.Cast('int64', {u})) * "
                                           f"T.int64({plan.threads}) + {t}", None, reads, slots, fold)
            with self.block(f"if {b} == T.floormod({chunks}, {g}):"):  # the tail: the next block in turn
                self._prefetched(lambda u: f"{chunks} * T.int64({chunk}) + T.Cast('int64', {u}) * "
                                           f"T.int64({plan.threads}) + {t}", plan.total, reads, slots, fold)
            for (node, *_), names in zip(folds, accs):
                self.store_thread(buffers[id(node)], tx, names)
        results = [self.block_combine(node, acc_t, buffers[id(node)], names)
                   for (node, acc_t, _, _), names in zip(folds, accs)]
        with self.first_thread():
            for (node, *_), values in zip(folds, results):
                for space, value, dtype in zip(self.partials[id(node)], values, self._dtypes(node)):
                    self.line(f"{space}[bx] = {value if dtype != 'bool' else f'T.Cast({_storage(dtype)!r}, {value})'}")
        return buffers

    def _source_reads(self, nodes) -> list:
        """(lazy value, TIR dtype) of each read among ``nodes`` (a fold's producers) that is read per element: what
        a thread loads into registers before it folds anything."""
        reads = []
        for node in nodes:
            value = self.env.get(node.outputs[0]) if node.op is ops.read else None
            if isinstance(value, Lazy):
                (t,) = T.leaf_types(node.outputs[0].type)
                reads.append((value, self.tir(t.dtype)))
        return reads

    def load_reads(self, reads, slots, at: str, idx: list) -> None:
        """The element at ``idx`` of every read into its slot (at ``at``)."""
        for (value, _), slot in zip(reads, slots):
            self.line(f"{slot}[{at}] = {self.elem(value, idx)}")

    def seed_reads(self, reads, slots, at: str, idx: list) -> None:
        """The element at ``idx`` of every read is its slot from here on in this block (the lazy values' memo), so
        the producers and the fold computed at ``idx`` read registers."""
        for (value, _), slot in zip(reads, slots):
            self.memo[-1][(id(value), tuple(idx))] = (value, f"{slot}[{at}]")

    def _prefetched(self, flat, bound, reads, slots, fold) -> None:
        """UNROLL elements of a chunk (flat indices ``flat(u)``, each below ``bound`` when one is given): every read
        of each element into its slot first, then the elements folded in order, each read found in its slot
        (:meth:`BlockMixin.loaded_first`)."""
        u = self.fresh("u")

        def use(j):
            idx = self._index(j)
            self.seed_reads(reads, slots, u, idx)
            fold(idx)

        self.loaded_first(lambda: self.unrolled(u, self.plan.unroll, flat(u), "j", bound),
                          lambda j: self.load_reads(reads, slots, u, self._index(j)), use)

    def _final_pass(self, buffers: dict | None = None) -> None:
        """The partials folded in block order, then the consumers: a second kernel's whole body, or the last
        block's end (``buffers``: the grid pass's, reused: every thread has read them, past the combine's
        barriers)."""
        plan, red = self.plan, self.plan.reduction
        if buffers is None:
            self.bind_thread()
            buffers = {id(n): self.block_buffers(self._dtypes(n)) for n in red.reductions}
        for node in red.pre:
            self.run_node(node)
        g = self.assign(plan.grid(), "g")
        folds = self._folds()
        with self.phase() as tx:
            accs = [accumulators(self, T.leaf_types(acc_t), inits) for _, acc_t, _, inits in folds]
            count = -(-plan.blocks // plan.threads)
            leaves = [(node, space, dtype) for node, *_ in folds
                      for space, dtype in zip(self.partials[id(node)], self._dtypes(node))]
            slots = [self.assign(f"T.alloc_local(({count},), {_storage(d)!r})", "f") for _, _, d in leaves]
            k = self.fresh("k")
            flat = f"T.Cast('int64', {k}) * T.int64({plan.threads}) + T.Cast('int64', {tx})"

            def load(i):
                for (_, space, _), slot in zip(leaves, slots):
                    self.line(f"{slot}[{k}] = {space}[{i}]")

            def use(_):
                for (node, acc_t, _, _), names in zip(folds, accs):
                    self.node = node
                    items = [self._partial(slot, k, dtype) for (n, _, dtype), slot in zip(leaves, slots) if n is node]
                    self._combine_into(node, acc_t, names, items)

            # every partial loaded before any is folded
            self.loaded_first(lambda: self.unrolled(k, count, flat, "i", g), load, use)
            for (node, *_), names in zip(folds, accs):
                self.store_thread(buffers[id(node)], tx, names)
        results = [self.block_combine(node, acc_t, buffers[id(node)], names)
                   for (node, acc_t, _, _), names in zip(folds, accs)]
        with self.first_thread():
            for (node, acc_t, _, _), values in zip(folds, results):
                value = assemble(acc_t, [Scalar(v) for v in values], Aggregate)
                (out,) = node.outputs
                self.env[out] = value
            for node in red.post:  # the consumers and the writes, in program order
                self.run_node(node)

    # -- folds ---------------------------------------------------------------------------------------------------
    def _dtypes(self, node) -> list:
        (acc_t,) = node.attr("types")
        return [self.tir(t.dtype) for t in T.leaf_types(acc_t)]

    def _partial(self, space: str, i: str, dtype: str) -> str:
        if dtype == "bool":
            return self.assign(f"T.Cast('bool', {space}[{i}])", "x")
        return self.assign(f"{space}[{i}]", "x")

    def _folds(self) -> list:
        """(reduce node, accumulator type, source value, identity leaves) per reduction, in program order."""
        folds = []
        for node in self.plan.reduction.reductions:
            self.node = node
            source, identity = (self.operand(x) for x in node.inputs)
            (acc_t,) = node.attr("types")
            folds.append((node, acc_t, source, [self.assign(self.elem(v, []), "x")
                                                for v in leaf_values(identity, Aggregate)]))
        self.node = None
        return folds

    def _fold(self, folds, accs, idx: list) -> None:
        """The source's element at coordinates ``idx`` folded into every reduction's accumulators."""
        for (node, acc_t, source, _), names in zip(folds, accs):
            self.node = node
            items = [self.elem(v, idx) for v in leaf_values(source, Aggregate)]
            self._combine_into(node, acc_t, names, items)
        self.node = None

    def _combine_into(self, node, acc_t, names: list, items: list) -> None:
        current = [self.assign(a, "x") for a in names]
        for name, value in zip(names, combine(self, node, acc_t, current, items, [], [])):
            self.line(f"{name} = {value}")

    def _index(self, j: str) -> list:
        """The source coordinates of flat element ``j``."""
        sizes = self.plan.sizes
        if len(sizes) == 1:
            return [j]
        idx, rest = [], j
        for n in reversed(sizes[1:]):
            idx.append(self.assign(f"T.floormod({rest}, {n})", "i"))
            rest = self.assign(f"T.floordiv({rest}, {n})", "q")
        return [rest, *reversed(idx)]


def computed_in_body(var, graph) -> bool:
    """Whether ``var`` is a value the graph's body computes (the second kernel computes it again)."""
    return not (var in graph.extents or any(p.var is var for p in graph.params))


def multi_block(graph, emulated: bool = False, single_pass: bool = True):
    """The multi-block plan of ``graph`` (a full reduction), or None; ``single_pass``: in one kernel."""
    return reduce_plan(graph, emulated, single_pass)
