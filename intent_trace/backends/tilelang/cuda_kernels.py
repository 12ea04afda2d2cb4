"""Parallel CUDA programs for graph shapes the general lowering runs serially.

The shared lowering gives every graph a correct program; on CUDA that program runs in one thread.
Here a graph whose whole body is one recognised pattern also gets a tiled TileLang program, used
for the calls whose extents it covers (a JIT specialisation chosen per call, so the logical kernel
is unchanged and every other call still has the general program). Recognised now:

- a **write nest** (:func:`flat_nest`): a graph whose only effect is one final write of a pure expression of
  In-view reads over whole axes (full unit-step domains or ``:``, :func:`full_axes`): pointwise, or with
  reductions and contractions inside each element. Its element loop becomes a grid of threads
  (the emitter's own element code, so numerics are the shared lowering's), each thread taking
  ``VECTOR`` elements strided by the block size so that neighbouring threads touch neighbouring
  elements (coalesced).
- ``matmul`` (:mod:`.cuda_matmul`): ``out[m, n] = cast?(contract(a[m, k], b[k, n], acc_dtype=f32))`` over
  whole axes, on tensor cores for f16/bf16 operands, on CUDA cores (fused multiply-adds, T10) for f32; on tensor
  cores also with a pointwise epilogue of the contraction before the write (bias, activation, residual, scales:
  :mod:`.cuda_epilogue`), applied to each accumulator (staged in shared memory, a rolled loop) before the one store.
- **segmented folds** (:mod:`.cuda_region`): a ``region_fold`` whose summary rows are independent (flash attention,
  causal or not, and any other such fold) as a tile program derived from its helpers: contractions on tensor cores,
  row reductions, the source in pipelined blocks, the summary in registers.

The pointwise nest and the **parallel loop** (:func:`parallel_grid`: a graph's one top-level ``parallel`` loop,
one iteration per thread) are not specialisations but plans for the general program itself: the emitter writes
the same element and iteration code, only the launch and the outermost loop differ.
"""
from __future__ import annotations

import attrs

from ...graph import ops
from ...graph.patterns import match
from ...graph.traits import CONSTANT_WORK
from ...graph.values import KernelGraph, Literal, walk_region
from ...schedule.prologue import extent_index, extent_vars, prologue
from . import cuda_matmul, cuda_matmul_simt, cuda_region
from .cuda_access import APPROXIMATE_DIV, FROM_DOMAIN, REJECT, full_axes, view_access


def specializations(graph: KernelGraph, target) -> list:
    """The tiled programs of ``graph`` on ``target`` (the CUDA target value, which passes itself): tensor-core
    matmuls per tiling, the f32 matmul on CUDA cores, flash attention."""
    specs = cuda_matmul.tensor_cores(graph, target)
    specs += cuda_matmul_simt.simt(graph, target)
    specs += cuda_region.specializations(graph, target)
    return [spec for spec in specs if spec is not None]


def emulated_specializations(graph: KernelGraph, target) -> list:
    """The tiled mappings above that have an emulation on ``target`` (the C target: tests and
    ``tools/pytest_plugins``): the tensor-core matmul's fused epilogue (cuda_matmul.emulated) and the f32 matmul on
    CUDA cores (cuda_matmul_simt.simt)."""
    specs = [*cuda_matmul.by_grid(lambda t: cuda_matmul.emulated(graph, target, t)),
             *cuda_matmul_simt.simt(graph, target)]
    specs += cuda_region.emulated(graph, target)
    return [spec for spec in specs if spec is not None]


# --- pointwise nests -------------------------------------------------------------------------------------

THREADS_PER_BLOCK, VECTOR, UNROLL = 128, 8, True
#: a rank-1 pointwise nest of 4-byte views: each thread's VECTOR steps are 16-byte groups of this many elements
#: (:mod:`.cuda_groups`; 1: element accesses). On by default: 16-byte accesses only where every view's start is
#: checked aligned and the group is whole, else the element accesses; not yet timed on a GPU (tools/launch_ab.py's
#: ``--kernels`` times both and the ``_elements`` child the zoo cases without it)
GROUP = 4


