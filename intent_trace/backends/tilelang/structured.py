"""TileLang rules for reduce, scan and contract: serial loops around mutable accumulators.

``scan`` and the general (folded) combines are the shared rules (:mod:`intent_trace.codegen.folds`; a scan writes
its prefixes into buffers, .storage). A reduce whose combine is *pointwise* (elementwise ops, constants,
broadcasts and aggregate plumbing on one accumulator shape, with captures that are scalars or tensors of that
shape: ``em.inlines``) commutes with indexing, so it is inlined per output position as scalar code and folds the
reduced positions in source order: exactly generic's fold. Its result is lazy like every tensor (each element
computed where it is consumed; a reduction to a scalar runs where it is defined): that strategy is TileLang's
own. A contract forms each product in the accumulator dtype and adds it to the accumulator in index order,
without fusing (T5).
"""
from __future__ import annotations

from ... import types as T
from ...codegen import folds
from ...graph.lowering import assemble, leaf_values, merge_index
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .accumulate import accumulators, combine, contract, lazy_leaves
from .emitter import Aggregate, Scalar

RULES: dict = dict(folds.RULES)
REJECTED: dict = {}  # every reduce, scan and contract lowers
rule = rule_registrar(RULES)


@rule(ops.reduce)
def _reduce(em, node, args):
    if not em.inlines(node):
        return folds.fold(em, node, args)
    source, identity, *captures = args
    (acc_t,) = node.attr("types")
    axes = node.attr("axes")
    src_types = T.leaf_types(node.inputs[0].type)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
    red = [src_shape[a] for a in axes]
    acc_types = T.leaf_types(acc_t)

    def compute(pos):
        accs = accumulators(em, acc_types, [em.elem(v, pos) for v in leaf_values(identity, Aggregate)])
        with em.loop_nest(red) as ridx:
            full = merge_index(pos, ridx, axes, rank)
            items = [em.elem(v, full) for v in leaf_values(source, Aggregate)]
            current = [em.assign(a, "x") for a in accs]
            for name, value in zip(accs, combine(em, node, acc_t, current, items, captures, pos)):
                em.line(f"{name} = {value}")
        return [em.assign(a, "r") for a in accs]

    if not kept:
        return assemble(acc_t, [Scalar(v) for v in compute([])], Aggregate)
    return assemble(acc_t, lazy_leaves(em, kept, compute, acc_types), Aggregate)


rule(ops.contract)(contract)
