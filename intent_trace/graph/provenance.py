"""Coordinate provenance: data attached to index values.

Every coordinate value (a domain point, ``I.indices`` of a domain or subregion, and whatever
helpers, slices, shape transforms and affine arithmetic make of them) carries an
:class:`IndexRelation`:

- ``source``: the root domain value, i.e. the *identity* of the iteration space;
- ``source_axis``: the axis of that source the coordinates run along;
- ``member``: the member ordinal of the source as an expression of the value's own axes
  (``a0, a1, ...``) or, for a scalar point, of the iteration ordinal ``o``;
- ``coord``: the value as an expression of the source coordinate ``c`` of that member.

Rules that rewrite values (reshape, transpose, broadcast, slice, arithmetic) rewrite these
expressions, so the facts survive any number of helper boundaries: helpers are inlined by the
tracer and the relation travels with the value, never with the call.

Expressions are bounded: constant offsets fold (``(c + 1) - 1`` is ``c``), and a value whose
expression would be deeper than :data:`MAX_DEPTH` operations carries no relation (provenance is
information, never semantics). Without the bound a Python loop of ``i = i * 3 + 1`` would grow one
expression per op, and printing, comparing or rewriting it would recurse as deep as the loop ran.
"""
from __future__ import annotations

from typing import Any

import attrs

MAX_DEPTH = 64  # operations in one provenance expression; deeper values carry no relation


class Expr:
    __slots__ = ()

    def __add__(self, other):
        return BinExpr("+", self, wrap(other))

    def __mul__(self, other):
        return BinExpr("*", self, wrap(other))


@attrs.frozen(slots=True, repr=False)
class AxisPos(Expr):
    """Position along axis ``k`` of the value the relation is attached to."""

    k: int

    def __repr__(self) -> str:
        return f"a{self.k}"


@attrs.frozen(slots=True, repr=False)
class Ordinal(Expr):
    """The iteration ordinal of the point (for scalar coordinates from iteration)."""

    def __repr__(self) -> str:
        return "o"


@attrs.frozen(slots=True, repr=False)
class Coord(Expr):
    """The source coordinate of the member."""

    def __repr__(self) -> str:
        return "c"


@attrs.frozen(slots=True, repr=False)
class Const(Expr):
    value: Any

    def __repr__(self) -> str:
        return repr(self.value)


@attrs.frozen(slots=True, eq=False, repr=False)
class Ref(Expr):
    """A runtime SSA value (a Var) or an extent (a Dim) used by the expression."""

    value: Any

    def __repr__(self) -> str:
        from ..types import Dim, extent_str

        if isinstance(self.value, Dim):
            return extent_str(self.value)
        from .printer import current_name

        return current_name(self.value)


@attrs.frozen(slots=True, repr=False)
class BinExpr(Expr):
    op: str  # "+", "-", "*", "//", "%"
    lhs: Expr
    rhs: Expr
    depth: int = attrs.field(init=False, eq=False, hash=False)

    @depth.default
    def _depth(self) -> int:
        return 1 + max(depth(self.lhs), depth(self.rhs))

    def __repr__(self) -> str:
        return f"({self.lhs!r} {self.op} {self.rhs!r})"


@attrs.frozen(slots=True, repr=False)
class NegExpr(Expr):
    arg: Expr
    depth: int = attrs.field(init=False, eq=False, hash=False)

    @depth.default
    def _depth(self) -> int:
        return 1 + depth(self.arg)

    def __repr__(self) -> str:
        return f"-{self.arg!r}"


def depth(expr) -> int:
    """Operations on the longest path of ``expr`` (leaves: 0), kept on each node so it costs nothing."""
    return getattr(expr, "depth", 0)


def wrap(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, int):
        return Const(x)
    return Ref(x)


