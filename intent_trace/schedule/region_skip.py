"""Which blocks of a segmented fold may be skipped: those where a coordinate mask of ``summarize`` is all false.

A segmented fold (:mod:`.region`) folds the source in blocks; a block's summary is combined into the running one.
When a block's summary *is* the fold's identity, combining it changes nothing -- the author promises
``combine(x, identity) == x`` (language §9.1, the same law that lets a target pad a tail with the identity) -- so a
target need not compute it. Causal attention is the example: ``summarize`` compares the absolute row (query) and
source (key) coordinates, ``keep = query_pos >= key_pos``, and a block of keys that lies entirely past a block of
rows has ``keep`` false everywhere; its scores become ``-inf``, ``p`` is the ``select``'s zero, ``m = -inf``,
``l = 0`` and ``P V = 0``: the identity ``(-inf, 0, 0)`` -- but only when ``V`` is finite there (``0 * inf`` is NaN,
and the serial program would keep it). ``K`` does not matter: the scores it makes are never selected.

:func:`prove` derives this from the graph, never from the example's names. For every comparison (``lt``, ``le``,
``gt``, ``ge``) of ``summarize`` between the row coordinates (an operand that is the indices of the rows' domain)
and the source coordinates (a source component that is the indices of the source axis' domain), each through
unit reshapes and broadcasts, it evaluates ``summarize`` partially with that comparison false everywhere:

- a ``select`` on a known condition is the side it picks (the other side is never computed: a NaN there is
  harmless); fills and constants are their values; broadcasts and reshapes keep a value;
- pointwise ops of known operands fold exactly: IEEE arithmetic, IEEE 754-2019 maximum/minimum, comparisons and
  logic, casts, and T4's functions only at their special values (``exp(-inf) = 0``);
- a reduction of a known value folds when its combine keeps it (``max(-inf, -inf) = -inf``, ``0 + 0 = 0``) whatever
  the number of members (a block has at least one);
- a contraction with an all-zero operand is the accumulator's +0 when the other operand is finite: a source
  component (through widening casts, broadcasts and unit reshapes) is then *needed finite* in the block;
- anything else is unknown.

The comparison is a skip when every summary leaf comes out known and equal, bit for bit, to the identity's fill.
A block of rows ``[r0, r0 + M)`` and of the source ``[k0, k0 + N)`` is then skippable when the comparison is false
for all its pairs -- for ``j <= i`` (``ge(i, j)``) when ``k0 > r0 + M - 1`` -- and the needed components are finite
in the block; a :class:`Bound` says which side of the diagonal that is. Any other shape proves nothing, and the
fold's program is the one that computes every block.
"""
from __future__ import annotations

import math

import attrs
import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.traits import AGGREGATE, MATH_FUNCTIONS
from ..graph.values import Literal, Var, walk_region
from .recognition import at as _at

#: A comparison ``a OP b`` as ``b OP' a`` (the operands swapped).
_SWAPPED = {ops.lt: ops.gt, ops.le: ops.ge, ops.gt: ops.lt, ops.ge: ops.le}
#: ``source OP row`` true for some pair of a block of rows [r0, r0 + M) and a block of the source: the live source
#: coordinates j are ``j < r0 + M + shift`` (upper) or ``j >= r0 + shift`` (lower).
_LIVE = {ops.le: ("upper", 0), ops.lt: ("upper", -1), ops.ge: ("lower", 0), ops.gt: ("lower", 1)}
_FOLD = {ops.add: np.add, ops.sub: np.subtract, ops.mul: np.multiply, ops.div: np.divide,
         ops.eq: np.equal, ops.ne: np.not_equal, ops.lt: np.less, ops.le: np.less_equal, ops.gt: np.greater,
         ops.ge: np.greater_equal, ops.and_: np.logical_and, ops.or_: np.logical_or}
#: The bool value that decides ``and``/``or`` whatever the other operand is (a mask and-ed with a data mask).
_ABSORBING = {ops.and_: False, ops.or_: True}
_ROW, _SOURCE = "row", "source"


