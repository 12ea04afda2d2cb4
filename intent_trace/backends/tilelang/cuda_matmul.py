"""Tiled matmul programs for ``out[m, n] = cast?(contract(a[m, k], b[k, n], acc_dtype=f32))`` over whole axes
(``c[:, :] = I.matmul(a[:, :], b[:, :], ...)`` too), chosen per call by the extents.

- Tails: the tensor-core program runs at any M and at any N and K whose rows are whole 16-byte units (8 f16/bf16
  elements: the TMA descriptors' stride rule; other N, K take the general program). TileLang's tile copies are
  bounds-predicated (TMA loads zero-fill outside the tensor, its stores and the fallback copies clip), so the
  last block's tile reads zeros past M, N and K -- each adds an exact ``+0`` product -- and writes only the
  elements inside C.

- Batched: ``out[b, m, n] = cast?(contract(a[b, m, k], b[b, k, n], batch=((0, 0),)))`` is the same program with
  the batch entry as the grid's third axis (tensor cores only).
- f16/bf16 operands (:func:`tensor_core`): ``T.gemm`` on tensor cores, accumulating in f32, the declared acc
  dtype (issue 7: "f16/bf16 tensor-core contracts accumulate in the declared acc dtype"); the cast to the output
  rounds to nearest even, as T3 asks. An accumulator that ends NaN is recomputed by the serial program's helpers
  after the K loop (:mod:`.cuda_matmul_nan`: wgmma gives no operand's payload), one compare per element otherwise.
- Fused epilogue (:mod:`.cuda_epilogue`): ``out = pointwise(contract, per-row/per-column/per-element reads,
  scalars)`` -- bias, activation, residual, scales, the cast -- on tensor cores: the accumulator fragment staged in
  shared memory, then a rolled loop in which each thread applies the expression (the shared emitter's element code:
  the serial program's helpers) to 8 adjacent accumulators of a row a pass, its per-column reads made once before the
  loop, into the tile's one store (:func:`_tile_loop`); :func:`emulated` runs the same mapping on the C target for
  the tests.
- f32 operands (:func:`.cuda_matmul_simt.simt`): never ``T.gemm`` (that would be TF32, a reduced-precision inner
  product: Hopper's wgmma takes no FP32 operands, TileLang's ``tl_templates/cuda/instruction/wgmma.h`` defines
  32-bit operands only as ``kTensorFloat32``, and ``contrib/cutedsl/ptx_mma.py`` maps float32 operands to the
  ``tf32`` MMAs) but an SGEMM on CUDA cores, fused multiply-adds (T10), any M, N, K, NaN outputs recomputed by the
  serial program's helpers.
"""
from __future__ import annotations

import attrs

from ... import types as DT
from ...graph import ops
from ...graph.patterns import any_, any_of, match, pat, producers
from ...graph.values import KernelGraph
from ...schedule.prologue import extent_index, extent_vars, prologue
from . import cuda, cuda_epilogue, cuda_epilogue_helpers, cuda_matmul_nan
from .cuda_access import REJECT, Specialization, full_axes, view_access

# the TIR dtype of each operand and output dtype the programs take (tiles hold f16/bf16 as themselves)
TIR_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


