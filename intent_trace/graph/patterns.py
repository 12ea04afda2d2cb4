"""Patterns over KIR values, and rewrites that build new graphs from them.

A backend that recognises a shape of graph (a matmul, a flash-attention fold, a unit-step domain) used to
spell it as hand-written walks over ``node.inputs`` and comparisons of tuples; here the shape is *data*: a
:class:`Pat` tree says which op (an OpDef, a set of OpDefs, or a trait set from :mod:`.traits`), dtype,
shape and attributes a value has, and which operands, with named captures and guards. :func:`match` answers
with the captures or None; :func:`rewrite` applies ``(pattern, build)`` rules and returns a new frozen graph.
The model is tinygrad's ``UPat``/``PatternMatcher``, adapted to KIR, where a value is a :class:`~.values.Var`
named by the node that defines it (``producers``), a :class:`~.values.Literal`, or a region parameter.

Matching is exhaustive (a generator backtracks through commutative operand orders and alternatives), so a
capture bound in one operand constrains the others: a name captured twice must be the same object (SSA
identity), as in tinygrad. Captures can be seeded (``match(..., captures={"q": q_param})``) to say that a
position *is* a given value. A Var is named by its node only when it is that node's one result (an op pattern
never matches one result of several); a node itself (a write, with none) is matched by passing the node.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator

import attrs

from . import ops as _ops
from .ops import OpDef
from .values import KernelGraph, Literal, Node, Region, Var, walk_region

#: Attributes that describe a node's result type or where the user wrote it, not what it computes: a *closed*
#: pattern (one that says "these attributes and no others") ignores them.
METADATA_ATTRS = frozenset({"type", "types", "extents", "helper", "helpers"})

#: The binary ops whose operands a pattern may match in either order (``commutative=True``). No trait says
#: this yet (graph/ops.py belongs to the registry): an identity set, kept here.
COMMUTATIVE = frozenset({_ops.add, _ops.mul, _ops.maximum, _ops.minimum})

_ANY = object()  # "no constraint" for a literal's value


def _op_set(op) -> frozenset | None:
    if op is None:
        return None
    if isinstance(op, OpDef):
        return frozenset({op})
    ops = frozenset(op)
    if not all(isinstance(o, OpDef) for o in ops):
        raise TypeError(f"a pattern's op is an OpDef or a set of OpDefs, got {op!r}")
    return ops


def _dtype_set(dtype) -> frozenset | None:
    if dtype is None:
        return None
    return frozenset(dtype) if isinstance(dtype, (set, frozenset, tuple, list)) else frozenset({dtype})


def _attr_items(a) -> tuple:
    return tuple(a.items()) if isinstance(a, dict) else tuple(a)


@attrs.frozen(slots=True, repr=False)
class Pat:
    """One pattern node. Every field left at its default is no constraint.

    - ``op``: the value is defined by (or the matched node is) a node of one of these ops;
    - ``operands``: sub-patterns for the node's inputs, in order (``commutative``: in any order; ``more``: the
      node may have further inputs after the ones named);
    - ``dtype``, ``shape``: of the value (of a node's one output); ``shape`` is a tuple of ints and
      :class:`~intent_trace.types.Dim` objects, compared by identity, or a predicate over the shape;
    - ``attrs``: ``{name: value or predicate}``; ``closed``: the node has no other attribute (besides
      :data:`METADATA_ATTRS`); ``where``: a predicate over the matched node (its regions, say);
    - ``literal``: the value is a Literal (``value``: equal to this, or satisfying this predicate);
    - ``alternatives``: the value matches one of these patterns (tried in order);
    - ``name``: capture the value under this name; ``guard``: a predicate over the captures made so far
      (this pattern's included), checked once its operands matched.
    """

    op: frozenset | None = attrs.field(default=None, converter=_op_set)
    operands: tuple | None = None
    dtype: frozenset | None = attrs.field(default=None, converter=_dtype_set)
    shape: Any = None
    attrs: tuple = attrs.field(default=(), converter=_attr_items)
    closed: bool = False
    where: Callable | None = None
    commutative: bool = False
    more: bool = False
    literal: bool = False
    value: Any = _ANY
    alternatives: tuple = ()
    name: str | None = None
    guard: Callable | None = None

    def __repr__(self) -> str:
        if self.literal:
            head = "lit" if self.value is _ANY else f"lit {self.value!r}"
        elif self.alternatives:
            head = " | ".join(map(repr, self.alternatives))
        elif self.op is not None:
            head = "|".join(sorted(o.name for o in self.op)) if len(self.op) < 4 else f"<{len(self.op)} ops>"
        else:
            head = "_"
        args = "" if self.operands is None else "(" + ", ".join(map(repr, self.operands)) + ")"
        return f"{head}{args}" + (f"@{self.name}" if self.name else "")


# --- constructors (the spelling the recognisers use) ------------------------------------------------------

def pat(op, *operands: Pat, **kw) -> Pat:
    """A node of ``op`` (an OpDef, a set of OpDefs or a trait set) whose inputs match ``operands``; with no
    operands given, any inputs (pass ``operands=()`` for "none")."""
    if operands:
        kw["operands"] = operands
    elif "operands" in kw and kw["operands"] is not None:
        kw["operands"] = tuple(kw["operands"])
    return Pat(op=op, **kw)


def any_(name: str | None = None, **kw) -> Pat:
    """Any value (a Var, a Literal or a node), captured as ``name``; with a name seeded or captured earlier,
    that very value."""
    return Pat(name=name, **kw)


def lit(value=_ANY, dtype=None, name: str | None = None, **kw) -> Pat:
    """A Literal operand, equal to ``value`` (or satisfying it, when it is callable) and of ``dtype``."""
    return Pat(literal=True, value=value, dtype=dtype, name=name, **kw)


def any_of(*alternatives: Pat, name: str | None = None, guard=None) -> Pat:
    """A value matching one of ``alternatives``, tried in order."""
    return Pat(alternatives=tuple(alternatives), name=name, guard=guard)


# --- matching ------------------------------------------------------------------------------------------

def producers(region: Region, nested: bool = True) -> dict:
    """{Var: the node that defines it} for the nodes of ``region`` (and of its nested regions, with ``nested``).
    Build it once per region and pass it to every :func:`match` there."""
    nodes = walk_region(region) if nested else region.nodes
    return {v: node for node in nodes for v in node.outputs}


def match(pattern: Pat, value, producers: dict, captures: dict | None = None) -> dict | None:
    """The captures of the first way ``value`` (a Node, Var or Literal) matches ``pattern``, or None.
    ``captures`` seeds names with the values they must be."""
    return next(matches(pattern, value, producers, captures), None)


def matches(pattern: Pat, value, producers: dict, captures: dict | None = None) -> Iterator[dict]:
    """Every way ``value`` matches ``pattern`` (as captures dicts), in the order the alternatives and
    operand orders are tried."""
    return _match(pattern, value, producers, dict(captures or {}))


def _type_of(value):
    if isinstance(value, Node):
        return value.outputs[0].type if len(value.outputs) == 1 else None
    return getattr(value, "type", None)


def _dtype_of(value):
    t = _type_of(value)
    return getattr(t, "dtype", t if isinstance(value, Literal) else None)


def _check(want, got) -> bool:
    return want(got) if callable(want) else got == want


def _match(p: Pat, value, producers: dict, caps: dict) -> Iterator[dict]:
    if p.name is not None and p.name in caps and caps[p.name] is not value:
        return
    if p.alternatives:
        for alt in p.alternatives:
            for c in _match(alt, value, producers, caps):
                yield from _bind(p, value, c)
        return
    node = value if isinstance(value, Node) else None
    if p.literal:
        if not isinstance(value, Literal) or (p.value is not _ANY and not _check(p.value, value.value)):
            return
    if node is None and isinstance(value, Var) and (p.op is not None or p.operands is not None or p.attrs
                                                    or p.where is not None or p.closed):
        node = producers.get(value)
        if node is not None and len(node.outputs) != 1:
            node = None  # a value is named by its node only when it is the node's one result
        if node is None:
            return
    if p.op is not None and (node is None or node.op not in p.op):
        return
    if p.dtype is not None and _dtype_of(value) not in p.dtype:
        return
    if p.shape is not None:
        shape = tuple(getattr(_type_of(value), "shape", ()))  # a scalar's (or a tuple's) shape is ()
        if callable(p.shape):
            if not p.shape(shape):
                return
        elif len(shape) != len(p.shape) or \
                any(a is not b and not (isinstance(a, int) and isinstance(b, int) and a == b)
                    for a, b in zip(shape, p.shape)):
            return
    if p.attrs or p.closed or p.where is not None:
        if node is None:
            return
        if not all(_check(want, node.attr(k)) for k, want in p.attrs):  # an absent attribute reads as None
            return
        if p.closed:
            named = {k for k, _ in p.attrs}
            if any(k not in named and k not in METADATA_ATTRS for k, _ in node.attrs):
                return
        if p.where is not None and not p.where(node):
            return
    if p.operands is None:
        yield from _bind(p, value, caps)
        return
    inputs = node.inputs if node is not None else None
    if inputs is None or len(inputs) < len(p.operands) or (len(inputs) != len(p.operands) and not p.more):
        return
    head = inputs[:len(p.operands)]
    orders = itertools.permutations(head) if p.commutative else (head,)
    for order in orders:
        for c in _operands(p.operands, order, producers, caps):
            yield from _bind(p, value, c)


def _operands(pats: tuple, values: tuple, producers: dict, caps: dict) -> Iterator[dict]:
    if not pats:
        yield caps
        return
    for c in _match(pats[0], values[0], producers, caps):
        yield from _operands(pats[1:], values[1:], producers, c)


def _bind(p: Pat, value, caps: dict) -> Iterator[dict]:
    if p.name is not None and p.name not in caps:
        caps = {**caps, p.name: value}
    if p.guard is None or p.guard(caps):
        yield caps


# --- rewriting -----------------------------------------------------------------------------------------

#: How many rule applications one :func:`rewrite` may make before it concludes its rules loop.
REWRITE_BUDGET = 100_000


def rewrite(graph: KernelGraph, rules) -> KernelGraph:
    """``graph`` with every node that matches a rule's pattern replaced by what the rule's build returns.

    ``rules`` is a sequence of ``(pattern, build)`` pairs; a pattern is matched against each node (so its top
    is a node pattern), in program order, inner regions first, and ``build(captures)`` returns None (no
    rewrite: the next rule is tried), an existing value (a Var or Literal that replaces the node's one
    result), a new Node, or a tuple of new nodes (inserted in its place; the last one's results replace the
    node's). New nodes are rewritten in turn (to a fixed point). Values used later, in nested regions and in
    region results are renamed accordingly. Nothing is mutated: unchanged nodes and regions are shared with
    the input, and a graph no rule changes is returned as is."""
    rules = tuple(rules)
    state = _Rewriter(rules, producers(graph.body))
    body = state.region(graph.body)
    return graph if body is graph.body else attrs.evolve(graph, body=body)


class _Rewriter:
    def __init__(self, rules: tuple, producers: dict):
        self.by_op: dict = {}
        self.anywhere = []
        for k, (pattern, build) in enumerate(rules):
            if pattern.op is None:
                self.anywhere.append((k, pattern, build))
            else:
                for op in pattern.op:
                    self.by_op.setdefault(op, []).append((k, pattern, build))
        self.producers = producers
        self.subst: dict = {}
        self.budget = REWRITE_BUDGET

    def value(self, x):
        while isinstance(x, Var) and x in self.subst:
            x = self.subst[x]
        return x

    def candidates(self, op) -> list:
        return sorted(self.by_op.get(op, []) + self.anywhere, key=lambda r: r[0])

    def node(self, node: Node) -> Node:
        inputs = tuple(self.value(x) for x in node.inputs)
        regions = tuple(self.region(r) for r in node.regions)
        if all(a is b for a, b in zip(inputs, node.inputs)) and all(a is b for a, b in zip(regions, node.regions)):
            return node
        return attrs.evolve(node, inputs=inputs, regions=regions)

    def region(self, region: Region) -> Region:
        out, changed = [], False
        work = list(reversed(region.nodes))
        while work:
            original = work.pop()
            node = self.node(original)
            changed |= node is not original
            replaced = self.apply(node)
            if replaced is None:
                out.append(node)
                for v in node.outputs:
                    self.producers[v] = node
                continue
            changed = True
            work.extend(reversed(replaced))
        results = tuple(self.value(x) for x in region.results)
        if not changed and all(a is b for a, b in zip(results, region.results)):
            return region
        return attrs.evolve(region, nodes=tuple(out), results=results)

    def apply(self, node: Node) -> tuple | None:
        """The nodes that replace ``node`` (after recording what its results become), or None."""
        for _, pattern, build in self.candidates(node.op):
            caps = match(pattern, node, self.producers)
            if caps is None:
                continue
            result = build(caps)
            if result is None:
                continue
            self.budget -= 1
            if self.budget < 0:
                raise RuntimeError(f"rewrite rules did not reach a fixed point after {REWRITE_BUDGET} "
                                   f"applications (the last matched {pattern!r})")
            if isinstance(result, (Var, Literal)):
                nodes, values = (), (result,)
            else:
                nodes = (result,) if isinstance(result, Node) else tuple(result)
                values = nodes[-1].outputs if nodes else ()
            if len(values) != len(node.outputs):
                raise ValueError(f"a rewrite of {node!r} gave {len(values)} results for its {len(node.outputs)}")
            for old, new in zip(node.outputs, values):
                if new is not old:
                    self.subst[old] = new
            return nodes
        return None
