"""Which tensor values the Numba emitter may fuse into their consumer instead of materialising.

A tensor value is fused (recomputed element by element inside its consumer's loop nest) when it
has exactly one use, in the region that defines it, by an op that consumes element-wise, and no
node between definition and use writes a view that the value reads. Everything else becomes an
array at its definition. This keeps pointwise chains free of temporaries without ever reading a
view after a write that the program order puts later.
"""
from __future__ import annotations

from ... import types as T
from ...graph.values import KernelGraph, Region, Var

# Ops that consume operands element by element (so a fused operand is evaluated once per element).
FUSING_CONSUMERS = frozenset({
    "add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum", "and_", "or_", "xor", "shl", "shr",
    "eq", "ne", "lt", "le", "gt", "ge", "neg", "invert", "select", "fma", "cast", "bitcast", "broadcast",
    "reshape", "transpose", "slice", "join", "write", "read", "reduce", "scan", "gather", "histogram",
    "scatter_reduce", "store", "contract", "unique_store", "random_bits",
    "exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc", "i0", "rsqrt", "sqrt",
    "sigmoid", "abs", "exp2", "tanh",
})


def _writes(node) -> set:
    """The views and buffers a node (or anything in its regions) writes: operand 0 of writing ops."""
    out = set()
    if "write" in node.op.effects:
        out.add(node.inputs[0])
    for r in node.regions:
        for n in r.nodes:
            out |= _writes(n)
    return out


# Values recomputed per consumer rather than materialised when used more than once.
REMATERIALIZED = frozenset({"read", "broadcast", "full", "indices"})

ELEMENTWISE = FUSING_CONSUMERS - {"broadcast", "reshape", "transpose", "slice", "join", "write", "read", "reduce",
                                  "scan", "gather", "histogram", "scatter_reduce", "store", "contract",
                                  "unique_store"}


def fusible_values(graph: KernelGraph) -> tuple:
    """(fused values, {value: views it reads}, {value: {(view, index operands, kinds) or (view, None)}}).

    The third map says how each view is read: through elementwise ops only, at the index the read
    used (aligned), or through a shape transform (None). A write may consume a fused value that
    reads the destination only when every such read is aligned with the write's own index.
    """
    fused: set = set()
    reads: dict = {}  # Var -> views it reads (transitively)
    aligned: dict = {}  # Var -> set of (view, signature or None)

    def region(r: Region) -> None:
        position: dict = {}
        uses: dict = {}
        producer: dict = {}
        for i, node in enumerate(r.nodes):
            for v in node.outputs:
                position[v] = i
                producer[v] = node.op.name
            deps = set()
            if "read" in node.op.effects:
                deps.add(node.inputs[0])
            for x in node.inputs:
                if isinstance(x, Var):
                    uses.setdefault(x, []).append((i, node))
                    deps |= reads.get(x, set())
            access = set()
            if node.op.name in ("read", "load"):
                access.add((node.inputs[0], (node.attr("index"), tuple(node.inputs[1:]))))
            for x in node.inputs:
                if isinstance(x, Var):
                    for view, sig in aligned.get(x, ()):
                        access.add((view, sig if node.op.name in ELEMENTWISE else None))
            for v in node.outputs:
                reads[v] = deps
                aligned[v] = access
            for sub in node.regions:
                region(sub)
                for n in _walk(sub):
                    for x in n.inputs:
                        if isinstance(x, Var):
                            uses.setdefault(x, []).append((None, n))  # a use inside a nested region
                for x in sub.results:
                    if isinstance(x, Var):
                        uses.setdefault(x, []).append((None, None))
        for x in r.results:
            if isinstance(x, Var):
                uses.setdefault(x, []).append((None, None))
        for v, i in position.items():
            if not isinstance(v.type, T.TensorType):
                continue
            u = uses.get(v, [])
            if len(u) > 1 and producer[v] in REMATERIALIZED and all(j is not None for j, _ in u) and \
                    all(c.op.name in FUSING_CONSUMERS for _, c in u):
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
            if consumer.op.name not in FUSING_CONSUMERS or (consumer.op.name == "read" and consumer.inputs[0] is v):
                continue
            between = set()
            for n in r.nodes[i + 1:j]:
                between |= _writes(n)
            if between & reads.get(v, set()):
                continue
            fused.add(v)

    region(graph.body)
    return fused, reads, aligned


def _walk(r: Region):
    for n in r.nodes:
        yield n
        for s in n.regions:
            yield from _walk(s)
