"""TileLang rules for the elementwise ops (:data:`.scalar_rules.SCALAR_RULES`) and constants.

A scalar result is a local bound once; a tensor result is lazy: each element is the helper call on the operand
elements at its own index (the operands recorded, so a long chain is evaluated bottom-up, not recursively).
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Lazy, Scalar
from .scalar_rules import SCALAR_RULES

RULES: dict = {}
REJECTED: dict = {}  # every elementwise op has a helper family; a dtype a target lacks is rejected per node
rule = rule_registrar(RULES)


@rule(*SCALAR_RULES)
def _elementwise(em, node, args):
    scalar_rule = SCALAR_RULES[node.op]
    d = node.inputs[-1].type.dtype
    em.tir(d)
    out_t = node.outputs[0].type
    if isinstance(out_t, T.ScalarType):
        return Scalar(em.assign(scalar_rule(em, node, d, *(a.expr for a in args))))

    def elem(idx):
        return em.assign(scalar_rule(em, node, d, *(em.elem(a, idx) for a in args)), "t")

    return Lazy(em.shape(out_t), elem, tuple(a for a in args if isinstance(a, Lazy)))


@rule(ops.constant)
def _constant(em, node, args):
    return Scalar(em.constant(node.attr("value"), node.attr("type").dtype))