def simplify_add(lhs: Expr, rhs: Expr) -> Expr:
    if isinstance(rhs, Const) and rhs.value == 0:
        return lhs
    if isinstance(lhs, Const) and lhs.value == 0:
        return rhs
    if isinstance(lhs, Const) and isinstance(rhs, Const):
        return Const(lhs.value + rhs.value)
    return BinExpr("+", lhs, rhs)


def substitute(expr: Expr, mapping) -> Expr:
    """Replace leaves for which ``mapping(leaf)`` returns an Expr."""
    if isinstance(expr, BinExpr):
        lhs, rhs = substitute(expr.lhs, mapping), substitute(expr.rhs, mapping)
        return simplify_add(lhs, rhs) if expr.op == "+" else BinExpr(expr.op, lhs, rhs)
    if isinstance(expr, NegExpr):
        return NegExpr(substitute(expr.arg, mapping))
    replaced = mapping(expr)
    return expr if replaced is None else replaced


@attrs.frozen(slots=True, repr=False)
class IndexRelation:
    """Provenance of a coordinate value (see the module docstring)."""

    kind: str  # "point" | "indices" (what produced the value first)
    source: Any  # the root domain Var
    source_axis: int
    member: Expr
    coord: Expr = Coord()

    def __repr__(self) -> str:
        from .printer import current_name

        text = f"{self.kind} of {current_name(self.source)} axis {self.source_axis}: m = {self.member!r}"
        if not isinstance(self.coord, Coord):
            text += f", value = {self.coord!r}"
        return text

    def map_member(self, mapping) -> "IndexRelation | None":
        return bounded(attrs.evolve(self, member=substitute(self.member, mapping)))

    def map_coord(self, fn) -> "IndexRelation | None":
        return bounded(attrs.evolve(self, coord=fn(self.coord)))


def bounded(rel: IndexRelation | None) -> IndexRelation | None:
    """``rel``, or None when one of its expressions is deeper than :data:`MAX_DEPTH`."""
    if rel is None or depth(rel.member) > MAX_DEPTH or depth(rel.coord) > MAX_DEPTH:
        return None
    return rel


def through_axes(rel: IndexRelation | None, new_axis_of_old) -> IndexRelation | None:
    """Re-express a relation after an axis permutation/insertion: old axis k -> ``new_axis_of_old(k)``
    (an Expr over the new value's axes)."""
    if rel is None:
        return None
    return rel.map_member(lambda e: new_axis_of_old(e.k) if isinstance(e, AxisPos) else None)


_SIGN = {"+": 1, "-": -1}


def _offset(lhs: Expr, op: str, rhs: Expr) -> Expr:
    """``lhs op rhs``, folding constant offsets: ``x + 0`` is ``x``, ``(x + a) - b`` is ``x + (a - b)``
    (exact: index arithmetic wraps modulo 2^64 either way)."""
    if op not in _SIGN or not isinstance(rhs, Const) or not isinstance(rhs.value, int):
        return BinExpr(op, lhs, rhs)
    shift = _SIGN[op] * rhs.value
    if isinstance(lhs, BinExpr) and lhs.op in _SIGN and isinstance(lhs.rhs, Const) and isinstance(lhs.rhs.value, int):
        shift += _SIGN[lhs.op] * lhs.rhs.value
        lhs = lhs.lhs
    if shift == 0:
        return lhs
    return BinExpr("+", lhs, Const(shift)) if shift > 0 else BinExpr("-", lhs, Const(-shift))


def through_arith(rel: IndexRelation | None, op: str, other, relation_on_left: bool) -> IndexRelation | None:
    """Affine arithmetic with a provenance-free operand keeps the relation (``i = n - 1 - o``)."""
    if rel is None:
        return None
    other_expr = wrap(other)
    if op == "neg":
        return rel.map_coord(NegExpr)
    if relation_on_left:
        return rel.map_coord(lambda c: _offset(c, op, other_expr))
    return rel.map_coord(lambda c: BinExpr(op, other_expr, c))