@attrs.frozen(slots=True)
class Bound:
    """A comparison of the row and source coordinates (``node``) whose all-false blocks summarise to the identity.
    The source coordinates a block of rows ``[r0, r0 + M)`` may see are ``j < r0 + M + shift`` (``side``
    ``"upper"``: every block from the first at or past that is skippable) or ``j >= r0 + shift`` (``"lower"``)."""

    side: str
    shift: int
    text: str  # the comparison as the user wrote it, in coordinates: "source <= row"
    node: object = attrs.field(eq=False)


@attrs.frozen(slots=True)
class MaskedSkip:
    """The proof for one fold: its bounds and the positions (in ``plan.sources``) of the source components that must
    be finite in a skipped block."""

    bounds: tuple
    finite: tuple

    def describe(self, names: list) -> str:
        """``false for every pair of source <= row, where v is finite`` (``names``: the source components' names):
        which blocks are skippable."""
        need = " and ".join(names[k] for k in self.finite)
        return f"false for every pair of {' or of '.join(b.text for b in self.bounds)}" + \
            (f", where {need} {'is' if len(self.finite) == 1 else 'are'} finite" if need else "")


class _Unknown(Exception):
    pass


@attrs.frozen(slots=True)
class _Src:
    """A value that is a source component's elements (``k``: its position), finite where the component is."""

    k: int


def prove(graph, plan) -> MaskedSkip | str:
    """The skip of segmented fold ``plan`` (:class:`.region.SegmentedFold`) of ``graph``, or why there is none."""
    summarize = plan.fold.regions[0]
    coords = _coordinates(summarize, plan)
    if {kind for kind, _ in coords.values()} != {_ROW, _SOURCE}:
        return "summarize compares no row coordinate with a source coordinate"
    identity = _identity(graph, plan)
    if identity is None:
        return "an identity leaf is not a fill of a constant"
    bounds, finite, why = [], set(), []
    for node in summarize.nodes:
        sides = [coords.get(x) for x in node.inputs]
        if node.op not in _LIVE or len(sides) != 2 or None in sides or {k for k, _ in sides} != {_ROW, _SOURCE}:
            continue
        (kind, a), (_, b) = sides
        # as "source OP row + c"
        op, c = (node.op, b - a) if kind == _SOURCE else (_SWAPPED[node.op], a - b)
        try:
            needed = _empty_block_is_identity(summarize, node, plan, identity)
        except _Unknown as e:
            why.append(f"with the comparison{_at(node)} false, {e}")
            continue
        side, shift = _LIVE[op]
        symbol = {ops.lt: "<", ops.le: "<=", ops.gt: ">", ops.ge: ">="}[op]
        bounds.append(Bound(side, shift + c, f"source {symbol} row" + (f" {'+-'[c < 0]} {abs(c)}" if c else ""),
                            node))
        finite |= needed
    if not bounds:
        return "; ".join(why) or "summarize compares no row coordinate with a source coordinate"
    return MaskedSkip(tuple(bounds), tuple(sorted(finite)))


def _coordinates(summarize, plan) -> dict:
    """{Var: (``"row"`` or ``"source"``, offset)}: the values of summarize that are the absolute row or source
    coordinates plus a constant, through unit reshapes, broadcasts and additions of integer literals."""
    n_src = len(plan.sources)
    coords = {p: (_SOURCE, 0) for p, s in zip(summarize.params[:n_src], plan.sources) if s.param is None}
    coords.update({p: (_ROW, 0) for p, x in zip(summarize.params[n_src:], plan.operands)
                   if getattr(x, "param", 0) is None})
    for node in summarize.nodes:
        ins = node.inputs
        if (node.op is ops.reshape or node.op is ops.broadcast) and ins[0] in coords:
            coords[node.outputs[0]] = coords[ins[0]]
        elif node.op in (ops.add, ops.sub) and len(ins) == 2:
            var, lit = (ins[0], ins[1]) if ins[0] in coords else (ins[1], ins[0])
            if var in coords and isinstance(lit, Literal) and isinstance(lit.value, int) and \
                    (node.op is ops.add or var is ins[0]):
                kind, offset = coords[var]
                coords[node.outputs[0]] = (kind, offset + (lit.value if node.op is ops.add else -lit.value))
    return coords


