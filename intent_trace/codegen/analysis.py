"""Which tensor values the Numba emitter may fuse into their consumer instead of materialising.

A tensor value is fused (recomputed element by element inside its consumer's loop nest) when it
has exactly one use, in the region that defines it, by an op that consumes element-wise (several operands of one
elementwise op, as in ``c * c``, are one use: the shared rule evaluates the element once for all of them), and no
node between definition and use writes a view that the value reads. Everything else becomes an
array at its definition. This keeps pointwise chains free of temporaries without ever reading a
view after a write that the program order puts later.

A *costly* value is one whose every element runs a loop: a reduction or a contraction, or anything that
fuses one. It is fused only into a consumer that evaluates each of its elements once (an elementwise op, a
shape permutation, the source of a reduce, the value of a write); under a broadcast, as a contract operand,
a gather source, an index, a reduce capture or with several uses it is materialised at its definition.
Otherwise a row reduction under a broadcast runs once per element of the row, not once per row (N^3 per
row for a whole-tensor softmax). Generators that keep tensors lazy (TileLang) must materialise every
costly value the analysis does not fuse (``Fusion.materialized``); cpu computes reductions eagerly.
"""
from __future__ import annotations

import bisect

import attrs

from .. import types as T
from ..graph import ops, traits
from ..graph.traits import ELEMENT_CONSUMERS, ELEMENTWISE, LOOPING, REMATERIALIZED
from ..graph.values import KernelGraph, Region, Var, walk_region

#: The ops that read one element of a view (or buffer) at an index: a value's access signature starts there.
ELEMENT_ACCESSES = frozenset({ops.read, ops.load})


def _writes(node) -> set:
    """The views and buffers a node (or anything in its regions) writes: operand 0 of writing ops."""
    out = set()
    if "write" in node.op.effects:
        out.add(node.inputs[0])
    for r in node.regions:
        for n in r.nodes:
            out |= _writes(n)
    return out


def evaluates_once(consumer, v: Var) -> bool:
    """Whether ``consumer`` evaluates each element of its operand ``v`` (used once by it) at most once: every
    operand of an elementwise op or a shape permutation, a reduce's or scan's source and identity, the value of
    a write, the values of a scatter_reduce, the values of a histogram (the ops' traits). Anything else (a
    broadcast, a contract operand, a gather source, index operands, reduce captures) evaluates an element many
    times, so a costly value fuses only into the former."""
    return any(x is v and traits.evaluates_once(consumer.op, k) for k, x in enumerate(consumer.inputs))


@attrs.frozen(slots=True)
class Fusion:
    """The analysis' result: ``fused``, ``reads`` and ``aligned`` as :func:`fusible_values` returns them, and
    ``materialized``: the costly values (see the module docstring) that are not fused, which a generator that
    keeps tensors lazy must hold in an array at their definition."""

    fused: frozenset
    reads: dict
    aligned: dict
    materialized: frozenset


def fusible_values(graph: KernelGraph) -> tuple:
    """(fused values, {value: views it reads}, {value: {(view, index operands, kinds) or (view, None)}}).

    The third map says how each view is read: through elementwise ops only, at the index the read
    used (aligned), or through a shape transform (None). A write may consume a fused value that
    reads the destination only when every such read is aligned with the write's own index.
    """
    f = fusion(graph)
    return set(f.fused), f.reads, f.aligned


