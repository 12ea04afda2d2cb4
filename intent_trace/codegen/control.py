"""Structured control, written once for every code generator: ``loop``, ``while``, ``if`` and ``break`` /
``continue``, with loop carries and branch results as the emitter's mutable locals (``em.mutable``: a reassigned
local on cpu, ``T.alloc_var`` or a buffer in TileLang; ``em.current`` reads them, ``em.store`` assigns them).

An enclosing KIR loop is a frame on ``em.loop_stack``: ``(kind, carry names, carry type, block depth)``, pushed by
``em.loop_frame`` while its body is emitted, so ``break``/``continue`` know what to store and which blocks they
leave (``em.leave_blocks``: TileLang frees the heap buffers those blocks hold). ``parallel``/``for`` differ per
target (cpu chooses ``prange`` and frames its race check; TileLang may map the loop onto threads), so each backend
writes that rule, with :func:`loop_point` for the loop's member.
"""
from __future__ import annotations

from ..graph import ops
from ..graph.interpreter import rule_registrar
from .values import Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

EXITS = {ops.break_: "break", ops.continue_: "continue"}  # the statement each exit op is, on every target


def loop_point(em, domain, o: str) -> Scalar:
    """The member of ``domain`` at loop position ``o``, bound to a local (the region's index parameter)."""
    d = em.dialect
    return Scalar(em.assign(d.as_index(d.coordinate(domain.start, domain.step, o)), "q"))


@rule(ops.loop)
def loop(em, node, args):
    domain, init = args
    (t,) = node.attr("types")
    (region,) = node.regions
    names = em.mutable(t, init)
    o = em.fresh("o")
    with em.block(f"for {o} in {em.dialect.serial(domain.length)}:"), em.in_loop(), em.loop_frame("loop", names, t):
        (new,) = em.run_region(region, (loop_point(em, domain, o), em.current(names, t)))
        em.store(names, new, t)
    return em.current(names, t)


@rule(ops.while_)
def while_(em, node, args):
    (init,) = args
    (t,) = node.attr("types")
    cond, body = node.regions
    names = em.mutable(t, init)
    # The condition region is statements, so the loop runs on a condition that never changes (``em.while_header``)
    # and leaves through ``break`` when the region's result is false (``em.while_stop``).
    with em.block(em.while_header()), em.in_loop():
        depth = em.depth
        (p,) = em.run_region(cond, (em.current(names, t),))
        with em.block(f"if {em.while_stop(p.expr)}:"):
            em.leave_blocks(depth)  # what the condition region holds
            em.line("break")
        with em.loop_frame("while", names, t):
            (new,) = em.run_region(body, (em.current(names, t),))
            em.store(names, new, t)
    return em.current(names, t)


@rule(ops.if_)
def if_(em, node, args):
    types = node.attr("types")
    then_r, else_r = node.regions
    names = em.mutable(types[0], scratch=False) if types else []  # a branch result never reads its own locals
    for header, region in ((f"if {args[0].expr}:", then_r), ("else:", else_r)):
        with em.block(header):
            results = em.run_region(region)
            if types:
                em.store(names, results[0], types[0])
    return em.current(names, types[0]) if types else None


@rule(ops.break_, ops.continue_)
def exit_(em, node, args):
    _, names, t, depth = em.loop_stack[-1]
    with em.block(f"if {em.flag(args[0].expr)}:"):
        if len(args) > 1:
            em.store(names, args[1], t)
        em.leave_blocks(depth)  # what this iteration holds
        em.line(EXITS[node.op])
