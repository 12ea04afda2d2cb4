"""Histograms on CUDA: a grid-stride program over the values, bins privatised per block, device atomics (the
schedule pass's :class:`~intent_trace.schedule.indexed.Histogram`).

Two kernels in one program, launched in order on one stream: the first zeroes the output's counts (the kernel owns
its output: the counts start from zero, spec §13), the second counts. Each block of the second takes
``UNROLL`` values a thread per grid-stride step (their loads issued before any is counted) and

- **bins on chip** (``bins <= SHARED_BINS``): counts them into its own bins in shared memory (u32, shared-memory
  atomics), then, after a barrier, adds each non-zero bin into the output with one device atomic;
- **bins in memory** (more bins): adds one to the output's bin with a device atomic per value;
- **a runtime bin count** (``bins=counts.shape[0]``, the counts' kernel extent): both, chosen when the kernel runs:
  each block holds ``SHARED_BINS`` private bins and counts into them when the bins fit, else into the output; a bin
  count that is not positive is cpu's ``ValueError`` (claimed, like a value outside the bins).

Counting is exact in any order (integers; T10), and counts wrap to the count dtype as the oracle's do (T2: adding
the wrapped partials wraps the same). A block's private counts are u32: a block counts at most
``ceil(N / (blocks * threads * UNROLL))`` steps of ``threads * UNROLL`` values, so more than 2^32 values in one bin of
one block needs N beyond 2^40 (a TiB of u8 values).

The values are the shared emitter's element code (a pure expression of whole-axis reads: pointwise ops, broadcasts,
indices), so their numerics are the serial program's. A value outside ``[0, bins)`` is cpu's ``ValueError`` under
checks -- claimed by the first thread that sees one, which goes on to the barrier without counting it (a thread that
left would leave its block waiting) -- and is not counted without checks (T10 "Checks": masked). With ``emulated``
the threads of a block are serial loops (the C target runs the same mapping on the CPU).
"""
from __future__ import annotations

import contextlib

import attrs

from ...codegen import checks as C
from ...graph import ops
from ...graph.lowering import runtime_bins_text
from ...graph.traits import POINTWISE
from ...schedule import indexed
from ...schedule.prologue import prologue
from .cuda_grid import GridEmitter, block_count, kernel_line
from .emitter import as_index
from .scalar_rules import tir_dtype

THREADS = indexed.THREADS
UNROLL = 8  # values a thread loads per grid-stride step before it counts any (its loads in flight)
MAX_BLOCKS = 512  # a grid of up to this many blocks strides over the values (4 per SM on an H200's 132 SMs)
SHARED_BINS = 8192  # u32 bins a block holds in shared memory (32 KiB)
#: the ops whose element code cannot fail a check (the only check of the program is the bins', claimed)
_ELEMENT_OPS = POINTWISE | {ops.read, ops.domain, ops.indices, ops.broadcast, ops.full}