def fusion(graph: KernelGraph) -> Fusion:
    """The fusion decisions for ``graph`` (:class:`Fusion`)."""
    fused: set = set()
    costly: set = set()
    reads: dict = {}  # Var -> views it reads (transitively)
    aligned: dict = {}  # Var -> set of (view, signature or None)

    def region(r: Region) -> None:
        position: dict = {}
        uses: dict = {}
        made_by: dict = {}
        for i, node in enumerate(r.nodes):
            for v in node.outputs:
                position[v] = i
                made_by[v] = node
            deps = set()
            if "read" in node.op.effects:
                deps.add(node.inputs[0])
            for x in node.inputs:
                if isinstance(x, Var):
                    uses.setdefault(x, []).append((i, node))
                    deps |= reads.get(x, set())
            access = set()
            if node.op in ELEMENT_ACCESSES:
                access.add((node.inputs[0], (node.attr("index"), tuple(node.inputs[1:]))))
            for x in node.inputs:
                if isinstance(x, Var):
                    for view, sig in aligned.get(x, ()):
                        access.add((view, sig if node.op in ELEMENTWISE else None))
            for v in node.outputs:
                reads[v] = deps
                aligned[v] = access
            for sub in node.regions:
                region(sub)
                for n in walk_region(sub):
                    for x in n.inputs:
                        if isinstance(x, Var):
                            uses.setdefault(x, []).append((None, n))  # a use inside a nested region
                for x in sub.results:
                    if isinstance(x, Var):
                        uses.setdefault(x, []).append((None, None))
        for x in r.results:
            if isinstance(x, Var):
                uses.setdefault(x, []).append((None, None))
        for v, i in position.items():  # in definition order: a value's operands are decided before it
            node = made_by[v]
            if node.op in LOOPING or any(x in fused and x in costly for x in node.inputs if isinstance(x, Var)):
                costly.add(v)  # each element runs a loop: its producer's, or that of a costly value it fuses
            if not isinstance(v.type, T.TensorType):
                continue
            u = uses.get(v, [])
            if v not in costly and len(u) > 1 and u[0][0] is not None and u[0][1].op in ELEMENTWISE and \
                    all(c is u[0][1] for _, c in u):
                u = u[:1]  # ``c * c``: one elementwise op, which evaluates each element of ``c`` once for both operands
            if v in costly and (len(u) != 1 or u[0][0] is None or not evaluates_once(u[0][1], v)):
                continue
            if len(u) > 1 and node.op in REMATERIALIZED and all(j is not None for j, _ in u) and \
                    all(c.op in ELEMENT_CONSUMERS for _, c in u):
                # A cheap value (a view read, a broadcast, a constant) is recomputed by each consumer
                # instead of copied into an array, if nothing writes what it reads before its last use.
                last = max(j for j, _ in u)
                between = set()
                for n in r.nodes[i + 1:last]:
                    between |= _writes(n)
                if not between & reads.get(v, set()):
                    fused.add(v)
                continue
            if len(u) != 1 or u[0][0] is None:
                continue
            j, consumer = u[0]
            if consumer.op not in ELEMENT_CONSUMERS or (consumer.op is ops.read and consumer.inputs[0] is v):
                continue
            between = set()
            for n in r.nodes[i + 1:j]:
                between |= _writes(n)
            if between & reads.get(v, set()):
                continue
            fused.add(v)

    region(graph.body)
    return Fusion(frozenset(fused), reads, aligned, frozenset(costly - fused))


def snapshot_values(graph: KernelGraph, fused: set, reads: dict) -> set:
    """Tensor values that would be evaluated after a write to a view they read: evaluated lazily at
    each use (the TileLang emitter keeps tensors lazy), they would see the write, so they are snapshotted where
    they are defined.

    A value defined at node i is snapshotted when some later node j uses it (in its operands, or anywhere in its
    regions) after a node between them wrote what it reads, or when j itself has regions that write it. Linear
    in the region's length for a chain without writes (an unrolled chain of 10,000 ops)."""
    out: set = set()

    def used(node, into: set) -> set:
        into.update(x for x in node.inputs if isinstance(x, Var))
        for r in node.regions:
            into.update(x for x in r.results if isinstance(x, Var))
            for n in r.nodes:
                used(n, into)
        return into

    def region(r) -> None:
        written = [_writes(n) for n in r.nodes]
        writers = [k for k, w in enumerate(written) if w]
        uses: dict = {}  # Var -> positions of the nodes that use it, ascending
        for j, node in enumerate(r.nodes):
            for x in used(node, set()):
                uses.setdefault(x, []).append(j)
        for i, node in enumerate(r.nodes):
            for sub in node.regions:
                region(sub)
            for v in node.outputs:
                if not isinstance(v.type, T.TensorType) or not reads.get(v):
                    continue
                seen: set = set()
                w = bisect.bisect_right(writers, i)
                for j in uses.get(v, ()):
                    if j <= i:
                        continue
                    while w < len(writers) and writers[w] < j:
                        seen |= written[writers[w]]
                        w += 1
                    if (seen | (written[j] if r.nodes[j].regions else set())) & reads[v]:
                        out.add(v)
                        break

    region(graph.body)
    return out
