"""Row groups: whole-tensor row kernels emitted as one parallel loop over rows (issue 19).

A whole-tensor softmax or layer norm is a chain of top-level nodes over ``[M, N]`` tensors in which reductions
along the trailing axes feed pointwise consumers broadcast back over the row. Emitted node by node, each step
that cannot fuse into its consumer (a reduction under a broadcast, a value used twice) is materialised into its
own array by its own parallel pass over all M rows: four passes and an M x N temporary for a softmax, each pass
streaming the whole tensor through the cache again. Row ``r`` of every one of those values depends only on row
``r`` of its operands, so the chain may equally run as ``for r in prange(M)`` with every step computed for row
``r`` only: the loop nest the ``for r in I.parallel(rows)`` spelling gets, with per-row scalars for the
reductions and row-sized buffers for what is materialised. Each element is still computed by the same scalar
code in the same order within its row (reductions keep their accumulator pattern), so results are bit-identical
to the node-by-node build.

:func:`row_groups` finds these chains. A *member* of a group over row extent ``M`` is a node every tensor result
of which has ``M`` as its first extent and whose element at row ``r`` reads only row ``r`` of any operand another
member defines:

- an elementwise op without effects (its operands share its shape);
- a broadcast, reshape or transpose keeping the first axis first and of extent ``M`` (a reshape that keeps the
  first extent keeps the row: row-major flat positions of row ``r`` unflatten to row ``r``);
- a reduce with a pointwise combine over axes other than 0 whose results are ``[M]`` (one scalar per row);
- a write whose value is a member's (or a hoisted value) and whose first index is ``:`` over a view axis of
  extent ``M`` (iteration ``r`` writes view row ``r`` only, so iterations never write the same element).

A pure node that depends on no member (a scalar, a view read, a fill, a parameter row such as ``g[:]``) is
*hoisted*: emitted before the row loop, in program order. A group never reads (in a member or a hoisted node)
a view it writes, so hoisting a read and running rows in any order cannot change what is read. A member whose
result is used after the group ends (or by a region result) ends the group before it: values computed per row
do not exist outside the row loop. A group is formed only when a reduction result is consumed by another member
by a member other than a write (the case the per-row loop improves); any other chain keeps its node-by-node code.

The body of a top-level ``I.parallel`` loop (``for b in I.parallel(B): y[b, :, :] = softmax(x[b, :, :])``) has
its groups too: each iteration runs its group's rows in a ``range`` inside the parallel loop (``row_loop``), and
a write whose leading indices are points fixed outside the group (``y[b, :, :]``) is a member: iteration ``r``
writes row ``r`` of the view's first whole axis. There a member whose value a later node of the body reads
(attention's probabilities, read by the second product; a reduction down the columns) does not end the group: it
is stored row by row into an array of its whole shape (``store_escaping``), allocated before the rows' loop, and
the later node reads that array -- as the node-by-node build would have materialised it. (Measured, one core of
this project's Xeon VM, quiet, two runs: a batch of 4 softmaxes of 1024 x 1024 in that form 4.2-4.3 -> 2.8 ms,
against 2.4 for the whole-tensor softmax of the same 4096 rows; batched layer norm 3.7-3.8 -> 1.35-1.43 ms;
benchmarks/cpu_rows.py's causal attention, whose two products dominate, unchanged within the run's noise.)

A hoisted value (one that depends on no member: ``s = x * t`` before a softmax of ``s``) is cheap to recompute in
the same way, and used twice by members it would be materialised whole before the rows' loop, a pass of its own:
it is recomputed by each use too (a temperature-scaled softmax of 4096 x 1024: 5.05 -> 2.54 ms, the plain one
2.39; one core).

A member's value used more than once is materialised into a row buffer (written, then read back by each use)
unless it is *recomputed* (:func:`recomputed`): a cheap pointwise value (one vector operation per element, no
division or T4 function) of operands that are themselves cheap to read -- the input row, per-row scalars, values
broadcast from them -- is computed again by each consumer instead. Layer norm's ``centred = x - mean`` then costs
one subtraction per use where the buffer cost a store and a reload per element (0.4 of its 1.5 ms). Each element
is the same scalar code either way, so results do not change.
"""
from __future__ import annotations

import attrs

from ... import types as T
from ...graph import ops
from ...codegen.analysis import evaluates_once
from ...graph.traits import ELEMENT_CONSUMERS, ELEMENTWISE, MATH_FUNCTIONS, POINTWISE, REMATERIALIZED
from ...graph.values import Region, Var, walk_region
from .inline import pointwise_combine

# Nodes that keep the first axis first (their operands' row r gives their row r).
_ROW_PRESERVING = frozenset({ops.broadcast, ops.reshape, ops.transpose})
# Pointwise ops whose element costs many cycles per vector (a division, a power): never recomputed.
_SLOW = frozenset({ops.div, ops.floordiv, ops.mod, ops.pow})
# At most this many cheap ops are recomputed per element of a recomputed value (its own and its operands').
MAX_RECOMPUTED_OPS = 3


