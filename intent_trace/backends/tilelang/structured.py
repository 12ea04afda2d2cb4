"""TileLang rules for reduce, scan and contract: serial loops around mutable accumulators.

A reduce or scan whose combine is *pointwise* (elementwise ops, constants, broadcasts and aggregate
plumbing on one accumulator shape, with captures that are scalars or tensors of that shape) commutes
with indexing, so it is inlined per output position as scalar code and folds the reduced (scanned)
positions in source order: exactly generic's fold. A reduce result is lazy like every tensor (each
element computed where it is consumed; a reduction to a scalar runs where it is defined); a scan writes
its prefixes into buffers (.storage). Any other combine (tuple or record accumulators of different shapes,
helpers with control flow, tensor captures of other shapes) is folded over whole accumulator values,
which are loop carries (tensor carries are buffers), exactly as the spec defines it. A contract forms
each product in the accumulator dtype and adds it to the accumulator in index order, without fusing (T5).
"""
from __future__ import annotations

from ... import types as T
from ...graph.lowering import assemble, leaf_values, merge_index, pointwise_shape
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .accumulate import accumulators, combine, contract, lazy_leaves
from .emitter import Aggregate, Array, Lazy, Scalar

RULES: dict = {}
REJECTED: dict = {}  # every reduce, scan and contract lowers
rule = rule_registrar(RULES)


def _pointwise(node) -> bool:
    """Whether the combine can be inlined per accumulator element (see the module docstring): a pointwise
    combine (:func:`~intent_trace.graph.lowering.pointwise_shape`) whose captures are scalars or tensors of the
    accumulator's shape."""
    shape = pointwise_shape(node)
    return shape is not None and all(isinstance(t, T.ScalarType) or tuple(t.shape) == shape
                                     for c in node.inputs[2:] for t in T.leaf_types(c.type))


@rule(ops.reduce)
def _reduce(em, node, args):
    if not _pointwise(node):
        return _fold(em, node, args)
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


@rule(ops.scan)
def _scan(em, node, args):
    if not _pointwise(node):
        return _fold(em, node, args)
    source, identity, *captures = args
    src_t, acc_t = node.inputs[0].type, node.inputs[1].type
    axis, inclusive, reverse = node.attr("axis"), node.attr("inclusive"), node.attr("reverse")
    src_types = T.leaf_types(src_t)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    kept = tuple(s for k, s in enumerate(src_shape) if k != axis)
    n = src_shape[axis]
    outs = [em.allocate(src_shape, em.tir(t.dtype)) for t in src_types]
    with em.loop_nest(kept) as pos:
        accs = accumulators(em, T.leaf_types(acc_t), [em.elem(v, pos) for v in leaf_values(identity, Aggregate)])
        j = em.fresh("k")
        with em.block(f"for {j} in T.serial({n}):"):
            k = em.assign(f"{n} - 1 - {j}", "k") if reverse else j
            full = merge_index(pos, [k], (axis,), rank)
            at = ", ".join(full)
            items = [em.assign(em.elem(v, full), "x") for v in leaf_values(source, Aggregate)]
            current = [em.assign(a, "x") for a in accs]
            if not inclusive:
                for out, a in zip(outs, current):
                    em.line(f"{out}[{at}] = {a}")
            lhs, rhs = (items, current) if reverse else (current, items)  # combine in source order
            new = combine(em, node, acc_t, lhs, rhs, captures, pos)
            for name, value in zip(accs, new):
                em.line(f"{name} = {value}")
            if inclusive:
                for out, value in zip(outs, new):
                    em.line(f"{out}[{at}] = {value}")
    return assemble(src_t, [Array(o, src_shape) for o in outs], Aggregate)


def _fold(em, node, args):
    """General combines: fold whole accumulator values over the reduced (scanned) positions in source order,
    with the accumulator as a loop carry (tensor leaves are buffers), as the spec defines reduce and scan."""
    source, identity, *captures = args
    is_scan = node.op is ops.scan
    src_t, acc_t = node.inputs[0].type, node.inputs[1].type
    axes = (node.attr("axis"),) if is_scan else node.attr("axes")
    reverse = is_scan and node.attr("reverse")
    src_types = T.leaf_types(src_t)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    # Captures are read at every step: a lazy one is computed once.
    captures = [em.materialize(c, v.type) if isinstance(c, Lazy) else c for c, v in zip(captures, node.inputs[2:])]
    names = em.mutable(acc_t, identity)
    outs = [em.allocate(src_shape, em.tir(t.dtype)) for t in src_types] if is_scan else []
    red = [src_shape[a] for a in axes]
    with em.loop_nest(red) as ridx:
        if reverse:
            ridx = [em.assign(f"{red[0]} - 1 - {ridx[0]}", "k")]

        def item_leaf(v, t):
            kept = tuple(s for k, s in enumerate(em.shape(t)) if k not in axes)
            if not kept:
                return Scalar(em.assign(em.elem(v, merge_index([], ridx, axes, rank)), "x"))
            return Lazy(kept, lambda idx, v=v: em.elem(v, merge_index(idx, ridx, axes, rank)))

        item = assemble(acc_t, [item_leaf(v, t) for v, t in zip(leaf_values(source, Aggregate), src_types)],
                        Aggregate)

        def store():
            for out, leaf in zip(outs, leaf_values(em.current(names, acc_t), Aggregate)):
                kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
                with em.loop_nest(kept) as idx:
                    em.line(f"{out}[{', '.join(merge_index(idx, ridx, axes, rank))}] = {em.elem(leaf, idx)}")

        if is_scan and not node.attr("inclusive"):
            store()
        acc = em.current(names, acc_t)
        pair = (item, acc) if reverse else (acc, item)  # combine in source order
        (new,) = em.run_region(node.regions[0], (*pair, *captures))
        em.store(names, new, acc_t)
        if is_scan and node.attr("inclusive"):
            store()
    if is_scan:
        return assemble(src_t, [Array(o, src_shape) for o in outs], Aggregate)
    return em.current(names, acc_t)


rule(ops.contract)(contract)
