"""The surface table: every user spelling and the canonical op it builds, as views of the registry.

Each :class:`~intent_trace.graph.ops.OpDef` carries its spellings (``dunders``, ``shorthands``); the tables
here are derived from them, so a spelling is written once, on its op. The proxy dunders are generated from
the registry too (``proxies/build.py``); ``tests/graph/test_coverage.py`` checks the tables against the
proxies and the ``I`` namespace.
"""
from __future__ import annotations

from .ops import REGISTRY

#: dunder -> (canonical op, operands reflected), for the two-operand operators
BINARY_DUNDERS = {d: (op.name, reflected) for op in REGISTRY.values() if op.arity == 2
                  for d, reflected in op.dunders}

#: dunder -> canonical op, for the one-operand operators
UNARY_DUNDERS = {d: op.name for op in REGISTRY.values() if op.arity == 1 for d, _ in op.dunders}

#: ``I.<name>`` -> canonical op (the function in language.py builds it)
SHORTHANDS = {name: op.name for op in REGISTRY.values() for name in op.shorthands}
