"""TileLang's spelling of what the shared rules (:mod:`intent_trace.codegen`) write: index arithmetic in int64
(a bare literal is int32 in TIR, so index text is cast), ``T.*`` intrinsics, helper calls for value selects and
f16/bf16 codecs, and the view value the emitter holds for a parameter (:class:`View`). :data:`TILELANG` is the
emitter's ``dialect``.
"""
from __future__ import annotations

import attrs

from ... import types as T
from ...codegen.dialect import Dialect
from ...codegen.values import View as BaseView
from ...graph.lowering import index_add, index_mul
from .scalar_rules import call


@attrs.frozen(slots=True)
class View(BaseView):
    """A view parameter as TileLang holds it: a rank-0 view travels as a one-element buffer, and a view whose
    values the target stores as another dtype records that buffer dtype (:func:`decode`/:func:`encode`)."""

    rank0: bool = False
    storage: str | None = None  # the buffer's TIR dtype when the target stores the values as another one


def add(a: str, b: str) -> str:
    return index_add(a, b, lambda x, y: f"({x} + {y})")


def mul(a: str, b: str) -> str:
    return index_mul(a, b, lambda x, y: f"({x} * {y})")


def as_index(expr: str) -> str:
    """An int64 (KIR ``index``) expression."""
    return f"T.int64({expr})" if expr.lstrip("-").isdigit() else f"T.Cast('int64', {expr})"


def decode(em, view: View, expr: str) -> str:
    """A view element as the value computed with: f16/bf16 stored as their bit patterns and held as floats
    (helper calls), any other stored dtype (bool as uint8, u32 as int32: ``view_storage``) cast."""
    d = view.dtype
    if d.name in ("f16", "bf16"):
        return call(em, "decode", (d,), d, (T.u16,), expr)
    return f"T.Cast({em.tir(d)!r}, {expr})" if view.storage else expr


def encode(em, view: View, expr: str) -> str:
    """A computed value as the element the view stores (the inverse of :func:`decode`)."""
    d = view.dtype
    if d.name in ("f16", "bf16"):
        return call(em, "encode", (d,), T.u16, (d,), expr)
    return f"T.Cast({view.storage!r}, {expr})" if view.storage else expr


def _count(start: str, end: str, step: str) -> str:
    # Without checks, a non-positive step makes the domain empty.
    return (f"T.if_then_else({step} > 0, T.max(T.int64(0), T.floordiv({end} - {start} + {step} - 1, {step})), "
            f"T.int64(0))")


TILELANG = Dialect(
    name="tilelang",
    zero="T.int64(0)",
    index=as_index,
    as_index=as_index,
    add=add,
    mul=mul,
    floordiv=lambda a, b: f"T.floordiv({a}, {b})",
    mod=lambda a, b: f"T.floormod({a}, {b})",
    nonneg=lambda x: f"T.max(T.int64(0), {x})",
    where=lambda c, a, b: f"T.if_then_else({c}, {a}, {b})",
    serial=lambda n: f"T.serial({n})",
    count=_count,
    # TileLang may evaluate an expression again at each use: an index value is an int64 local.
    hold=lambda em, x, hint: em.assign(as_index(x), hint),
    # Without checks the kernel goes on past a negative extent: it is an empty one.
    fresh_extent=lambda em, n: em.assign(f"T.max(T.int64(0), {n})", "n"),
    select=lambda em, d, c, a, b: call(em, "select", (d,), d, (T.bool_, d, d), c, a, b),
    decode=decode,
    encode=encode,
    subscript=lambda coords: ", ".join(coords) or "0",  # a rank-0 view is a one-element buffer
    marked=lambda ref: f"{ref} != T.uint8(0)",
    mark="T.uint8(1)",
    extent_lengths=True,
)
