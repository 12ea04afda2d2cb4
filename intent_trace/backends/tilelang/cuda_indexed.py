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


def indexed_plan(graph, emulated: bool = False):
    """The grid plan of a histogram, scatter or row-gather graph, or None."""
    for planner in (histogram_plan, functools.partial(scatter_plan, screen=True), gather_plan):
        plan = planner(graph, emulated)
        if plan is not None:
            return plan
    return None
