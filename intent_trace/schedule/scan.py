"""Scans along one long axis: ``y[:] = I.cumsum(x[:], axis=0)`` (``I.cumsum``, ``I.cummax``, ``I.scan`` with a
scalar combine), the source a pointwise expression of whole-axis reads of one axis, the result written whole.

A ``scan`` may be re-associated but not re-ordered (language §8, T10), so a target may cut the axis into
contiguous segments, fold each segment in order into its total, scan the totals in order, and scan each segment
again from the combined totals before it (reduce-then-scan). :func:`recognise` finds such graphs from their
structure (traits, patterns, the types' extents; never op names) and says why any other graph is not one.
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.lowering import pointwise_shape
from ..graph.traits import AGGREGATE, POINTWISE
from ..graph.values import KernelGraph, Literal, walk_region
from .access import full_axes, view_access, REJECT
from .plan import Part
from .prologue import extent_vars, prologue
from .recognition import Rejected
from .recognition import at as _at
from .rows import _value_dtype


@attrs.frozen(slots=True)
class AxisScan:
    """A recognised scan: ``axis`` the graph extent index of the scanned axis; ``combine`` its helper's name;
    ``inclusive``; ``pre`` the nodes before the scan (the source's producers), ``scan`` and ``write`` the scan and
    the whole write of its result; ``fused`` the pointwise ops of the source."""

    axis: int
    combine: str
    inclusive: bool
    fused: tuple
    pre: tuple = attrs.field(eq=False)
    scan: object = attrs.field(eq=False)
    write: object = attrs.field(eq=False)

    @property
    def reason(self) -> str:
        return ("a scan along the only axis: it may be re-associated but not re-ordered (T10), so blocks fold "
                "contiguous segments into totals, and each block scans its segments from the totals before it")

    def part(self, graph: KernelGraph, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        return Part("multi_block_scan", self.reason, (("elements", names[self.axis]), *params.items()),
                    self.fused, nodes=(self.scan, self.write))


def recognise(graph: KernelGraph) -> AxisScan | Rejected:
    """The scan of ``graph``, or why it is none."""
    pro = prologue(graph)  # checks made before any launch: uniform scalars here, part of no body
    extents = extent_vars(graph, pro)
    views = {p.var: p for p in graph.params if p.kind == "view"}
    nodes = graph.body.nodes
    if len(nodes) < 2 or nodes[-2].op is not ops.scan or nodes[-1].op is not ops.write:
        return Rejected("not a scan whose result is the graph's one write")
    scan, write = nodes[-2], nodes[-1]
    source, identity, *captures = scan.inputs
    (src_t,) = T.leaf_types(source.type) if len(T.leaf_types(source.type)) == 1 else (None,)
    if src_t is None or not isinstance(src_t, T.TensorType) or src_t.rank != 1:
        return Rejected(f"the scan{_at(scan)} is not of one rank-1 tensor")
    if src_t.shape[0] not in {ev.extent for ev in extents}:
        return Rejected(f"the scan{_at(scan)} runs along a static axis")
    axis = next(k for ev, k in extents.items() if ev.extent is src_t.shape[0])
    if scan.attr("reverse"):
        return Rejected(f"the scan{_at(scan)} runs in reverse (not mapped yet)")
    if captures or pointwise_shape(scan) is None:
        return Rejected(f"the scan{_at(scan)} has combine operands or a combine with control flow")
    if not isinstance(identity, Literal) and not any(identity in n.outputs and not n.inputs for n in nodes):
        return Rejected(f"the identity of the scan{_at(scan)} is computed")
    domains, uniform, element, fused = {}, set(), {}, set()
    for node in nodes[:-2]:
        if node in pro:
            uniform.update(node.outputs)
            continue
        if node.op.effects - {"read"} or node.regions:
            return Rejected(f"op {node.op.name}{_at(node)} before the scan has effects or regions")
        access = view_access(node, extents, views, domains)
        if access is REJECT:
            return Rejected(f"op {node.op.name}{_at(node)} is not a whole-axis read or a full domain")
        if access == "domain":
            continue
        if access is not None:
            if access[1] != (axis,):
                return Rejected(f"the read{_at(node)} is not of the scanned axis")
            element[node.outputs[0]] = True
            continue
        if not (node.op in POINTWISE or node.op in AGGREGATE or node.op is ops.broadcast):
            return Rejected(f"op {node.op.name}{_at(node)} is not a pointwise producer of the scan's source")
        if any(x in element for x in node.inputs):
            fused.add(node.op.name)
            element.update((v, True) for v in node.outputs)
        for v in node.outputs:
            for t in T.leaf_types(v.type):
                if not _value_dtype(t.dtype) or tuple(getattr(t, "shape", ())) not in ((), (src_t.shape[0],)):
                    return Rejected(f"op {node.op.name}{_at(node)} has a shape or dtype a scan does not map")
            uniform.add(v)
    view, value = write.inputs[0], write.inputs[1]
    p = views.get(view)
    if p is None or p.type.access != "Out" or value is not scan.outputs[0]:
        return Rejected(f"the write{_at(write)} is not of the scan's result into an Out view")
    if any(n.op is ops.read and n.inputs[0] is view for n in walk_region(graph.body)):
        return Rejected(f"the written view {p.name} is also read")
    if full_axes(write, p.type, extents, domains) != (axis,):
        return Rejected(f"the write{_at(write)} is not of the whole scanned axis")
    for t in T.leaf_types(scan.outputs[0].type):
        if not _value_dtype(t.dtype):
            return Rejected(f"the scan{_at(scan)} computes {t.dtype}")
    return AxisScan(axis, scan.attr("helper") or "combine", bool(scan.attr("inclusive")), tuple(sorted(fused)),
                    tuple(nodes[:-2]), scan, write)
