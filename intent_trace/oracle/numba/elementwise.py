"""cpu's table of the elementwise ops and constants: the shared rules (:mod:`intent_trace.codegen.pointwise`) over
the ops cpu's scalar rule table spells (:mod:`.scalar_rules`). A tensor result is a fused element expression that
the emitter materialises where fusion stops.

Float add and mul keep x86's first NaN operand with a compare and a blend (:func:`.scalar_rules.first_nan_arith`)
except where two NaN operands cannot meet or may meet in either order: an operand that is a constant other than a
NaN (``x * 1.5``), and an inlined combine (a reduction's or fold's order is free, T5/T10, so which of two NaNs it
meets first is free too).
"""
from __future__ import annotations

import math

import attrs

from ...codegen import pointwise
from ...codegen.values import Scalar
from ...graph import ops
from .scalar_rules import COMMUTED, SCALAR_RULES, arith


@attrs.frozen(slots=True)
class NotNaN(Scalar):
    """A constant that is not a NaN: an operand that never makes two NaNs meet."""


def constant(em, node, args):
    value = pointwise.constant(em, node, args)
    dtype = node.attr("type").dtype
    return value if dtype.is_float and math.isnan(float(node.attr("value"))) else NotNaN(value.expr)


def commuted(em, node, args):
    """add/mul: the first-NaN spelling unless one operand is :class:`NotNaN` or the order is free (a combine)."""
    d = node.inputs[-1].type.dtype
    if em.pointwise or any(isinstance(a, NotNaN) for a in args):
        return pointwise.elementwise(em, node, args, lambda a, b: arith(node, d, a, b))
    return pointwise.elementwise(em, node, args)


RULES: dict = {**pointwise.rules(SCALAR_RULES), ops.constant: constant, **{op: commuted for op in COMMUTED}}
