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
from ...graph import ops, traits

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


def option_family(family: str, node) -> str:
    """The helper family of an op with T4's named options: ``<family>_ftz`` for ``flush_to_zero=True`` (which needs
    ``approximate=True``), ``<family>_approx`` for ``approximate=True`` alone, else ``family``. A target whose
    instruction is exact (C, the oracle's bodies) defines the ``_approx`` family as the exact one: the exact result
    meets every approximate bound (T4); a GPU maps it to the hardware's approximate instruction (T10)."""
    if node.attr("flush_to_zero"):
        return family + "_ftz"
    return family + "_approx" if node.attr("approximate") else family


def _div(em, node, d, a, b):
    return call(em, option_family("div", node), (d,), d, (d, d), a, b)


def _compare(family: str):
    def rule(em, node, d, a, b):
        return call(em, family, (d,), T.bool_, (d, d), a, b)
    return rule


def _unary(family: str):
    def rule(em, node, d, x):
        return call(em, family, (d,), d, (d,), x)
    return rule


def _math(family: str):
    def rule(em, node, d, x):
        return call(em, option_family(family, node), (d,), d, (d,), x)
    return rule


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


#: The elementwise ops, each with its rule: the helper family it calls is the TileLang helper vocabulary
#: (``it_max_f32`` for ``maximum``), spelled here once per op.
SCALAR_RULES: dict = {
    ops.add: _binary("add"), ops.sub: _binary("sub"), ops.mul: _binary("mul"), ops.floordiv: _binary("floordiv"),
    ops.mod: _binary("mod"), ops.pow: _binary("pow"), ops.maximum: _binary("max"), ops.minimum: _binary("min"),
    ops.and_: _binary("and"), ops.or_: _binary("or"), ops.xor: _binary("xor"), ops.shl: _binary("shl"),
    ops.shr: _binary("shr"),
    ops.div: _div, ops.select: _select, ops.fma: _fma, ops.cast: _cast, ops.bitcast: _bitcast,
    ops.eq: _compare("eq"), ops.ne: _compare("ne"), ops.lt: _compare("lt"), ops.le: _compare("le"),
    ops.gt: _compare("gt"), ops.ge: _compare("ge"),
    ops.neg: _unary("neg"), ops.invert: _unary("invert"),
    # The T4 functions (abs, floor and sqrt included) call the helper family of their own name (``it_exp_f32``),
    # with ``_ftz`` / ``_approx`` for the option forms (option_family): generated from the registry, so a new function
    # needs only its bodies.
    **{op: _math(op.name) for op in traits.MATH_FUNCTIONS},
}


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
