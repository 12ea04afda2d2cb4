"""cpu's reduce and scan rules.

``scan`` and the general (folded) combines are the shared rules (:mod:`intent_trace.codegen.folds`). A reduce
whose combine is *pointwise* (only elementwise ops, constants, broadcasts and aggregate plumbing, with scalar
captures and one kept shape for every accumulator component) commutes with indexing: it is inlined per output
position as scalar code, here with several partial accumulators over the innermost reduced axis (re-association
and re-ordering are the author's contract, spec §7, and the independent chains let LLVM vectorise), the output
positions a parallel loop, and inside a row group (:mod:`.rows`) one row's value. That strategy is cpu's own.
A float sum uses explicit vector lanes in a fixed order instead (:mod:`.lane_sum`), a float max/min order keys
(:mod:`.select_reduce`).
"""
from __future__ import annotations

from ... import types as T
from ...codegen import folds
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.lowering import assemble, leaf_values, merge_index
from .inline import inline_combine, result_arrays
from .lane_sum import lane_width, lanes_finish, lanes_run, lanes_start
from .select_reduce import keyed_reduction, keyed_select
from .values import Aggregate, Array, Lazy, Scalar

RULES: dict = dict(folds.RULES)
rule = rule_registrar(RULES)

PARTIALS = 8  # independent accumulators over the innermost reduced axis


@rule(ops.reduce)
def _reduce(em, node, args):
    source, identity, *captures = args
    (acc_t,) = node.attr("types")
    axes = node.attr("axes")
    src_t = node.inputs[0].type
    if not em.inlines(node):
        return folds.fold(em, node, args)
    src_leaves = leaf_values(source, Aggregate)
    acc_leaf_types = T.leaf_types(acc_t)
    rank = T.leaf_types(src_t)[0].rank
    src_shape = tuple(em.extent(e) for e in T.leaf_types(src_t)[0].shape)
    kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
    red = [src_shape[a] for a in axes]
    ident_leaves = leaf_values(identity, Aggregate)
    region_size = len(node.regions[0].nodes)
    width = lane_width(node)  # a float sum: explicit vector lanes in a fixed order (.lane_sum)
    keyed = keyed_select(node) is not None  # float max/min over order keys: one accumulator
    partials = PARTIALS if region_size <= 8 and width is None and not keyed else 1
    # Inside a row group (base.row_loop) the kept shape is [M] and this is row r's value: a scalar.
    row = em.row is not None
    outs = [None] * len(acc_leaf_types) if row else result_arrays(em, acc_leaf_types, kept)
    results: list = []
    with em.loop_nest(kept, parallel=True) as pos:
        accs = [[em.assign(em.elem(v, pos), "c") for v in ident_leaves] for _ in range(partials)]
        lanes = lanes_start(em, accs[0][0]) if width else None
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

        if lanes:
            lanes_run(em, lanes, width, last, lambda k: step_elements(k)[0])
        elif keyed:  # float max/min: vectorised over order keys, a sequential loop where a NaN is
            keyed_reduction(em, node, accs[0][0], last, lambda k: step_elements(k)[0], lambda k: step(0, k))
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
        if lanes:
            lanes_finish(em, lanes, accs[0][0])
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
