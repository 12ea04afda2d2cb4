"""The indexed grid programs of tilelang-cuda, as one launch planner (:attr:`.spec.TileLangTarget.indexed_grid`):
a histogram (:mod:`.cuda_histogram`), a scatter_reduce (:mod:`.cuda_scatter`) or a row gather (:mod:`.cuda_gather`),
whichever the graph is (the schedule pass's :mod:`~intent_trace.schedule.indexed` recognisers); None for any other
graph, which keeps the planners after it (flat nests, parallel grids) and today's programs.
"""
from __future__ import annotations

import functools

from .cuda_gather import gather_plan
from .cuda_histogram import histogram_plan
from .cuda_scatter import scatter_plan


#: CUDA's row gather copies 16-byte units, 4 a thread, where a row's bytes are whole units and both buffers are
#: aligned (elements otherwise): tools/indexed_ab.py on one H100, the zoo's embedding (f16 32000x4096, 8192 ids):
#: 0.97x torch against 0.66x for 8 elements a thread and 0.37x for main's flat nest (2026-12-06, sixth session)
VECTOR_GATHER = functools.partial(gather_plan, vector=True, per_thread=4)


def indexed_plan(graph, emulated: bool = False):
    """The grid plan of a histogram, scatter or row-gather graph, or None."""
    for planner in (histogram_plan, functools.partial(scatter_plan, screen=True), VECTOR_GATHER):
        plan = planner(graph, emulated)
        if plan is not None:
            return plan
    return None