@attrs.frozen
class HistogramPlan:
    """The launch of a :class:`~intent_trace.schedule.indexed.Histogram`: ``total`` the values' count (an int64
    expression of extent names), ``out``/``out_dtype`` the counts' parameter and its TIR dtype, ``bins`` the bin
    count (a number, or the kernel extent's name ``dK`` for a runtime one)."""

    histogram: indexed.Histogram = attrs.field(eq=False)
    total: str
    out: str
    out_dtype: str
    bins: str
    threads: int = THREADS
    unroll: int = UNROLL
    max_blocks: int = MAX_BLOCKS
    shared_bins: int = SHARED_BINS
    emulated: bool = False
    mapping = "privatised_histogram"

    @property
    def runtime(self) -> bool:
        """The bin count is known only when the kernel runs: shared or global bins are chosen then."""
        return not self.bins.isdigit()

    @property
    def on_chip(self) -> bool:
        """Whether the blocks count into private bins (a runtime bin count: whenever it fits, chosen per run)."""
        return self.runtime or int(self.bins) <= self.shared_bins

    @property
    def chip_bins(self) -> str:
        """The private bins a block holds: all of them, or (runtime) as many as fit (none are used past that)."""
        return f"T.min({self.bins}, T.int64({self.shared_bins}))" if self.runtime else self.bins

    @property
    def emitter(self):
        return HistogramEmitter

    def blocks(self) -> str:
        return block_count(self.total, self.threads * self.unroll, self.max_blocks)

    def part(self, graph):
        where = "shared memory" if self.on_chip else "global memory"
        if self.runtime:
            where = f"shared memory when bins <= {self.shared_bins}, else global memory (chosen when the kernel runs)"
        return self.histogram.part(graph, grid=f"{self.blocks()} (strided)", threads=self.threads,
                                   per_thread=self.unroll, bins_in=where)

    def launch(self, prelude: str | None) -> str:
        """The zeroing kernel (its body written here: it names only the output), then the counting kernel's head."""
        bins, n = self.bins, self.threads
        zero = f"T.Cast({self.out_dtype!r}, 0)"
        if self.emulated:
            first = [kernel_line("1", n, True, prelude, "bz"), f"        for z in T.serial({bins}):",
                     f"            {self.out}[z] = {zero}"]
        else:
            blocks = block_count(bins, n, 2 ** 31 - 1) if self.runtime else f"{-(-int(bins) // n)}"
            first = [kernel_line(blocks, n, False, prelude, "bz"), "        tz = T.get_thread_binding()",
                     f"        if bz * {n} + tz < {bins}:", f"            {self.out}[bz * {n} + tz] = {zero}"]
        return "\n".join([*first, "    " + kernel_line(self.blocks(), n, self.emulated, None)])


def histogram_plan(graph, emulated: bool = False, **params) -> HistogramPlan | None:
    got = indexed.recognise_histogram(graph)
    if not isinstance(got, indexed.Histogram):
        return None
    pro = prologue(graph)  # checked before any launch (schedule.prologue): no check of this program
    if any(n.op not in _ELEMENT_OPS and n not in pro for n in graph.body.nodes[:-2]):
        return None
    names = {id(ev.extent): f"d{k}" for k, ev in enumerate(graph.extents)}
    total = []
    for s in got.node.inputs[0].type.shape:
        total.append(f"T.int64({s})" if isinstance(s, int) else names.get(id(s)))
    if None in total:
        return None
    bins = str(got.bins) if got.runtime is None else names[id(got.runtime.extent)]
    k = next(i for i, p in enumerate(graph.params) if p.var is got.out.var)
    return HistogramPlan(got, " * ".join(total), f"p{k}", tir_dtype(got.out.type.dtype), bins, emulated=emulated,
                         **params)


