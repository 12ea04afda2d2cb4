"""Carried lanes: an ordered loop whose carry is a vector of independent lanes (a Mamba-style state passing).

``I.loop(chunks, h0, step)`` is inherently ordered: iteration ``c`` needs the carry iteration ``c - 1`` left (T10:
"the serial carry stays serial per chain"). But when the carry is a vector ``h[d]`` whose every element is updated
from its own element only -- pointwise ops, scalars of the iteration (``decay[c]``) broadcast over the lanes, reads
and writes of the lane's own element -- each lane is a chain of its own. A target may give every lane a thread that
runs the whole loop on its element (the chain stays serial, the chains run in parallel), instead of one thread for
the kernel.

:func:`recognise` finds such graphs from their structure (traits, shapes, the loop's region; never op names) and says
why any other graph is not one. Recognised: top-level full unit domains, reads, pointwise ops and broadcasts of
scalars, one ``loop`` whose carry leaves are all vectors over one kernel extent (the lanes), its body of the same
kinds plus writes, and writes after it; every vector is over the lanes, every read or write of a vector covers the
lane axis whole (one element a lane), no view is both read and written.
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.patterns import match
from ..graph.traits import AGGREGATE, POINTWISE
from ..graph.values import KernelGraph, Literal, walk_region
from .access import UNIT_DOMAIN
from .plan import Part
from .prologue import extent_vars, prologue
from .recognition import NotRecognised, Rejected, run_walk
from .recognition import at as _at


@attrs.frozen(slots=True)
class CarriedLanes:
    """A recognised lane loop: ``lanes`` the graph extent index of the carry's vector axis; ``fused`` the pointwise
    ops each lane's thread computes; ``loop`` the loop node, ``writes`` every write (in the loop and after it)."""

    lanes: int
    fused: tuple
    loop: object = attrs.field(eq=False)
    writes: tuple = attrs.field(eq=False)

    @property
    def reason(self) -> str:
        return ("an ordered loop whose carry is a vector of independent lanes (every element updated from its own "
                "element): each lane is a serial chain (T10), the chains run in parallel, one thread a lane")

    def part(self, graph: KernelGraph, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        return Part("carried_lanes", self.reason, (("lanes", names[self.lanes]), *params.items()), self.fused,
                    nodes=(self.loop, *self.writes))


def recognise(graph: KernelGraph) -> CarriedLanes | Rejected:
    """The lane loop of ``graph``, or why it is none."""
    return run_walk(_Walk(graph))


class _Walk:
    def __init__(self, graph: KernelGraph):
        self.graph = graph
        self.prologue = prologue(graph)  # checks made before any launch: scalars here, part of no body
        self.extent_of = extent_vars(graph, self.prologue)
        self.extents = {ev.extent: k for k, ev in enumerate(graph.extents)}
        self.views = {p.var: p for p in graph.params if p.kind == "view"}
        self.domains: dict = {}
        self.fused: set = set()
        self.writes: list = []
        self.read_views: set = set()
        self.point = None
        self.lane = None

    def fail(self, why: str):
        raise NotRecognised(why)

    def run(self) -> CarriedLanes:
        nodes = self.graph.body.nodes
        loops = [n for n in nodes if n.op is ops.loop]
        if len(loops) != 1:
            self.fail("no top-level loop" if not loops else "more than one top-level loop")
        (loop,) = loops
        if any(n.regions and n is not loop for n in walk_region(self.graph.body)):
            other = next(n for n in walk_region(self.graph.body) if n.regions and n is not loop)
            self.fail(f"op {other.op.name}{_at(other)} has regions (only the one loop's body is run per lane)")
        carry = T.leaf_types(loop.outputs[0].type) if len(loop.outputs) == 1 else []
        lanes = {t.shape[0] for t in carry if isinstance(t, T.TensorType) and t.rank == 1}
        if not carry or len(lanes) != 1 or any(not isinstance(t, T.TensorType) or t.rank != 1 for t in carry):
            self.fail(f"the loop{_at(loop)} does not carry vectors over one axis (the lanes)")
        (self.lane,) = lanes
        if self.lane not in self.extents:
            self.fail(f"the loop{_at(loop)} carries vectors over a static axis")
        (body,) = loop.regions
        self.point = body.params[0]
        for node in nodes:
            if node is loop:
                if match(UNIT_DOMAIN, self.producer(loop.inputs[0]), {}) is None:
                    self.fail(f"the loop{_at(loop)} is not over a unit-step domain from 0")
                self.values(loop)
                continue
            self.node(node)
        for node in body.nodes:
            self.node(node)
        for p in body.params[1:]:
            self.values_of(p.type, None)
        written = {w.inputs[0] for w in self.writes}
        both = written & self.read_views
        if both:
            self.fail(f"the view {self.views[next(iter(both))].name} is both read and written (a lane could read "
                      f"what another wrote)")
        if not self.writes:
            self.fail("nothing is written")
        return CarriedLanes(self.extents[self.lane], tuple(sorted(self.fused)), loop, tuple(self.writes))

    def producer(self, var):
        return next((n for n in walk_region(self.graph.body) if var in n.outputs), None)

    def values_of(self, t, node) -> None:
        for lt in T.leaf_types(t):
            if isinstance(lt, T.TensorType) and (lt.rank != 1 or lt.shape[0] is not self.lane):
                self.fail(f"op {node.op.name if node else 'the loop'}{_at(node)} has a value of shape "
                          f"{tuple(lt.shape)!r}, not a vector over the lanes")

    def values(self, node) -> None:
        for v in node.outputs:
            self.values_of(v.type, node)

    def node(self, node) -> None:
        op = node.op
        if node in self.prologue:  # a scalar computed before the launch: every lane sees it alike
            return
        if op is ops.domain:
            caps = match(UNIT_DOMAIN, node, {})
            if caps is None or caps["end"] not in self.extent_of:
                self.fail(f"the domain{_at(node)} is not domain(0, E, 1) of a kernel extent")
            self.domains[node.outputs[0]] = self.graph.extents[self.extent_of[caps["end"]]].extent
            return
        if op is ops.dim:
            return
        if op is ops.read or op is ops.write:
            return self.access(node)
        if not (op in POINTWISE or op in AGGREGATE or op is ops.broadcast or op is ops.full) or op.effects:
            self.fail(f"op {op.name}{_at(node)} is not one a lane computes alone (pointwise ops, broadcasts of "
                      f"scalars, reads and writes of the lane's element)")
        if op is ops.full and len(node.inputs) != 1:
            self.fail(f"the fill{_at(node)} takes extents computed in the kernel")
        if op in POINTWISE and node.inputs:
            self.fused.add(op.name)
        self.values(node)

    def access(self, node) -> None:
        view = node.inputs[0]
        p = self.views.get(view)
        if p is None:
            self.fail(f"the {node.op.name}{_at(node)} is not of a kernel view")
        operands = iter(node.inputs[2:] if node.op is ops.write else node.inputs[1:])
        lanes = 0
        for axis, kind in enumerate(node.attr("index")):
            dim = p.type.shape[axis]
            if kind == "all" or kind == "domain":
                covered = dim if kind == "all" else self.domains.get(next(operands))
                if covered is not self.lane or dim is not self.lane:
                    self.fail(f"the {node.op.name}{_at(node)} covers an axis other than the lanes whole")
                lanes += 1
            elif kind == "point":
                x = next(operands)
                if not (x is self.point or isinstance(x, Literal)):
                    self.fail(f"the {node.op.name}{_at(node)} indexes a point that is not the loop's own")
            else:
                self.fail(f"the {node.op.name}{_at(node)} indexes by a tensor")
        if lanes > 1:
            self.fail(f"the {node.op.name}{_at(node)} covers the lanes twice")
        if node.op is ops.write:
            if not lanes or p.type.access != "Out":
                self.fail(f"the write{_at(node)} is not of each lane's own element of an Out view")
            self.writes.append(node)
        else:
            self.read_views.add(view)
            self.values(node)