@attrs.frozen(slots=True)
class RowGroup:
    """Nodes ``start .. end - 1`` of a region emitted as: ``hoisted`` (in order), then ``for r in prange(M)``
    over ``members`` (in order). ``extent`` is the row extent's type-level name (a Dim or int)."""

    start: int
    end: int
    extent: object
    hoisted: tuple
    members: tuple
    recomputed: frozenset = frozenset()
    stored: frozenset = frozenset()  # members' values used after the group: stored row by row into whole arrays


def _tensor(v) -> bool:
    return isinstance(v, Var) and isinstance(v.type, T.TensorType)


def _rows_of(v, extent) -> bool:
    return _tensor(v) and v.type.rank >= 1 and v.type.shape[0] == extent


def _pure(node) -> bool:
    return not node.regions and node.op.effects <= {"read"}


def _member(node, extent) -> bool:
    """Whether ``node`` may run per row of ``extent`` (the module docstring's list)."""
    op = node.op
    outs = node.outputs
    if op is ops.write:
        # the value's rows go to the view's first whole axis, after points fixed outside the group (``out[b, :, :]``
        # in a parallel loop's body over b): iteration r writes that axis's row r only
        view, value = node.inputs[0], node.inputs[1]
        kinds = node.attr("index") or ()
        first = next((k for k, kind in enumerate(kinds) if kind != "point"), None)
        return (first is not None and kinds[first] == "all" and view.type.shape[first] == extent
                and _rows_of(value, extent) and all(k in ("all", "point", "domain") for k in kinds))
    if not outs or not all(_rows_of(v, extent) for v in outs):
        return False
    if op in ELEMENTWISE:
        shape = outs[0].type.shape
        return not op.effects and not node.regions and \
            all(x.type.shape == shape for x in node.inputs if _tensor(x))
    if op in _ROW_PRESERVING:
        src = node.inputs[0]
        if not _rows_of(src, extent):
            return False
        if op is ops.broadcast:
            return src.type.rank == outs[0].type.rank
        if op is ops.transpose:
            return node.attr("perm")[0] == 0
        return True
    if op is ops.reduce:
        source, identity = node.inputs[0], node.inputs[1]
        return (pointwise_combine(node) and 0 not in node.attr("axes") and _rows_of(source, extent)
                and all(v.type.rank == 1 for v in outs)
                and (not _tensor(identity) or _rows_of(identity, extent)))
    return False


def _reads(node) -> set:
    return {n.inputs[0] for n in (node, *walk_region_nodes(node)) if "read" in n.op.effects}


def walk_region_nodes(node):
    for r in node.regions:
        yield from walk_region(r)


def _scan(nodes, start: int, uses: dict):
    """The longest group starting at ``start`` (None if no worthwhile one): (end, extent, hoisted, members)."""
    extent = None
    hoisted, members = [], []
    defined: set = set()
    k = start
    while k < len(nodes):
        node = nodes[k]
        depends = any(x in defined for x in node.inputs if isinstance(x, Var))
        if not depends and _pure(node):
            hoisted.append(k)
        else:
            if extent is None:
                first = node.inputs[0] if node.op is ops.write else (node.outputs[0] if node.outputs else None)
                if first is None or not _tensor(first) or first.type.rank < 1:
                    break
                extent = first.type.shape[0]
            if not _member(node, extent):
                break
            members.append(k)
            defined.update(node.outputs)
        k += 1
    return k, extent, hoisted, members


def _trim(nodes, start, end, hoisted, members, uses, store_escaping: bool = False):
    """Cut the group before its first member whose result is used at or after the group's end (``store_escaping``:
    by the region's results only; a later node's use reads the stored array)."""
    while True:
        escaping = [k for k in members if any(j is None or (j >= end and not store_escaping)
                                              for v in nodes[k].outputs for j in uses.get(v, ()))]
        if not escaping:
            return end, hoisted, members
        end = escaping[0]
        hoisted = [k for k in hoisted if k < end]
        members = [k for k in members if k < end]


def _worthwhile(nodes, members) -> bool:
    """A reduce result consumed by a member that computes (not only a write): the per-row loop then saves a
    pass and a temporary. A reduction written straight out keeps its code."""
    reduced = {v for k in members if nodes[k].op is ops.reduce for v in nodes[k].outputs}
    return any(x in reduced for k in members if nodes[k].op is not ops.write
               for x in nodes[k].inputs if isinstance(x, Var))


def _no_read_of_written(nodes, hoisted, members, reads: dict) -> bool:
    """Whether no member or hoisted node reads, itself or through an operand (a fused read defined before the
    group is evaluated inside it), a view a member writes."""
    written = {nodes[k].inputs[0] for k in members if nodes[k].op is ops.write}
    if not written:
        return True
    for k in (*hoisted, *members):
        seen = _reads(nodes[k])
        for x in nodes[k].inputs:
            seen |= reads.get(x, set())
        if seen & written:
            return False
    return True


