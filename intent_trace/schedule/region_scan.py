"""Segmented scans: a ``region_scan`` (language §9.2) as three parallel phases over chunks of its source axis.

§9.2 lets a target cut the source into any contiguous, ordered, covering slices and combine their transitions with
any parenthesisation that keeps their order; ``apply(combine(a, b), s) == apply(b, apply(a, s))``. So the state a
chunk receives is ``apply(prefix, initial)`` with ``prefix`` the combine of every earlier chunk's transition, in
order, and no chunk needs another's outputs. A target may then run:

1. ``summarize`` on every chunk at once: its transition;
2. the transitions' exclusive prefixes with ``combine`` (in order), each chunk's incoming state
   ``apply(prefix, initial)``, and the final state ``apply(total, initial)``;
3. ``emit`` on every chunk at once, from its incoming state, its outputs written at the chunk's offset.

:func:`recognise` finds such scans from the graph's structure (the scan's place, the ops of its helpers by trait,
the shapes of the state), never op names, and says why any other graph is not one. The helpers are pure regions
(the language guarantees it); a target places their element code (pointwise ops, broadcasts, reshapes, fills,
contractions and reductions whose combine it inlines), so an op outside those keeps the serial program.
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.lowering import pointwise_shape
from ..graph.traits import AGGREGATE, CONTRACTIONS, POINTWISE
from ..graph.values import KernelGraph, walk_region
from .batch import placement
from .plan import Part
from .prologue import extent_vars, prologue
from .recognition import NotRecognised, Rejected, run_walk
from .recognition import at as _at

#: ops a chunk's program computes as element code (besides pointwise ones, aggregates and contractions)
_ELEMENT_OPS = (ops.broadcast, ops.reshape, ops.full, ops.dim, ops.indices, ops.domain)
#: ops before the scan: its source's reads and the values of its identity and initial state
_BEFORE_OPS = (ops.read, ops.full, ops.domain, ops.indices, ops.broadcast, ops.reshape, ops.dim)


@attrs.frozen(slots=True)
class SegmentedScan:
    """A recognised segmented scan: ``axis`` the graph extent index of the scanned axis; ``batch`` that of the
    top-level ``parallel`` loop around it (None: none; ``loop`` and ``point`` its node and its point); ``scan`` the
    node; ``before`` the nodes computed before it (its source's reads, its identity and initial state: every phase
    computes them again, lazily); ``out_writes`` and ``state_writes`` the whole writes of its outputs and of its
    final state; ``fused`` the pointwise ops of its helpers; ``elementwise``: the one shape of every summary and state
    leaf when ``combine`` and ``apply`` are pointwise on it (each element's prefix is then independent of the others:
    the prefix phase may split the elements over blocks), else None."""

    axis: int
    fused: tuple
    contractions: int
    batch: int | None
    elementwise: tuple | None
    scan: object = attrs.field(eq=False)
    before: tuple = attrs.field(default=(), eq=False)
    out_writes: tuple = attrs.field(default=(), eq=False)
    state_writes: tuple = attrs.field(default=(), eq=False)
    loop: object = attrs.field(default=None, eq=False)
    point: object = attrs.field(default=None, eq=False)

    @property
    def reason(self) -> str:
        return (f"a region scan (§9.2: any segmentation, transitions combined in order): each chunk summarised to its "
                f"transition in parallel, the transitions' exclusive prefixes combined in order and applied to the "
                f"initial state, each chunk emitted from its incoming state in parallel ({self.contractions} "
                f"contraction(s) in the helpers)")

    def part(self, graph: KernelGraph, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        writes = (*self.out_writes, *self.state_writes)
        batch = () if self.batch is None else (("batch", names[self.batch]),)
        return Part("segmented_scan", self.reason, (("source", names[self.axis]), *batch, *params.items()),
                    self.fused, nodes=(self.scan, *writes))


def recognise(graph: KernelGraph) -> SegmentedScan | Rejected:
    """The segmented scan of ``graph``, or a Rejected saying why it is none."""
    return run_walk(_Walk(graph))


def elementwise(scan) -> tuple | None:
    """The one shape of every leaf of ``scan``'s summary and state when ``combine`` and ``apply`` compute each element
    from the same element of their operands (pointwise ops of values of that shape, scalars), else None."""
    leaves = [*T.leaf_types(scan.inputs[1].type), *T.leaf_types(scan.inputs[2].type)]
    shapes = {tuple(t.shape) if isinstance(t, T.TensorType) else None for t in leaves}
    if len(shapes) != 1 or None in shapes:
        return None
    (shape,) = shapes
    _summarize, combine, apply, _emit = scan.regions
    for node in (*combine.nodes, *apply.nodes):
        values = [*node.outputs, *(x for x in node.inputs if hasattr(x, "type"))]
        if node.op not in POINTWISE or node.regions or any(
                isinstance(v.type, T.TensorType) and tuple(v.type.shape) != shape for v in values) or any(
                not isinstance(v.type, T.TensorType) for v in node.outputs):
            return None
    return shape


class _Walk:
    def __init__(self, graph: KernelGraph):
        self.graph = graph
        self.prologue = prologue(graph)
        self.extent_of = extent_vars(graph, self.prologue)
        self.extents = {ev.extent: k for k, ev in enumerate(graph.extents)}
        self.point = None
        self.params = {p.var: p for p in graph.params}
        self.fused: set = set()
        self.contractions = 0

    def fail(self, why: str):
        raise NotRecognised(why)

    def run(self) -> SegmentedScan:
        scans = [n for n in walk_region(self.graph.body) if n.op is ops.region_scan]
        if len(scans) != 1:
            self.fail("no region_scan" if not scans else "more than one region_scan")
        (scan,) = scans
        where = placement(self.graph, scan, self.extent_of)
        pre, body, loop, batch, point = where.pre, list(where.body), where.loop, where.batch, where.point
        self.point = point
        at = body.index(scan)
        before = []
        for node in [*pre, *body[:at]]:
            before.append(node)
            if node in self.prologue:
                continue
            if node.regions or node.op.effects - {"read"} or not (
                    node.op in _BEFORE_OPS or node.op in POINTWISE or node.op in AGGREGATE):
                self.fail(f"op {node.op.name}{_at(node)} before the region_scan is not a read, a fill or element code "
                          f"(each phase computes what comes before the scan again)")
        source_t = T.leaf_types(scan.inputs[0].type)[0]
        axis = scan.attr("axis")
        if not isinstance(source_t, T.TensorType) or source_t.shape[axis] not in self.extents:
            self.fail(f"the source axis of the region_scan{_at(scan)} is not a kernel extent")
        out_t, state_t = scan.attr("types")
        for t in T.leaf_types(state_t):
            if isinstance(t, T.TensorType) and any(not isinstance(d, int) and d not in self.extents for d in t.shape):
                self.fail(f"the state of the region_scan{_at(scan)} has an axis that is not a kernel extent (each "
                          f"chunk's transition is stored for the prefix phase)")
        for region in scan.regions:
            self.helper(region)
        out_writes, state_writes = self.consumers(scan, body[at + 1:])
        if batch is not None and batch == self.extents[source_t.shape[axis]]:
            self.fail("the batch extent is also the scan's source axis")
        return SegmentedScan(self.extents[source_t.shape[axis]], tuple(sorted(self.fused)), self.contractions, batch,
                             elementwise(scan), scan, tuple(before), tuple(out_writes), tuple(state_writes), loop,
                             point)

    def helper(self, region) -> None:
        for node in region.nodes:
            op = node.op
            if op.effects or (node.regions and op is not ops.reduce):
                self.fail(f"op {op.name}{_at(node)} in a region_scan helper has effects or regions")
            if op is ops.reduce:
                if pointwise_shape(node) is None:
                    self.fail(f"the reduction{_at(node)} in a region_scan helper has a combine a chunk cannot inline")
            elif op in CONTRACTIONS:
                self.contractions += 1
            elif not (op in POINTWISE or op in AGGREGATE or op in _ELEMENT_OPS):
                self.fail(f"op {op.name}{_at(node)} in a region_scan helper is not element code (pointwise ops, "
                          f"broadcasts, reshapes, fills, contractions, inlined reductions)")
            if op in POINTWISE and node.inputs:
                self.fused.add(op.name)

    def whole(self, write) -> bool:
        """Whether ``write`` is of whole axes, led by the batch point when the scan is in a parallel loop."""
        index, operands = write.attr("index"), write.inputs[2:]
        lead = 0 if self.point is None else 1
        return tuple(index[:lead]) == ("point",) * lead and all(e == "all" for e in index[lead:]) and \
            all(x is self.point for x in operands)

    def consumers(self, scan, nodes) -> tuple:
        outs, state = scan.outputs
        for v in (outs, state):
            if not isinstance(v.type, (T.TensorType, T.ScalarType)):
                self.fail(f"a result of the region_scan{_at(scan)} is an aggregate (not mapped yet)")
        out_writes, state_writes = [], []
        for node in nodes:
            if node.op is ops.dim and node not in self.prologue:
                continue
            if node.op is not ops.write:
                self.fail(f"op {node.op.name}{_at(node)} after the region_scan is not a write of its results")
            view, value = node.inputs[0], node.inputs[1]
            p = self.params.get(view)
            if value is not outs and value is not state:
                self.fail(f"the write{_at(node)} is not of a result of the region_scan")
            if p is None or p.type.access != "Out" or not self.whole(node) or \
                    any(n.op is ops.read and n.inputs[0] is view for n in walk_region(self.graph.body)):
                self.fail(f"the write{_at(node)} is not a whole write of an Out view that nothing reads")
            (out_writes if value is outs else state_writes).append(node)
        if len(out_writes) != 1:
            self.fail("the region_scan's outputs are not written once, whole")
        return out_writes, state_writes
