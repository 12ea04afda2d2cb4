"""Segmented folds: a ``region_fold`` whose summary is a block of rows, mapped to a tile program.

A ``region_fold`` (language §9.1) may cut its source axis into any contiguous, ordered, covering slices and combine
their summaries with any parenthesisation that keeps their order. When every value its helpers compute is *row
local* -- each row of the summary (the leading axis ``R`` of every summary leaf, an axis of the fold's operands,
never of the source) depends only on the same row of the operands -- the rows are independent too. A target may then
give each block of rows a program of its own: the source axis cut into blocks of ``E`` members folded in order, each
block summarised on a tile (``summarize``), its summary combined into a running one held on chip (``combine``: a left
fold in source order, which the laws allow), the fold's consumers applied to the final summary before one store.

:func:`recognise` finds such folds from the graph's structure -- the fold's regions and the shapes of their values,
traits and patterns, never op names -- and says why any other graph is not one. Every value of the regions has a
*layout*: per axis its role, ``"R"`` (the summary's rows), ``"E"`` (the slice), a free kernel extent (``F``: the
summary's other axes, such as a head dimension, whole on chip) or a unit axis. What a tile program can place:

- pointwise ops (:data:`~intent_trace.graph.traits.POINTWISE`), broadcasts, reshapes that only add or drop unit axes,
  fills, tuples and their components;
- reductions along the last axis of an ``(R, E)`` or ``(R, F)`` value whose combine is one ``add``, ``maximum`` or
  ``minimum`` of its two parameters (a tree reduction: any order ``reduce`` allows, T10);
- contractions of two rank-2 values over one pair of axes whose result is ``(R, X)``, f16, bf16 or f32 operands
  accumulating in f32 (a tile matrix product: FMA allowed inside it, T10; a target puts f16/bf16 products on tensor
  cores and f32 ones on CUDA cores, never a TF32 MMA, which T5 forbids).

The segments are the source in order: the program is ``combine(...combine(combine(identity, s0), s1)..., sn)``,
one parenthesisation §9.1 allows ("Combine保持logical order但允许任意parenthesization"); a slice shorter than a
block (the tail) is padded, and the padding is masked out of every reduction and contraction over the slice axis.

A tile max or min reduction may ignore a NaN operand and return either zero sign (CUDA's ``fmaxf``, TileLang's
``T.reduce_max``); :mod:`.region_laws` proves when that cannot change an output (``SegmentedFold.tolerant``),
else a target reduces exactly (IEEE 754-2019 maximum: NaN wins, -0 < +0).
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.traits import AGGREGATE, CONTRACTIONS, POINTWISE
from ..graph.patterns import match
from ..graph.values import KernelGraph, Literal, Var, walk_region
from . import region_laws
from .access import UNIT_DOMAIN, unit_reshape
from .batch import placement
from .plan import Part
from .prologue import extent_vars, prologue
from .recognition import NotRecognised, Rejected, run_walk
from .recognition import at as _at

ROW, SLICE = "R", "E"
#: A reduction's combine: one op of its two parameters, and what a tile reduction calls it.
REDUCE_KINDS = {ops.add: "sum", ops.maximum: "max", ops.minimum: "min"}
#: Tile matrix products take these operand dtypes (f32 accumulation); f32 operands are multiplied on CUDA cores, since
#: tensor cores would make them TF32, a reduced-precision inner product (T5).
TILE_OPERANDS = ("f16", "bf16", "f32")


@attrs.frozen(slots=True)
class Reduction:
    """A reduction of the summarize helper: its node, its kind (``sum``, ``max``, ``min``), the role of the reduced
    axis (``"E"``: over the slice, masked at the tail; a free extent otherwise) and its identity's constant."""

    kind: str
    axis: object
    identity: float
    node: object = attrs.field(eq=False)


