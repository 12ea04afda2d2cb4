"""Generic: the NumPy reference interpreter, the semantic authority.

Slow and obvious on purpose. This module composes the target: each rule module (``generic_*.py``) owns
the rules of one family in its ``RULES`` and imports only downward (:mod:`.generic_base`,
:mod:`.numerics`); :data:`RULES` here is their union, one rule per canonical op. Numerics come from
:mod:`.numerics`. Out/InOut views are staged copies committed only when the whole run succeeds, so a
kernel that raises leaves every caller array as it was (T9).
"""
from __future__ import annotations

import numpy as np

from ..arguments import bind_arguments
from ..compiler import register_target
from ..display import ExecutableDisplay
from ..graph.interpreter import rule_table
from ..graph.values import KernelGraph
from ..limits import check_allocation
from ..specialize import respecialize
from . import (generic_atomic, generic_contract, generic_control, generic_elementwise, generic_memory,
               generic_quant, generic_random, generic_region, generic_scaled, generic_shapes, generic_structured)
from .generic_base import DomainValue, LoopExit, NumpyInterpreter  # noqa: F401  (public names of the target)

RULES = rule_table(generic_elementwise.RULES, generic_shapes.RULES, generic_control.RULES, generic_structured.RULES,
                   generic_contract.RULES, generic_region.RULES, generic_memory.RULES, generic_random.RULES,
                   generic_atomic.RULES, generic_scaled.RULES, generic_quant.RULES)
# Ops this target refuses, with the reason (OpDef -> str): none, the reference defines every op.
REJECTED: dict = {}


class GenericInterpreter(NumpyInterpreter):
    """The reference interpreter: the generic walk over the composed rule table."""

    rules = RULES


class GenericExecutable(ExecutableDisplay):
    """``intent.compile(k, target="generic")``: runs the reference interpreter on NumPy arrays.

    ``seed`` seeds the random segmentation that every region fold/scan picks anew on each run (so
    tests exercise the §9 laws); ``check_laws=True`` also re-evaluates every reduce, scan and region
    combine under other associations and segmentations and raises :class:`LawViolation` naming the
    helper, the law and a small counterexample when they disagree beyond the T5 bound."""

    target = "generic"
    source = None

    def __init__(self, graph: KernelGraph, seed: int | None = 0, check_laws: bool = False):
        self.graph = graph
        self.rng = np.random.default_rng(seed)
        self.check_laws = bool(check_laws)

    def __call__(self, *args, **constexprs) -> None:
        if constexprs:  # another constexpr value: that specialisation runs the arguments (intent_trace.specialize)
            return respecialize(self, constexprs)(*args)
        values, dims = bind_arguments(self.graph, args)
        staged = []
        for i, p in enumerate(self.graph.params):
            if p.kind == "view" and p.type.access != "In":
                check_allocation(f"the staging copy of {p.name}", values[i].shape, values[i].itemsize)
        for i, p in enumerate(self.graph.params):
            if p.kind == "view" and p.type.access != "In":
                copy = np.array(values[i], copy=True)
                staged.append((values[i], copy))
                values[i] = copy
        GenericInterpreter(self.graph, values, dims, self.rng, self.check_laws).run_region(self.graph.body)
        for caller, copy in staged:  # commit only after the whole run succeeded
            np.copyto(caller, copy)

    def __repr__(self) -> str:
        return f"<generic executable {self.graph.name}>"


register_target("generic", lambda graph, **options: GenericExecutable(graph, **options))
