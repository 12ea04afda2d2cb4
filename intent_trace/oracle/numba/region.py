"""Numba rules for region_fold and region_scan (spec §9).

The cpu target cuts the source into slices of ``SLICE`` members (the last one shorter): each slice
is copied into arrays, summarised, and folded into a running summary (region fold), or emitted
from the running state, which the slice's transition then advances (region scan: by the §9 laws
this equals apply(combine(prefix, ...)) without forming prefixes).
"""
from __future__ import annotations

import contextlib

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.lowering import assemble, leaf_values
from .inline import result_arrays
from .values import Aggregate, Array, Lazy

RULES: dict = {}
rule = rule_registrar(RULES)

SLICE = 256


@contextlib.contextmanager
def _slices(em, node, source):
    """Loop over slices; yields the slice values (materialised) and the slice offset/extent names."""
    axis = node.attr("axis")
    src_t = node.inputs[0].type
    leaf_types = T.leaf_types(src_t)
    shape = tuple(em.extent(e) for e in leaf_types[0].shape)
    n = shape[axis]
    slice_dim = node.regions[0].params[0].type.shape[axis]
    start = em.fresh("s")
    with em.block(f"for {start} in range(0, {n}, {SLICE}):"):
        # Slices are few and large: loop nests inside them may still run in parallel (no loop_depth).
        length = em.assign(f"min({SLICE}, {n} - {start})", "n")
        em.dim_names[slice_dim] = length
        parts = []
        for leaf, t in zip(leaf_values(source, Aggregate), leaf_types):
            lshape = tuple(length if k == axis else em.extent(e) for k, e in enumerate(t.shape))

            def elem(idx, leaf=leaf):
                return em.elem(leaf, [f"np.int64({i}) + {start}" if k == axis else i for k, i in enumerate(idx)])

            parts.append(em.materialize(Lazy(lshape, elem), t))
        yield parts, start


@rule(ops.region_fold)
def _region_fold(em, node, args):
    source, identity, *operands = args
    (summary_t,) = node.attr("types")
    summarize, combine = node.regions
    names = em.carry_names(summary_t)
    em.assign_leaves(names, identity, summary_t)
    with _slices(em, node, source) as (parts, _):
        (s,) = em.run_region(summarize, (*parts, *operands))
        (new,) = em.run_region(combine, (em.rebuild(list(names), summary_t), s))
        em.assign_leaves(names, new, summary_t)
    return em.rebuild(list(names), summary_t)


@rule(ops.region_scan)
def _region_scan(em, node, args):
    source, identity, initial, *operands = args
    summarize, combine, apply, emit = node.regions
    out_t, state_t = node.attr("types")
    axis = node.attr("axis")
    out_leaf_types = T.leaf_types(out_t)
    outs = [result_arrays(em, [t], tuple(em.extent(e) for e in t.shape))[0] for t in out_leaf_types]
    names = em.carry_names(state_t)
    em.assign_leaves(names, initial, state_t)
    with _slices(em, node, source) as (parts, start):
        state = em.rebuild(list(names), state_t)
        (piece,) = em.run_region(emit, (*parts, state, *operands))
        for out, leaf, t in zip(outs, leaf_values(piece, Aggregate), out_leaf_types):
            leaf = em.materialize(leaf, t)
            with em.loop_nest(leaf.shape, parallel=False) as idx:
                dest = [f"np.int64({i}) + {start}" if k == axis else i for k, i in enumerate(idx)]
                em.line(f"{out}[{', '.join(dest)}] = {em.elem(leaf, idx)}")
        (s,) = em.run_region(summarize, (*parts, *operands))
        (new,) = em.run_region(apply, (s, em.rebuild(list(names), state_t)))
        em.assign_leaves(names, new, state_t)
    shapes = [tuple(em.extent(e) for e in t.shape) for t in out_leaf_types]
    return assemble(out_t, [Array(o, sh) for o, sh in zip(outs, shapes)], Aggregate), em.rebuild(list(names), state_t)