@attrs.frozen
class MatmulTiling:
    """How the tensor-core program tiles its output: a block computes ``tm`` x ``tn`` through ``tk``-deep
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


#: the tiling of the calls whose grid of its tiles has at least :data:`WIDE_BLOCKS` blocks (tools/matmul_sweep.py on
#: the H200: 0.93 of torch at 4096^3, 1.13 at 8192^3)
WIDE = MatmulTiling(policy="FullRow", shared_epilogue=True)
#: the tiling of the other calls: one 128 x 256 block an SM leaves SMs idle below a grid of about an SM count (1000^3
#: is 32 blocks on 132 SMs: 0.79 of torch), where 128 x 128 tiles spread over twice as many
SMALL = MatmulTiling(128, 128, 64, 4, 256, "FullRow", True)
WIDE_BLOCKS = 128
_SHARED_BYTES = 227 * 1024  # an sm_90 block's shared memory


@attrs.frozen
class MatmulMatch:
    """A recognised matmul: the parameter index of A, B and C, the graph extent index of M, K and N, the
    operand and output dtype names."""

    a: int
    b: int
    c: int
    m: int
    k: int
    n: int
    dtype: str
    out: str
    batch: int | None = None  # the graph extent index of the batch axis of a batched matmul
    # with a fused epilogue (cuda_epilogue): the contraction's value and the written value; None for
    # ``out = cast?(contract)``, whose programs store the accumulator itself
    contract: object = attrs.field(default=None, eq=False)
    written: object = attrs.field(default=None, eq=False)

    @property
    def epilogue(self) -> bool:
        return self.contract is not None

    def _shape(self, *axes) -> tuple:
        return axes if self.batch is None else (self.batch, *axes)

    def header(self, graph: KernelGraph) -> tuple:
        """(the ``T.dynamic`` extent lines, the kernel's parameter list) of a program over this matmul."""
        names = {self.a: "A", self.b: "B", self.c: "C"}
        shapes = {self.a: self._shape(self.m, self.k), self.b: self._shape(self.k, self.n),
                  self.c: self._shape(self.m, self.n)}
        dtypes = {self.a: TIR_DTYPE[self.dtype], self.b: TIR_DTYPE[self.dtype], self.c: TIR_DTYPE[self.out]}
        params = ", ".join(f"{names[i]}: T.Tensor(({', '.join(f'd{x}' for x in shapes[i])}), {dtypes[i]!r})"
                           for i in sorted(names))
        # int32 extents: TileLang's tile copies index in int32 (``applies`` keeps every operand under 2**31)
        dims = "\n".join(f"d{k} = T.dynamic('d{k}', 'int32')" for k in range(len(graph.extents)))
        return dims, params

    def specialization(self, program: str, tm: int, tn: int, tk: int, stored: tuple = (),
                       tiles: tuple | None = None) -> Specialization:
        """For extents that are multiples of (tm, tn, tk): 1 where the program masks that axis's tail. ``stored``:
        the views the program declares in their storage dtypes (a fused epilogue's operands); ``tiles``: the
        (rows, columns) of the block's output tile, which make the program's grid (``Specialization.grid``)."""
        divides = ((self.m, tm), (self.n, tn), (self.k, tk))
        suffix = "_epilogue" if self.epilogue else ""
        grid = () if tiles is None else \
            ((self.m, tiles[0]), (self.n, tiles[1])) + (() if self.batch is None else ((self.batch, 1),))
        if self.batch is None:
            return Specialization("matmul" + suffix, program, divides, stored=stored, grid=grid)
        operands = (self._shape(self.m, self.k), self._shape(self.k, self.n), self._shape(self.m, self.n))
        return Specialization("batched_matmul" + suffix, program, (*divides, (self.batch, 1)), operands=operands,
                              stored=stored, grid=grid)

    def stored(self, graph: KernelGraph, target) -> tuple:
        """The views besides A, B and C whose storage dtype differs from their value dtype (declared as stored)."""
        return tuple(k for k, p in enumerate(graph.params) if p.kind == "view" and k not in (self.a, self.b, self.c)
                     and target.view_storage(p.type.dtype) is not None)


#: ``view[...] = cast?(contract(read a, read b, reduce=..., batch=..., acc_dtype=f32))``: the write a matmul graph
#: ends with (which reads, and over which axes, :func:`_match` checks against the graph's views).
def _contract(reduce, batch):
    return pat(ops.contract, pat(ops.read, name="a", more=True), pat(ops.read, name="b", more=True),
               attrs={"reduce": reduce, "batch": batch, "acc_dtype": DT.f32}, name="contract")


def _write_of(contract):
    return pat(ops.write, any_("view"), any_of(pat(ops.cast, contract, name="cast"), contract), more=True)


#: {operand rank: the contraction of a matmul of that rank}: 2 a plain matmul, 3 a batched one (batch axis 0 of both)
CONTRACTS = {2: _contract(((1, 0),), ()), 3: _contract(((2, 1),), ((0, 0),))}


def _match(graph: KernelGraph) -> MatmulMatch | None:
    # the prologue's checks (I.assume_equal of extents) are made on the host before any launch: part of no body,
    # and the extents they state equal are one axis (a's K and b's K, say)
    pro = prologue(graph)
    extents, index = extent_vars(graph, pro), extent_index(graph, pro.complete)
    params = {p.var: (k, p) for k, p in enumerate(graph.params)}
    domains, reads = {}, {}
    nodes = graph.body.nodes
    defs = producers(graph.body, nested=False)
    writes = [node for node in nodes if node.op is ops.write]
    contracts = [node for node in nodes if node.op is ops.contract]
    if len(writes) != 1 or len(contracts) != 1:
        return None
    for rank, pattern in CONTRACTS.items():
        caps = match(pattern, contracts[0], defs)
        if caps is not None:
            break
    else:
        return None
    write, contract = writes[0], contracts[0]
    plain = match(_write_of(any_("contract_value")), write, defs, {"contract_value": contract.outputs[0]})
    epilogue: tuple = ()
    if plain is None:  # a pointwise consumer of the contraction before the write (cuda_epilogue)
        operand_reads = (defs[caps["a"]], defs[caps["b"]])
        epilogue = cuda_epilogue.epilogue_nodes(graph, contract, write, operand_reads, pro.nodes)
        if not epilogue or not any(contract.outputs[0] in n.inputs for n in epilogue):
            return None
        cast = None
    else:
        cast = plain.get("cast")
    matched = {write, contract, *((defs[cast],) if cast is not None else ()), *epilogue}
    for node in nodes:  # besides the matched write, cast and contract: only full domains and whole-axis reads
        if node in pro:
            continue
        access = view_access(node, extents, params, domains)
        if access is REJECT or (access is None and node not in matched):
            return None
        if access is not None and node.op is ops.read:
            reads[node.outputs[0]] = (params[access[0]], access[1])
    if not all(len(reads.get(x, ((), ()))[1]) == rank for x in (caps["a"], caps["b"])):
        return None  # both operands are reads of whole matrices (batches of them) over domains
    (ka, pa), (*ba, ma, kk) = reads[caps["a"]]
    (kb, pb), (*bb, kk2, nb) = reads[caps["b"]]
    dtype = pa.type.dtype.name
    if dtype not in TIR_DTYPE or pb.type.dtype.name != dtype or kk != kk2 or ka == kb or ba != bb:
        return None
    view = write.inputs[0]
    if view not in params:
        return None
    kc, pc = params[view]
    if pc.type.access != "Out" or full_axes(write, pc.type, extents, domains) != (*ba, ma, nb):
        return None
    out = pc.type.dtype.name
    if out not in TIR_DTYPE or (cast is None and not epilogue and out != "f32"):
        return None
    if epilogue and tuple(contract.outputs[0].type.shape) != tuple(pc.type.shape):
        return None  # the epilogue maps each accumulator element to the output element at its position
    # every view axis is the domain's extent: a full, compact operand
    for p, axes in ((pa, (*ba, ma, kk)), (pb, (*ba, kk, nb)), (pc, (*ba, ma, nb))):
        if tuple(extents.get(graph.extents[a]) for a in axes) != axes or len(p.type.shape) != rank:
            return None
        if any(index.get(s) != a for s, a in zip(p.type.shape, axes)):
            return None
    return MatmulMatch(ka, kb, kc, ma, kk, nb, dtype, out, ba[0] if ba else None,
                       contract.outputs[0] if epilogue else None, write.inputs[1])


#: the recogniser, shared with the other targets' tiled matmuls (:mod:`.metal_matmul`)
match_matmul = _match


def by_grid(make) -> list:
    """The programs ``make(tiling)`` makes for :data:`WIDE` and :data:`SMALL` (None: no program), in the order the
    executable tries them: :data:`WIDE`'s for grids of at least :data:`WIDE_BLOCKS` of its tiles, :data:`SMALL`'s
    for every other call."""
    wide, small = make(WIDE), (make(SMALL) if SMALL != WIDE else None)
    if wide is None or small is None:
        return [s for s in (wide, small) if s is not None]
    return [attrs.evolve(wide, least=WIDE_BLOCKS), small]


def tensor_cores(graph: KernelGraph, target) -> list:
    """The tensor-core programs of ``graph`` (:func:`by_grid`)."""
    return by_grid(lambda t: tensor_core(graph, target, t))


def tensor_core(graph: KernelGraph, target, config: MatmulTiling | None = None) -> Specialization | None:
    """The tensor-core program of ``graph`` with tiling ``config`` (:data:`WIDE` by default), for every call."""
    match = _match(graph)
    if match is None or match.dtype not in ("f16", "bf16"):
        return None
    t = config or WIDE
    staged = t.stages * (t.tm * t.tk + t.tk * t.tn) * 2 + t.tm * t.tn * (4 if match.out == "f32" else 2)
    if t.shared_epilogue and staged > _SHARED_BYTES:  # an f32 tile does not fit beside the pipeline's buffers
        t = attrs.evolve(t, shared_epilogue=False)
    dims, params = match.header(graph)
    m, n, k, dtype, out = match.m, match.n, match.k, TIR_DTYPE[match.dtype], TIR_DTYPE[match.out]
    if match.batch is not None:  # the batch entry is the grid's third axis, each block one tile of one entry
        t = attrs.evolve(t, persistent=0)
    pad = " " * (12 if t.persistent else 8)
    z = "" if match.batch is None else "bz, "  # the batch coordinate leads every tile copy
    if match.batch is not None:
        launch = (f"with T.Kernel(T.ceildiv(d{n}, {t.tn}), T.ceildiv(d{m}, {t.tm}), d{match.batch}, "
                  f"threads={t.threads}) as (bx, by, bz):")
        tiles = ""
    elif t.persistent:
        launch = f"with T.Kernel({t.persistent}, threads={t.threads}) as block:"
        tiles = (f"\n        for by, bx in T.Persistent([T.ceildiv(d{m}, {t.tm}), T.ceildiv(d{n}, {t.tn})], "
                 f"{t.persistent}, block):")
    else:
        launch = f"with T.Kernel(T.ceildiv(d{n}, {t.tn}), T.ceildiv(d{m}, {t.tm}), threads={t.threads}) as (bx, by):"
        tiles = "\n        T.use_swizzle(10)"
    if match.epilogue:  # the epilogue's loop over the tile staged in shared memory
        fused = _fused_epilogue(graph, target, match, t, z)
        if fused is None:
            return None
        params, helpers = fused.params, fused.helpers
        c_shared = "".join(f"\n        {line}" for line in fused.setup)
        epilogue = f"\n{pad}".join(fused.lines)
    else:  # a NaN accumulator recomputed by the serial program (cuda_matmul_nan): in the fragment, or over the
        # staged element its conversion wrote
        fix = cuda_matmul_nan.recompute(graph, target, match, t, "C_f", "C_s" if t.shared_epilogue else None)
        fixed = "".join(f"{line}\n{pad}" for line in fix.lines)
        epilogue = (f"T.copy(C_f, C_s)\n{pad}{fixed}T.copy(C_s, C[{z}by * {t.tm}, bx * {t.tn}])" if t.shared_epilogue
                    else f"{fixed}T.copy(C_f, C[{z}by * {t.tm}, bx * {t.tn}])")
        c_shared = f"\n        C_s = T.alloc_shared(({t.tm}, {t.tn}), {out!r})" if t.shared_epilogue else ""
        c_shared += "".join(f"\n        {line}" for line in fix.setup)
        helpers = fix.helpers
    launch = launch.replace(") as", ", prelude=PRELUDE) as")
    dims = f"PRELUDE = {cuda.prelude(list(dict.fromkeys(helpers)))!r}\n\n{dims}"
    program = f'''# Generated by intent_trace (target tilelang-cuda): tiled matmul specialisation of a KIR graph.
import tilelang.language as T

{dims}


@T.prim_func
def kernel({params}):
    {launch}
        A_s = T.alloc_shared(({t.tm}, {t.tk}), {dtype!r})
        B_s = T.alloc_shared(({t.tk}, {t.tn}), {dtype!r})
        C_f = T.alloc_fragment(({t.tm}, {t.tn}), 'float32'){c_shared}{tiles}
{pad}T.clear(C_f)
{pad}for ko in T.Pipelined(T.ceildiv(d{k}, {t.tk}), num_stages={t.stages}):
{pad}    T.copy(A[{z}by * {t.tm}, ko * {t.tk}], A_s)
{pad}    T.copy(B[{z}ko * {t.tk}, bx * {t.tn}], B_s)
{pad}    T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.{t.policy})
{pad}{epilogue}
'''
    align = 16 // (2 if match.dtype in ("f16", "bf16") else 4)  # elements a 16-byte row unit holds (A, B rows)
    return match.specialization(program, 1, align, align, match.stored(graph, target), (t.tm, t.tn))


@attrs.frozen
class Lanes:
    """How the fused epilogue's threads cover a ``tm`` x ``tn`` tile: each thread ``vector`` adjacent columns of a
    row (two 16-byte reads of the staged f32 accumulators, one 16-byte write of f16/bf16 results), ``per_row``
    threads a row, ``rows`` rows a pass, ``passes`` passes. A thread keeps its columns: what the epilogue reads per
    column (a bias) is read once per tile (:func:`.cuda_epilogue.levels`)."""

    vector: int
    per_row: int
    rows: int
    passes: int


def epilogue_lanes(t: MatmulTiling, vector: int = 8) -> Lanes | None:
    """The epilogue's lanes for tiling ``t`` (None when its threads do not cover a tile in whole rows)."""
    vector = max(vector, t.tn // t.threads)
    if t.tn % vector or t.threads % (t.tn // vector) or t.tm % (t.threads // (t.tn // vector)):
        return None
    per_row = t.tn // vector
    rows = t.threads // per_row
    return Lanes(vector, per_row, rows, t.tm // rows)


#: the f32 columns each row of the staged accumulator tile is padded by: a warp's fragment stores (8 rows x 32
#: bytes) then fall on distinct banks instead of eight rows on the same eight banks
_PAD = 8


@attrs.frozen
class _Fused:
    """A tiled program's fused epilogue (cuda_epilogue): the kernel's parameters, the definitions of the helpers it
    calls, the lines before the K loop (tiles, locals, constants) and the lines after it (unindented)."""

    params: str
    helpers: tuple
    setup: tuple
    lines: tuple


def _tile_loop(match: MatmulMatch, t: MatmulTiling, lanes: Lanes, code, fix: tuple, acc: str, out: str,
               vector: str, unroll: str) -> list | None:
    """The epilogue over one tile (lines, nested by four spaces), run by each thread ``tx`` of the block: the
    accumulators ``acc[ei, ej]`` (f32, staged) of ``lanes.vector`` adjacent columns of a row at a time read into
    ``a_l``; where one of them is a NaN (one branch), each is recomputed by ``fix`` where it is a NaN inside C
    (cuda_matmul_nan.element_fix, in a loop of its own: the hot path stays straight); each finished by the element
    ``code`` (cuda_epilogue.element_code: the serial program's helpers) at its clamped output coordinates ``(eb,) em,
    en`` into ``o_l``, which is written to ``out[ei, ej]``. ``vector``: the loop the reads and the write take
    (``T.vectorized`` on CUDA: 16-byte accesses); ``unroll``: the recomputation's (``T.unroll`` on CUDA: ``a_l``
    stays in registers).

    The loop over a thread's rows is rolled and its body holds one copy of the element code per column. Unrolled over
    the whole tile (128 accumulators a thread, 60-70 SASS instructions each with their NaN rules, and the NaN
    recomputation with its K loop beside each) the fused program was ~30,000 instructions where the plain matmul's
    hot path is a few hundred, and ran 0.33 ms slower at 4096^3 on the H100. What depends on the column alone (a
    bias and its decode) is computed before the loop, what depends on the row alone once a row
    (:func:`.cuda_epilogue.levels`)."""
    split = cuda_epilogue.levels(code.body, {"en"}, {"ei", "em"}, {"fa"})
    if split is None:
        return None
    v, m, n = lanes.vector, f"d{match.m}", f"d{match.n}"
    per_column = ["en", *cuda_epilogue.bound_names((*split.column, *split.element))]
    taken = cuda_epilogue.names("\n".join((*code.body, code.value, *fix)))
    lines = [f"cx = tx % {lanes.per_row} * {v}", *(("eb = T.Cast('int64', bz)",) if match.batch is not None else ()),
             *split.constant]
    copies = []
    for c in range(v):
        to = {name: f"{name}_c{c}" for name in per_column}
        if taken & set(to.values()):
            return None  # a name the element code already uses
        lines += [f"en_c{c} = T.min(T.Cast('int64', bx * {t.tn} + cx + {c}), T.Cast('int64', {n}) - T.int64(1))",
                  *(cuda_epilogue.renamed(x, to) for x in split.column)]
        copies += [f"fa[0] = a_l[{c}]", *(cuda_epilogue.renamed(x, to) for x in split.element),
                   f"o_l[{c}] = {cuda_epilogue.renamed(code.value, to)}"]
    lines += [f"for ir in T.serial({lanes.passes}):",
              f"    ei = ir * {lanes.rows} + tx // {lanes.per_row}",
              f"    em = T.min(T.Cast('int64', by * {t.tm} + ei), T.Cast('int64', {m}) - T.int64(1))",
              *(f"    {x}" for x in split.row),
              f"    for c in {vector}({v}):", f"        a_l[c] = {acc}[ei, cx + c]",
              f"    if {cuda_matmul_nan.any_nan(f'a_l[{c}]' for c in range(v))}:",
              f"        for c in {unroll}({v}):", "            ej = cx + c", "            fa[0] = a_l[c]",
              *(f"            {x}" for x in fix), "            a_l[c] = fa[0]",
              *(f"    {x}" for x in copies),
              f"    for c in {vector}({v}):", f"        {out}[ei, cx + c] = o_l[c]"]
    return lines


def _fused_epilogue(graph: KernelGraph, target, match: MatmulMatch, t: MatmulTiling, z: str) -> _Fused | None:
    """The tensor-core program's epilogue: the accumulator fragment staged in shared memory as f32 (``C_a``, rows
    padded), then each thread finishes its elements of the tile in a rolled loop (:func:`_tile_loop`) into the output
    tile (``C_s`` for f16/bf16; in place in ``C_a`` for f32), which leaves in one copy (TMA for ``C_s``: whole rows,
    clipped at the tensor's end)."""
    lanes = epilogue_lanes(t)
    narrow = match.out != "f32"
    pad = _PAD if narrow else 0  # an f32 result is written in place and leaves by TMA: a dense tile
    if lanes is None or t.tm * (t.tn + pad) * 4 + (t.tm * t.tn * 2 if narrow else 0) > _SHARED_BYTES:
        return None
    names = {match.a: "A", match.b: "B", match.c: "C"}
    params, env = cuda_epilogue.declare_params(graph, target, names)
    out = TIR_DTYPE[match.out]
    index = ["eb", "em", "en"] if match.batch is not None else ["em", "en"]
    out_view = env[graph.params[match.c].var]
    # the epilogue's own max/min bodies and one rounding of a written cast (cuda_epilogue_helpers)
    rounded = cuda_epilogue_helpers.rounded_store(graph, match.written, out_view.dtype)
    code = cuda_epilogue.element_code(graph, cuda_epilogue_helpers.epilogue_target(target), env, match.contract,
                                      "fa[0]", index, match.written, out_view, out if narrow else None, rounded)
    if code is None:
        return None
    fix = cuda_matmul_nan.element_fix(graph, target, match, t)
    tile = "C_s" if narrow else "C_a"
    loop = _tile_loop(match, t, lanes, code, fix.element, "C_a", tile, "T.vectorized", "T.unroll")
    if loop is None:
        return None
    setup = [f"C_a = T.alloc_shared(({t.tm}, {t.tn + pad}), 'float32')",
             *((f"C_s = T.alloc_shared(({t.tm}, {t.tn}), {out!r})",) if narrow else ()),
             f"a_l = T.alloc_local(({lanes.vector},), 'float32')", f"o_l = T.alloc_local(({lanes.vector},), {out!r})",
             "tx = T.get_thread_binding()", *fix.setup, *code.setup]
    lines = [f"for si, sj in T.Parallel({t.tm}, {t.tn}):", "    C_a[si, sj] = C_f[si, sj]", *loop,
             f"T.copy({tile}, C[{z}by * {t.tm}, bx * {t.tn}])"]
    return _Fused(params, (*code.helpers, *fix.helpers), tuple(setup), tuple(lines))


def emulated(graph: KernelGraph, target, config: MatmulTiling | None = None) -> Specialization | None:
    """The tensor-core epilogue mapping run on ``target`` (the C target: tests and ``tools/pytest_plugins``): the
    same grid of output tiles (one after another; the block index split into ``bx, by, bz`` as the CUDA grid's),
    each tile's threads one after another over the same loop (:func:`_tile_loop`: the same lanes, hoisting and
    element code) into a tile that is then stored inside C. Each accumulator element is the serial program's element
    with a NaN made NVIDIA's canonical one (:func:`.cuda_matmul_nan.hardware_product`: ``T.gemm`` has no C
    lowering), so the numbers the tests check are the epilogue's, the tiling's and the NaN fix's. Only graphs with an
    epilogue get one (a plain matmul keeps the C target's own program)."""
    match = _match(graph)
    t = config or WIDE
    lanes = epilogue_lanes(t)
    if match is None or not match.epilogue or match.dtype not in ("f16", "bf16") or lanes is None:
        return None
    params, env = cuda_epilogue.declare_params(graph, target, {})
    out_view = env[graph.params[match.c].var]
    index = ["eb", "em", "en"] if match.batch is not None else ["em", "en"]
    rounded = cuda_epilogue_helpers.rounded_store(graph, match.written, out_view.dtype)
    code = cuda_epilogue.element_code(graph, cuda_epilogue_helpers.epilogue_target(target), env, match.contract,
                                      "fa[0]", index, match.written, out_view, None, rounded)
    if code is None:
        return None
    m, n, nbx, nby = f"d{match.m}", f"d{match.n}", f"T.ceildiv(d{match.n}, T.int64({t.tn}))", \
        f"T.ceildiv(d{match.m}, T.int64({t.tm}))"
    blocks = f"{nbx} * {nby}" + (f" * d{match.batch}" if match.batch is not None else "")
    dims = "\n".join(f"d{k} = T.dynamic('d{k}', 'int64')" for k in range(len(graph.extents)))
    operands = (f"p{match.a}", f"p{match.b}")
    fix = cuda_matmul_nan.element_fix(graph, target, match, t, True, operands)
    product = cuda_matmul_nan.hardware_product(graph, target, match, t, operands)
    loop = _tile_loop(match, t, lanes, code, fix.element, "C_e", "C_o", "T.serial", "T.serial")
    if loop is None:
        return None
    stored = target.view_storage(getattr(DT, match.out)) or "float32"
    z = "bz, " if match.batch is not None else ""
    lines = [f"bx = T.Cast('int64', blk) % {nbx}", f"by = T.Cast('int64', blk) // {nbx} % {nby}",
             f"bz = T.Cast('int64', blk) // ({nbx} * {nby})", *fix.setup,
             f"C_e = T.alloc_local(({t.tm}, {t.tn}), 'float32')",
             f"C_o = T.alloc_local(({t.tm}, {t.tn}), {stored!r})", f"a_l = T.alloc_local(({lanes.vector},), 'float32')",
             f"o_l = T.alloc_local(({lanes.vector},), {stored!r})",
             *code.setup, *product.lines,
             f"for tx in T.serial({t.threads}):", *(f"    {line}" for line in loop),
             f"for oi, oj in T.grid({t.tm}, {t.tn}):",
             f"    if by * T.int64({t.tm}) + T.Cast('int64', oi) < {m} and "
             f"bx * T.int64({t.tn}) + T.Cast('int64', oj) < {n}:",
             f"        p{match.c}[{z}by * T.int64({t.tm}) + T.Cast('int64', oi), "
             f"bx * T.int64({t.tn}) + T.Cast('int64', oj)] = C_o[oi, oj]"]
    text = "\n".join(f"        {line}" for line in lines)
    program = f'''# Generated by intent_trace (target {target.name}): the tilelang-cuda tiled matmul's epilogue mapping, emulated.
import tilelang.language as T

PRELUDE = {target.prelude(list(dict.fromkeys((*code.helpers, *product.helpers, *fix.helpers))))!r}

{dims}


@T.prim_func
def kernel({params}):
    with T.Kernel(T.max({blocks}, T.int64(1)), prelude=PRELUDE) as blk:
{text}
'''
    views = tuple(k for k, p in enumerate(graph.params) if p.kind == "view" and target.view_storage(p.type.dtype))
    align = 16 // 2
    return match.specialization(program, 1, align, align, views, (t.tm, t.tn))
