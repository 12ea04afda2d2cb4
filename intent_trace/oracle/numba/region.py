"""cpu's region_fold and region_scan rules (spec §9): the shared ones (:func:`intent_trace.codegen.folds.region_rules`)
over cpu's slicing.

The cpu target cuts the source into slices of ``SLICE`` members (the last one shorter), each copied into arrays
(loop nests inside a slice may still run in parallel) before it is summarised, or emitted from the running
state.
"""
from __future__ import annotations

import contextlib

from ... import types as T
from ...codegen import folds
from ...graph.lowering import leaf_values
from .values import Aggregate, Lazy

SLICE = folds.SLICE


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
        length = em.assign(f"R.min2({SLICE}, {n} - {start})", "n")
        em.dim_names[slice_dim] = length
        parts = []
        for leaf, t in zip(leaf_values(source, Aggregate), leaf_types):
            lshape = tuple(length if k == axis else em.extent(e) for k, e in enumerate(t.shape))

            def elem(idx, leaf=leaf):
                return em.elem(leaf, [f"np.int64({i}) + {start}" if k == axis else i for k, i in enumerate(idx)])

            parts.append(em.materialize(Lazy(lshape, elem), t))
        yield parts, start


RULES: dict = folds.region_rules(_slices)
