"""TileLang's table of the shape, aggregate, domain, view and control rules.

The rules are the shared ones (:mod:`intent_trace.codegen.structural`, :mod:`~intent_trace.codegen.access`,
:mod:`~intent_trace.codegen.control`), written in TileLang's dialect (:mod:`.dialect`); their run-time checks are
cpu's (the error channel is :mod:`.storage`'s). Buffers' ``load``/``store`` are the view rules here. Without
checks a domain whose step is not positive is empty. Conflicting parallel writes are not checked (generic does).

Only ``parallel``/``for`` is TileLang's own: a serial program runs a parallel domain as a serial loop (any order
is a valid one), and the graph's one top-level parallel loop may be mapped onto threads instead (``em.grid``:
:class:`.cuda_kernels.ParallelGrid`, chosen before the emission).
"""
from __future__ import annotations

from ...codegen import access, control, structural
from ...codegen.control import loop_point
from ...graph import ops
from ...graph.interpreter import rule_registrar

RULES: dict = {**structural.RULES, **access.RULES, **control.RULES}
REJECTED: dict = {}
rule = rule_registrar(RULES)

rule(ops.load)(access.read)
rule(ops.store)(access.write)


@rule(ops.parallel, ops.for_)
def _iterate(em, node, args):
    (d,) = args
    (region,) = node.regions
    if em.grid is not None and node is em.grid.node:
        with em.grid_iteration(em.grid, d.length) as o:
            em.run_region(region, (loop_point(em, d, o),))
        return
    o = em.fresh("o")
    with em.block(f"for {o} in T.serial({d.length}):"), em.loop_frame("for"):
        em.run_region(region, (loop_point(em, d, o),))