def _transitive_reads(nodes) -> dict:
    """{value: the views its computation reads}, for the values of ``nodes``."""
    reads: dict = {}
    for node in nodes:
        seen = set(_reads(node))
        for x in node.inputs:
            seen |= reads.get(x, set())
        for v in node.outputs:
            reads[v] = seen
    return reads


def row_groups(region: Region, store_escaping: bool = False) -> dict:
    """{index of a group's first node: :class:`RowGroup`} for the nodes of ``region`` (not nested ones).
    ``store_escaping`` (a group of a top-level parallel loop's body, whose row loop runs inside the parallel one): a
    member whose value a later node of the region uses is stored row by row into an array of its whole shape (what
    that node reads) instead of ending the group; one the region's results use still ends it."""
    nodes = region.nodes
    uses: dict = {}
    for j, node in enumerate(nodes):
        for x in node.inputs:
            if isinstance(x, Var):
                uses.setdefault(x, []).append(j)
        for n in walk_region_nodes(node):
            for x in n.inputs:
                if isinstance(x, Var):
                    uses.setdefault(x, []).append(j)
        for r in node.regions:
            for x in r.results:
                if isinstance(x, Var):
                    uses.setdefault(x, []).append(j)
    for x in region.results:
        if isinstance(x, Var):
            uses.setdefault(x, []).append(None)
    reads = _transitive_reads(nodes)
    groups: dict = {}
    start = 0
    while start < len(nodes):
        end, extent, hoisted, members = _scan(nodes, start, uses)
        while True:
            end, hoisted, members = _trim(nodes, start, end, hoisted, members, uses, store_escaping)
            if not members or _no_read_of_written(nodes, hoisted, members, reads):
                break
            end = members[-1]  # end the group before its last member (and trim what then escapes)
            hoisted = [k for k in hoisted if k < end]
            members = [k for k in members if k < end]
        if members and _worthwhile(nodes, members):
            # what later nodes read (none unless ``store_escaping``: _trim ended the group before any such member)
            stored = frozenset(v for k in members for v in nodes[k].outputs
                               if any(j is not None and j >= end for j in uses.get(v, ())))
            groups[start] = RowGroup(start, end, extent, tuple(nodes[k] for k in hoisted),
                                     tuple(nodes[k] for k in members),
                                     recomputed(nodes, members, extent, uses, hoisted), stored)
            start = end
        else:
            # A group starting inside this run has this run's extent and fewer members: none is worthwhile
            # either. Restarting at the node that stopped the run keeps the analysis linear in the region.
            start = max(start + 1, end)
    return groups


def _cheap(op) -> bool:
    return op in POINTWISE and op not in MATH_FUNCTIONS and op not in _SLOW


def _per_row(v, extent) -> bool:
    """One element per row (``[M]``, ``[M, 1]``): the emitter holds it in a scalar local."""
    return _rows_of(v, extent) and all(e == 1 for e in v.type.shape[1:])


def recomputed(nodes, members, extent, uses: dict, hoisted=()) -> frozenset:
    """The members' and hoisted nodes' values recomputed by each use instead of materialised (the module
    docstring): a cheap pointwise value used more than once, every use by a member that evaluates each element
    once, whose element costs at most :data:`MAX_RECOMPUTED_OPS` cheap ops read from operands that are not row
    buffers of costly values (the input row, per-row scalars, broadcasts of them, other such values). A hoisted one
    (``x * t`` before a softmax of it: it depends on no member) would otherwise be materialised whole before the
    rows' loop, a pass of its own over the tensor."""
    made_by = {v: node for node in nodes for v in node.outputs}
    inside = {k: nodes[k] for k in members}
    candidates = {**{k: nodes[k] for k in hoisted}, **inside}
    cost: dict = {}

    def ops_of(x):
        """Cheap ops an element of ``x`` recomputes when read through a fused expression (None: not cheap)."""
        if not _tensor(x) or _per_row(x, extent):
            return 0
        if x in cost:
            return cost[x]
        node = made_by.get(x)
        if node is None:
            return 0  # a parameter: an array read
        if node.op in REMATERIALIZED or node.op in _ROW_PRESERVING:
            parts = [ops_of(y) for y in node.inputs]
        elif _cheap(node.op) and not node.regions:
            parts = [1, *(ops_of(y) for y in node.inputs)]
        else:
            return None
        cost[x] = None if None in parts else sum(parts)
        return cost[x]

    out = set()
    for k, node in candidates.items():
        if not _cheap(node.op) or node.regions or len(node.outputs) != 1:
            continue
        (v,) = node.outputs
        used_at = uses.get(v, [])
        if _per_row(v, extent) or len(used_at) < 2 or any(j not in inside for j in used_at):
            continue
        if not all(inside[j].op in ELEMENT_CONSUMERS and evaluates_once(inside[j], v) for j in used_at):
            continue
        n = ops_of(v)
        if n is not None and n <= MAX_RECOMPUTED_OPS:
            out.add(v)
    return frozenset(out)
