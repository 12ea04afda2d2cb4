"""Indexed access on a grid: histograms and scatters (collisions combined by atomics) and row gathers (a grid over
the output rows), recognised from the graph's structure (ops compared as OpDefs, patterns, types), never from names.

- :class:`Histogram`: ``counts[:] = I.histogram(values, bins=B, valid=?)`` with ``values`` (and ``valid``) a pure
  expression of whole-axis reads and ``B`` static or the counts' kernel extent (``bins=counts.shape[0]``). Counts
  are integers and order-free (T10: histogram may run in any order), so a target may count each block's share in
  private bins and add them into the output atomically.
- :class:`Scatter`: ``I.scatter_reduce(dest, index, values, combine=...)`` of a kernel view, the graph's one
  effect, its combine one of the built-in binary ops (add, maximum, minimum, and, or, xor): each update is one
  device atomic read-modify-write of the same combine (collisions combine in any order, spec §13, T10).
- :class:`GatherRows`: ``out[:, ..., :] = I.gather(src[...], (i0, ..., identity))`` whose last index is the
  identity over the source's last axis and whose other indices are constant along it (an embedding lookup):
  every output row is one source row, so a target reads each row's coordinates once and copies the row with
  neighbouring threads on neighbouring elements.

Each ``recognise_*`` returns its record or a :class:`Rejected` saying why not (the schedule's serial reason).
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.patterns import match
from ..graph.values import KernelGraph, Literal, walk_region
from .access import UNIT_DOMAIN, full_axes
from .plan import Part
from .prologue import extent_vars, prologue
from .recognition import NotRecognised, Rejected

THREADS = 256  # a block's threads (a target may choose its own and say so in its part)
#: The combines a scatter applies as one device atomic: the atomic_rmw kinds of the built-in combines.
ATOMIC_COMBINES = {ops.add: "add", ops.maximum: "max", ops.minimum: "min", ops.and_: "and", ops.or_: "or",
                   ops.xor: "xor"}
COUNT_DTYPES = frozenset({"i32", "i64"})  # counts a device atomic adds natively (wrap-around, T2)




def _views(graph: KernelGraph) -> dict:
    return {p.var: p for p in graph.params if p.kind == "view"}


def _pure_producers(graph: KernelGraph, nodes, views: dict, extents: dict) -> None:
    """Every node is pure and reads kernel views over whole axes (a read of a point or of part of an axis could
    fail a check per element, or depend on a loop), or is part of the prologue (checked before any launch)."""
    domains: dict = {}
    pro = prologue(graph)
    for node in nodes:
        if node in pro:
            continue
        if node.op.effects - {"read"} or node.regions:
            raise NotRecognised(f"op {node.op.name} has effects or regions of its own before the indexed op")
        if node.op is ops.domain:
            caps = match(UNIT_DOMAIN, node, {})
            if caps is not None and caps["end"] in extents:
                domains[node.outputs[0]] = extents[caps["end"]]
            continue
        if node.op is ops.read:
            p = views.get(node.inputs[0])
            if p is None or full_axes(node, p.type, extents, domains) is None:
                raise NotRecognised("a read that is not of whole axes of a kernel view")


# --- histogram ------------------------------------------------------------------------------------------------

@attrs.frozen(slots=True)
class Histogram:
    """``node``: the histogram; ``write``: the final whole write of its counts to ``out`` (a view parameter of
    shape (bins,)); ``count``: the counts' dtype. ``bins`` is the static bin count, or (a runtime one) the name of
    the kernel extent that gives it, ``runtime`` (its Var: the host knows it before the call, and a launch sized by
    it zeroes the counts)."""

    bins: int | str
    count: str
    has_valid: bool
    node: object = attrs.field(eq=False)
    write: object = attrs.field(eq=False)
    out: object = attrs.field(eq=False)
    runtime: object = attrs.field(eq=False, default=None)

    reason = ("a histogram's counts are integers combined in any order (T10): each block counts its share of the "
              "values into private bins, then adds them into the output with device atomics")

    def part(self, graph: KernelGraph, **params) -> Part:
        return Part("privatised_histogram", self.reason, (("bins", self.bins), *params.items()),
                    nodes=(self.node, self.write))


def recognise_histogram(graph: KernelGraph) -> Histogram | Rejected:
    nodes = graph.body.nodes
    hist = [n for n in walk_region(graph.body) if n.op is ops.histogram]
    if len(hist) != 1 or len(nodes) < 2 or nodes[-2] is not hist[0] or nodes[-1].op is not ops.write:
        return Rejected("not one histogram whose counts are the graph's one final write")
    node, write = nodes[-2], nodes[-1]
    views, extents = _views(graph), extent_vars(graph)
    out = views.get(write.inputs[0])
    bins, count = node.attr("bins"), node.attr("type").dtype
    if out is None or write.inputs[1] is not node.outputs[0] or out.type.access != "Out":
        return Rejected("the histogram's counts are not written whole to an Out view")
    if write.attr("index") != ("all",) or tuple(out.type.shape) != tuple(node.attr("type").shape):
        return Rejected("the histogram's counts are not written whole to an Out view of (bins,)")
    runtime = None
    if bins is None:  # a runtime bin count: the counts' own extent (bins=counts.shape[0]), which the host knows
        runtime = node.inputs[-1]
        if runtime not in extents:
            return Rejected("the histogram's runtime bin count is not a kernel extent (the launch that zeroes the "
                            "counts is sized by it before the kernel runs)")
        bins = graph.extents[extents[runtime]].extent.name
    if count.name not in COUNT_DTYPES:
        return Rejected(f"counts of dtype {count} (a device atomic adds i32 and i64 counts)")
    values = node.inputs[0]
    if not isinstance(values.type, T.TensorType) or not values.type.shape:
        return Rejected("the histogram's values are not a tensor")
    try:
        _pure_producers(graph, nodes[:-2], views, extents)
    except NotRecognised as e:
        return Rejected(str(e))
    if any(n.op is ops.read and n.inputs[0] is write.inputs[0] for n in nodes):
        return Rejected("the counts' view is also read")
    return Histogram(bins, count.name, bool(node.attr("has_valid")), node, write, out, runtime)


# --- scatter_reduce ----------------------------------------------------------------------------------------------

@attrs.frozen(slots=True)
class Scatter:
    """``node``: the scatter_reduce (the graph's last node and one effect); ``kind``: its combine as an atomic
    read-modify-write kind; ``dtype``: the destination's."""

    kind: str
    dtype: str
    node: object = attrs.field(eq=False)
    dest: object = attrs.field(eq=False)

    reason = ("scatter_reduce combines collisions in any order (spec §13, T10): a grid over the updates, each "
              "applied with one device atomic of the combine")

    def part(self, graph: KernelGraph, **params) -> Part:
        return Part("atomic_scatter", self.reason, (("combine", self.kind), *params.items()), nodes=(self.node,))


def _combine_kind(region) -> str | None:
    """The atomic kind of a combine region ``(old, new) -> op(old, new)`` (either operand order: the built-in
    combines are commutative), else None."""
    if len(region.nodes) != 1 or len(region.params) != 2:
        return None
    (n,) = region.nodes
    kind = ATOMIC_COMBINES.get(n.op)
    if kind is None or n.regions or set(n.inputs) != set(region.params) or len(n.inputs) != 2:
        return None
    return kind if tuple(region.results) == tuple(n.outputs) else None


def recognise_scatter(graph: KernelGraph) -> Scatter | Rejected:
    nodes = graph.body.nodes
    if not nodes or nodes[-1].op is not ops.scatter_reduce:
        return Rejected("not a graph whose one effect is a final scatter_reduce")
    node = nodes[-1]
    views, extents = _views(graph), extent_vars(graph)
    dest = views.get(node.inputs[0])
    if dest is None:
        return Rejected("the scatter_reduce's destination is not a kernel view")
    kind = _combine_kind(node.regions[0])
    if kind is None:
        return Rejected("the scatter_reduce's combine is not one built-in binary op (add, maximum, minimum, and, or, "
                        "xor), which a device atomic applies")
    d = dest.type.dtype
    if not (d.is_int and d.bits in (32, 64) or d.name == "f32"):
        return Rejected(f"a destination of dtype {d} (device atomics take 32- and 64-bit integers and f32)")
    if any(isinstance(x, Literal) for x in node.inputs[1:]):
        return Rejected("a scatter_reduce of a literal value or index")
    try:
        _pure_producers(graph, nodes[:-1], views, extents)
    except NotRecognised as e:
        return Rejected(str(e))
    if any(n.op is ops.read and n.inputs[0] is node.inputs[0] for n in nodes):
        return Rejected("the destination is also read (its updates would race with the reads)")
    return Scatter(kind, d.name, node, dest)


# --- row gathers -----------------------------------------------------------------------------------------------

@attrs.frozen(slots=True)
class GatherRows:
    """``out[r..., :] = src[i(r...), :]``: ``node`` the gather, ``write`` its whole write to ``out``, ``source``
    the whole read of ``src`` it gathers from; ``rows`` the leading index operands (each constant along the
    last axis: a broadcast of a value whose last axis is 1)."""

    rank: int  # the output's rank (its last axis is the copied row)
    node: object = attrs.field(eq=False)
    write: object = attrs.field(eq=False)
    source: object = attrs.field(eq=False)
    out: object = attrs.field(eq=False)
    rows: tuple = attrs.field(eq=False)

    reason = ("each output row is one source row (the last index is the identity): a grid over the output rows, "
              "each row's coordinates read and checked once, its elements copied by neighbouring threads")

    def part(self, graph: KernelGraph, **params) -> Part:
        return Part("gather_rows", self.reason, tuple(params.items()), nodes=(self.node, self.write))


def _producer(nodes, var):
    return next((n for n in nodes if var in n.outputs), None)


def _identity_last(nodes, var, extents: dict, axis_extent) -> bool:
    """``var`` is ``broadcast(reshape(indices(domain(0, E, 1)), (1, ..., E)))`` (or the reshape itself) with E the
    source's last axis: the identity along the last axis."""
    n = _producer(nodes, var)
    if n is not None and n.op is ops.broadcast:
        n = _producer(nodes, n.inputs[0])
    if n is None or n.op is not ops.reshape or len(n.inputs) != 1:
        return False
    shape = tuple(n.outputs[0].type.shape)
    if shape[-1] is not axis_extent or any(s != 1 for s in shape[:-1]):
        return False
    ix = _producer(nodes, n.inputs[0])
    if ix is None or ix.op is not ops.indices:
        return False
    dom = _producer(nodes, ix.inputs[0])
    caps = match(UNIT_DOMAIN, dom, {}) if dom is not None else None
    return caps is not None and caps["end"] in extents and caps["end"].extent is axis_extent


def _constant_last(nodes, var) -> bool:
    """``var`` is a broadcast of a value whose last axis is 1: the same element all along the last axis."""
    n = _producer(nodes, var)
    if n is None or n.op is not ops.broadcast:
        return False
    shape = getattr(n.inputs[0].type, "shape", ())
    return len(shape) == len(n.outputs[0].type.shape) and shape[-1] == 1


def recognise_gather_rows(graph: KernelGraph) -> GatherRows | Rejected:
    nodes = graph.body.nodes
    if len(nodes) < 2 or nodes[-1].op is not ops.write or nodes[-2].op is not ops.gather:
        return Rejected("not a gather whose result is the graph's one final write")
    node, write = nodes[-2], nodes[-1]
    views, extents = _views(graph), extent_vars(graph)
    out = views.get(write.inputs[0])
    if out is None or out.type.access != "Out" or write.inputs[1] is not node.outputs[0]:
        return Rejected("the gather is not written to an Out view")
    if set(write.attr("index")) != {"all"} or node.attr("has_valid"):
        return Rejected("the gather is not written whole, or has a valid mask")
    src = _producer(nodes, node.inputs[0])
    rank = node.inputs[0].type.rank
    if src is None or src.op is not ops.read or set(src.attr("index")) != {"all"} or src.inputs[0] not in views:
        return Rejected("the gather's source is not a whole read of a kernel view")
    sp = views[src.inputs[0]]
    ot = node.outputs[0].type
    if sp.type.dtype != out.type.dtype or tuple(ot.shape) != tuple(out.type.shape) or ot.rank < 1:
        return Rejected("the gathered rows are not the written view's (dtype or shape)")
    last = sp.type.shape[-1]
    if ot.shape[-1] is not last:
        return Rejected("the output rows are not as long as the source rows")
    index = node.inputs[1:1 + rank]
    if not _identity_last(nodes, index[-1], extents, last):
        return Rejected("the gather's last index is not the identity over the source's last axis")
    if not all(_constant_last(nodes, x) for x in index[:-1]):
        return Rejected("a leading gather index varies along the row")
    try:
        _pure_producers(graph, nodes[:-2], views, extents)
    except NotRecognised as e:
        return Rejected(str(e))
    if any(n.op is ops.read and n.inputs[0] is write.inputs[0] for n in nodes):
        return Rejected("the written view is also read")
    return GatherRows(ot.rank, node, write, src, out, tuple(index[:-1]))


def why_not(graph: KernelGraph) -> str | None:
    """Why a graph holding a histogram, a scatter_reduce or a gather got none of these mappings (None: it holds
    none of them, or it is one)."""
    found = {n.op for n in walk_region(graph.body)}
    for op, recognise, what in ((ops.histogram, recognise_histogram, "privatised_histogram"),
                                (ops.scatter_reduce, recognise_scatter, "atomic_scatter"),
                                (ops.gather, recognise_gather_rows, "gather_rows")):
        if op in found:
            got = recognise(graph)
            if isinstance(got, Rejected):
                return f"not a {what}: {got.reason}"
    return None
