"""Folds written once for every code generator: ``scan``, the general (folded) ``reduce`` and ``scan``, and the
scaffolding of ``region_fold``/``region_scan`` (spec §7, §9).

A combine the emitter can inline per element (``em.inlines``: a pointwise combine whose captures it can read at an
element) commutes with indexing: a scan then runs per kept position with scalar accumulators
(``em.accumulators``), folding the scanned positions in source order; the combine is inlined as scalar code
(``em.inline_combine``). Any other combine is folded over whole accumulator values, which are loop carries
(``em.mutable``: tensor leaves are arrays or buffers), in source order, exactly as the spec defines reduce and
scan: :func:`fold`. A pointwise ``reduce`` is each backend's own (cpu keeps partial accumulators and row groups,
TileLang computes each element lazily where it is consumed).

A region op cuts its source into slices along its axis (the backend's ``slices``: cpu copies each slice into
arrays, TileLang views it at its offset) and folds each slice's summary into a running one, or emits each slice
from the running state and advances the state by the slice's transition (:func:`region_rules`).
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..graph.lowering import assemble, leaf_values, merge_index
from .values import Aggregate, Array, Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

# Members per slice of a region op's source on every compiled target (the last slice shorter): by the §9 laws the
# segmentation does not change the result (within T5); one size makes the targets' slices (and rounding) agree.
SLICE = 256


@rule(ops.scan)
def scan(em, node, args):
    if not em.inlines(node):
        return fold(em, node, args)
    source, identity, *captures = args
    src_t, acc_t = node.inputs[0].type, node.inputs[1].type
    axis, inclusive, reverse = node.attr("axis"), node.attr("inclusive"), node.attr("reverse")
    src_types = T.leaf_types(src_t)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    kept = tuple(s for k, s in enumerate(src_shape) if k != axis)
    n = src_shape[axis]
    outs = [em.result_array(src_shape, t) for t in src_types]
    with em.nest(kept, parallel=True) as pos:
        accs = em.accumulators(T.leaf_types(acc_t), [em.elem(v, pos) for v in leaf_values(identity, Aggregate)])
        j = em.fresh("k")
        with em.block(f"for {j} in {em.dialect.serial(n)}:"):
            k = em.assign(f"{n} - 1 - {j}", "k") if reverse else j
            full = merge_index(pos, [k], (axis,), rank)
            at = ", ".join(full)
            items = [em.assign(em.elem(v, full), "x") for v in leaf_values(source, Aggregate)]
            current = em.read_accumulators(accs)
            if not inclusive:
                for out, a in zip(outs, current):
                    em.line(f"{out}[{at}] = {a}")
            lhs, rhs = (items, current) if reverse else (current, items)  # combine in source order
            new = em.inline_combine(node, acc_t, lhs, rhs, captures, pos)
            for name, value in zip(accs, new):
                em.line(f"{name} = {value}")
            if inclusive:
                for out, value in zip(outs, new):
                    em.line(f"{out}[{at}] = {value}")
    return assemble(src_t, [Array(o, src_shape) for o in outs], Aggregate)


def fold(em, node, args):
    """General combines: fold whole accumulator values over the reduced (scanned) positions in source order,
    with the accumulator as a loop carry, as the spec defines reduce and scan."""
    source, identity, *captures = args
    is_scan = node.op is ops.scan
    src_t, acc_t = node.inputs[0].type, node.inputs[1].type
    axes = (node.attr("axis"),) if is_scan else node.attr("axes")
    reverse = is_scan and node.attr("reverse")
    src_types = T.leaf_types(src_t)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    sources = [em.computed(v, t) for v, t in zip(leaf_values(source, Aggregate), src_types)]
    # Captures are read at every step: a lazy one is computed once.
    captures = [em.materialize(c, v.type) if isinstance(c, Lazy) else c for c, v in zip(captures, node.inputs[2:])]
    names = em.mutable(acc_t, identity)
    outs = [em.result_array(src_shape, t) for t in src_types] if is_scan else []
    red = [src_shape[a] for a in axes]
    kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
    with em.nest(red, parallel=False) as ridx:
        if reverse:
            ridx = [em.assign(f"{red[0]} - 1 - {ridx[0]}", "k")]

        def item_leaf(v, t):
            leaf_kept = tuple(s for k, s in enumerate(em.shape(t)) if k not in axes)
            if not leaf_kept:
                return Scalar(em.assign(em.elem(v, merge_index([], ridx, axes, rank)), "x"))
            return Lazy(leaf_kept, lambda idx, v=v: em.elem(v, merge_index(idx, ridx, axes, rank)))

        item = assemble(acc_t, [item_leaf(v, t) for v, t in zip(sources, src_types)], Aggregate)

        def store():
            for out, leaf in zip(outs, leaf_values(em.current(names, acc_t), Aggregate)):
                with em.nest(kept, parallel=False) as idx:
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


def region_rules(slices) -> dict:
    """The ``region_fold`` and ``region_scan`` rules over a backend's slicing: ``slices(em, node, source)``, a
    context manager around the loop over slices that yields (the slice's source leaves, its first member). By
    the §9 laws every segmentation gives the same result (within T5)."""

    def region_fold(em, node, args):
        source, identity, *operands = args
        (summary_t,) = node.attr("types")
        summarize, combine = node.regions
        names = em.mutable(summary_t, identity)
        with slices(em, node, source) as (parts, _):
            (s,) = em.run_region(summarize, (*parts, *operands))
            (new,) = em.run_region(combine, (em.current(names, summary_t), s))
            em.store(names, new, summary_t)
        return em.current(names, summary_t)

    def region_scan(em, node, args):
        # Each slice is emitted from the running state, its pieces written at the slice's offset; the state then
        # advances by the slice's transition apply(summarize(slice), state) (by the laws, apply(combine(prefix,
        # s), initial): no prefix is formed).
        source, _identity, initial, *operands = args
        summarize, _combine, apply, emit = node.regions
        out_t, state_t = node.attr("types")
        axis = node.attr("axis")
        out_types = T.leaf_types(out_t)
        outs = [em.result_array(em.shape(t), t) for t in out_types]
        names = em.mutable(state_t, initial)
        with slices(em, node, source) as (parts, start):
            (piece,) = em.run_region(emit, (*parts, em.current(names, state_t), *operands))
            for out, leaf, t in zip(outs, leaf_values(piece, Aggregate), out_types):
                leaf = em.computed(leaf, t)
                with em.nest(leaf.shape, parallel=False) as idx:
                    dest = [em.dialect.add(i, start) if k == axis else i for k, i in enumerate(idx)]
                    em.line(f"{out}[{', '.join(dest)}] = {em.elem(leaf, idx)}")
            (s,) = em.run_region(summarize, (*parts, *operands))
            (new,) = em.run_region(apply, (s, em.current(names, state_t)))
            em.store(names, new, state_t)
        shapes = [em.shape(t) for t in out_types]
        return assemble(out_t, [Array(o, sh) for o, sh in zip(outs, shapes)], Aggregate), em.current(names, state_t)

    return {ops.region_fold: region_fold, ops.region_scan: region_scan}
