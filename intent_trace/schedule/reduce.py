"""Full reductions: graphs whose work is one or more reductions over *every* axis of one source shape, the source a
pointwise expression of whole-axis reads (fused producers), the results combined by scalar consumers into one
final write of a point (``y[0] = I.reduce.sum(x[:], axis=0)``, a 2-D sum over both axes, an ``arg_reduce`` over
its whole source, a custom combine with its identity).

A ``reduce`` may be re-associated and re-ordered (language §7, T10), so a target may split the source over a
grid of blocks: each block folds a strided slice into one partial, and a second pass combines the partials and
runs the consumers. :func:`recognise` finds such graphs from their structure -- traits
(:data:`~intent_trace.graph.traits.POINTWISE`, :data:`~intent_trace.graph.traits.AGGREGATE`), patterns and the
types' extents -- never from op names, and says why any other graph is not one.

Every value is classified by what it depends on: nothing (uniform: scalars, extents, broadcasts of them), the
element of the source (a value of the source's shape), or a reduction's result (a scalar computed after the
grid's pass). An element value that depends on a reduction would need a second pass over the source (a level
of its own), which this plan does not make.
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.lowering import pointwise_shape
from ..graph.patterns import match
from ..graph.traits import AGGREGATE, POINTWISE
from ..graph.values import KernelGraph, Literal, walk_region
from .access import UNIT_DOMAIN, full_axes
from .plan import Part
from .prologue import extent_index, extent_vars, prologue
from .recognition import NotRecognised, Rejected, run_walk
from .recognition import at as _at
from .rows import _value_dtype

_rep = T.representative  # an extent's class of extents stated equal (I.assume_equal): compared by it
UNIFORM, ELEMENT, REDUCED = 0, 1, 2  # what a value depends on (bits)
_DEPENDS = {UNIFORM: "nothing", ELEMENT: "the source's element", REDUCED: "a full reduction",
            ELEMENT | REDUCED: "the source's element and a full reduction"}


@attrs.frozen(slots=True)
class FullReduction:
    """A recognised full reduction. ``axes``: the graph extent indices of the source's axes, in order (the
    source has ``prod(axes)`` elements, every one reduced); ``reductions``: the reduce nodes (one pass over the
    source folds them all; their combine helpers in ``combines``); ``pre``: the nodes that depend on no reduction
    (the fused producers and uniform values), in program order; ``post``: the scalar consumers of the results and
    the writes of points, in program order; ``write``: the last write; ``fused``: the pointwise ops of the
    source."""

    axes: tuple
    combines: tuple
    fused: tuple
    reductions: tuple = attrs.field(eq=False)
    pre: tuple = attrs.field(eq=False)
    post: tuple = attrs.field(eq=False)
    write: object = attrs.field(eq=False)

    @property
    def reason(self) -> str:
        return (f"{len(self.reductions)} reduction(s) ({', '.join(self.combines)}) over every axis of the source, "
                f"{'with' if self.fused else 'without'} pointwise producers: a reduce may run in any order (T10), "
                f"so blocks fold strided slices into partials and a final pass combines them and runs the consumers")

    def part(self, graph: KernelGraph, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        return Part("full_reduce", self.reason,
                    (("elements", " * ".join(names[a] for a in self.axes)), *params.items()),
                    self.fused, nodes=(*self.reductions, self.write))


def recognise(graph: KernelGraph) -> FullReduction | Rejected:
    """The full reduction of ``graph``, or why it is none."""
    return run_walk(_Walk(graph))


class _Walk:
    def __init__(self, graph: KernelGraph):
        self.graph = graph
        self.index = extent_index(graph)  # extents stated equal (a prologue check) are one axis: compared by class
        self.prologue = prologue(graph)  # checks made before any launch: uniform scalars here, part of no body
        self.extents = extent_vars(graph, self.prologue)
        self.kind = {ev: UNIFORM for ev in graph.extents}
        self.kind.update({p.var: UNIFORM for p in graph.params if p.kind == "scalar"})
        self.views = {p.var: p for p in graph.params if p.kind == "view"}
        self.domains: dict = {}
        self.fused: set = set()
        self.reductions, self.pre, self.post = [], [], []

    def fail(self, why: str):
        raise NotRecognised(why)

    def run(self) -> FullReduction:
        nodes = self.graph.body.nodes
        reduces = [n for n in nodes if n.op is ops.reduce]
        if not reduces:
            self.fail("no top-level reduction over every axis of its source")
        source = T.leaf_types(reduces[0].inputs[0].type)[0]
        if source.rank == 0 or reduces[0].attr("axes") != tuple(range(source.rank)):
            self.fail(f"the reduction{_at(reduces[0])} keeps axes of its source (a row group or an element loop "
                      f"maps it)")
        self.shape = tuple(map(_rep, source.shape))
        if any(s not in self.index for s in self.shape) or len(set(self.shape)) != len(self.shape):
            self.fail("the source's axes must be distinct kernel extents (a static axis is not mapped yet)")
        self.axes = tuple(self.index[s] for s in self.shape)
        write = nodes[-1]
        if write.op is not ops.write:
            self.fail(f"the last op{_at(write)} is {write.op.name}, not the write of the reduction's result")
        for node in nodes:
            if node.op is ops.write:
                self.final_write(node)
                continue
            if node.op.effects - {"read"} and node not in self.prologue:
                self.fail(f"op {node.op.name}{_at(node)} has effects ({', '.join(sorted(node.op.effects))}): a full "
                          f"reduction's only effects are its writes of results")
            self.node(node)
        combines = tuple(n.attr("helper") or "combine" for n in self.reductions)
        return FullReduction(self.axes, combines, tuple(sorted(self.fused)), tuple(self.reductions),
                             tuple(self.pre), tuple(self.post), write)

    def operand(self, x) -> int:
        if isinstance(x, Literal):
            return UNIFORM
        if x not in self.kind:
            self.fail(f"a value of type {x.type!r} is used where a full reduction cannot follow it")
        return self.kind[x]

    def define(self, node, kind: int) -> None:
        if kind == ELEMENT | REDUCED:
            self.fail(f"op {node.op.name}{_at(node)} depends on {_DEPENDS[kind]}: that needs a second pass over the "
                      f"source")
        for v in node.outputs:
            for t in T.leaf_types(v.type):
                if not isinstance(t, (T.TensorType, T.ScalarType)):
                    continue
                if not _value_dtype(t.dtype):
                    self.fail(f"op {node.op.name}{_at(node)} computes {t.dtype}, which has no arithmetic of its own")
                shape = tuple(map(_rep, getattr(t, "shape", ())))
                if shape not in ((), self.shape) or (kind & ELEMENT and shape != self.shape):
                    self.fail(f"op {node.op.name}{_at(node)} has shape {shape!r}, neither the source's nor a scalar")
                if kind & REDUCED and shape:
                    self.fail(f"op {node.op.name}{_at(node)} broadcasts a reduction's result over the source")
            self.kind[v] = kind
        (self.post if kind & REDUCED else self.pre).append(node)

    def node(self, node) -> None:
        op = node.op
        if node in self.prologue:  # computed before the launch: a scalar every block sees alike
            return self.define(node, UNIFORM)
        if op is ops.domain:
            caps = match(UNIT_DOMAIN, node, {})
            if caps is None or caps["end"] not in self.extents:
                self.fail(f"the domain{_at(node)} is not domain(0, E, 1) of a kernel extent E")
            self.domains[node.outputs[0]] = self.extents[caps["end"]]
            self.pre.append(node)
            return
        if op is ops.read:
            p = self.views.get(node.inputs[0])
            axes = full_axes(node, p.type, self.extents, self.domains) if p is not None else None
            if axes != self.axes:
                self.fail(f"the read{_at(node)} is not of whole axes in the source's shape")
            return self.define(node, ELEMENT)
        if op is ops.indices:
            (d,) = node.inputs
            if self.domains.get(d) not in self.axes or len(self.shape) != 1:
                self.fail(f"indices{_at(node)} of a domain other than the source's (one axis)")
            return self.define(node, ELEMENT)
        if op is ops.reduce:
            return self.reduce(node)
        if op is ops.reshape:
            (x, *rest) = node.inputs
            if rest or tuple(map(_rep, getattr(x.type, "shape", ()))) != tuple(map(_rep, node.outputs[0].type.shape)):
                self.fail(f"the reshape{_at(node)} changes the shape")
            return self.define(node, self.operand(x))
        if node.regions:
            self.fail(f"op {op.name}{_at(node)} has regions of its own (control flow is not a full reduction)")
        if op in POINTWISE or op in AGGREGATE or op is ops.broadcast or op is ops.full:
            if op in POINTWISE and node.inputs and any(self.operand(x) & ELEMENT for x in node.inputs):
                self.fused.add(op.name)
            kind = UNIFORM
            for x in node.inputs:
                kind |= self.operand(x)
            return self.define(node, kind)
        self.fail(f"op {op.name}{_at(node)} is not part of a full reduction (one of: whole-axis reads, pointwise "
                  f"ops, broadcasts, reductions over every axis)")

    def reduce(self, node) -> None:
        source, identity, *captures = node.inputs
        shapes = {tuple(map(_rep, t.shape)) for t in T.leaf_types(source.type)}
        if shapes != {self.shape} or node.attr("axes") != tuple(range(len(self.shape))):
            self.fail(f"the reduction{_at(node)} is not over every axis of the source's shape")
        if pointwise_shape(node) is None:
            self.fail(f"the reduction{_at(node)} has a combine with control flow or of several shapes")
        if captures:
            self.fail(f"the reduction{_at(node)} has combine operands")
        if self.operand(source) & REDUCED or self.operand(identity) != UNIFORM:
            self.fail(f"the reduction{_at(node)} reads another full reduction's result (a pass per level)")
        for v in node.outputs:
            for t in T.leaf_types(v.type):
                if not _value_dtype(t.dtype):
                    self.fail(f"the reduction{_at(node)} computes {t.dtype}, which has no arithmetic of its own")
            self.kind[v] = REDUCED
        self.reductions.append(node)

    def final_write(self, node) -> None:
        view, value, *index = node.inputs
        p = self.views.get(view)
        if p is None or p.type.access != "Out":
            self.fail(f"the write{_at(node)} is not to an Out view")
        if any(n.op is ops.read and n.inputs[0] is view for n in walk_region(self.graph.body)):
            self.fail(f"the written view {p.name} is also read")
        if any(k != "point" for k in node.attr("index")) or any(self.operand(x) != UNIFORM for x in index):
            self.fail(f"the write{_at(node)} is not of one point at uniform coordinates")
        if self.operand(value) != REDUCED:
            self.fail(f"the write{_at(node)} does not write a reduction's result")
        self.post.append(node)