@attrs.frozen
class FlatNest:
    """One write nest mapped onto a grid: ``shape`` are the extent names of the written domains. With
    ``emulated`` the threads of a block are a serial loop: the C target runs the same mapping (tests)."""

    shape: tuple
    threads: int = THREADS_PER_BLOCK
    vector: int = VECTOR
    unroll: bool = UNROLL  # unrolled, so each thread issues its loads before it waits on any
    emulated: bool = False
    group: int = 1  # elements a step moves together (16 bytes: cuda_groups), rank 1 only

    @property
    def total(self) -> str:
        return " * ".join(self.shape) or "1"

    @property
    def width(self) -> int:
        """The elements of one block."""
        return self.threads * self.vector * self.group

    @property
    def outer(self) -> str:
        """The rows: the product of every axis but the last."""
        return " * ".join(self.shape[:-1]) or "1"

    @property
    def wide(self) -> str:
        """Whether the nest is spread row by row (rank 2 or more, the last axis at least a block's elements; the
        emitter's ``_flat_loop``): a block is then a chunk of one row."""
        return f"{self.shape[-1]} >= T.int64({self.width})"

    @property
    def chunks(self) -> str:
        """The blocks of one row, spread row by row."""
        return f"T.ceildiv({self.shape[-1]}, T.int64({self.width}))"

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        threads = "" if self.emulated else f", threads={self.threads}"
        blocks = f"T.ceildiv({self.total}, {self.width})"
        if len(self.shape) > 1:
            blocks = f"T.if_then_else({self.wide}, {self.outer} * {self.chunks}, {blocks})"
        # at least one block: CUDA refuses a zero grid, and an empty nest must still launch (and do nothing)
        return f"with T.Kernel(T.max({blocks}, 1){threads}{extra}) as bx:"


