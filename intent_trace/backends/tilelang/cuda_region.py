"""The segmented fold (:class:`~intent_trace.schedule.region.SegmentedFold`) as a tile-level TileLang program.

Per block of the grid (``ceildiv(rows, block_M)`` x the batch): the fold's operand tiles loaded once (``T.copy``
into shared memory), the running summary in register fragments starting from the identity, then the source in
blocks of ``block_N`` (``T.Pipelined``): the block's source tiles loaded, ``summarize`` applied to them, ``combine``
with the running summary; at the end the fold's consumers and one store of each output tile. Nothing here knows
attention: the program is derived from the helper regions, node by node --

- a contraction is ``T.gemm`` (tensor cores, f32 accumulation, ``transpose_A``/``transpose_B`` from the contracted
  axes): an operand that is a loaded tile is used as it is, a computed one is materialised (the left operand in a
  register fragment, the right one in shared memory) in its dtype;
- a reduction along a row is ``T.reduce_sum``/``T.reduce_max``/``T.reduce_min`` over a fragment holding its source;
- every other op is the shared emitter's element code (:class:`.emitter.TileLangEmitter` with the graph's rules),
  evaluated inside ``T.Parallel`` loops where a value is materialised (a reduction's source, a contraction operand,
  the combined summary, an output tile), each loop writing a fragment in place when the value it overwrites is dead
  (so attention's scores, then ``p``, live in one fragment);
- ``combine`` stores the new running summary in two loops: the per-row leaves (and the per-row values the wider
  leaves broadcast, kept in fragments) first, then the wider leaves, so no loop reads a leaf another overwrote.

**Overlap.** Where the helpers have attention's structure (a first product of the block's inputs, a last one whose
leaf ``combine`` rescales linearly), the loop is rotated so a block's second product runs on the tensor cores while
the next block's element work does, in FlashAttention's combine form (:mod:`.cuda_region_overlap`).

**Tails.** The source's last block may be short: every reduction over the source axis and every contraction
operand over it is masked there (the reduction's neutral element; 0 for a product), in a branch only that block
takes (one uniform test per block, no per-element cost on full blocks); loads past the tensor read zeros. Where
``summarize`` compares the row and source coordinates (causal attention's mask), a whole block that lies inside the
mask takes the same kind of branch: the comparison is known true there (:mod:`.cuda_region_inside`). Rows past
the last are computed and never stored. ``S = 0`` is left to the general program (a TMA descriptor of an empty
axis); so are ``rows = 0`` and ``batch = 0``.

**Numerics** (T10). Contractions use FMA and any order; sums are tree reductions (T5's bound); ``exp`` is CUDA's
precise ``expf`` (``exp2f`` for ``exp2``, approximate or not). The element code is the serial program's helpers
except that, on CUDA, f32 ``+ - * /`` and the vendor functions skip the x86-NaN-payload decision
(:func:`fast_helpers`: NaN-ness and every non-NaN bit are IEEE's, a NaN's payload the hardware's, as the tensor
cores already give it), and a cast to f16/bf16 is the hardware's round-to-nearest-even conversion. A max/min
reduction is ``T.reduce_max`` (a NaN operand ignored) only where :mod:`~intent_trace.schedule.region_laws` proves it
harmless, else exact on ordered integer keys (:mod:`.cuda_region_tiles`). A row whose outputs hold a NaN is recomputed
by the serial program after the tiles are staged (:mod:`.cuda_region_nan`): NaN outputs carry the oracle's payloads.
"""
from __future__ import annotations

import attrs

from ... import types as T
from ...errors import LoweringError
from ...graph import ops
from ...graph.lowering import assemble, leaf_values
from ...graph.values import Literal, Var
from ...schedule import region as schedule_region
from ...schedule.region import ROW, SLICE
from . import cuda_region_nan, cuda_region_overlap, cuda_region_skip
from .cuda_region_combine import combine
from .cuda_region_inside import Inside
from .cuda_access import Specialization, tma_rows
from .cuda_epilogue import declare_params
from .cuda_region_tiles import Emulated, Spelling, Tiling, clears_to, fast_helpers, float_literal
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter
from .rules import REJECTED, RULES

