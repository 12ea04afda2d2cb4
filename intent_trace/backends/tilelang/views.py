"""A view element's storage codec, shared by the rules that read and write views (structure, memory).

A view whose values the target stores as another dtype (f16/bf16 as their uint16 bits, bool as uint8, u32 as
int32: ``view_storage``) is decoded where an element is read and encoded where one is written; both are helper
calls (:mod:`.scalar_rules`) or a cast.
"""
from __future__ import annotations

from ... import types as T
from .emitter import View
from .scalar_rules import call


def decode(em, view: View, expr: str) -> str:
    d = view.dtype
    if d.name in ("f16", "bf16"):  # stored as bit patterns, held as floats
        return call(em, "decode", (d,), d, (T.u16,), expr)
    return f"T.Cast({em.tir(d)!r}, {expr})" if view.storage else expr


def encode(em, view: View, expr: str) -> str:
    d = view.dtype
    if d.name in ("f16", "bf16"):
        return call(em, "encode", (d,), T.u16, (d,), expr)
    return f"T.Cast({view.storage!r}, {expr})" if view.storage else expr
