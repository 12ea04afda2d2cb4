"""Generic rules for structured control: parallel, for, loop, while, if, break and continue.

``parallel`` runs its points one after another under a frame of the race detector
(:mod:`.generic_races`), so conflicting accesses of two points to one element are a RuntimeError. ``break``/``continue``
raise :class:`.generic_base.LoopExit`, which the enclosing loop rule catches.
"""
from __future__ import annotations

import numpy as np

from ..graph import ops
from ..graph.interpreter import rule_registrar
from .generic_base import LoopExit
from .generic_races import Frame

RULES: dict = {}
rule = rule_registrar(RULES)


@rule(ops.parallel)
def _parallel(it, node, args):
    domain = args[0]
    (region,) = node.regions
    frame = Frame()
    it.race_frames.append(frame)
    try:
        for c in domain.coords:
            frame.point = int(c)
            it.run_region(region, (np.asarray(c),))
    finally:
        it.race_frames.pop()


@rule(ops.for_)
def _for(it, node, args):
    (region,) = node.regions
    for c in args[0].coords:
        try:
            it.run_region(region, (np.asarray(c),))
        except LoopExit as e:
            if e.kind == "break":
                break


@rule(ops.loop)
def _loop(it, node, args):
    domain, carry = args
    (region,) = node.regions
    for c in domain.coords:
        try:
            (carry,) = it.run_region(region, (np.asarray(c), carry))
        except LoopExit as e:
            carry = e.carry
            if e.kind == "break":
                break
    return carry


@rule(ops.while_)
def _while(it, node, args):
    (carry,) = args
    cond, body = node.regions
    while True:
        (p,) = it.run_region(cond, (carry,))
        if not bool(p):
            return carry
        try:
            (carry,) = it.run_region(body, (carry,))
        except LoopExit as e:
            carry = e.carry
            if e.kind == "break":
                return carry


@rule(ops.if_)
def _if(it, node, args):
    then_r, else_r = node.regions
    results = it.run_region(then_r if bool(args[0]) else else_r)
    return results[0] if results else None


@rule(ops.break_, ops.continue_)
def _exit(it, node, args):
    if bool(args[0]):
        raise LoopExit("break" if node.op is ops.break_ else "continue", args[1] if len(args) > 1 else None)
