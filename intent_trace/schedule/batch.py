"""Where a region op sits: at the top level of the kernel, or in its one top-level ``parallel`` loop over
``domain(0, B, 1)`` of a kernel extent ``B`` (a batch: batch * heads of attention), which a target runs as a grid of
independent entries (language §5: the iterations of ``parallel`` never conflict). Shared by the segmented fold
(:mod:`.region`) and the segmented scan (:mod:`.region_scan`).
"""
from __future__ import annotations

import attrs

from ..graph import ops
from ..graph.patterns import match
from .access import UNIT_DOMAIN
from .recognition import NotRecognised
from .recognition import at as _at


@attrs.frozen(slots=True)
class Placement:
    """``pre``: the top-level nodes before the loop (all of them when there is none); ``body``: the nodes of the
    region op's block; ``loop``, ``batch`` and ``point``: the parallel loop, its extent's graph index and its point
    (None without a loop)."""

    pre: tuple
    body: tuple
    loop: object = None
    batch: int | None = None
    point: object = None


def placement(graph, node, extent_of: dict) -> Placement:
    """Where ``node`` sits in ``graph`` (``extent_of``: schedule.prologue.extent_vars); NotRecognised otherwise."""
    top = tuple(graph.body.nodes)
    what = f"the {node.op.name}{_at(node)}"
    if node in top:
        return Placement((), top)
    loop = top[-1] if top and top[-1].op is ops.parallel else None
    if loop is None or node not in loop.regions[0].nodes or sum(n.op is ops.parallel for n in top) != 1:
        raise NotRecognised(f"{what} is neither at the top level nor in a top-level parallel loop (last in the graph)")
    pre = top[:-1]
    caps = match(UNIT_DOMAIN, next((n for n in pre if loop.inputs[0] in n.outputs), None), {})
    if caps is None or caps["end"] not in extent_of:
        raise NotRecognised(f"the parallel loop{_at(loop)} is not over domain(0, B, 1) of a kernel extent B")
    (point,) = loop.regions[0].params
    return Placement(pre, tuple(loop.regions[0].nodes), loop, extent_of[caps["end"]], point)
