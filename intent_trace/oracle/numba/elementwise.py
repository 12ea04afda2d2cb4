"""cpu's table of the elementwise ops and constants: the shared rules (:mod:`intent_trace.codegen.pointwise`) over
the ops cpu's scalar rule table spells (:mod:`.scalar_rules`). A tensor result is a fused element expression that
the emitter materialises where fusion stops.
"""
from __future__ import annotations

from ...codegen import pointwise
from ...graph import ops
from .scalar_rules import SCALAR_RULES

RULES: dict = {**pointwise.rules(SCALAR_RULES), ops.constant: pointwise.constant}