# Tiles per head dimension, tried in order. 128 x 128 tiles of 256 threads, one stage of K/V loads and the FullRow warp
# policy are flash attention's measured best on an H200 (tools/attention_sweep.py on the template this program
# replaced: block_N 128 beats 64, one stage beats 2 and 3, block_M 64 is slower); smaller heads keep the tiles.
CONFIGS = (Tiling(128), Tiling(64), Tiling(32), Tiling(16))
#: f32 products on CUDA cores keep both operands in shared memory (f32 tiles: twice the bytes): half the tiles
SIMT_CONFIGS = tuple(attrs.evolve(t, block_M=64, block_N=64) for t in CONFIGS)
SHARED_BYTES = Spelling.shared_limit  # an sm_90 block's shared memory
_TILE_TIR = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
_PAD = {"max": "-T.infinity('float32')", "min": "T.infinity('float32')", "sum": "T.float32(-0.0)"}
def _tilings(plan) -> tuple:
    configs = SIMT_CONFIGS if any(n.inputs[0].type.dtype is T.f32 for n in plan.contractions) else CONFIGS
    return configs if plan.free else configs[:1]


def specializations(graph, target) -> list:
    """The segmented-fold programs of ``graph`` on CUDA, one per head size of :data:`CONFIGS`."""
    return _specializations(graph, target, False)


def emulated(graph, target) -> list:
    """The same mapping on ``target`` (the C target: tests, ``tools/pytest_plugins``)."""
    return _specializations(graph, target, True)


def _specializations(graph, target, emulate: bool) -> list:
    plan = schedule_region.recognise(graph)
    if not isinstance(plan, schedule_region.SegmentedFold):
        return []
    out = []
    for tiling in _tilings(plan):
        try:
            out.append(specialization(graph, target, plan, tiling, Emulated if emulate else Spelling))
        except TooLarge:
            continue  # this head size's tiles do not fit a block's shared memory: the others may
        except LoweringError:
            return []  # an op the element code cannot place here (a dtype it does not hold): the general program
    return out


class TooLarge(LoweringError):
    """The tiles of one tiling take more shared memory than a block has (another tiling may fit)."""


def specialization(graph, target, plan, tiling: Tiling, spelling) -> Specialization:
    """The program of the segmented fold ``plan`` with ``tiling``, written in ``spelling`` (a class of
    :mod:`.cuda_region_tiles`' or another target's: :mod:`.metal_region`); :class:`TooLarge` when its shared tiles
    exceed ``spelling.shared_limit``, another LoweringError when its element code cannot be placed."""
    skip = cuda_region_skip.proof(graph, plan, spelling)
    program = _Program(graph, target, plan, tiling, spelling, skip)
    text = program.text()
    if program.sp.shared_bytes > spelling.shared_limit:
        raise TooLarge(f"the tiles of head size {tiling.head} take {program.sp.shared_bytes} bytes of shared memory")
    divides = ((plan.rows, 1), (plan.source, 1)) + (((plan.batch, 1),) if plan.batch is not None else ())
    views = [tuple(k for k, ev in enumerate(graph.extents) for e in p.type.shape if ev.extent is e)
             for p in graph.params if p.kind == "view"]
    stored = () if spelling.value_views else \
        tuple(k for k, p in enumerate(graph.params) if p.kind == "view" and target.view_storage(p.type.dtype))
    f32 = any(n.inputs[0].type.dtype is T.f32 for n in plan.contractions)
    part = plan.part(graph, block_M=tiling.block_M, block_N=tiling.block_N, head=tiling.head, threads=tiling.threads,
                     stages=tiling.stages, pipelined=spelling.pipelined(f32) + program.overlapped,
                     **({"skip": cuda_region_skip.describe(graph, plan, skip)} if skip else {}))
    return Specialization(f"segmented_fold_d{tiling.head}", text, divides, tuple((f, tiling.head) for f in plan.free),
                          operands=tuple(views), stored=stored, part=part,
                          aligned=tma_rows(graph) if spelling.tma else (), workspaces=program.workspaces)



