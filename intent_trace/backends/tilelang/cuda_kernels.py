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
- ``matmul``: ``out[m, n] = cast?(contract(a[m, k], b[k, n], acc_dtype=f32))`` with f16/bf16 operands
  over whole axes (``c[:, :] = I.matmul(a[:, :], b[:, :], ...)`` too). Tensor cores accumulate in f32, the declared acc dtype (issue 7: "f16/bf16
  tensor-core contracts accumulate in the declared acc dtype"); f32 operands are never given to
  ``T.gemm`` (that would be TF32). The cast to the output rounds to nearest even, as T3 asks.
- **flash attention** (:mod:`.cuda_attention`): the batched f16 region fold of ``examples/flash_attention.py``
  (QK^T and PV on tensor cores with f32 accumulation, the kernel's own summary and combine per key block).

The pointwise nest and the **parallel loop** (:func:`parallel_grid`: a graph's one top-level ``parallel`` loop,
one iteration per thread) are not specialisations but plans for the general program itself: the emitter writes
the same element and iteration code, only the launch and the outermost loop differ.
"""
from __future__ import annotations

import math

import attrs

from ...graph.values import KernelGraph, Literal



@attrs.frozen
class MatmulTiling:
    """How the matmul specialisation tiles its output: a block computes ``tm`` x ``tn`` through ``tk``-deep
    steps pipelined over ``stages`` shared buffers. ``policy`` splits the block's tile among its warpgroups
    (TileLang's GemmWarpPolicy); ``shared_epilogue`` stages the rounded tile in shared memory so that it
    leaves in whole rows (TMA stores) instead of each thread's scattered fragment elements; ``persistent`` > 0
    launches that many blocks, each looping over output tiles (T.Persistent), instead of one block a tile."""

    tm: int = 128
    tn: int = 256
    tk: int = 64
    stages: int = 3
    threads: int = 256
    policy: str = "Square"
    shared_epilogue: bool = False
    persistent: int = 0


# tile configurations, tried in order; the first whose tiles divide a call's extents is used
CONFIGS = (MatmulTiling(policy="FullRow", shared_epilogue=True),)  # tools/matmul_sweep.py on the H200
_SHARED_BYTES = 227 * 1024  # an sm_90 block's shared memory
_TIR = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


@attrs.frozen
class Specialization:
    """A tiled program for the calls whose extents satisfy ``divides``: {extent index: tile}, and ``equals``:
    {extent index: the size the program is written for}.

    It takes the graph's own arguments only (no error record, no workspaces): a recogniser returns one only for
    graphs whose general program cannot fail a run-time check wherever the specialisation applies (full unit-step
    domains, whole views, reshapes whose sizes agree by construction)."""

    name: str
    program: str
    divides: tuple  # ((graph extent index, tile), ...)
    equals: tuple = ()  # ((graph extent index, size), ...)
    # the extent indices of each operand's axes: every operand stays under 2**31 elements (int32 indices);
    # by default a matmul's, whose operands are the consecutive pairs of ``divides`` (C, B, A)
    operands: tuple | None = None

    def applies(self, extents: dict) -> bool:
        operands = self.operands
        if operands is None:
            operands = tuple((a, b) for (a, _), (b, _) in zip(self.divides, self.divides[1:] + self.divides[:1]))
        if any(math.prod(extents[k] for k in axes) >= 2**31 for axes in operands):
            return False
        if any(extents[k] != size for k, size in self.equals):
            return False
        return all(extents[k] > 0 and extents[k] % tile == 0 for k, tile in self.divides)


def specializations(graph: KernelGraph) -> list:
    from . import cuda_attention

    specs = [_matmul(graph, config) for config in CONFIGS]
    specs += [cuda_attention.attention(graph, config) for config in cuda_attention.CONFIGS]
    return [spec for spec in specs if spec is not None]


def _unit_domain(node, extents) -> int | None:
    """The extent index of a full ``domain(0, E, 1)``, else None."""
    begin, end, step = node.inputs
    if not (isinstance(begin, Literal) and begin.value == 0 and isinstance(step, Literal) and step.value == 1):
        return None
    return extents.get(end)


_REJECT = object()


def full_axes(node, view_type, extents: dict, domains: dict) -> tuple | None:
    """The graph extent index of each axis a read or write covers whole: a full unit-step domain, or ``:`` over
    a view axis that is a kernel extent; None when any index entry is something else (a point, a partial
    domain, a static axis)."""
    axes, operands = [], iter(node.inputs[2:] if node.op.name == "write" else node.inputs[1:])
    by_dim = {ev.extent: k for ev, k in extents.items()}
    for axis, kind in enumerate(node.attr("index")):
        if kind == "all":
            k = by_dim.get(view_type.shape[axis])
        elif kind == "domain":
            k = domains.get(next(operands))
        else:
            return None
        if k is None:
            return None
        axes.append(k)
    return tuple(axes)


def _access(node, extents: dict, views, domains: dict):
    """Domains and reads, the two ops every recognised graph is built from: a full unit-step domain is
    recorded in ``domains`` ("domain"); a read of whole axes (:func:`full_axes`) gives (view, extent
    indices); any other domain or read gives ``_REJECT``; other ops give None. ``views`` maps a view's
    variable to its parameter (or to (index, parameter))."""
    if node.op.name == "domain":
        k = _unit_domain(node, extents)
        if k is None:
            return _REJECT
        domains[node.outputs[0]] = k
        return "domain"
    if node.op.name == "read":
        view = node.inputs[0]
        p = views.get(view)
        p = p[1] if isinstance(p, tuple) else p
        axes = full_axes(node, p.type, extents, domains) if p is not None else None
        return _REJECT if axes is None else (view, axes)
    return None


def _matmul(graph: KernelGraph, config=None) -> Specialization | None:
    extents = {ev: k for k, ev in enumerate(graph.extents)}
    params = {p.var: (k, p) for k, p in enumerate(graph.params)}
    domains, reads, contract, cast, write = {}, {}, None, None, None
    for node in graph.body.nodes:
        name, access = node.op.name, _access(node, extents, params, domains)
        if access is _REJECT:
            return None
        if access is not None:
            if name == "read":
                reads[node.outputs[0]] = (params[access[0]], access[1])
        elif name == "contract" and contract is None:
            contract = node
        elif name == "cast" and cast is None and contract is not None and node.inputs[0] is contract.outputs[0]:
            cast = node
        elif name == "write" and write is None:
            write = node
        else:
            return None
    if contract is None or write is None or contract.attr("reduce") != ((1, 0),) or contract.attr("batch") != ():
        return None
    if contract.attr("acc_dtype").name != "f32" or not all(len(reads.get(x, ((), ()))[1]) == 2
                                                          for x in contract.inputs):
        return None  # both operands are reads of matrices over domains
    (ka, pa), (ma, kk) = reads[contract.inputs[0]]
    (kb, pb), (kk2, nb) = reads[contract.inputs[1]]
    dtype = pa.type.dtype.name
    if dtype not in ("f16", "bf16") or pb.type.dtype.name != dtype or kk != kk2 or ka == kb:
        return None
    view, value = write.inputs[:2]
    if value is not (cast.outputs[0] if cast is not None else contract.outputs[0]) or view not in params:
        return None
    kc, pc = params[view]
    if pc.type.access != "Out" or full_axes(write, pc.type, extents, domains) != (ma, nb):
        return None
    out = pc.type.dtype.name
    if out not in _TIR or (cast is None and out != "f32"):
        return None
    # every view axis is the domain's extent: a full, compact operand
    for p, axes in ((pa, (ma, kk)), (pb, (kk, nb)), (pc, (ma, nb))):
        if tuple(extents.get(graph.extents[a]) for a in axes) != axes or len(p.type.shape) != 2:
            return None
        if any(s is not graph.extents[a].extent for s, a in zip(p.type.shape, axes)):
            return None
    t = config or CONFIGS[0]
    staged = t.stages * (t.tm * t.tk + t.tk * t.tn) * 2 + t.tm * t.tn * (4 if out == "f32" else 2)
    if t.shared_epilogue and staged > _SHARED_BYTES:  # an f32 tile does not fit beside the pipeline's buffers
        t = attrs.evolve(t, shared_epilogue=False)
    names = {ka: "A", kb: "B", kc: "C"}
    shapes = {ka: ("d{}".format(ma), f"d{kk}"), kb: (f"d{kk}", f"d{nb}"), kc: (f"d{ma}", f"d{nb}")}
    dtypes = {ka: _TIR[dtype], kb: _TIR[dtype], kc: _TIR[out]}
    params_text = ", ".join(f"{names[k]}: T.Tensor(({shapes[k][0]}, {shapes[k][1]}), {dtypes[k]!r})"
                            for k in sorted(names))
    # int32 extents: TileLang's tile copies index in int32 (``applies`` keeps every operand under 2**31 elements)
    dims = "\n".join(f"d{k} = T.dynamic('d{k}', 'int32')" for k in range(len(graph.extents)))
    pad = " " * (12 if t.persistent else 8)
    if t.persistent:
        launch = f"with T.Kernel({t.persistent}, threads={t.threads}) as block:"
        tiles = (f"\n        for by, bx in T.Persistent([T.ceildiv(d{ma}, {t.tm}), T.ceildiv(d{nb}, {t.tn})], "
                 f"{t.persistent}, block):")
    else:
        launch = f"with T.Kernel(T.ceildiv(d{nb}, {t.tn}), T.ceildiv(d{ma}, {t.tm}), threads={t.threads}) as (bx, by):"
        tiles = "\n        T.use_swizzle(10)"
    epilogue = (f"T.copy(C_f, C_s)\n{pad}T.copy(C_s, C[by * {t.tm}, bx * {t.tn}])" if t.shared_epilogue
                else f"T.copy(C_f, C[by * {t.tm}, bx * {t.tn}])")
    c_shared = f"\n        C_s = T.alloc_shared(({t.tm}, {t.tn}), {_TIR[out]!r})" if t.shared_epilogue else ""
    program = f'''# Generated by intent_trace (target tilelang-cuda): tiled matmul specialisation of a KIR graph.
import tilelang.language as T

{dims}


@T.prim_func
def kernel({params_text}):
    {launch}
        A_s = T.alloc_shared(({t.tm}, {t.tk}), {_TIR[dtype]!r})
        B_s = T.alloc_shared(({t.tk}, {t.tn}), {_TIR[dtype]!r})
        C_f = T.alloc_fragment(({t.tm}, {t.tn}), 'float32'){c_shared}{tiles}
{pad}T.clear(C_f)
{pad}for ko in T.Pipelined(T.ceildiv(d{kk}, {t.tk}), num_stages={t.stages}):
{pad}    T.copy(A[by * {t.tm}, ko * {t.tk}], A_s)
{pad}    T.copy(B[ko * {t.tk}, bx * {t.tn}], B_s)
{pad}    T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.{t.policy})
{pad}{epilogue}
'''
    return Specialization("matmul", program, ((ma, t.tm), (nb, t.tn), (kk, t.tk)))


# --- pointwise nests -------------------------------------------------------------------------------------

THREADS_PER_BLOCK, VECTOR, UNROLL = 128, 8, True
_POINTWISE_FAMILIES = ("binary", "compare", "unary", "ternary", "convert")


@attrs.frozen
class FlatNest:
    """One write nest mapped onto a grid: ``shape`` are the extent names of the written domains. With
    ``emulated`` the threads of a block are a serial loop: the C target runs the same mapping (tests)."""

    shape: tuple
    threads: int = THREADS_PER_BLOCK
    vector: int = VECTOR
    unroll: bool = UNROLL  # unrolled, so each thread issues its loads before it waits on any
    emulated: bool = False

    @property
    def total(self) -> str:
        return " * ".join(self.shape) or "1"

    def launch(self, prelude: str | None) -> str:
        extra = f", prelude={prelude}" if prelude else ""
        threads = "" if self.emulated else f", threads={self.threads}"
        # at least one block: CUDA refuses a zero grid, and an empty nest must still launch (and do nothing)
        return f"with T.Kernel(T.max(T.ceildiv({self.total}, {self.threads * self.vector}), 1){threads}{extra}) as bx:"


def flat_nest(graph: KernelGraph, emulated: bool = False) -> FlatNest | None:
    """The flat mapping of a graph whose one effect is its final write of a pure function of whole-axis reads,
    or None. Each element is computed by the emitter's own element code, so a reduction or a contraction inside
    it (a row sum, an f32 matmul) runs in its thread in the serial program's order: the same bits. Such nests
    take one element per thread (no unrolled copies of their loops)."""
    extents = {ev: k for k, ev in enumerate(graph.extents)}
    views = {p.var: p for p in graph.params if p.kind == "view"}
    domains, read_views = {}, set()
    nodes = graph.body.nodes
    if not nodes or nodes[-1].op.name != "write":
        return None
    loops = False  # a reduction or contraction in the element code
    for node in nodes[:-1]:
        name, family = node.op.name, node.op.family
        if node.op.effects - {"read"}:
            return None
        access = _access(node, extents, views, domains)
        if access is _REJECT:
            return None
        if name == "read":
            read_views.add(access[0])
        elif access is None and not (family in _POINTWISE_FAMILIES or name in ("broadcast", "constant")):
            loops = True  # any other pure op (its workspaces, if any, make the emitter fall back: storage.py)
        if node.op.name == "div" and (node.attr("approximate") or node.attr("flush_to_zero")):
            return None
    write = nodes[-1]
    view = write.inputs[0]
    p = views.get(view)
    if p is None or p.type.access != "Out" or view in read_views or not p.type.shape:
        return None
    axes = full_axes(write, p.type, extents, domains)
    if axes is None or len(set(axes)) != len(axes) or len(axes) != len(p.type.shape):
        return None
    if any(s is not graph.extents[a].extent for s, a in zip(p.type.shape, axes)):
        return None  # a write of the whole view, so no element is left to an earlier value
    vector, unroll = (1, False) if loops else (VECTOR, UNROLL)
    return FlatNest(tuple(f"d{a}" for a in axes), THREADS_PER_BLOCK, vector, unroll, emulated)


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


def _nodes(region):
    for node in region.nodes:
        yield node
        for r in node.regions:
            yield from _nodes(r)


def parallel_grid(graph: KernelGraph, emulated: bool = False) -> ParallelGrid | None:
    """The grid mapping of a graph whose effects are one top-level parallel loop over ``domain(begin, E, 1)``
    (``begin`` a literal, ``E`` a kernel extent or a literal), else None. Nothing before the loop writes,
    allocates or reads a view the loop writes, nothing after it has an effect, and its body has no
    scatter_reduce."""
    nodes = graph.body.nodes
    loops = [k for k, n in enumerate(nodes) if n.op.name == "parallel"]
    if len(loops) != 1:
        return None
    (at,) = loops
    loop = nodes[at]
    for node in nodes[:at]:
        if node.regions and node.op.effects or node.op.effects - {"read"}:
            return None
    if any(n.op.effects for n in nodes[at + 1:]):
        return None
    body = [n for r in loop.regions for n in _nodes(r)]
    if any(n.op.name == "scatter_reduce" for n in body):
        return None  # its read-modify-writes are plain ones (atomics are device atomics: cuda_atomics.py)
    # The serial program reads what comes before the loop before any iteration writes; a thread's prologue may
    # run after another thread's iteration, so a view the loop writes must not be read before it.
    written = {n.inputs[0] for n in body if n.op.effects & {"write"}}
    if any(n.inputs and n.inputs[0] in written for n in nodes[:at] if n.op.effects):
        return None
    producer = next((n for n in nodes[:at] if loop.inputs[0] in n.outputs), None)
    if producer is None or producer.op.name != "domain":
        return None
    begin, end, step = producer.inputs
    if not (isinstance(begin, Literal) and isinstance(step, Literal) and step.value == 1 and begin.value >= 0):
        return None
    extents = {ev: k for k, ev in enumerate(graph.extents)}
    if isinstance(end, Literal):
        stop = f"T.int64({int(end.value)})"
    elif end in extents:
        stop = f"d{extents[end]}"
    else:
        return None
    length = stop if begin.value == 0 else f"T.max({stop} - T.int64({int(begin.value)}), T.int64(0))"
    return ParallelGrid(loop, length, GRID_THREADS, emulated)
