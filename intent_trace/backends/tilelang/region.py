"""TileLang rules for region_fold and region_scan (spec §9).

The source is cut into slices of ``SLICE`` members along the axis (the last one shorter), as the cpu target
cuts it; by the §9 laws every segmentation gives the same result (within T5). A slice is the source seen
at an offset (lazy: nothing is copied). Region fold summarises each slice and folds the summary into a
running one (a loop carry, tensor leaves in buffers). Region scan emits each slice from the running state,
writing the pieces into the output buffers at the slice's offset, then advances the state by the slice's
transition ``apply(summarize(slice), state)`` (by the laws, ``apply(combine(prefix, s), initial)``).
"""
from __future__ import annotations

from ... import types as T
from ...graph.lowering import assemble, leaf_values
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Aggregate, Array, Lazy, add, as_index

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)

SLICE = 256


def _slice_loop(em, node, source):
    """Open the loop over slices; returns (slice values, the slice's first member)."""
    axis = node.attr("axis")
    leaf_types = T.leaf_types(node.inputs[0].type)
    n = em.shape(leaf_types[0])[axis]
    s = em.fresh("o")
    em.line(f"for {s} in T.serial(T.floordiv({as_index(n)} + T.int64({SLICE - 1}), T.int64({SLICE}))):")
    em.depth += 1
    em.memo.append({})
    start = em.assign(f"{as_index(s)} * T.int64({SLICE})", "s")
    length = em.assign(f"T.min(T.int64({SLICE}), {as_index(n)} - {start})", "n")
    em.host_sizes[length] = str(SLICE)  # a workspace holding a slice is sized by the bound (.storage)
    # summarize (and emit) take the slices first: their slice extent is this slice's member count
    for region in (node.regions[0], node.regions[3]) if node.op is ops.region_scan else node.regions[:1]:
        for p in region.params[:len(leaf_types)]:
            e = p.type.shape[axis]
            if not isinstance(e, int):
                em.dim_names[e] = length
    parts = []
    for leaf, t in zip(leaf_values(source, Aggregate), leaf_types):
        shape = tuple(length if k == axis else x for k, x in enumerate(em.shape(t)))
        parts.append(Lazy(shape, lambda idx, leaf=leaf: em.elem(leaf, [add(i, start) if k == axis else i
                                                                        for k, i in enumerate(idx)])))
    return parts, start


def _end_slice_loop(em) -> None:
    em.release(em.depth)
    em.depth -= 1
    em.memo.pop()


@rule(ops.region_fold)
def _region_fold(em, node, args):
    source, identity, *operands = args
    (summary_t,) = node.attr("types")
    summarize, combine = node.regions
    names = em.mutable(summary_t, identity)
    parts, _ = _slice_loop(em, node, source)
    (s,) = em.run_region(summarize, (*parts, *operands))
    (new,) = em.run_region(combine, (em.current(names, summary_t), s))
    em.store(names, new, summary_t)
    _end_slice_loop(em)
    return em.current(names, summary_t)


@rule(ops.region_scan)
def _region_scan(em, node, args):
    source, identity, initial, *operands = args
    summarize, combine, apply, emit = node.regions
    out_t, state_t = node.attr("types")
    axis = node.attr("axis")
    out_types = T.leaf_types(out_t)
    outs = [em.allocate(em.shape(t), em.tir(t.dtype)) for t in out_types]
    names = em.mutable(state_t, initial)
    parts, start = _slice_loop(em, node, source)
    (piece,) = em.run_region(emit, (*parts, em.current(names, state_t), *operands))
    for out, leaf in zip(outs, leaf_values(piece, Aggregate)):
        with em.loop_nest(leaf.shape) as idx:
            dest = [add(i, start) if k == axis else i for k, i in enumerate(idx)]
            em.line(f"{out}[{', '.join(dest)}] = {em.elem(leaf, idx)}")
    (s,) = em.run_region(summarize, (*parts, *operands))
    (new,) = em.run_region(apply, (s, em.current(names, state_t)))
    em.store(names, new, state_t)
    _end_slice_loop(em)
    shapes = [em.shape(t) for t in out_types]
    return assemble(out_t, [Array(o, sh) for o, sh in zip(outs, shapes)], Aggregate), em.current(names, state_t)
