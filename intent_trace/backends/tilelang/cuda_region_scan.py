"""The segmented scan (:class:`~intent_trace.schedule.region_scan.SegmentedScan`) as three CUDA kernels over chunks
of ``CHUNK`` members of the source axis (and its emulation on the C target: a block's threads one after another).

1. **transitions**: a block a chunk runs ``summarize`` on its chunk and stores the transition in its slot of a
   workspace;
2. **prefixes**: one block (a batch entry's) folds the transitions in chunk order: chunk ``c``'s incoming state is
   ``apply(prefix, initial)`` with ``prefix`` the ``combine`` of the transitions before it (stored in its slot), then
   ``prefix = combine(prefix, transition[c])``; the final state ``apply(total, initial)`` is written. Where
   ``combine`` and ``apply`` are pointwise on one shape (``SegmentedScan.elementwise``: a sum of outer products),
   each element's prefixes are independent: the elements are split over blocks, a thread an element, its prefix a
   local carried through the chunks (no buffer, no barrier);
3. **outputs**: a block a chunk runs ``emit`` on its chunk from its incoming state, its outputs written at the
   chunk's offset.

By §9.2's laws the result is the serial program's within T5 (T10: the segmentation and the parenthesisation the
laws allow are free). Each helper is the shared emitter's element code (:class:`.emitter.TileLangEmitter`: the serial
program's helpers and rules); only where values are stored differs. A value the element code holds in a buffer (a
materialised contraction, a carry, a copy) gets a slot of a workspace per chunk (one block's threads share it), and
every nest that writes one is spread over the block's threads (a strided loop over its flat elements), a barrier
after it. A buffer written anywhere else (inside a loop of the element code, where every thread would write it) is a
LoweringError: the plan is refused and the serial program runs, saying so.
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph.lowering import assemble
from ...schedule import region_scan as schedule_region_scan
from . import cuda_scan
from .cuda_grid import kernel_line
from .cuda_reduce import WARP, BlockMixin, computed_in_body
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter
from .region import slice_views
from .scalar_rules import constant_expr
from .storage import Workspace, host_dtype
from .views import encode

CHUNK = 64  # members of the source a block summarises and emits
THREADS = 128


@attrs.frozen
class RegionScanPlan:
    """A segmented scan's launch: ``size`` the extent name of the source axis, ``batch`` that of the parallel loop
    around the scan (None: none). A chunk kernel's blocks are the chunks of every batch entry, batch-major."""

    found: schedule_region_scan.SegmentedScan = attrs.field(eq=False)
    size: str
    batch: str | None = None
    chunk: int = CHUNK
    threads: int = THREADS
    emulated: bool = False
    mapping = "segmented_scan"
    node = None  # no parallel loop of the graph is the grid's

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def emitter(self):
        return RegionScanEmitter

    def chunks(self) -> str:
        return f"T.ceildiv({self.size}, T.int64({self.chunk}))"

    def per_entry(self) -> str:
        """The chunk blocks of one batch entry (at least one: an empty axis still has a block)."""
        return f"T.max({self.chunks()}, T.int64(1))"

    def grid(self) -> str:
        entries = f" * T.max({self.batch}, T.int64(1))" if self.batch else ""
        return f"{self.per_entry()}{entries}"

    @property
    def slots(self) -> tuple:
        """A workspace's leading axes, as the host sizes them: the batch entries, then a slot per chunk and one
        more."""
        return (*((self.batch,) if self.batch else ()), f"{self.size}/{self.chunk}+1")

    def launch(self, prelude: str | None) -> str:
        return kernel_line(self.grid(), self.threads, self.emulated, prelude)

    def part(self, graph):
        prefixes = "the state's elements split over blocks" if self.found.elementwise else "one block"
        return self.found.part(graph, chunk=self.chunk, blocks="one a chunk", threads=self.threads,
                               phases=f"3: transitions in parallel, their prefixes in order ({prefixes} an entry), "
                                      f"outputs in parallel")


def multi_block(graph, emulated: bool = False):
    """CUDA's multi-block plans: a full reduction's or a scan's (:func:`.cuda_scan.multi_block`), else a segmented
    scan's."""
    return cuda_scan.multi_block(graph, emulated) or region_scan_plan(graph, emulated)


def region_scan_plan(graph, emulated: bool = False) -> RegionScanPlan | None:
    """The segmented scan's launch of ``graph``, or None (:func:`~intent_trace.schedule.region_scan.recognise` says
    why)."""
    found = schedule_region_scan.recognise(graph)
    if not isinstance(found, schedule_region_scan.SegmentedScan):
        return None
    batch = None if found.batch is None else f"d{found.batch}"
    return RegionScanPlan(found, f"d{found.axis}", batch, emulated=emulated)