def flat_nest(graph: KernelGraph, emulated: bool = False, grouped: bool = True) -> FlatNest | None:
    """The flat mapping of a graph whose one effect is its final write of a pure function of whole-axis reads,
    or None. Each element is computed by the emitter's own element code, so a reduction or a contraction inside
    it (a row sum, an f32 matmul) runs in its thread in the serial program's order: the same bits. Such nests
    take one element per thread (no unrolled copies of their loops); a gather (an embedding lookup) is constant
    work per element, so its nest is unrolled as a pointwise one is (its reads in flight together). The prologue's checks (schedule.prologue) are
    made before the launch: scalars here, and extents they state equal are one (their class's first name,
    schedule.prologue.extent_index, as the program names them); a written domain may be of a prologue value stated
    equal to an extent (the emitter names its loop by that extent: codegen.structural.domain). A rank-1 nest whose
    views are all of 4-byte elements moves 16-byte groups (``group``: :mod:`.cuda_groups`) unless ``grouped`` is
    False (Metal: metal_grid.flat_nest)."""
    pro = prologue(graph)
    index = extent_index(graph, pro.complete)
    extents = extent_vars(graph, pro)
    views = {p.var: p for p in graph.params if p.kind == "view"}
    domains, read_views = {}, set()
    nodes = graph.body.nodes
    if not nodes or nodes[-1].op is not ops.write:
        return None
    loops = False  # a reduction or contraction in the element code
    for node in nodes[:-1]:
        if node in pro:
            continue
        if node.op.effects - {"read"}:
            return None
        access = view_access(node, extents, views, domains)
        if access is REJECT:
            return None
        if node.op is ops.read:
            read_views.add(access[0])
        elif access is None and node.op not in CONSTANT_WORK:
            loops = True  # any other pure op (its workspaces, if any, make the emitter fall back: storage.py)
        if match(APPROXIMATE_DIV, node, {}) is not None:
            return None
    write = nodes[-1]
    view = write.inputs[0]
    p = views.get(view)
    if p is None or p.type.access != "Out" or view in read_views or not p.type.shape:
        return None
    axes = full_axes(write, p.type, extents, domains)
    if axes is None or len(set(axes)) != len(axes) or len(axes) != len(p.type.shape):
        return None
    if any(index.get(s) != a for s, a in zip(p.type.shape, axes)):
        return None  # a write of the whole view, so no element is left to an earlier value
    vector, unroll = (1, False) if loops else (VECTOR, UNROLL)
    itemsizes = {views[v].type.dtype.np.itemsize for v in (*read_views, view)}
    group = GROUP if grouped and not loops and len(axes) == 1 and itemsizes == {4} and vector % GROUP == 0 else 1
    return FlatNest(tuple(f"d{a}" for a in axes), THREADS_PER_BLOCK, vector // group, unroll, emulated, group)


# --- parallel loops --------------------------------------------------------------------------------------

GRID_THREADS = 32  # one warp per block: rows spread over every SM before any SM gets a second block


@attrs.frozen
class ParallelGrid:
    """The graph's top-level ``parallel`` loop mapped onto threads: iteration ``o`` (0 <= o < length) runs in
    thread ``bx * threads + tx``, each thread running the loop body as the general program does.

    Legal because ``parallel`` is an unordered forall whose iterations never conflict except through atomics
    and reductions (language §5): atomics are device atomics (:mod:`.cuda_atomics`); ``scatter_reduce``, whose
    updates are plain read-modify-writes, keeps the serial program. The
    emitter falls back to the serial program (:class:`~.storage.GridFallback`) where an iteration would need a
    workspace of its own. With ``emulated`` the threads of a block are a serial loop: the C target runs the
    same mapping on the CPU (tests)."""

    node: object = attrs.field(eq=False)  # the parallel node
    length: str  # the iteration count, in extent names and literals (the launch reads it before the body)
    threads: int = GRID_THREADS
    emulated: bool = False

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        blocks = f"T.max(T.ceildiv({self.length}, T.int64({self.threads})), T.int64(1))"
        threads = "" if self.emulated else f", threads={self.threads}"
        return f"with T.Kernel({blocks}{threads}{extra}) as bx:"


def parallel_grid(graph: KernelGraph, emulated: bool = False) -> ParallelGrid | None:
    """The grid mapping of a graph whose effects are one top-level parallel loop over ``domain(begin, E, 1)``
    (``begin`` a literal, ``E`` a kernel extent or a literal), else None. Nothing before the loop writes,
    allocates or reads a view the loop writes, nothing after it has an effect, and its body has no
    scatter_reduce. The prologue's checks before it (schedule.prologue) are made before the launch."""
    nodes = graph.body.nodes
    loops = [k for k, n in enumerate(nodes) if n.op is ops.parallel]
    if len(loops) != 1:
        return None
    (at,) = loops
    loop = nodes[at]
    pro = prologue(graph)
    for node in nodes[:at]:
        if node not in pro and (node.regions and node.op.effects or node.op.effects - {"read"}):
            return None
    if any(n.op.effects for n in nodes[at + 1:]):
        return None
    body = [n for r in loop.regions for n in walk_region(r)]
    if any(n.op is ops.scatter_reduce for n in body):
        return None  # its read-modify-writes are plain ones (atomics are device atomics: cuda_atomics.py)
    # The serial program reads what comes before the loop before any iteration writes; a thread's prologue may
    # run after another thread's iteration, so a view the loop writes must not be read before it.
    written = {n.inputs[0] for n in body if n.op.effects & {"write"}}
    if any(n.inputs and n.inputs[0] in written for n in nodes[:at] if n.op.effects):
        return None
    producer = next((n for n in nodes[:at] if loop.inputs[0] in n.outputs), None)
    caps = match(FROM_DOMAIN, producer, {}) if producer is not None else None
    if caps is None:
        return None
    begin, end = caps["begin"], caps["end"]
    extents = extent_vars(graph, pro)
    if isinstance(end, Literal):
        stop = f"T.int64({int(end.value)})"
    elif end in extents:
        stop = f"d{extents[end]}"
    else:
        return None
    length = stop if begin.value == 0 else f"T.max({stop} - T.int64({int(begin.value)}), T.int64(0))"
    return ParallelGrid(loop, length, GRID_THREADS, emulated)