@attrs.frozen(slots=True)
class Source:
    """A component of the fold's source (or an operand): a whole-axis read of a view (``param``: its index) or the
    indices of a kernel domain (``param`` None); ``layout``: the roles of its axes."""

    param: int | None
    layout: tuple
    node: object = attrs.field(eq=False)


@attrs.frozen(slots=True)
class SegmentedFold:
    """A recognised segmented fold. ``rows``, ``source``, ``free`` and ``batch`` are graph extent indices (the
    summary's rows, the folded axis, the free axes and the optional batch of a top-level ``parallel`` loop);
    ``sources`` and ``operands`` say where the fold's inputs come from (:class:`Source`, or a scalar's Var / a
    Literal for an operand); ``before`` are the nodes to compute before the fold (scalars, domains), ``after`` the
    consumers of its summary up to the ``writes``; ``reductions`` and ``contractions`` are the summarize helper's, in
    program order; ``tolerant``: every max/min reduction may ignore NaN operands and zero signs (:mod:`.region_laws`);
    ``fused``: the pointwise ops computed inside the tiles."""

    rows: int
    source: int
    free: tuple
    batch: int | None
    combines: tuple
    contractions_count: int
    tolerant: bool
    fused: tuple
    why_exact: str = ""
    fold: object = attrs.field(default=None, eq=False)
    loop: object = attrs.field(default=None, eq=False)
    sources: tuple = attrs.field(default=(), eq=False)
    operands: tuple = attrs.field(default=(), eq=False)
    before: tuple = attrs.field(default=(), eq=False)
    after: tuple = attrs.field(default=(), eq=False)
    writes: tuple = attrs.field(default=(), eq=False)
    reductions: tuple = attrs.field(default=(), eq=False)
    contractions: tuple = attrs.field(default=(), eq=False)
    roles: dict = attrs.field(factory=dict, eq=False)  # Dim -> role, for every axis the regions' values have

    @property
    def reason(self) -> str:
        kinds = ", ".join(self.combines) or "none"
        return (f"a region fold whose summary rows are independent (every helper value is row local): blocks of rows "
                f"per program, the source folded in order in blocks ({self.contractions_count} tile matrix product(s), "
                f"reductions: {kinds}), each block's summary combined into a running one on chip, the consumers "
                f"applied before one store (§9.1: any segmentation, combine order kept)")

    def part(self, graph: KernelGraph, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        grid = [f"ceildiv({names[self.rows]}, block_M)"] + ([names[self.batch]] if self.batch is not None else [])
        exact = () if self.tolerant else (("exact_max", self.why_exact),)
        return Part("segmented_fold", self.reason, (("grid", " x ".join(grid)), ("source", names[self.source]),
                                                    *params.items(), *exact),
                    self.fused, nodes=(self.fold, *self.writes))


def recognise(graph: KernelGraph) -> SegmentedFold | Rejected:
    """The segmented fold of ``graph``, or why it is none."""
    return run_walk(_Walk(graph))


def _consumers(graph: KernelGraph) -> dict:
    uses: dict = {}
    for node in walk_region(graph.body):
        for x in node.inputs:
            if isinstance(x, Var):
                uses.setdefault(x, []).append(node)
        for r in node.regions:
            for x in r.results:
                if isinstance(x, Var):
                    uses.setdefault(x, []).append(node)
    return uses


class _Walk:
    def __init__(self, graph: KernelGraph):
        self.graph = graph
        self.prologue = prologue(graph)  # checks made before any launch: scalars here, part of no body
        self.extent_of = extent_vars(graph, self.prologue)
        self.extents = {ev.extent: k for k, ev in enumerate(graph.extents)}
        self.params = {p.var: (k, p) for k, p in enumerate(graph.params)}
        self.uses = _consumers(graph)
        self.domains: dict = {}  # domain Var -> its Dim
        self.roles: dict = {}  # Dim -> "R" | "E" | the free Dim itself
        self.layouts: dict = {}  # Var -> layout
        self.fused: set = set()
        self.point = None

    def fail(self, why: str):
        raise NotRecognised(why)

    # -- structure --------------------------------------------------------------------------------------------
    def run(self) -> SegmentedFold:
        folds = [n for n in walk_region(self.graph.body) if n.op is ops.region_fold]
        if len(folds) != 1:
            self.fail("no region_fold" if not folds else "more than one region_fold")
        (fold,) = folds
        where = placement(self.graph, fold, self.extent_of)
        pre, body, loop, batch, self.point = list(where.pre), where.body, where.loop, where.batch, where.point
        at = list(body).index(fold)
        for node in [*pre, *body[:at]]:
            if node.op is ops.domain:
                self.top_node(node)
        self.setup_roles(fold)
        sources = self.sources(fold)
        operands = self.fold_operands(fold)
        self.identity(fold)
        before = []
        for node in [*pre, *body[:at]]:  # scalars and domains computed once; the fold's reads, fills and tuples
            if node.op is ops.read or node.op is ops.full or node.op in AGGREGATE:
                if node.regions:
                    self.fail(f"op {node.op.name}{_at(node)} before the fold has regions")
                continue
            self.top_node(node)
            before.append(node)
        summarize, combine = fold.regions
        reductions, contractions = self.summarize(fold, summarize)
        self.combine(fold, combine)
        after, writes = self.consumers(fold, body[at + 1:])
        if batch is not None and batch in (self.extents.get(d) for d in self.roles):
            self.fail("the batch extent is also an axis of the fold's values")
        free = tuple(self.extents[d] for d, role in self.roles.items() if role is d)
        tolerant, why = region_laws.tolerant(fold, reductions, after, writes)
        return SegmentedFold(
            self.extents[self.row], self.extents[self.slice_of], free, batch,
            tuple(r.kind for r in reductions), len(contractions), tolerant, tuple(sorted(self.fused)), why,
            fold, loop, sources, operands, tuple(before), tuple(after), tuple(writes), tuple(reductions),
            tuple(contractions), dict(self.roles))

    def top_node(self, node) -> None:
        """A node before the fold's loop: domains, their indices, scalar computations (no effects) and the
        prologue's checks (made before any launch)."""
        if node in self.prologue:
            return
        if node.op is ops.domain:
            caps = match(UNIT_DOMAIN, node, {})
            if caps is None or caps["end"] not in self.extent_of:
                self.fail(f"the domain{_at(node)} is not domain(0, E, 1) of a kernel extent")
            self.domains[node.outputs[0]] = self.graph.extents[self.extent_of[caps["end"]]].extent
            return
        if node.op is ops.indices:
            return
        if node.op.effects or node.regions:
            self.fail(f"op {node.op.name}{_at(node)} before the fold has effects or regions")
        if node.op is ops.dim and not any(self.uses.get(v) for v in node.outputs):
            return
        if not (node.op in POINTWISE) or any(not isinstance(v.type, T.ScalarType) for v in node.outputs):
            self.fail(f"op {node.op.name}{_at(node)} before the fold is not a scalar computation")

    def setup_roles(self, fold) -> None:
        if fold.attr("axis") != 0:
            self.fail(f"the region_fold{_at(fold)} folds axis {fold.attr('axis')} (a tile program folds axis 0)")
        leaves = T.leaf_types(fold.outputs[0].type)
        if not all(isinstance(t, T.TensorType) and 1 <= t.rank <= 2 for t in leaves):
            self.fail(f"the summary of the region_fold{_at(fold)} has a leaf that is not a tensor of rank 1 or 2 "
                      f"(its rows are what the blocks split)")
        rows = {t.shape[0] for t in leaves}
        if len(rows) != 1:
            self.fail(f"the summary leaves of the region_fold{_at(fold)} do not share their leading axis (the rows)")
        (self.row,) = rows
        if self.row not in self.extents:
            self.fail(f"the summary rows of the region_fold{_at(fold)} are not a kernel extent")
        self.roles[self.row] = ROW
        source_t = T.leaf_types(fold.inputs[0].type)[0]
        self.slice_of = source_t.shape[0]
        if self.slice_of not in self.extents or self.slice_of is self.row:
            self.fail(f"the source axis of the region_fold{_at(fold)} is not a kernel extent other than the rows")
        summarize = fold.regions[0]
        n_src = len(T.leaf_types(fold.inputs[0].type))
        slices = {p.type.shape[0] for p in summarize.params[:n_src]}
        if len(slices) != 1:
            self.fail("the summarize helper's slices do not share one slice extent")
        (self.slice,) = slices
        self.roles[self.slice] = SLICE
        self.roles[self.slice_of] = SLICE

    def layout(self, t, node=None) -> tuple:
        """The roles of a value's axes (new kernel extents become free axes); fails on a shape a tile program
        cannot hold."""
        shape = tuple(getattr(t, "shape", ()))
        out = []
        for d in shape:
            if isinstance(d, int):
                if d != 1:
                    self.fail(f"op {node.op.name if node else '?'}{_at(node)} has a static axis of {d} (only unit "
                              f"static axes are mapped)")
                out.append(1)
                continue
            if d not in self.roles:
                if d not in self.extents:
                    self.fail(f"a value{_at(node)} has an axis that is not a kernel extent")
                self.roles[d] = d  # a free axis
            out.append(self.roles[d])
        roles = [r for r in out if r != 1]
        if len(roles) > 2 or len(set(map(id, roles))) != len(roles) or (ROW in roles and roles[0] != ROW):
            self.fail(f"a value{_at(node)} of shape {shape!r} is not a tile: at most two axes, the rows first")
        return tuple(out)

    def view_read(self, node) -> Source:
        """A read of an In view, whole (``:``) except the batch point; its layout by role."""
        k, p = self.access(node)
        if p.type.access != "In":
            self.fail(f"the read{_at(node)} of {p.name} is of a view the kernel also writes")
        return Source(k, self.layout(node.outputs[0].type, node), node)

    def access(self, node) -> tuple:
        """(param index, param) of a read or write of a kernel view over whole axes, led by the batch point."""
        view = node.inputs[0]
        what = node.op.name
        if view not in self.params:
            self.fail(f"the {what}{_at(node)} is not of a kernel view")
        index, operands = node.attr("index"), node.inputs[2 if node.op is ops.write else 1:]
        points = [i for i, e in enumerate(index) if e == "point"]
        if any(e not in ("all", "point") for e in index) or points != list(range(len(points))) or \
                len(points) != (0 if self.point is None else 1) or any(x is not self.point for x in operands):
            self.fail(f"the {what}{_at(node)} is not of whole axes at the batch point")
        return self.params[view]

    def producer(self, var):
        return next((n for n in walk_region(self.graph.body) if var in n.outputs), None)

    def sources(self, fold) -> tuple:
        src = fold.inputs[0]
        node = self.producer(src)
        items = node.inputs if node is not None and node.op is ops.tuple else (src,)
        out = []
        for x in items:
            n = self.producer(x)
            if n is None:
                self.fail(f"a source component of the region_fold{_at(fold)} is not computed in the kernel")
            if n.op is ops.indices:
                if self.domains.get(n.inputs[0]) is not self.slice_of:
                    self.fail(f"the indices{_at(n)} in the fold's source are not of the source axis' domain")
                out.append(Source(None, (SLICE,), n))
                continue
            if n.op is not ops.read:
                self.fail(f"a source component of the region_fold{_at(fold)} is op {n.op.name}{_at(n)}, not a read "
                          f"of a view or the indices of its axis (a tile program loads its blocks)")
            s = self.view_read(n)
            if not s.layout or s.layout[0] != SLICE or len(s.layout) > 2:
                self.fail(f"the source read{_at(n)} is not (source, free) or (source,)")
            if len(self.uses.get(x, ())) != 1:
                self.fail(f"the source read{_at(n)} has uses besides the fold")
            out.append(s)
        return tuple(out)

    def fold_operands(self, fold) -> tuple:
        out = []
        for x in fold.inputs[2:]:
            if isinstance(x, Literal) or isinstance(getattr(x, "type", None), T.ScalarType):
                out.append(x)
                continue
            n = self.producer(x)
            if n is not None and n.op is ops.indices and self.domains.get(n.inputs[0]) is self.row:
                out.append(Source(None, (ROW,), n))
                continue
            if n is None or n.op is not ops.read:
                self.fail(f"an operand of the region_fold{_at(fold)} is not a scalar, a read of a view or the indices "
                          f"of the rows' domain")
            s = self.view_read(n)
            if SLICE in s.layout:
                self.fail(f"the operand read{_at(n)} has the source axis")
            out.append(s)
        return tuple(out)

    def identity(self, fold) -> None:
        ident = fold.inputs[1]
        node = self.producer(ident)
        items = node.inputs if node is not None and node.op is ops.tuple else (ident,)
        for x in items:
            n = self.producer(x)
            if n is None or n.op is not ops.full or len(n.inputs) != 1 or \
                    not (isinstance(n.inputs[0], Literal) or isinstance(n.inputs[0].type, T.ScalarType)):
                self.fail(f"an identity leaf of the region_fold{_at(fold)} is not a fill of a scalar")
            self.layout(n.outputs[0].type, n)

    # -- the helpers ------------------------------------------------------------------------------------------
    def region_values(self, region, allow_structured: bool):
        """Check a helper region's nodes; returns (reductions, contractions)."""
        reductions, contractions = [], []
        for p in region.params:
            for t in T.leaf_types(p.type):
                if isinstance(t, T.TensorType):
                    self.layout(t)
        for node in region.nodes:
            op = node.op
            if op is ops.dim:
                if any(self.uses.get(v) for v in node.outputs):
                    self.fail(f"the helper computes with an extent{_at(node)} (a tile's extent is not the slice's)")
                continue
            for v in node.outputs:
                for t in T.leaf_types(v.type):
                    if isinstance(t, T.TensorType):
                        self.layout(t, node)
            if op is ops.reduce and allow_structured:
                reductions.append(self.reduction(node))
            elif op in CONTRACTIONS and allow_structured:
                contractions.append(self.contraction(node))
            elif op is ops.reshape:
                self.reshape(node)
            elif op is ops.full:
                if len(node.inputs) != 1:
                    self.fail(f"the fill{_at(node)} takes extents computed in the kernel")
            elif op in POINTWISE or op in AGGREGATE or op is ops.broadcast:
                if node.regions:
                    self.fail(f"op {op.name}{_at(node)} has regions")
                if op in POINTWISE and node.inputs:
                    self.fused.add(op.name)
            else:
                self.fail(f"op {op.name}{_at(node)} in a fold helper is not one a tile program places (pointwise "
                          f"ops, broadcasts, unit reshapes, fills"
                          + (", reductions along a row and tile matrix products)" if allow_structured else ")"))
        return reductions, contractions

    def reshape(self, node) -> None:
        why = unit_reshape(node)
        if why is not None:
            self.fail(why)

    def reduction(self, node) -> Reduction:
        source, identity, *captures = node.inputs
        leaves = T.leaf_types(source.type)
        (body,) = node.regions
        if len(leaves) != 1 or captures or node.attr("axes") != (1,):
            self.fail(f"the reduction{_at(node)} is not of one value along its last axis")
        layout = self.layout(leaves[0], node)
        if len(layout) != 2 or layout[0] != ROW or layout[1] == 1:
            self.fail(f"the reduction{_at(node)} is not along the last axis of a (rows, x) value")
        inner = body.nodes[0] if len(body.nodes) == 1 else None
        if inner is None or inner.op not in REDUCE_KINDS or set(inner.inputs) != set(body.params) or \
                len(body.params) != 2 or body.results != inner.outputs or inner.attrs:
            self.fail(f"the reduction{_at(node)} has a combine other than one add, maximum or minimum")
        if leaves[0].dtype.name not in ("f32", "f16", "bf16"):
            self.fail(f"the reduction{_at(node)} is of {leaves[0].dtype} (a tile reduction of floats)")
        fill = self.producer(identity)
        if fill is None or fill.op is not ops.full or not isinstance(fill.inputs[0], Literal):
            fill = self.producer(fill.inputs[0]) if fill is not None and fill.op is ops.full else None
            value = fill.attr("value") if fill is not None and fill.op is ops.constant else None
        else:
            value = fill.inputs[0].value
        if value is None:
            self.fail(f"the identity of the reduction{_at(node)} is not a constant fill")
        return Reduction(REDUCE_KINDS[inner.op], layout[1], float(value), node)

    def contraction(self, node):
        if node.op is not ops.contract or len(node.inputs) != 2 or node.attr("batch") or \
                len(node.attr("reduce") or ()) != 1:
            self.fail(f"the contraction{_at(node)} is not a matrix product of two operands over one pair of axes")
        lhs, rhs = node.inputs
        for x in (lhs, rhs):
            t = x.type
            if not isinstance(t, T.TensorType) or t.rank != 2 or t.dtype.name not in TILE_OPERANDS:
                self.fail(f"the contraction{_at(node)} has an operand that is not a rank-2 tile of f16, bf16 or f32")
        if lhs.type.dtype is not rhs.type.dtype or node.attr("acc_dtype") is not T.f32:
            self.fail(f"the contraction{_at(node)} does not accumulate operands of one dtype in f32")
        out = self.layout(node.outputs[0].type, node)
        if out[0] != ROW:
            self.fail(f"the contraction{_at(node)} does not produce (rows, x) tiles")
        return node

    def summarize(self, fold, region) -> tuple:
        if len(region.results) != 1:
            self.fail("the summarize helper has no single result")
        reductions, contractions = self.region_values(region, True)
        for t in T.leaf_types(region.results[0].type):
            if SLICE in self.layout(t):
                self.fail("a summary leaf has the slice axis")
        return reductions, contractions

    def combine(self, fold, region) -> None:
        self.region_values(region, False)

    def consumers(self, fold, nodes) -> tuple:
        after, writes = [], []
        for node in nodes:
            if node.op is ops.write:
                writes.append(self.write(node))
                continue
            if node.op.effects or node.regions:
                self.fail(f"op {node.op.name}{_at(node)} after the fold has effects or regions")
            if node.op is ops.dim and not any(self.uses.get(v) for v in node.outputs):
                continue
            if node.op is ops.reshape:
                self.reshape(node)
            elif not (node.op in POINTWISE or node.op in AGGREGATE or node.op in (ops.broadcast, ops.full)):
                self.fail(f"op {node.op.name}{_at(node)} after the fold is not a pointwise consumer of its summary")
            for v in node.outputs:
                for t in T.leaf_types(v.type):
                    if isinstance(t, T.TensorType) and SLICE in self.layout(t, node):
                        self.fail(f"op {node.op.name}{_at(node)} after the fold has the source axis")
            if node.op in POINTWISE and node.inputs:
                self.fused.add(node.op.name)
            after.append(node)
        if not writes:
            self.fail("the fold's summary is not written")
        return after, writes

    def write(self, node):
        k, p = self.access(node)
        if p.type.access != "Out" or any(n.op is ops.read and n.inputs[0] is p.var for n in walk_region(
                self.graph.body)):
            self.fail(f"the write{_at(node)} is not to an Out view that nothing reads")
        layout = self.layout(node.inputs[1].type, node)
        if not layout or layout[0] != ROW:
            self.fail(f"the write{_at(node)} is not of rows")
        return node