def _identity(graph, plan):
    """The identity's leaves as NumPy scalars of their dtypes, or None when one is not a constant fill."""
    producers = {v: n for n in walk_region(graph.body) for v in n.outputs}
    ident = plan.fold.inputs[1]
    node = producers.get(ident)
    items = node.inputs if node is not None and node.op is ops.tuple else (ident,)
    out = []
    for x in items:
        fill = producers.get(x)
        value = fill.inputs[0] if fill is not None and fill.op is ops.full else None
        if isinstance(value, Var) and producers.get(value) is not None and producers[value].op is ops.constant:
            value = Literal(producers[value].attr("value"), value.type)
        if not isinstance(value, Literal):
            return None
        out.append(_scalar(value.value, T.leaf_types(x.type)[0].dtype))
    return tuple(out)


def _scalar(value, dtype):
    return np.asarray(value).astype(dtype.np)[()]


def _same(a, b) -> bool:
    return a.dtype == b.dtype and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _empty_block_is_identity(summarize, mask, plan, identity) -> frozenset:
    """The source components that must be finite for a block where ``mask`` is all false to summarise to
    ``identity``; raises :class:`_Unknown` saying where the evaluation loses the value."""
    env, needed = {mask.outputs[0]: np.bool_(False)}, set()
    for k, p in enumerate(summarize.params[:len(plan.sources)]):
        env[p] = _Src(k)

    def value(x):
        if isinstance(x, Literal):
            return _scalar(x.value, x.type.dtype)
        return env[x]

    why = {}  # an unknown value -> where its evaluation first lost a value (the root cause, for the message)
    for node in summarize.nodes:
        if node is mask or node.op is ops.dim:
            continue
        args = [value(x) if not isinstance(x, Var) or x in env else None for x in node.inputs]
        try:
            result = _evaluate(node, args, needed)
        except _Unknown as e:  # unknown: an error only if a summary leaf needs it
            lost = next((why[x] for x in node.inputs if x in why), None)
            for out in node.outputs:
                why[out] = lost or f"{e}{_at(node)}"
            continue
        env[node.outputs[0]] = result
    result = summarize.results[0]
    tuple_node = next((n for n in summarize.nodes if result in n.outputs and n.op is ops.tuple), None)
    leaf_vars = tuple_node.inputs if tuple_node is not None else (result,)
    got = [env.get(x) if isinstance(x, Var) else value(x) for x in leaf_vars]
    for k, (leaf, want) in enumerate(zip(got, identity)):
        if isinstance(leaf, np.generic) and not _same(leaf, want):
            raise _Unknown(f"summary leaf {k} is {_show(leaf)}, not the identity's {_show(want)}")
    for k, (x, leaf) in enumerate(zip(leaf_vars, got)):
        if not isinstance(leaf, np.generic):
            raise _Unknown(f"summary leaf {k} depends on values a masked block does not fix (first: "
                           f"{why.get(x, 'a source component')})")
    return frozenset(needed)


def _show(x) -> str:
    return "not known" if not isinstance(x, np.generic) else repr(x.item())


