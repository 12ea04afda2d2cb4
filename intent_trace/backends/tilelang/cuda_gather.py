"""Row gathers on CUDA (an embedding lookup, the schedule pass's :class:`~intent_trace.schedule.indexed.GatherRows`):
a grid over the output's rows, each block one chunk of one row.

Why not the flat nest: there every element loads its row's index, checks it and leaves the kernel when the check
fails, so the compiler issues an element's loads only after the previous element's check (0.37 of torch on the
H100). An output row is one source row (the last index is the identity, the others constant along the row), so
here a block reads its row's coordinates once, checks them once, and its threads copy the row's elements as bits
(the same dtype in and out: no decode or encode), each thread ``per_thread`` elements strided by the block's
threads (coalesced), unrolled with no exit between them: every load is issued before the first store waits.

A coordinate outside the source is the serial program's ``IndexError`` (the ``I.gather source`` message: axis,
coordinate, extent): the block claims the error record (:meth:`.GridEmitter.claim`, the first claim wins) and
copies nothing; the executable then raises and commits nothing. Several bad rows: one of them is reported, the
one whose block claims first (as in the flat nest and the other grids; the serial program reports the first). The
column needs no
check: it is below the row's length by construction. With ``emulated`` the threads of a block are a serial loop
(the C target runs the same mapping, ``tools/pytest_plugins/emulate_cuda_grids.py``).

``vector`` (CUDA's default, :data:`.cuda_indexed.VECTOR_GATHER`; Metal copies elements): a thread copies 16-byte
units where the row's bytes are whole units and both buffers start on a 16-byte boundary (tested on the device, one
uniform branch), the element copy otherwise. Measured on one H100 (``tools/indexed_ab.py``, f16 rows of 4096): 4
units a thread 0.97x torch, 8 elements a thread 0.66x, the flat nest 0.37x.
"""
from __future__ import annotations

import attrs

from ...graph.lowering import ErrorSite
from ...schedule import indexed
from .cuda_grid import GridEmitter, extent_names, kernel_line, recognised
from .emitter import as_index
from .memory import at

THREADS = 128
PER_THREAD = 8  # elements a thread copies per block, unrolled: its loads in flight together
MAX_BLOCKS = 1 << 30  # the grid strides past this many (row, chunk) blocks
VECTOR_BYTES = 16
#: the serial gather's message (memory._gather), so every target reports the same error
#: a thread's share of a row chunk in 16-byte units (the vector variant): ``first`` the chunk's first element, ``n``
#: the row's elements (a multiple of ``lanes``, the rows 16-byte aligned: ``_aligned``)
_UNITS = ("__device__ __forceinline__ int {name}(void* d, const void* s, long long first, long long tx, long long n) {{"
          " const uint4* src = (const uint4*)s; uint4* dst = (uint4*)d; long long last = n / {lanes} - 1;"
          " long long k0 = first / {lanes} + tx; uint4 r[{n}];"
          " _Pragma(\"unroll\") for (int u = 0; u < {n}; ++u) {{ long long k = k0 + (long long)u * {threads};"
          " r[u] = __ldg(src + (k < last ? k : last)); }}"
          " _Pragma(\"unroll\") for (int u = 0; u < {n}; ++u) {{ long long k = k0 + (long long)u * {threads};"
          " if (k <= last) dst[k] = r[u]; }} return 0; }}")
_MESSAGE = "I.gather source: coordinate {{0}} on axis {axis} is outside its extent {{1}}"