class HistogramEmitter(GridEmitter):
    """The shared emitter with the histogram placed on the grid and its write done by the atomics."""

    def run_node(self, node):
        h = self.plan.histogram
        if node is h.write:
            return None  # the counts are the output's own (zeroed by the first kernel, added to by the blocks)
        if node is h.node:
            outer, self.node = self.node, node
            try:
                self._count(node)
            finally:
                self.node = outer
            return None
        return super().run_node(node)

    def _count(self, node) -> None:
        plan, bins = self.plan, self.plan.bins
        vt = node.inputs[0].type
        values = self.operand(node.inputs[0])
        valid = self.operand(node.inputs[1]) if node.attr("has_valid") else None
        shape, n, u = self.shape(vt), plan.threads, plan.unroll
        private = fits = None
        if plan.runtime:  # spec §13: a positive bin count, else cpu's ValueError (claimed: the record is one)
            with self.block(f"if {bins} <= T.int64(0):"):
                self.claim(C.HISTOGRAM_BINS.site(self._note(), bins=runtime_bins_text(node)), bins)
            fits = self.flag(f"{bins} <= T.int64({plan.shared_bins})")
        if plan.on_chip:  # the block's bins, zeroed by its threads
            alloc = "T.alloc_local" if self.emulated else "T.alloc_shared"
            size = plan.shared_bins if plan.runtime else bins
            private = self.assign(f"{alloc}(({size},), 'uint32')", "s")
            with self._bins() as z:
                self.line(f"{private}[{z}] = T.uint32(0)")
            self.sync()
        blocks = self.assign(plan.blocks(), "g")
        sites = len(self.error_sites)
        with self.phase() as tx:
            xs = self.assign(f"T.alloc_local(({u},), 'int64')", "x")
            ok = self.assign(f"T.alloc_local(({u},), 'int32')", "k")
            k, v = self.fresh("k"), self.fresh("u")
            with self.block(f"for {k} in T.serial(T.ceildiv({plan.total}, {blocks} * T.int64({n * u}))):"):
                with self.block(f"for {v} in T.unroll({u}):"):  # the step's loads, all issued first
                    j = self.assign(f"(({k} * {blocks} + T.Cast('int64', bx)) * T.int64({u}) + T.Cast('int64', {v}))"
                                    f" * T.int64({n}) + T.Cast('int64', {tx})", "j")
                    self.line(f"{ok}[{v}] = 0")
                    with self.block(f"if {j} < {plan.total}:"):
                        idx = self.unflatten(j, shape)
                        active = self.block(f"if {self.elem(valid, idx)}:") if valid is not None else \
                            contextlib.nullcontext()
                        with active:
                            self.line(f"{xs}[{v}] = {as_index(self.elem(values, idx))}")
                            self.line(f"{ok}[{v}] = 1")
                if len(self.error_sites) != sites:
                    raise self.reject("the histogram's values have run-time checks of their own")
                with self.block(f"for {v} in T.unroll({u}):"), self.block(f"if {ok}[{v}] != 0:"):
                    x = self.assign(f"{xs}[{v}]", "x")
                    inside = f"{x} >= T.int64(0) and {x} < {as_index(bins)}"
                    if self.checks:  # (a bin count that is not positive is that error, whichever thread claims)
                        outside = f"not ({inside}) and {bins} > T.int64(0)" if plan.runtime else f"not ({inside})"
                        with self.block(f"if {self.flag(outside)}:"):
                            if plan.runtime:
                                self.claim(C.HISTOGRAM_RUNTIME_BIN.site(self._note()), x, bins)
                            else:
                                self.claim(C.HISTOGRAM_BIN.site(self._note(), bins=int(bins)), x)
                    with self.block(f"if {inside}:"):
                        if fits is not None:  # a runtime bin count: the block's bins when they fit, else the output's
                            with self.block(f"if {fits}:"):
                                self.atomic_add(f"{private}[{x}]", "T.uint32(1)")
                            with self.block("else:"):
                                self.atomic_add(f"{plan.out}[{x}]", f"T.Cast({plan.out_dtype!r}, 1)")
                        elif private is not None:
                            self.atomic_add(f"{private}[{x}]", "T.uint32(1)")
                        else:
                            self.atomic_add(f"{plan.out}[{x}]", f"T.Cast({plan.out_dtype!r}, 1)")
        if private is not None:  # the block's counts into the output's
            self.sync()
            with self._bins() as z, self.block(f"if {private}[{z}] != T.uint32(0):"):
                self.atomic_add(f"{plan.out}[{z}]", f"T.Cast({plan.out_dtype!r}, {private}[{z}])")

    @contextlib.contextmanager
    def _bins(self):
        """Each private bin once, the block's threads taking every ``threads``-th."""
        bins, n = self.plan.chip_bins, self.plan.threads
        steps = f"T.ceildiv({bins}, T.int64({n}))" if self.plan.runtime else f"{-(-int(bins) // n)}"
        with self.phase() as tx:
            c = self.fresh("c")
            with self.block(f"for {c} in T.serial({steps}):"):
                z = self.assign(f"{c} * {n} + {tx}", "z")
                with self.block(f"if {z} < {bins}:"):
                    yield z

