"""The TileLang lowering's rule table, composed from the rule modules' own tables.

Each rule module (:mod:`.elementwise`, :mod:`.structure`, :mod:`.structured`, :mod:`.memory`, :mod:`.region`,
:mod:`.atomic`, :mod:`.quant`, :mod:`.random`, :mod:`.scaled`, :mod:`.sparse`) owns ``RULES`` (OpDef -> rule)
and ``REJECTED`` (OpDef -> why no TileLang target lowers it) and imports only downward (the emitter and its
values, :mod:`.scalar_rules`, the shared helpers :mod:`.views`, :mod:`.accumulate`, :mod:`.extern`, and the rules
every code generator shares, :mod:`intent_trace.codegen`, which structure, structured, region and elementwise
enter in their tables). This is the one module that imports them all; nothing fills a table as an import side
effect. Every op of the registry is either lowered or rejected with its reason (checked here, at import, so an op
added to the registry without a TileLang decision fails loudly instead of being rejected with a generic message).
"""
from __future__ import annotations

from ...graph import ops
from ...graph.interpreter import rule_table
from . import atomic, elementwise, memory, quant, random, region, scaled, sparse, structure, structured

MODULES = (elementwise, structure, structured, memory, region, atomic, quant, random, scaled, sparse)


def _compose(modules) -> tuple:
    rules, rejected = {}, {}
    for m in modules:
        for table, into in ((m.RULES, rules), (m.REJECTED, rejected)):
            twice = (set(table) & set(rules)) | (set(table) & set(rejected))
            if twice:
                raise RuntimeError(f"TileLang rule module {m.__name__} decides ops another module decides: "
                                   f"{sorted(op.name for op in twice)}")
            into.update(table)
    undecided = [op.name for op in ops.REGISTRY.values() if op not in rules and op not in rejected]
    if undecided:
        raise RuntimeError(f"ops with neither a TileLang rule nor a reason for rejecting them: {sorted(undecided)}")
    return rule_table(rules), rejected


RULES, REJECTED = _compose(MODULES)