@attrs.frozen
class GatherPlan:
    """The launch of a :class:`~intent_trace.schedule.indexed.GatherRows`: ``rows`` the output's rows (an int64
    expression of extent names), ``length`` a row's elements (an extent name or literal), ``itemsize`` the bytes of
    one element."""

    gather: indexed.GatherRows = attrs.field(eq=False)
    rows: str
    length: str
    itemsize: int
    threads: int = THREADS
    per_thread: int = PER_THREAD
    vector: bool = False
    emulated: bool = False
    #: each load's column clamped into the row (no guard: 8 predicated loads, 70 registers on sm_90a), or guarded
    #: (the A/B's ``rows_guarded``: a branch around each load, constant address offsets, 54 registers)
    clamp: bool = True
    mapping = "gather_rows"

    @property
    def lanes(self) -> int:
        """Elements in one 16-byte unit (the vector variant's copy)."""
        return max(1, VECTOR_BYTES // self.itemsize)

    @property
    def width(self) -> int:
        """The elements of one block's chunk of a row."""
        return self.threads * self.per_thread * (self.lanes if self.vector else 1)

    @property
    def chunks(self) -> str:
        return f"T.ceildiv({self.length}, T.int64({self.width}))"

    @property
    def total(self) -> str:
        return f"{self.rows} * {self.chunks}"

    def blocks(self) -> str:
        return f"T.max(T.min({self.total}, T.int64({MAX_BLOCKS})), T.int64(1))"

    @property
    def emitter(self):
        return GatherEmitter

    def part(self, graph):
        copy = f"16-byte units where aligned ({self.lanes} elements)" if self.vector else "elements"
        return self.gather.part(graph, rows=self.rows, chunk=self.width, threads=self.threads,
                                per_thread=self.per_thread, copy=copy)

    def launch(self, prelude: str | None) -> str:
        return kernel_line(self.blocks(), self.threads, self.emulated, prelude)


def gather_plan(graph, emulated: bool = False, vector: bool = False, per_thread: int = PER_THREAD,
                clamp: bool = True) -> GatherPlan | None:
    """The row gather's grid plan, or None; ``vector``, ``per_thread`` and ``clamp`` are the A/B's variants
    (``tools/indexed_ab.py``)."""
    got = recognised(graph, indexed.recognise_gather_rows, indexed.GatherRows, 2)
    shape = extent_names(graph, got.out.type.shape) if got is not None else None
    if shape is None:
        return None
    rows = " * ".join(shape[:-1]) or "T.int64(1)"
    itemsize = max(1, got.out.type.dtype.bits // 8)
    return GatherPlan(got, rows, shape[-1], itemsize, per_thread=per_thread, vector=vector,
                      emulated=emulated, clamp=clamp)


class GatherEmitter(GridEmitter):
    """The shared emitter with the gather's rows placed on the grid, the write done by the copy."""

    def run_node(self, node):
        g = self.plan.gather
        if node is g.write:
            return None  # the copy below is the write
        if node is not g.node:
            return super().run_node(node)
        self.emit_at(node, self._copy)
        return None

    def _copy(self, node) -> None:
        plan, g = self.plan, self.plan.gather
        src, out = self.operand(g.source.inputs[0]), self.operand(g.write.inputs[0])
        out_t = node.attr("type")
        shape = self.shape(out_t)
        step = self.fresh("s")
        blocks = self.assign(plan.blocks(), "g")
        with self.block(f"for {step} in T.serial(T.ceildiv({plan.total}, {blocks})):"):
            # locals, not bindings: TVM substitutes a binding's expression into every use (cuda_grid.coordinates)
            b = self.variable("int64", f"{step} * {blocks} + T.Cast('int64', bx)", "b")
            with self.block(f"if {b} < {plan.total}:"):
                row, chunk = self.coordinates(b, (plan.rows, plan.chunks), plan.total)
                first = self.variable("int64", f"{chunk} * T.int64({plan.width})", "o")
                lead = self.unflatten(row, shape[:-1]) if len(shape) > 2 else [row][:len(shape) - 1]
                idx = [*lead, "T.int64(0)"]  # the row's first element: every index but the last is constant along it
                coords, inside = [], []
                for axis, x in enumerate(g.rows):
                    n = as_index(src.shape[axis])
                    c = self.variable("int64", as_index(at(self, self.operand(x), x.type, idx, out_t)), "j")
                    coords.append(c)
                    inside.append(f"{c} >= T.int64(0) and {c} < {n}")
                    if self.checks:
                        with self.block(f"if {self.flag(f'{c} < T.int64(0) or {c} >= {n}')}:"):
                            self.claim(ErrorSite(IndexError, _MESSAGE.format(axis=axis), self._note()), c, n)
                with self.block(f"if {self.flag(' and '.join(inside))}:"):  # a bad row copies nothing
                    if not plan.vector:
                        self._rows(src, out, lead, coords, first)
                    elif plan.emulated:  # the 16-byte copy is CUDA's: the element loop it falls back to
                        self._element_chunk(src, out, lead, coords, first)
                    else:
                        with self.block(f"if {self._aligned(src, out)}:"):
                            self._units(src, out, lead, coords, first)
                        with self.block("else:"):
                            self._element_chunk(src, out, lead, coords, first)

    def _element_chunk(self, src, out, lead: list, coords: list, first: str) -> None:
        """The vector variant's chunk copied by elements (rows that are not whole 16-byte units, or unaligned
        buffers), a block's share at a time."""
        plan = self.plan
        k = self.fresh("k")
        with self.block(f"for {k} in T.serial({plan.lanes}):"):
            part = self.variable("int64", f"{first} + T.Cast('int64', {k}) * T.int64({plan.threads * plan.per_thread})",
                                 "o")
            self._rows(src, out, lead, coords, part)

    def _rows(self, src, out, lead: list, coords: list, first: str) -> None:
        """Each thread's share of the chunk: ``per_thread`` elements strided by the block. Two unrolled loops: every
        element's load into registers (its column clamped into the row, so no load waits on a test), then the
        stores of the elements inside the row: no store or branch stands between two loads."""
        plan, n = self.plan, self.plan.per_thread
        with self.phase() as tx:
            held = self.fresh("h")
            self.line(f"{held} = T.alloc_local(({n},), {src.storage or self.tir(src.dtype)!r})")
            u = self.fresh("u")

            def column() -> str:
                return self.variable("int64", f"{first} + T.Cast('int64', {u}) * T.int64({plan.threads}) + "
                                     f"T.Cast('int64', {tx})", "c")

            with self.block(f"for {u} in T.unroll({n}):"):
                if plan.clamp:
                    inside = self.variable("int64", f"T.min({column()}, {plan.length} - T.int64(1))", "a")
                    self.line(f"{held}[{u}] = {src.name}[{', '.join([*coords, inside])}]")
                else:  # the A/B's guarded loads: one base address and constant offsets, a branch around each
                    col = column()
                    with self.block(f"if {col} < {plan.length}:"):
                        self.line(f"{held}[{u}] = {src.name}[{', '.join([*coords, col])}]")
            with self.block(f"for {u} in T.unroll({n}):"):
                col = column()
                with self.block(f"if {col} < {plan.length}:"):
                    self.line(f"{out.name}[{', '.join([*lead, col])}] = {held}[{u}]")

    def _units(self, src, out, lead: list, coords: list, first: str) -> None:
        """The vector variant's copy: each thread ``per_thread`` 16-byte units strided by the block, all loaded
        (``__ldg``, the unit clamped into the row) before any is stored. Thread-level CUDA: TileLang found no
        vectorisation plan for the clamped loads."""
        plan = self.plan
        name = f"itc_copy_units_{plan.per_thread}x{plan.threads}"
        self.helpers.setdefault(name, _UNITS.format(name=name, n=plan.per_thread, threads=plan.threads,
                                                    lanes=plan.lanes))
        dst = f"T.access_ptr({out.name}[{', '.join([*lead, 'T.int64(0)'])}], 'w')"
        from_ = f"T.access_ptr({src.name}[{', '.join([*coords, 'T.int64(0)'])}], 'r')"
        self.line(f"T.evaluate(T.call_extern('int32', {name!r}, {dst}, {from_}, {first}, "
                  f"T.Cast('int64', {self.tx}), {plan.length}))")

    def _aligned(self, src, out) -> str:
        """Whether the rows are whole 16-byte units and both buffers start on a 16-byte boundary (uniform)."""
        self.helpers.setdefault("itc_aligned16", "__device__ __forceinline__ bool itc_aligned16(const void* a, "
                                "const void* b) { return (((unsigned long long)a | (unsigned long long)b) & 15ull) "
                                "== 0ull; }")
        zero_s = ", ".join(["0"] * len(src.shape))
        zero_o = ", ".join(["0"] * len(out.shape))
        ptrs = f"T.access_ptr({src.name}[{zero_s}], 'r'), T.access_ptr({out.name}[{zero_o}], 'w')"
        return self.flag(f"{self.plan.length} % T.int64({self.plan.lanes}) == T.int64(0) and "
                         f"T.call_extern('bool', 'itc_aligned16', {ptrs})")

