"""Numba rules for reduce and scan.

When a combine is *pointwise* (only elementwise ops, constants, broadcasts and aggregate
plumbing, with scalar captures and one kept shape for every accumulator component), it commutes
with indexing: the emitter inlines it per output position as scalar code. Reductions then run
with several partial accumulators over the innermost reduced axis (re-association and
re-ordering are the author's contract, spec §7, and the independent chains let LLVM vectorise),
and the output positions form a parallel loop. Any other combine is folded over whole
accumulator arrays, exactly as the spec defines it.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.lowering import assemble, leaf_values, merge_index
from .inline import inline_combine, pointwise_combine, result_arrays
from .select_reduce import keyed_reduction, keyed_select
from .values import Aggregate, Array, Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

PARTIALS = 8  # independent accumulators over the innermost reduced axis


@rule(ops.reduce)
def _reduce(em, node, args):
    source, identity, *captures = args
    (acc_t,) = node.attr("types")
    axes = node.attr("axes")
    src_t = node.inputs[0].type
    if not pointwise_combine(node):
        return _fold(em, node, args)
    src_leaves = leaf_values(source, Aggregate)
    acc_leaf_types = T.leaf_types(acc_t)
    rank = T.leaf_types(src_t)[0].rank
    src_shape = tuple(em.extent(e) for e in T.leaf_types(src_t)[0].shape)
    kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
    red = [src_shape[a] for a in axes]
    ident_leaves = leaf_values(identity, Aggregate)
    region_size = len(node.regions[0].nodes)
    partials = PARTIALS if region_size <= 8 else 1
    # Inside a row group (base.row_loop) the kept shape is [M] and this is row r's value: a scalar.
    row = em.row is not None
    outs = [None] * len(acc_leaf_types) if row else result_arrays(em, acc_leaf_types, kept)
    results: list = []
    with em.loop_nest(kept, parallel=True) as pos:
        accs = [[em.assign(em.elem(v, pos), "c") for v in ident_leaves] for _ in range(partials)]
        loops = 0
        red_idx = []
        for n in red[:-1]:
            i = em.fresh("k")
            em.line(f"for {i} in range({n}):")
            em.depth += 1
            loops += 1
            red_idx.append(i)
        last = red[-1]

        def step_elements(k: str) -> list:
            return [em.assign(em.elem(v, merge_index(pos, red_idx + [k], axes, rank)), "x") for v in src_leaves]

        def step(slot: int, k: str):
            elems = step_elements(k)
            new = inline_combine(em, node, acc_t, accs[slot], elems, captures, pos)
            for name, value in zip(accs[slot], new):
                em.line(f"{name} = {value}")

        if keyed_select(node):  # float max/min: vectorised over order keys, a sequential loop where a NaN is
            keyed_reduction(em, node, accs[0][0], last, lambda k: step_elements(k)[0], lambda k: step(0, k))
            accs = accs[:1]
        elif partials > 1:
            base = em.fresh("k")
            bulk = em.assign(f"{last} - {last} % {partials}", "n")
            with em.block(f"for {base} in range(0, {bulk}, {partials}):"):
                for p in range(partials):
                    step(p, f"{base} + {p}")
            tail = em.fresh("k")
            with em.block(f"for {tail} in range({bulk}, {last}):"):
                step(0, tail)
        else:
            k = em.fresh("k")
            with em.block(f"for {k} in range({last}):"):
                step(0, k)
        em.depth -= loops
        while len(accs) > 1:  # combine the partial accumulators pairwise
            merged = []
            for a, b in zip(accs[::2], accs[1::2]):
                new = inline_combine(em, node, acc_t, a, b, captures, pos)
                for name, value in zip(a, new):
                    em.line(f"{name} = {value}")
                merged.append(a)
            accs = merged
        results = accs[0]
        for out, value in zip(outs, results):
            if out is not None:
                em.line(f"{out}[{', '.join(pos)}] = {value}")
    if row:
        leaves = [Lazy(kept, lambda idx, v=v: v) for v in results]
    elif kept:
        leaves = [Array(o, kept) for o in outs]
    else:
        leaves = [Scalar(v) for v in results]
    return assemble(acc_t, leaves, Aggregate)


@rule(ops.scan)
def _scan(em, node, args):
    if not pointwise_combine(node):
        return _fold(em, node, args)
    source, identity, *captures = args
    src_t = node.inputs[0].type
    acc_t = node.inputs[1].type
    axis, inclusive, reverse = node.attr("axis"), node.attr("inclusive"), node.attr("reverse")
    src_leaf_types = T.leaf_types(src_t)
    rank = src_leaf_types[0].rank
    src_shape = tuple(em.extent(e) for e in src_leaf_types[0].shape)
    kept = tuple(s for k, s in enumerate(src_shape) if k != axis)
    n = src_shape[axis]
    outs = result_arrays(em, src_leaf_types, src_shape)
    with em.loop_nest(kept, parallel=True) as pos:
        accs = [em.assign(em.elem(v, pos), "c") for v in leaf_values(identity, Aggregate)]
        j = em.fresh("k")
        with em.block(f"for {j} in range({n}):"):
            k = em.assign(f"{n} - 1 - {j}" if reverse else j, "k")
            full = merge_index(pos, [k], (axis,), rank)
            elems = [em.assign(em.elem(v, full), "x") for v in leaf_values(source, Aggregate)]
            if not inclusive:
                for out, a in zip(outs, accs):
                    em.line(f"{out}[{', '.join(full)}] = {a}")
            lhs, rhs = (elems, accs) if reverse else (accs, elems)
            new = inline_combine(em, node, acc_t, lhs, rhs, captures, pos)
            for name, value in zip(accs, new):
                em.line(f"{name} = {value}")
            if inclusive:
                for out, a in zip(outs, accs):
                    em.line(f"{out}[{', '.join(full)}] = {a}")
    return assemble(src_t, [Array(o, src_shape) for o in outs], Aggregate)


def _fold(em, node, args):
    """General combines: fold whole accumulator values over the reduced (or scanned) positions, in
    source order, with the accumulator as a loop carry (any combine, including structured ones)."""
    source, identity, *captures = args
    is_scan = node.op is ops.scan
    src_t = node.inputs[0].type
    acc_t = node.inputs[1].type
    axes = (node.attr("axis"),) if is_scan else node.attr("axes")
    reverse = is_scan and node.attr("reverse")
    src_leaf_types = T.leaf_types(src_t)
    rank = src_leaf_types[0].rank
    src_shape = tuple(em.extent(e) for e in src_leaf_types[0].shape)
    src_leaves = [em.materialize(v, t) for v, t in zip(leaf_values(source, Aggregate), src_leaf_types)]
    captures = [em.materialize(c, v.type) if isinstance(c, Lazy) else c for c, v in zip(captures, node.inputs[2:])]
    names = em.carry_names(acc_t)
    em.assign_leaves(names, identity, acc_t)
    outs = result_arrays(em, src_leaf_types, src_shape) if is_scan else []
    red_idx, opened = [], 0
    for a in axes:
        i = em.fresh("k")
        em.line(f"for {i} in range({src_shape[a]}):")
        em.depth += 1
        opened += 1
        red_idx.append(i if not reverse else em.assign(f"{src_shape[a]} - 1 - {i}", "k"))
    em.loop_depth += 1

    def item_leaf(v, t):
        kept = tuple(em.extent(e) for k, e in enumerate(t.shape) if k not in axes)
        if not kept:
            return Scalar(em.assign(em.elem(v, merge_index([], red_idx, axes, rank)), "x"))
        return Lazy(kept, lambda idx, v=v: em.elem(v, merge_index(idx, red_idx, axes, rank)))

    item = assemble(acc_t, [item_leaf(v, t) for v, t in zip(src_leaves, src_leaf_types)], Aggregate)

    def store():
        for out, leaf in zip(outs, em.leaves(em.rebuild(list(names), acc_t), acc_t)):
            kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
            with em.loop_nest(kept, parallel=False) as idx:
                value = leaf if not kept else f"{leaf}[{', '.join(idx)}]"
                em.line(f"{out}[{', '.join(merge_index(idx, red_idx, axes, rank))}] = {value}")

    if is_scan and not node.attr("inclusive"):
        store()
    (region,) = node.regions
    pair = (item, em.rebuild(list(names), acc_t)) if reverse else (em.rebuild(list(names), acc_t), item)
    (new,) = em.run_region(region, (*pair, *captures))
    em.assign_leaves(names, new, acc_t)
    if is_scan and node.attr("inclusive"):
        store()
    em.loop_depth -= 1
    em.depth -= opened
    if is_scan:
        return assemble(src_t, [Array(o, src_shape) for o in outs], Aggregate)
    return em.rebuild(list(names), acc_t)
