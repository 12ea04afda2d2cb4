"""Generic rules for the elementwise ops: arithmetic, comparisons, the math library, selects, conversions.

Each op's numerics come from :mod:`.numerics` (round-once float arithmetic, wrap-around integers, IEEE
maximum/minimum); the rules only pick the function. Tables here are keyed by OpDef.
"""
from __future__ import annotations

import numpy as np

from ..graph import ops
from ..graph.interpreter import rule_registrar
from . import numerics as N
from .generic_base import is_float

RULES: dict = {}
rule = rule_registrar(RULES)

_PLAIN = {ops.add: np.add, ops.sub: np.subtract, ops.mul: np.multiply}


@rule(*_PLAIN)
def _arith(it, node, args):
    a, b = args
    fn = _PLAIN[node.op]
    if is_float(a):
        return N.float_binary(fn, a, b)
    with N.errstate():
        return np.asarray(fn(a, b)).astype(a.dtype)


@rule(ops.div)
def _div(it, node, args):
    a, b = args
    if node.attr("flush_to_zero"):
        a, b = N.flush_subnormals(a), N.flush_subnormals(b)
        return N.flush_subnormals(N.float_binary(np.divide, a, b))
    return N.float_binary(np.divide, a, b)


_INT_BINARY = {ops.floordiv: N.int_floordiv, ops.mod: N.int_mod, ops.shl: N.shl, ops.shr: N.shr}


@rule(*_INT_BINARY)
def _int_binary(it, node, args):
    return _INT_BINARY[node.op](*args)


@rule(ops.pow)
def _pow(it, node, args):
    a, b = args
    return N.float_pow(a, b) if is_float(a) else N.int_pow(a, b)


@rule(ops.maximum, ops.minimum)
def _minmax(it, node, args):
    return N.ieee_maximum(args[0], args[1], node.op is ops.maximum)


_BITWISE = {ops.and_: np.bitwise_and, ops.or_: np.bitwise_or, ops.xor: np.bitwise_xor}


@rule(*_BITWISE)
def _bitwise(it, node, args):
    return np.asarray(_BITWISE[node.op](*args)).astype(args[0].dtype)


_COMPARE = {ops.eq: np.equal, ops.ne: np.not_equal, ops.lt: np.less, ops.le: np.less_equal, ops.gt: np.greater,
            ops.ge: np.greater_equal}


@rule(*_COMPARE)
def _compare(it, node, args):
    a, b = args
    if is_float(a):
        a, b = N.widen(a), N.widen(b)
    return np.asarray(_COMPARE[node.op](a, b))


@rule(*(ops.REGISTRY[name] for name in ops.UNARY_MATH))
def _unary_math(it, node, args):
    return N.unary_math(node.op.name, args[0], bool(node.attr("flush_to_zero")))


@rule(ops.neg)
def _neg(it, node, args):
    (x,) = args
    if is_float(x):
        return N.sign_bit_op(x, "neg")
    with N.errstate():
        return np.negative(x)


@rule(ops.invert)
def _invert(it, node, args):
    return np.invert(args[0])


@rule(ops.select)
def _select(it, node, args):
    p, a, b = args
    return np.where(p, a, b).astype(a.dtype)


@rule(ops.fma)
def _fma(it, node, args):
    return N.fma(*args)


@rule(ops.constant)
def _constant(it, node, args):
    return np.asarray(node.attr("value"), dtype=node.attr("type").dtype.np)


@rule(ops.cast)
def _cast(it, node, args):
    return N.cast(args[0], node.attr("dtype"))


@rule(ops.bitcast)
def _bitcast(it, node, args):
    return N.bitcast(args[0], node.attr("dtype"))
