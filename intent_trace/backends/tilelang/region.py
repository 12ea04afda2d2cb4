"""TileLang's region_fold and region_scan rules (spec §9): the shared ones
(:func:`intent_trace.codegen.folds.region_rules`) over TileLang's slicing.

The source is cut into slices of ``SLICE`` members along the axis (the last one shorter), as the cpu target
cuts it; by the §9 laws every segmentation gives the same result (within T5). A slice is the source seen at an
offset (lazy: nothing is copied), and a buffer holding one is sized by the bound ``SLICE`` where the host sizes it
(.storage).
"""
from __future__ import annotations

import contextlib

from ... import types as T
from ...codegen import folds
from ...graph.lowering import leaf_values
from ...graph import ops
from .emitter import Aggregate, Lazy, add, as_index

SLICE = folds.SLICE


@contextlib.contextmanager
def _slices(em, node, source):
    """The loop over slices; yields (slice values, the slice's first member)."""
    axis = node.attr("axis")
    leaf_types = T.leaf_types(node.inputs[0].type)
    n = em.shape(leaf_types[0])[axis]
    s = em.fresh("o")
    em.line(f"for {s} in T.serial(T.floordiv({as_index(n)} + T.int64({SLICE - 1}), T.int64({SLICE}))):")
    em.depth += 1
    em.memo.append({})
    start = em.assign(f"{as_index(s)} * T.int64({SLICE})", "s")
    parts = slice_views(em, node, source, start, SLICE)
    yield parts, start
    em.release(em.depth)
    em.depth -= 1
    em.memo.pop()


def slice_views(em, node, source, start: str, size: int) -> list:
    """The slice of a region op's ``source`` that starts at member ``start`` and holds up to ``size`` members (fewer
    at the end of the axis), as lazy views of the source leaves (nothing is copied); the helpers' slice extents are
    named by its member count, which a workspace sizes by ``size`` (.storage). Also the chunks of a segmented scan
    (:mod:`.cuda_region_scan`)."""
    axis = node.attr("axis")
    leaf_types = T.leaf_types(node.inputs[0].type)
    n = em.shape(leaf_types[0])[axis]
    length = em.assign(f"T.min(T.int64({size}), {as_index(n)} - {start})", "n")
    em.host_sizes[length] = str(size)  # a workspace holding a slice is sized by the bound (.storage)
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
    return parts


RULES: dict = folds.region_rules(_slices)
REJECTED: dict = {}