@attrs.frozen
class _Tile:
    buf: str
    scope: str  # "shared" | "fragment"
    dtype: str  # the buffer's value TIR dtype ('float16' even where the emulation stores float32)
    shape: tuple
    loaded: bool = False  # a view's tile: zeros past the tensor (no mask needed for a product over the source)


class _Program:
    """Writes one program: the shared emitter ``em`` writes every line (its element code and these primitives)."""

    def __init__(self, graph, target, plan, tiling: Tiling, spelling, skip=None):
        self.graph, self.plan, self.t, self.target = graph, plan, tiling, target
        self.skip = skip  # schedule.region_skip.MaskedSkip: the source blocks a coordinate mask empties are skipped
        # cuda_region_overlap: while its loop is written, where its first product is issued and its turn waited for
        self.overlap, self.issued, self.turn = None, None, None
        self.overlapped = ""  # the schedule's note when it was
        self.inside = Inside(graph, plan, tiling)  # blocks inside a coordinate mask: no per-element comparison
        self.workspaces, self.passes = (), []  # the skip's workspaces and the lines of its kernels before the fold
        fast = spelling.fast_bodies
        spec = attrs.evolve(target, helper_source=fast_helpers(target.helper_source)) if fast else target
        em = TileLangEmitter(graph, spec, RULES, REJECTED, checks=False)
        em.materialized = frozenset()
        em.snapshots = type(em.snapshots)()
        em.depth = 2
        self.em = em
        self.sp = spelling(em, tiling)
        names = {k: f"p{k}" for k, p in enumerate(graph.params) if p.kind == "view"} if spelling.value_views else {}
        for p in graph.params:
            if p.kind == "view" and p.type.dtype.name not in _TILE_TIR:
                raise LoweringError(f"the segmented fold reads or writes {p.name} of {p.type.dtype} (tiles hold "
                                    f"f16, bf16 and f32)")
        self.params, env = declare_params(graph, target, names)
        self.views = {var: v for var, v in env.items() if not isinstance(v, Scalar)}
        self.scalars = {var: v for var, v in env.items() if isinstance(v, Scalar)}
        em.env.update(self.scalars)
        self.tiles: dict = {}  # id(Lazy) -> (the Lazy, kept alive so the id stays its own, its _Tile)
        self.buffers: dict = {}  # buffer name -> _Tile
        self.deps: dict = {}  # Var -> the fragments its value reads
        self.pinned: set = set()  # the running summary: never overwritten in place
        self.reductions = {id(r.node): r for r in plan.reductions}
        self.producers = {v: n for n in graph.walk() for v in n.outputs}
        self.size = {ROW: tiling.block_M, SLICE: tiling.block_N}
        self.dims = {k: f"d{k}" for k in range(len(graph.extents))}

    # -- values -------------------------------------------------------------------------------------------
    def role_size(self, role) -> int:
        return self.size.get(role, self.t.head) if role != 1 else 1

    def tile_value(self, tile: _Tile) -> Lazy:
        lazy = Lazy(tuple(map(str, tile.shape)), lambda idx, t=tile: self.sp.element(t.buf, t.dtype, idx))
        self.tiles[id(lazy)] = (lazy, tile)
        self.buffers[tile.buf] = tile
        return lazy

    def tile_of(self, value) -> _Tile | None:
        """The tile ``value`` reads element for element, when it is one's."""
        entry = self.tiles.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None

    def bind(self, var, tile: _Tile) -> None:
        self.em.env[var] = self.tile_value(tile)
        self.inside.masked.discard(var)  # it reads the tile now, not the comparison
        self.deps[var] = frozenset({tile.buf}) if self.reuses(tile) else frozenset()

    def reuses(self, tile: _Tile) -> bool:
        """Whether a value may be written over ``tile`` once its readers are dead: a fragment, or a computed shared
        tile where the spelling reuses those (a loaded view's tile never)."""
        return tile.scope == "fragment" or (self.sp.reuse_shared and not tile.loaded)

    def fragment(self, shape: tuple, dtype: str = "float32", prefix: str = "f", scope: str = "fragment") -> _Tile:
        """A computed tile; ``scope`` where the program asks for it, the spelling says where it lives."""
        scope = self.sp.place(tuple(shape), scope)
        return _Tile(self.sp.alloc(prefix, shape, dtype, scope), scope, dtype, tuple(shape))

    def run(self, node) -> None:
        """One node by the shared emitter (element code), its value's fragments recorded. A reshape only adds or
        drops unit axes (the recogniser checked): its element reads the same indices, unit axes at 0 (the shared
        rule's flat index would index fragments by int64 expressions, which TileLang's layout inference refuses)."""
        if node.op is ops.reshape:
            self.em.env[node.outputs[0]] = _unit_reshape(self.em, node)
        else:
            self.em.run_node(node)
        self.inside.track(self.em, node)
        deps = frozenset().union(*(self.deps.get(x, frozenset()) for x in node.inputs if isinstance(x, Var)))
        for v in node.outputs:
            self.deps[v] = deps

    def index(self, role, block: str) -> Lazy:
        """The absolute coordinates of a tile axis (``bx`` blocks of rows, ``kb`` blocks of the source)."""
        size = self.role_size(role)
        first = f"T.Cast('int64', {block}) * T.int64({size})"
        return Lazy((str(size),), lambda idx: f"({first} + T.Cast('int64', {idx[0]}))")

    # -- tiles of views -----------------------------------------------------------------------------------
    def view_tile(self, source, corner: dict, point: str = "bz") -> _Tile:
        """A shared tile of a view read (``source``: schedule.region.Source), and the lines that load it (``point``:
        the batch coordinate's name)."""
        k = source.param
        p = self.graph.params[k]
        view = self.views[p.var]
        shape = tuple(self.role_size(r) for r in source.layout)
        dtype = _TILE_TIR[p.type.dtype.name]
        tile = _Tile(self.sp.alloc("s", shape, dtype, "shared"), "shared", dtype, shape, loaded=True)
        axes = [("point", point)] * (len(p.type.shape) - len(source.layout))
        for role, e in zip(source.layout, p.type.shape[len(axes):]):
            extent = self.dims[next(i for i, ev in enumerate(self.graph.extents) if ev.extent is e)]
            axes.append(("tile", corner.get(role, "0"), self.role_size(role), extent))
        self.sp.load(tile.buf, view, axes)
        return tile

    # -- the program --------------------------------------------------------------------------------------
    def text(self) -> str:
        em, plan, t = self.em, self.plan, self.t
        for k, ev in enumerate(self.graph.extents):
            em.env[ev] = Scalar(self.dims[k])
            em.dim_names[ev.extent] = self.dims[k]
        bound = {}
        for node in plan.before:
            if node.op is ops.indices:
                role = plan.roles.get(node.inputs[0].type.extent)
                bound[node.outputs[0]] = role
                continue
            em.run_node(node)
        for d, role in plan.roles.items():
            em.dim_names[d] = str(self.role_size(role))
        for var, role in bound.items():
            if role == ROW:
                em.env[var] = self.index(ROW, "bx")
        rows = {ROW: f"bx * {t.block_M}"}
        # the fold's operands, loaded once
        fold = plan.fold
        summarize, combine = fold.regions
        operand_values = []
        for x in plan.operands:
            if isinstance(x, Literal):
                operand_values.append(em.literal(x))
            elif isinstance(x, schedule_region.Source) and x.param is None:
                operand_values.append(self.index(ROW, "bx"))
            elif isinstance(x, schedule_region.Source):
                tile = self.view_tile(x, rows)
                self.bind(x.node.outputs[0], tile)
                operand_values.append(em.env[x.node.outputs[0]])
            else:
                operand_values.append(em.env[x])
        # the running summary, from the identity
        leaf_types = T.leaf_types(fold.outputs[0].type)
        running = []
        identity = leaf_values(self.identity_fills(fold), Aggregate)
        for lt, fill in zip(leaf_types, identity):
            if lt.dtype.name != "f32":
                raise LoweringError(f"a summary leaf is {lt.dtype} (the running summary is held in f32 fragments)")
            tile = self.fragment(tuple(self.role_size(r) for r in self.layout(lt)), prefix="run")
            self.pinned.add(tile.buf)
            self.fill(tile, fill)
            running.append(tile)
        # the source, block by block
        start, count = None, f"T.ceildiv({self.dims[plan.source]}, {t.block_N})"
        if self.skip is not None:  # the blocks [start, count) the mask may keep, widened to every flagged one
            start, count = cuda_region_skip.source_range(self, self.skip)
        overlap = cuda_region_overlap.find(self, summarize, combine) if self.sp.overlap else None
        if overlap is not None:  # a block's second product overlapped with the next block's element work
            cuda_region_overlap.loop(self, overlap, summarize, combine, running, operand_values, start, count)
            self.overlapped = cuda_region_overlap.note(self)
        else:
            with em.block(self.sp.source_loop("kb", count, start)):
                values = [self.index(SLICE, "kb") if s.param is None else
                          self.tile_value(self.view_tile(s, {SLICE: f"kb * {t.block_N}"})) for s in plan.sources]
                block = self.summarize(summarize, [*values, *operand_values])
                self.combine(combine, running, block)
        # the consumers, and one store per output
        em.env[fold.outputs[0]] = assemble(fold.outputs[0].type, [self.tile_value(r) for r in running], Aggregate)
        for node in plan.after:
            if node.op is not ops.dim:
                self.run(node)
        staged = [self.stage(write, rows) for write in plan.writes]
        cuda_region_nan.fix_rows(self, [(write, tile, view) for write, tile, view, _ in staged])
        for _, tile, view, axes in staged:  # a NaN row recomputed: its staged elements are the serial program's
            self.sp.store(tile.buf, view, axes)
        if self.skip is not None:
            self.workspaces = cuda_region_skip.workspaces(self)
            self.passes = cuda_region_skip.passes(self, self.skip)
        return self.assemble_text()

    def identity_fills(self, fold, em=None):
        """The fill expression of each identity leaf (an aggregate of Scalars), as ``em`` (the program's) has them."""
        em = em or self.em
        node = self.producers.get(fold.inputs[1])
        items = node.inputs if node is not None and node.op is ops.tuple else (fold.inputs[1],)
        fills = []
        for x in items:
            fill = self.producers[x].inputs[0]
            fills.append(em.literal(fill) if isinstance(fill, Literal) else em.env[fill])
        return Aggregate(tuple(fills))

    def layout(self, t) -> tuple:
        return tuple(self.plan.roles.get(d, 1) if not isinstance(d, int) else 1 for d in t.shape)

    def fill(self, tile: _Tile, value: Scalar) -> None:
        names = [self.em.fresh("i") for _ in tile.shape]
        with self.em.block(self.sp.parallel(names, tile.shape)):
            self.em.line(f"{tile.buf}[{', '.join(names)}] = {self.sp.stored(tile.dtype, value.expr)}")

    # -- summarize ------------------------------------------------------------------------------------------
    def summarize(self, region, values: list):
        em = self.em
        last = self.last_uses(region)
        for p, v in zip(region.params, values):
            em.env[p] = v
            self.deps[p] = frozenset()
        for pos, node in enumerate(region.nodes):
            if node.op is ops.dim:
                continue
            if id(node) in self.reductions:
                self.reduce(node, pos, last)
            elif self.overlap is not None and node is self.overlap.last:  # issued by the overlapped loop
                self.em.env[node.outputs[0]] = cuda_region_overlap.Deferred(self.em.shape(node.outputs[0].type))
            elif node.op is ops.contract:
                self.contract(node, pos, last)
            else:
                self.run(node)
        return em.env[region.results[0]]

    @staticmethod
    def last_uses(region) -> dict:
        last = {}
        for pos, node in enumerate(region.nodes):
            for x in node.inputs:
                if isinstance(x, Var):
                    last[x] = pos
        for x in region.results:
            last[x] = len(region.nodes)
        return last

    def reusable(self, var, shape: tuple, dtype: str, pos: int, last: dict, scope: str = "fragment") -> _Tile | None:
        """A tile of ``scope`` ``var``'s value reads, of this shape and dtype, that no other live value reads."""
        for buf in sorted(self.deps.get(var, ())):
            if buf in self.pinned:
                continue
            tile = self.buffers.get(buf)
            if tile is None or tile.shape != shape or tile.dtype != dtype or tile.scope != scope:
                continue
            if all(u is var or buf not in d or last.get(u, -1) < pos for u, d in self.deps.items()):
                return tile
        return None

    def materialize(self, var, dtype: str, pos: int, last: dict, scope: str = "fragment", pad: str | None = None,
                    slice_axis: int | None = None) -> _Tile:
        """``var``'s value in a tile of ``dtype`` (the one it is, when it is one), padded with ``pad`` past the
        source's end along ``slice_axis``; ``var`` then reads the tile."""
        value = self.em.env[var]
        tile = self.tile_of(value)
        if tile is not None and tile.dtype == dtype and (pad is None or tile.loaded) and \
                (scope == "fragment" or tile.scope == scope):
            return tile
        shape = tuple(int(s) for s in value.shape)
        cast = self.producers.get(var)
        if self.sp.hardware_casts and cast is not None and cast.op is ops.cast and _TILE_TIR.get(
                cast.attr("dtype").name) == dtype and cast.inputs[0].type.dtype is T.f32:
            value = self.em.env[cast.inputs[0]]  # the tile's own conversion rounds (RNE), as the cast helper does
        scope = self.sp.place(shape, scope)
        reuse = scope == "fragment" or self.sp.reuse_shared
        target = self.reusable(var, shape, dtype, pos, last, scope) if reuse else None
        if target is None:
            target = _Tile(self.sp.alloc("m", shape, dtype, scope), scope, dtype, shape)
        self.write_cases(target, value, var, None if pad is None or slice_axis is None else (slice_axis, pad))
        self.bind(var, target)
        return target

    def write_cases(self, tile: _Tile, value, var, mask=None) -> None:
        """``tile = value`` (``var``'s), in a branch per block: a whole block of the source inside every coordinate
        mask (:mod:`.cuda_region_inside`) is written unmasked, with the comparisons known; the others as they are,
        ``mask`` (the source axis and its padding) applied past the source's end."""
        fast = [f"(kb + 1) * {self.t.block_N} <= {self.dims[self.plan.source]}"] if mask is not None else []
        known = self.inside.known(var)
        if not fast and known is None:
            return self.write_tile(tile, value)
        with self.em.block(f"if {' and '.join([*fast, *([known] if known else [])])}:"):
            with self.inside.assuming(known is not None):
                self.write_tile(tile, value)
        with self.em.block("else:"):
            self.write_tile(tile, value, mask)

    def write_tile(self, tile: _Tile, value, mask=None) -> None:
        names = [self.em.fresh("i") for _ in tile.shape]
        with self.em.block(self.sp.parallel(names, tile.shape)):
            expr = self.sp.stored(tile.dtype, self.em.elem(value, names))
            if mask is not None:
                axis, pad = mask
                inside = f"kb * {self.t.block_N} + {names[axis]} < {self.dims[self.plan.source]}"
                pad = pad if tile.dtype == "float32" else self.sp.narrow_pad(tile.dtype, pad)
                expr = f"T.if_then_else({inside}, {expr}, {pad})"
            self.em.line(f"{tile.buf}[{', '.join(names)}] = {expr}")

    def slice_axis(self, var) -> int | None:
        roles = self.layout(var.type)
        return roles.index(SLICE) if SLICE in roles else None

    def reduce(self, node, pos: int, last: dict) -> None:
        r = self.reductions[id(node)]
        source = node.inputs[0]
        if source.type.dtype.name != "f32":
            raise LoweringError(f"the reduction{_loc(node)} is of {source.type.dtype} (a tile reduction of f32)")
        width = self.role_size(r.axis)
        out = self.fragment((self.t.block_M,), prefix="red")
        pad = _PAD[r.kind] if r.axis == SLICE else None
        identity = float_literal(r.identity)
        if r.kind != "sum" and not self.plan.tolerant:
            self.exact(node, r, out, width, pos, last)
        else:
            src = self.materialize(source, "float32", pos, last, self.sp.reduced_scope, pad=pad,
                                   slice_axis=1 if pad else None)
            clear = clears_to(r.kind, r.identity)
            if not clear:
                self.fill(out, Scalar(identity))
            self.sp.reduce(r.kind, src.buf, out.buf, (self.t.block_M, width), clear)
        self.bind(node.outputs[0], out)

    def exact(self, node, r, out: _Tile, width: int, pos: int, last: dict) -> None:
        """IEEE 754-2019 maximum/minimum over ordered integer keys (:mod:`.cuda_region_tiles`)."""
        key_max, key_min, unkey = self.sp.keys()
        key = key_max if r.kind == "max" else key_min
        keys = self.fragment((self.t.block_M, width), "int32", "key", self.sp.reduced_scope)
        value = self.em.env[node.inputs[0]]
        pad = "T.int32(-2147483648)" if r.kind == "max" else "T.int32(2147483647)"
        wrapped = Lazy(value.shape, lambda idx: f"T.call_extern('int32', {key!r}, {self.em.elem(value, idx)})")
        self.write_cases(keys, wrapped, node.inputs[0], (1, pad) if r.axis == SLICE else None)
        best = self.fragment((self.t.block_M,), "int32", "best")
        self.fill(best, Scalar(f"T.call_extern('int32', {key!r}, {float_literal(r.identity)})"))
        self.sp.reduce(r.kind, keys.buf, best.buf, (self.t.block_M, width), False, "int32")
        i = self.em.fresh("i")
        with self.em.block(self.sp.parallel([i], (self.t.block_M,))):
            self.em.line(f"{out.buf}[{i}] = T.call_extern('float32', {unkey!r}, {best.buf}[{i}])")

    def contract(self, node, pos: int, last: dict) -> None:
        """``T.gemm`` for f16/bf16 operands (the left one may be a register fragment); f32 operands both in shared
        memory, multiplied on CUDA cores (:meth:`.cuda_region_tiles.Spelling.simt_gemm`)."""
        lhs, rhs = node.inputs
        ((la, ra),) = node.attr("reduce")
        simt = lhs.type.dtype is T.f32
        operands = []
        for x, axis, scope in ((lhs, la, self.sp.left_scope(simt)), (rhs, ra, "shared")):
            dtype = _TILE_TIR[x.type.dtype.name]
            reduced = self.layout(x.type)[axis] == SLICE
            operands.append(self.materialize(x, dtype, pos, last, scope, "T.float32(0)" if reduced else None,
                                             axis if reduced else None))
        a, b = operands
        shape = tuple(self.role_size(r) for r in self.layout(node.outputs[0].type))
        out = self.fragment(shape, prefix="acc", scope=self.sp.product_scope)
        if self.overlap is not None and node is self.overlap.first:  # waited for by the overlapped loop
            self.turn = len(self.em.lines)  # where the warpgroups' turn is waited for (ping-pong)
            self.sp.gemm_async(a.buf, b.buf, out.buf, la == 0, ra == 1, (*shape, a.shape[la]), True)
            self.issued = len(self.em.lines)
        else:
            (self.sp.simt_gemm if simt else self.sp.gemm)(a.buf, b.buf, out.buf, la == 0, ra == 1,
                                                          (*shape, a.shape[la]))
        self.bind(node.outputs[0], out)

    # -- combine ----------------------------------------------------------------------------------------------
    def combine(self, region, running: list, block) -> None:
        combine(self, region, running, block)

    def row_core(self, x):
        """``x`` through the unit-axis reshapes that made it (a per-row value as (R, 1))."""
        node = self.producers.get(x)
        while node is not None and node.op is ops.reshape and isinstance(node.inputs[0], Var):
            x = node.inputs[0]
            node = self.producers.get(x)
        return x

    # -- outputs ------------------------------------------------------------------------------------------
    def stage(self, write, rows: dict) -> tuple:
        """(write, the output's staged tile, its view, the store's axes): its value computed in registers and staged
        in shared memory (TileLang's fragment copy; emulated: NaNs made the hardware's canonical one)."""
        view_var, value = write.inputs[0], self.em.env[write.inputs[1]]
        p = next(p for p in self.graph.params if p.var is view_var)
        layout = self.layout(write.inputs[1].type)
        dtype = _TILE_TIR[p.type.dtype.name]
        shape = tuple(self.role_size(r) for r in layout)
        tile = _Tile(self.sp.alloc("o", shape, dtype, "shared"), "shared", dtype, shape)
        if self.sp.stage_in_place:
            self.write_tile(tile, self.sp.hardware_nans(value))
        else:  # stored in whole rows from the shared tile
            staged = self.fragment(shape, dtype, "out")
            self.write_tile(staged, value)
            self.em.line(f"T.copy({staged.buf}, {tile.buf})")
        axes = [("point", "bz")] * (len(p.type.shape) - len(layout))
        for role, e in zip(layout, p.type.shape[len(axes):]):
            extent = self.dims[next(i for i, ev in enumerate(self.graph.extents) if ev.extent is e)]
            axes.append(("tile", rows.get(role, "0"), self.role_size(role), extent))
        return write, tile, self.views[view_var], axes

    def assemble_text(self) -> str:
        em, plan, t = self.em, self.plan, self.t
        rows = f"T.ceildiv({self.dims[plan.rows]}, {t.block_M})"
        batch = [self.dims[plan.batch]] if plan.batch is not None else []
        prelude = self.target.prelude(list(em.helpers.values()))
        if self.skip is not None:  # the busiest blocks of rows first (cuda_region_skip)
            launch, coords = cuda_region_skip.fold_launch(self, rows, batch)
        else:
            launch, coords = self.sp.kernel([rows, *batch], "PRELUDE")
        width = self.sp.extent_dtype
        dims = "\n".join(f"d{k} = T.dynamic('d{k}', {width!r})" for k in range(len(self.graph.extents)))
        body = [*coords, *self.sp.allocs, *em.constant_lines]
        lines = [f"# Generated by intent_trace (target {em.target_name}): a segmented fold (region_fold) as a tile "
                 f"program{self.sp.note}.", f"import {self.sp.language} as T", "", f"PRELUDE = {prelude!r}", "", dims, "", "", "@T.prim_func",
                 f"def kernel({', '.join([self.params, *(w.param() for w in self.workspaces)])}):",
                 *self.passes, f"    {launch}", *("        " + x for x in body), *em.lines, ""]
        return "\n".join(lines)


def _unit_reshape(em, node) -> Lazy:
    x = em.env[node.inputs[0]]
    old, new = tuple(getattr(node.inputs[0].type, "shape", ())), tuple(node.outputs[0].type.shape)
    keep = [k for k, d in enumerate(new) if not (isinstance(d, int) and d == 1)]
    into = [k for k, d in enumerate(old) if not (isinstance(d, int) and d == 1)]

    def elem(idx):
        at = ["0"] * len(old)
        for k, n in zip(into, keep):
            at[k] = idx[n]
        return em.elem(x, at)

    if isinstance(x, Scalar):
        return Lazy(em.shape(node.outputs[0].type), lambda idx: x.expr)
    return Lazy(em.shape(node.outputs[0].type), elem)


def _loc(node) -> str:
    return f" at {node.loc!r}" if node.loc is not None else ""
