"""cpu's table of the elementwise ops and constants: the shared rules (:mod:`intent_trace.codegen.pointwise`) over
the ops cpu's scalar rule table spells (:mod:`.scalar_rules`). A tensor result is a fused element expression that
the emitter materialises where fusion stops.

Float add and mul keep x86's first NaN operand whatever order LLVM gives their operands (T3), spelled by what the
emitter knows of the operands:

- plain where two NaN operands cannot meet or may meet in either order: an operand that is a literal or constant
  other than a NaN (``x * 1.5``), and an inlined combine (a reduction's or fold's order is free, T5/T10, so which
  of two NaNs it meets first is free too);
- the plain op unless the invariant operand is a NaN, where one operand is the same along the innermost loop (a
  scalar argument, a row's value: :func:`_invariant`): one loop-invariant test, which LLVM hoists and unswitches
  on (:func:`.scalar_rules.invariant_first_nan_arith`);
- else a compare and a blend per element (:func:`.scalar_rules.first_nan_arith`).
"""
from __future__ import annotations

import math
import weakref

import attrs

from ... import types as T
from ...codegen import pointwise
from ...codegen.values import Scalar
from ...graph import ops
from ...graph.values import Literal, walk_region
from .scalar_rules import COMMUTED, SCALAR_RULES, arith, invariant_first_nan_arith


@attrs.frozen(slots=True)
class NotNaN(Scalar):
    """A constant that is not a NaN: an operand that never makes two NaNs meet."""


def constant(em, node, args):
    value = pointwise.constant(em, node, args)
    dtype = node.attr("type").dtype
    return value if dtype.is_float and math.isnan(float(node.attr("value"))) else NotNaN(value.expr)


_PRODUCERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> {Var: the node that defines it}


def _producer(graph, var):
    table = _PRODUCERS.get(graph)
    if table is None:
        table = _PRODUCERS[graph] = {v: n for n in walk_region(graph.body) for v in n.outputs}
    return table.get(var)


def _invariant(em, var) -> bool:
    """Whether every element of ``var`` along its last axis is one value, so that the element loop (innermost over
    the last axis) holds it in a register: a scalar, or a broadcast of a scalar or of a value whose last extent is 1
    (a row's value, ``reshape(v, (M, 1))``). Only the speed depends on it: both spellings are right for any values."""
    if isinstance(var.type, T.ScalarType):
        return True
    node = _producer(em.graph, var)
    if node is None or node.op is not ops.broadcast:
        return False
    src = node.inputs[0].type
    return isinstance(src, T.ScalarType) or not src.shape or src.shape[-1] == 1


def _not_nan(var, value) -> bool:
    if isinstance(var, Literal):
        return not (isinstance(var.value, float) and math.isnan(var.value))
    return isinstance(value, NotNaN)


def commuted(em, node, args):
    """add/mul: the spelling of the module docstring's list, first that applies."""
    d = node.inputs[-1].type.dtype
    if em.pointwise or any(_not_nan(v, a) for v, a in zip(node.inputs, args)):
        return pointwise.elementwise(em, node, args, lambda a, b: arith(node, d, a, b))
    if not isinstance(node.outputs[0].type, T.ScalarType):
        invariant = [_invariant(em, v) for v in node.inputs]
        if invariant.count(True) == 1:
            k = invariant.index(True)
            return pointwise.elementwise(em, node, args, lambda a, b: invariant_first_nan_arith(node, d, a, b, k))
    return pointwise.elementwise(em, node, args)


RULES: dict = {**pointwise.rules(SCALAR_RULES), ops.constant: constant, **{op: commuted for op in COMMUTED}}
