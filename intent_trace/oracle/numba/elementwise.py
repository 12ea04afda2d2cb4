"""Numba rules for the elementwise ops (spellings in :mod:`.scalar_rules`) and constants.

A scalar result is one local; a tensor result is a fused element expression (:class:`.values.Lazy`) that
the emitter materialises where fusion stops.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .scalar_rules import SCALAR_RULES
from .values import Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)


@rule(*SCALAR_RULES)
def _elementwise(em, node, args):
    scalar_rule = SCALAR_RULES[node.op]
    d = node.inputs[-1].type.dtype
    out_t = node.outputs[0].type
    if isinstance(out_t, T.ScalarType):
        return Scalar(em.assign(scalar_rule(node, d, *(a.expr for a in args))))

    def elem(idx):
        return em.assign(scalar_rule(node, d, *(em.elem(a, idx) for a in args)), "t")

    return Lazy(tuple(em.extent(e) for e in out_t.shape), elem)


@rule(ops.constant)
def _constant(em, node, args):
    return Scalar(em.constant(node.attr("value"), node.attr("type").dtype))
