"""cpu's table of the shape, aggregate, domain, view and control rules.

The rules are the shared ones (:mod:`intent_trace.codegen.structural`, :mod:`~intent_trace.codegen.access`,
:mod:`~intent_trace.codegen.control`), written in cpu's dialect (:data:`.indexing.NUMBA`). Buffers' ``load`` and
``store`` are :mod:`.memory`'s (the same access rules).

Only ``parallel``/``for`` is cpu's own: a top-level ``parallel`` whose body updates no shared state is a
``prange``, and with checks each ``parallel`` frames its race check (:mod:`.races`).
"""
from __future__ import annotations

import contextlib

from ...codegen import access, control, structural
from ...codegen.control import loop_point
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.values import walk_region
from .races import parallel_frame

RULES: dict = {**structural.RULES, **access.RULES, **control.RULES}
rule = rule_registrar(RULES)


def _updates_shared_state(region) -> bool:
    """A scatter_reduce into a destination the region does not allocate (threads would race on it)."""
    nodes = list(walk_region(region))
    local = {v for n in nodes for v in n.outputs}
    return any(n.op is ops.scatter_reduce and n.inputs[0] not in local for n in nodes)


@rule(ops.parallel, ops.for_)
def _iterate(em, node, args):
    (d,) = args
    (region,) = node.regions
    parallel = node.op is ops.parallel and em.prange_depth == 0 and em.loop_depth == 0 and \
        not _updates_shared_state(region)
    p = em.fresh("o")
    hoisted = em.staging.parallel_loop(em, d.length) if parallel else contextlib.nullcontext()
    with parallel_frame(em, region, d, p, node.op is ops.parallel), hoisted, \
            em.block(f"for {p} in {'prange' if parallel else 'range'}({d.length}):"):
        if parallel:
            em.uses_prange = True
            em.prange_depth += 1
        outer, em.parallel_body = em.parallel_body, (region if parallel else None)
        try:
            with em.in_loop(), em.loop_frame("for"):
                em.run_region(region, (loop_point(em, d, p),))
        finally:
            em.parallel_body = outer
        if parallel:
            em.prange_depth -= 1
