"""Integer helper bodies (T2) shared by the C-family targets: one text, each target's type names.

C (``c.py``, also CUDA through it) and Metal (``metal.py``) spell integer arithmetic alike; only the
type names differ (``int32_t``/``uint32_t`` against ``int``/``uint``). Each renderer takes the helper's
dtype and returns the body of a function whose parameters are a and b, or None for dtypes it does not
handle (the target's own renderers cover those).
"""
from __future__ import annotations

from collections.abc import Callable

from ... import types as T


def integer_renderers(name: Callable[[T.DType], str], unsigned: Callable[[T.DType], str]) -> dict:
    """Renderers by helper family. ``name(d)`` is the target's type of ``d``; ``unsigned(d)`` the unsigned type
    integer arithmetic wraps in (never promoted to int)."""

    def floordiv(d):  # truncating; x // 0 = 0; INT_MIN // -1 = INT_MIN (by wrapping negation)
        if not d.is_int:
            return None
        if d.kind == "uint":
            return f"return b == 0 ? ({name(d)})0 : ({name(d)})(a / b);"
        return (f"if (b == 0) return 0; if (b == -1) return ({name(d)})(({unsigned(d)})0 - ({unsigned(d)})a); "
                f"return ({name(d)})(a / b);")

    def mod(d):  # the dividend's sign; x % 0 = 0; x % -1 = 0
        if not d.is_int:
            return None
        if d.kind == "uint":
            return f"return b == 0 ? ({name(d)})0 : ({name(d)})(a % b);"
        return f"if (b == 0 || b == -1) return 0; return ({name(d)})(a % b);"

    def bitwise(sym: str):
        def body(d):
            if d.is_bool:
                return f"return a {sym} b;"
            return f"return ({name(d)})(a {sym} b);" if d.is_int else None
        return body

    def shl(d):  # shifts outside [0, bits) give 0
        if not d.is_int:
            return None
        neg = "b < 0 || " if d.kind == "int" else ""
        return f"if ({neg}b >= {d.bits}) return 0; return ({name(d)})(({unsigned(d)})a << b);"

    def shr(d):  # logical for unsigned, arithmetic (sign fill) for signed
        if not d.is_int:
            return None
        if d.kind == "uint":
            return f"if (b >= {d.bits}) return 0; return ({name(d)})(a >> b);"
        return (f"if (b < 0 || b >= {d.bits}) return a < 0 ? ({name(d)})-1 : ({name(d)})0; "
                f"return ({name(d)})(a >> b);")

    def invert(d):  # bitwise on integers, logical on bool
        if d.is_bool:
            return "return !a;"
        return f"return ({name(d)})~a;" if d.is_int else None

    return {"floordiv": floordiv, "mod": mod, "and": bitwise("&"), "or": bitwise("|"), "xor": bitwise("^"),
            "shl": shl, "shr": shr, "invert": invert}
