"""TileLang's table of the elementwise ops (:data:`.scalar_rules.SCALAR_RULES`) and constants: the shared rules
(:mod:`intent_trace.codegen.pointwise`). A scalar result is a local bound once; a tensor result is lazy: each
element is the helper call on the operand elements at its own index (the operands recorded, so a long chain is
evaluated bottom-up, not recursively).
"""
from __future__ import annotations

from ...codegen import pointwise
from ...graph import ops
from .scalar_rules import SCALAR_RULES

RULES: dict = {**pointwise.rules(SCALAR_RULES), ops.constant: pointwise.constant}
REJECTED: dict = {}  # every elementwise op has a helper family; a dtype a target lacks is rejected per node