def _evaluate(node, args: list, needed: set):
    """A node's value from its operands' (None: unknown); raises :class:`_Unknown` when it is not known."""
    op, out = node.op, node.outputs[0]
    dtype = getattr(T.leaf_types(out.type)[0], "dtype", None)
    if op is ops.tuple:
        return tuple(args)  # unknown components stay None
    if op is ops.get:
        if not isinstance(args[0], tuple) or args[0][node.attr("index")] is None:
            raise _Unknown("a component")
        return args[0][node.attr("index")]
    if op in AGGREGATE:
        raise _Unknown(op.name)
    if op is ops.select:
        cond, a, b = args
        if isinstance(cond, np.generic):
            picked = a if bool(cond) else b
            if picked is None:
                raise _Unknown("the selected side")
            return picked
        if isinstance(a, np.generic) and isinstance(b, np.generic) and _same(a, b):
            return a
        raise _Unknown("a select on an unknown condition")
    if op is ops.broadcast or op is ops.reshape:
        if args[0] is None:
            raise _Unknown(op.name)
        return args[0]
    if op is ops.full:
        if not isinstance(args[0], np.generic):
            raise _Unknown("a fill")
        return _scalar(args[0], dtype)
    if op is ops.constant:
        return _scalar(node.attr("value"), dtype)
    if op is ops.cast:
        x = args[0]
        if isinstance(x, _Src):
            src = node.inputs[0].type.dtype
            if src.is_float and dtype.is_float and dtype.np.itemsize >= src.np.itemsize:
                return x  # a widening float cast keeps finiteness
            raise _Unknown("a narrowing cast of a source component")
        if isinstance(x, np.generic):
            with np.errstate(all="ignore"):
                return _scalar(x, dtype)
        raise _Unknown("a cast")
    if op is ops.reduce:
        return _reduce(node, args)
    if op is ops.contract:
        return _contract(node, args, needed)
    if op in _ABSORBING and len(args) == 2 and dtype is T.bool_:  # false and x, true or x: whatever x is
        for a in args:
            if isinstance(a, np.generic) and bool(a) == _ABSORBING[op]:
                return np.bool_(_ABSORBING[op])
    if any(not isinstance(a, np.generic) for a in args):
        raise _Unknown(op.name)
    return _pointwise(op, args, dtype)


def _pointwise(op, args: list, dtype):
    if op in MATH_FUNCTIONS and len(args) == 1:  # T4's specials hold for the approximate options too (T10)
        x = float(args[0])
        if math.isnan(x):
            return _scalar(math.nan, dtype)
        for special, result in op.math.specials or ():
            if _same(_scalar(special, dtype), _scalar(x, dtype)):
                return _scalar(result, dtype)
        raise _Unknown(f"{op.name} of a value that is none of its special values")
    if op is ops.maximum or op is ops.minimum:
        a, b = (float(x) for x in args)
        if math.isnan(a) or math.isnan(b):
            return _scalar(math.nan, dtype)
        if a == b == 0.0:  # IEEE 754-2019: -0 < +0
            pick = max if op is ops.maximum else min
            return _scalar(pick((a, b), key=lambda z: math.copysign(1.0, z)), dtype)
        return _scalar((max if op is ops.maximum else min)(a, b), dtype)
    if op is ops.neg:
        return _scalar(-args[0], dtype)
    fold = _FOLD.get(op)
    if fold is None or len(args) != 2 or (op is ops.div and not dtype.is_float):
        raise _Unknown(op.name)
    with np.errstate(all="ignore"):
        return _scalar(fold(*args), dtype)


def _reduce(node, args: list):
    """A reduction of a known value ``x``: known when its combine gives ``x`` back from ``(x, x)`` and from the
    identity and ``x`` (so every grouping of a block's members agrees; a block has one member at least)."""
    x, identity = args[0], args[1]
    (body,) = node.regions
    inner = body.nodes[0] if len(body.nodes) == 1 else None
    if not isinstance(x, np.generic) or not isinstance(identity, np.generic) or inner is None or \
            len(inner.outputs) != 1 or body.results != inner.outputs:
        raise _Unknown("a reduction")
    dtype = x.dtype
    for pair in ((x, x), (identity, x)):
        env = dict(zip(body.params, pair))
        got = _pointwise(inner.op, [env.get(v, v) for v in inner.inputs], T.leaf_types(inner.outputs[0].type)[0]
                         .dtype)
        if not _same(np.asarray(got).astype(dtype)[()], x):
            raise _Unknown("a reduction whose combine changes its members' value")
    return x


def _contract(node, args: list, needed: set):
    """A contraction with an all-zero operand: the accumulator's +0 when the other operand is finite."""
    acc = node.attr("acc_dtype") or node.outputs[0].type.dtype
    for zero, other in ((args[0], args[1]), (args[1], args[0])):
        if not (isinstance(zero, np.generic) and float(zero) == 0.0):
            continue
        if isinstance(other, np.generic):
            if not math.isfinite(float(other)):
                raise _Unknown("a contraction of zeros with a non-finite value")
            return _scalar(0.0, acc)
        if isinstance(other, _Src):
            needed.add(other.k)
            return _scalar(0.0, acc)
    raise _Unknown("a contraction")
