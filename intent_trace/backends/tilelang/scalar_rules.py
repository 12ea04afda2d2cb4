"""TIR expressions for every elementwise op: one table keyed by OpDef.

Each KIR value operation becomes a call of a *helper* (``T.call_extern``) whose name says the
operation and its dtypes (``it_add_i32``, ``it_cast_f64_u8``): the lowering fixes the vocabulary
and each target module writes the bodies (:mod:`.c` for ``tilelang-c``). Keeping value arithmetic
inside opaque calls is what makes the numerics exact: TVM's simplifier rewrites float expressions
algebraically (``x - x`` -> 0, ``x + 0.0`` -> x, ``x * 0.0`` -> 0.0) and integer expressions as if
they never overflowed, both wrong under T2/T3; a call is left alone. Index arithmetic (loop
bounds, coordinates) stays plain TIR, where those assumptions hold.

A rule takes the emitter, the node, the operand dtype and the operand expressions (local names or
constants), and returns one TIR expression.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops

TIR_DTYPE = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "index": "int64",
             "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32", "f64": "float64",
             "f16": "float32", "bf16": "float32"}  # f16/bf16 values live in float32 (rounded to their format)


def tir_dtype(d: T.DType) -> str:
    return TIR_DTYPE[d.name]


def call(em, family: str, dtypes: tuple, ret: T.DType, arg_types: tuple, *exprs: str) -> str:
    """``T.call_extern`` of the helper ``family`` specialised to ``dtypes``."""
    name = em.helper(family, dtypes, ret, arg_types)
    return f"T.call_extern({tir_dtype(ret)!r}, {name!r}, {', '.join(exprs)})"


def _binary(family: str):
    def rule(em, node, d, a, b):
        return call(em, family, (d,), d, (d, d), a, b)
    return rule


def _div(em, node, d, a, b):
    return call(em, "div_ftz" if node.attr("flush_to_zero") else "div", (d,), d, (d, d), a, b)


def _compare(em, node, d, a, b):
    return call(em, node.op.name, (d,), T.bool_, (d, d), a, b)


def _unary(family: str):
    def rule(em, node, d, x):
        return call(em, family, (d,), d, (d,), x)
    return rule


def _math(em, node, d, x):
    # ``approximate=True`` only widens the allowed error (T4): the exact result satisfies it.
    family = node.op.name + ("_ftz" if node.attr("flush_to_zero") else "")
    return call(em, family, (d,), d, (d,), x)


def _select(em, node, d, p, a, b):
    return call(em, "select", (d,), d, (T.bool_, d, d), p, a, b)


def _fma(em, node, d, a, b, c):
    return call(em, "fma", (d,), d, (d, d, d), a, b, c)


def cast_expr(em, src: T.DType, dst: T.DType, x: str) -> str:
    if src is dst or (src.name in ("i64", "index") and dst.name in ("i64", "index")):
        return x
    return call(em, "cast", (src, dst), dst, (src,), x)


def _cast(em, node, d, x):
    return cast_expr(em, node.inputs[0].type.dtype, node.attr("dtype"), x)


def _bitcast(em, node, d, x):
    src, dst = node.inputs[0].type.dtype, node.attr("dtype")
    if src is dst or (src.name in ("i64", "index") and dst.name in ("i64", "index")):
        return x
    return call(em, "bitcast", (src, dst), dst, (src,), x)


SCALAR_RULES: dict = {}
for _name, _family in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("floordiv", "floordiv"), ("mod", "mod"),
                       ("pow", "pow"), ("maximum", "max"), ("minimum", "min"), ("and_", "and"), ("or_", "or"),
                       ("xor", "xor"), ("shl", "shl"), ("shr", "shr")):
    SCALAR_RULES[ops.REGISTRY[_name]] = _binary(_family)
for _name, _fn in (("div", _div), ("select", _select), ("fma", _fma), ("cast", _cast), ("bitcast", _bitcast)):
    SCALAR_RULES[ops.REGISTRY[_name]] = _fn
for _name in ops.COMPARE:
    SCALAR_RULES[ops.REGISTRY[_name]] = _compare
for _name in ("neg", "invert", "abs"):
    SCALAR_RULES[ops.REGISTRY[_name]] = _unary(_name)
for _name in ops.UNARY_MATH:
    if _name != "abs":
        SCALAR_RULES[ops.REGISTRY[_name]] = _math


# --- constants ------------------------------------------------------------------------------------------

def constant_expr(em, value, d: T.DType) -> str:
    """A TIR expression holding ``value`` exactly in ``d``.

    TVM prints float immediates with six significant digits and folds arithmetic on them, so float
    constants (and 64-bit integers outside the int32 range, whose C literals would not be portable)
    are rebuilt from their bit pattern by a helper."""
    import numpy as np

    if d.is_bool:
        return "T.bool(True)" if value else "T.bool(False)"
    if d.is_float:
        v = np.asarray(value, dtype=d.np)
        if d.name in ("f16", "bf16"):
            v = v.astype(np.float32)  # exact: the constant is the float holding the format's value
        bits = int(v.reshape(1).view(f"u{v.dtype.itemsize}")[0])
        if v.dtype.itemsize == 4:
            return call(em, "bits", (d,), d, (T.u32,), f"T.uint32({bits})")
        return call(em, "bits", (d,), d, (T.u32, T.u32), f"T.uint32({bits >> 32})", f"T.uint32({bits & 0xFFFFFFFF})")
    v = int(value)
    if d.bits == 64 and not -(1 << 31) <= v < (1 << 31):
        bits = v & ((1 << 64) - 1)
        return call(em, "bits", (d,), d, (T.u32, T.u32), f"T.uint32({bits >> 32})", f"T.uint32({bits & 0xFFFFFFFF})")
    return f"T.{tir_dtype(d)}({v})"