class RegionScanEmitter(BlockMixin, TileLangEmitter):
    """The shared emitter writing the three kernels: buffers in per-chunk workspace slots, their nests spread over
    the block's threads."""

    def __init__(self, graph, target, rules, rejected, checks=True, nest=None, grid=None):
        super().__init__(graph, target, rules, rejected, checks, nest=None, grid=None)
        self.plan = grid
        self.grid_planned = True
        self.tx = None
        self.slot = ("T.int64(0)",)  # the (entry,) chunk whose workspace slots this kernel's buffers take
        self.spread_depth = None  # the depth at which a nest writing a buffer is spread over the threads
        self.elements = None  # the prefix kernel's elements, split over its blocks (an elementwise scan), or None
        self.part = None  # this block's part of them, in the prefix kernel

    def constant(self, value, dtype):
        """A constant's expression where it is used: no constant is bound once in the first of three kernels."""
        self.tir(dtype)
        return constant_expr(self, value, dtype)

    # -- the kernels ----------------------------------------------------------------------------------------------
    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super().run_region(region, params)
        scan = self.plan.found.scan
        summary_t, state_t = scan.inputs[1].type, scan.inputs[2].type
        self.transitions = self._chunk_spaces(summary_t, "the chunks' transitions of a region scan")
        self.incoming = self._chunk_spaces(state_t, "the chunks' incoming states of a region scan")
        dims = dict(self.dim_names)
        self._transitions()
        self.depth -= 1  # the next kernels, after the first
        entries = f" * T.max({self.plan.batch}, T.int64(1))" if self.plan.batch else ""
        self.elements = None  # the shape whose elements the prefix kernel's blocks split (elementwise helpers)
        if self.plan.found.elementwise is not None:
            self.elements = tuple(self.shape(T.leaf_types(state_t)[0]))
            total = " * ".join(f"T.Cast('int64', {s})" for s in self.elements) or "T.int64(1)"
            prefix_blocks = f"T.max(T.ceildiv({total}, T.int64({self.plan.threads})), T.int64(1))"
        else:
            prefix_blocks = "T.int64(1)"
        for launch, kernel in ((self._launch(f"{prefix_blocks}{entries}"), lambda: self._prefixes(prefix_blocks)),
                               (self._launch(self.plan.grid()), self._outputs)):
            self.env = {k: v for k, v in self.env.items() if not computed_in_body(k, self.graph)}
            self.dim_names, self.memo = dict(dims), [{}]
            with self.block(launch):
                kernel()
        self.depth += 1
        return []

    def _launch(self, blocks: str) -> str:
        return kernel_line(blocks, self.plan.threads, self.plan.emulated, None)

    @contextlib.contextmanager
    def _begin(self, per: str, chunked: bool):
        """A kernel's body: the thread's binding, this block's batch entry (under a guard: an empty batch still has a
        block) and its block of the entry (``per`` a batch entry: its chunk, or its part of the prefix kernel's
        elements), the nodes before the scan; yields, for a chunk's kernel, (its source leaves, its first member),
        else None."""
        plan = self.plan
        self.bind_thread()
        self.spread_depth = self.depth
        block = self.assign("T.Cast('int64', bx)", "c")
        if plan.batch is None:
            entry, within = None, block
        else:
            per = self.assign(per, "g")
            entry, within = self.assign(f"{block} // {per}", "b"), self.assign(f"{block} % {per}", "c")
        self.part = None if chunked or self.elements is None else within
        self.slot = (*((entry,) if entry else ()), within if chunked else "T.int64(0)")
        guard = self.block(f"if {entry} < {plan.batch}:") if entry else contextlib.nullcontext()
        with guard:
            self.spread_depth = self.depth
            if self.plan.found.point is not None:
                self.env[self.plan.found.point] = Scalar(entry)
            for node in self.plan.found.before:
                self.run_node(node)
            self.node = scan = self.plan.found.scan
            if not chunked:
                yield None
            else:
                start = self.assign(f"{within} * T.int64({plan.chunk})", "s")
                yield slice_views(self, scan, self.operand(scan.inputs[0]), start, plan.chunk), start
            self.node = None
        self.part = None

    def _operands(self) -> list:
        return [self.operand(x) for x in self.plan.found.scan.inputs[3:]]

    def _transitions(self) -> None:
        with self._begin(self.plan.per_entry(), True) as (parts, _):
            summarize = self.plan.found.scan.regions[0]
            (s,) = self.run_region(summarize, (*parts, *self._operands()))
            self._store_slots(self.transitions, s, self.plan.found.scan.inputs[1].type, self.slot)

    def _prefixes(self, per: str) -> None:
        if self.elements is not None:
            return self._element_prefixes(per)
        with self._begin(per, False):
            scan = self.plan.found.scan
            _summarize, combine, apply, _emit = scan.regions
            summary_t = scan.inputs[1].type
            identity, initial = self.operand(scan.inputs[1]), self.operand(scan.inputs[2])
            prefix = self.mutable(summary_t, identity)
            k = self.fresh("k")
            with self.block(f"for {k} in T.serial({self.plan.chunks()}):"):
                outer, self.spread_depth = self.spread_depth, self.depth
                slot = (*self.slot[:-1], k)
                (state,) = self.run_region(apply, (self.current(prefix, summary_t), initial))
                self._store_slots(self.incoming, state, scan.inputs[2].type, slot)
                (new,) = self.run_region(combine, (self.current(prefix, summary_t),
                                                   self._slot_value(self.transitions, summary_t, slot)))
                self.store(prefix, new, summary_t)
                self.spread_depth = outer
            (final,) = self.run_region(apply, (self.current(prefix, summary_t), initial))
            self.env[scan.outputs[1]] = final
            for write in self.plan.found.state_writes:
                self.run_node(write)

    def _element_prefixes(self, per: str) -> None:
        """The prefix kernel of an elementwise scan: each thread one element of the state, its prefix a local carried
        through the chunks (``combine`` and ``apply`` are pointwise: an element needs only the same element of their
        operands), so nothing is stored but the incoming states and the final state, and no thread waits for
        another."""
        scan = self.plan.found.scan
        _summarize, combine, apply, _emit = scan.regions
        summary_t, state_t = scan.inputs[1].type, scan.inputs[2].type
        shape, threads = self.elements, self.plan.threads
        with self._begin(per, False):
            identity, initial = self.operand(scan.inputs[1]), self.operand(scan.inputs[2])
            total = self.assign(" * ".join(f"T.Cast('int64', {s})" for s in shape), "t")
            with self.phase() as tx:
                f = self.assign(f"{self.part} * T.int64({threads}) + T.Cast('int64', {tx})", "f")
                with self.block(f"if {f} < {total}:"):
                    idx = self.coordinates(f, shape, total)
                    carries = []
                    for leaf, lt in zip(self.leaves(identity, summary_t), T.leaf_types(summary_t)):
                        name = self.fresh("c")
                        self.line(f"{name} = T.alloc_var({self.tir(lt.dtype)!r}, init={self.elem(leaf, idx)})")
                        carries.append(name)

                    def prefix():  # the carries now, as a value of the summary's type (this thread's element)
                        now = [self.assign(c, "x") for c in carries]
                        return assemble(summary_t, [Lazy(shape, lambda _i, v=v: v) for v in now], Aggregate)

                    k = self.fresh("k")
                    with self.block(f"for {k} in T.serial({self.plan.chunks()}):"):
                        current = prefix()
                        (state,) = self.run_region(apply, (current, initial))
                        for (name, _), leaf in zip(self.incoming, self.leaves(state, state_t)):
                            self.line(f"{name}[{', '.join([*self.slot[:-1], k, *idx])}] = {self.elem(leaf, idx)}")
                        slot = (*self.slot[:-1], k)
                        (new,) = self.run_region(combine, (current, self._slot_value(self.transitions, summary_t,
                                                                                        slot)))
                        values = [self.assign(self.elem(leaf, idx), "x") for leaf in self.leaves(new, summary_t)]
                        for name, value in zip(carries, values):
                            self.line(f"{name} = {value}")
                    (final,) = self.run_region(apply, (prefix(), initial))
                    (leaf,) = self.leaves(final, state_t)
                    for write in self.plan.found.state_writes:
                        view = self.env[write.inputs[0]]
                        points = [self.operand(x).expr for x in write.inputs[2:]]
                        self.line(f"{view.name}[{', '.join([*points, *idx])}] = "
                                  f"{encode(self, view, self.elem(leaf, idx))}")

    def _outputs(self) -> None:
        with self._begin(self.plan.per_entry(), True) as (parts, start):
            scan = self.plan.found.scan
            state = self._slot_value(self.incoming, scan.inputs[2].type, self.slot)
            (piece,) = self.run_region(scan.regions[3], (*parts, state, *self._operands()))
            (write,) = self.plan.found.out_writes
            view = self.env[write.inputs[0]]
            axis = scan.attr("axis")
            (out_t,) = T.leaf_types(scan.outputs[0].type)
            piece = self.computed(piece, out_t)
            points = [self.operand(x).expr for x in write.inputs[2:]]  # the batch point, leading
            with self.spread(piece.shape) as idx:
                dest = points + [f"{i} + {start}" if k == axis else i for k, i in enumerate(idx)]
                self.line(f"{view.name}[{', '.join(dest)}] = {encode(self, view, self.elem(piece, idx))}")

    # -- the per-chunk workspaces -------------------------------------------------------------------------------
    def _chunk_spaces(self, t, what: str) -> list:
        """A workspace per leaf of ``t``, a slot per chunk (and one more): each chunk's value of it."""
        names = []
        for lt in T.leaf_types(t):
            shape = self.shape(lt) if isinstance(lt, T.TensorType) else ()
            space = Workspace(f"W{len(self.workspaces)}", (*self.plan.slots, *shape), host_dtype(self.tir(lt.dtype)),
                              f" for {what}")
            self.workspaces.append(space)
            names.append((space.name, lt))
        return names

    def _store_slots(self, spaces, value, t, slot: tuple) -> None:
        for (name, lt), leaf in zip(spaces, self.leaves(value, t)):
            if isinstance(lt, T.TensorType):
                leaf = self.computed(leaf, lt)
                with self.spread(leaf.shape) as idx:
                    self.line(f"{name}[{', '.join([*slot, *idx])}] = {self.elem(leaf, idx)}")
            else:
                with self.spread(()):
                    self.line(f"{name}[{', '.join(slot)}] = {leaf}")

    def _slot_value(self, spaces, t, slot: tuple):
        """The value of ``t`` held in the slot ``slot`` of ``spaces`` (lazy: read where used)."""
        leaves = []
        for name, lt in spaces:
            if isinstance(lt, T.TensorType):
                shape = self.shape(lt)
                leaves.append(Lazy(shape, lambda idx, name=name: f"{name}[{', '.join([*slot, *idx])}]"))
            else:
                leaves.append(Scalar(self.assign(f"{name}[{', '.join(slot)}]", "x")))
        return assemble(t, leaves, Aggregate)

    # -- buffers: a slot per chunk, written by every thread ------------------------------------------------------
    def allocate(self, shape, dtype: str, zero: bool = False) -> str:
        """A buffer of ``shape`` in this chunk's slot of a workspace of its own (every thread of the block sees
        it): each axis the host sizes (a kernel extent, a static size, a slice's bound)."""
        dims = tuple(shape) or ("1",)
        sizes = self.host_shape(dims)
        if sizes is None:
            raise self.reject("a chunk's program needs a buffer whose size depends on data")
        space = Workspace(f"W{len(self.workspaces)}", (*self.plan.slots, *sizes), host_dtype(dtype), self._for_op())
        self.workspaces.append(space)
        name = self.fresh("a")
        first = ", ".join([*self.slot, *["0"] * len(sizes)])
        self.line(f"{name} = T.make_tensor_from_addr(T.access_ptr({space.name}[{first}], 'rw'), "
                  f"({', '.join(sizes)},), {dtype!r})")
        self.zero_fill(name, sizes, dtype, zero)
        return name

    def buffer_nest(self, shape):
        """Every element of a buffer written (a snapshot, a copy, a fill): spread over the block's threads."""
        return self.spread(shape)

    def nest(self, shape, parallel: bool):
        """A shared rule's nest: spread over the threads where it is parallel at a kernel's top level (a write of
        a view), else serial in each thread (a reduction's loop: every thread's locals)."""
        if parallel and self.depth == self.spread_depth:
            return self.spread(shape)
        return self.loop_nest(shape)

    @contextlib.contextmanager
    def spread(self, shape):
        """The elements of ``shape`` spread over the block's threads (a strided loop over the flat elements), then a
        barrier: the buffer it writes is read by any thread after it."""
        if self.depth != self.spread_depth:
            raise self.reject("a chunk's program writes a buffer inside a loop (every thread would write it)")
        shape = tuple(shape)
        threads = self.plan.threads
        total = self.assign(" * ".join(f"T.Cast('int64', {s})" for s in shape) or "T.int64(1)", "t")
        if self.part is not None:  # the prefix kernel of an elementwise scan: this block's threads, an element each
            if shape != self.elements:
                raise self.reject(f"the prefix kernel splits the elements of {self.elements!r}, not of {shape!r}")
            with self.phase() as tx:
                f = self.assign(f"{self.part} * T.int64({threads}) + T.Cast('int64', {tx})", "f")
                with self.block(f"if {f} < {total}:"):
                    yield self.coordinates(f, shape, total) if shape else []
        else:
            with self.phase() as tx:
                e = self.fresh("e")
                with self.block(f"for {e} in T.serial(T.ceildiv({total}, T.int64({threads}))):"):
                    f = self.assign(f"{e} * T.int64({threads}) + T.Cast('int64', {tx})", "f")
                    with self.block(f"if {f} < {total}:"):
                        yield self.coordinates(f, shape, total) if shape else []
        self.sync()

