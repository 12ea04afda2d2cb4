"""The TileLang lowering's rule tables are explicit: each rule module owns its table and imports only downward,
one module composes them, every op is either lowered or rejected with its reason, every module of the backend
imports first and alone, and no op is named by a string.

These tests read the package's source and import its modules; they compile nothing.
"""
from __future__ import annotations

import ast

from package_source import PACKAGE, import_graph, strongly_connected

from intent_trace.graph import ops

TILELANG = PACKAGE / "backends" / "tilelang"
RULE_MODULES = ("elementwise", "structure", "structured", "memory", "region", "atomic", "quant", "random", "scaled",
                "sparse")
# The module-level structure of the whole package (imports alone, no cycles, no op-name strings) is
# tests/test_package_structure.py's; these tests are the TileLang backend's own rules on top of it.


def _late_imports(module: str) -> set:
    """The package modules ``module`` imports anywhere (function bodies too)."""
    return import_graph(everywhere=True)[module]


def test_rule_modules_import_no_sibling_rule_module():
    for name in RULE_MODULES:
        module = f"intent_trace.backends.tilelang.{name}"
        imported = _late_imports(module)
        siblings = {m for m in imported if m.rsplit(".", 1)[-1] in RULE_MODULES and m != module}
        assert not siblings, f"{name} imports the rule modules {sorted(siblings)}"


def test_rule_modules_import_no_private_helper_of_another_module():
    for path in sorted(TILELANG.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        private = [(node.module, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
                   for a in node.names if a.name.startswith("_") and node.module is not None]  # not a module
        assert not private, f"{path.name} imports private helpers {private}"


def test_each_rule_module_owns_its_table_and_the_composition_decides_every_op_once():
    import importlib

    from intent_trace.backends.tilelang import rules

    seen: dict = {}
    for name in RULE_MODULES:
        m = importlib.import_module(f"intent_trace.backends.tilelang.{name}")
        assert isinstance(m.RULES, dict) and isinstance(m.REJECTED, dict)
        for op in (*m.RULES, *m.REJECTED):
            assert isinstance(op, ops.OpDef)
            assert op not in seen, f"{op.name} is decided by {seen[op]} and {name}"
            seen[op] = name
        for op, why in m.REJECTED.items():
            assert isinstance(why, str) and why and "yet" not in why, (op.name, why)
    assert set(seen) == set(ops.REGISTRY.values())
    assert set(rules.RULES) | set(rules.REJECTED) == set(ops.REGISTRY.values())
    assert not set(rules.RULES) & set(rules.REJECTED)
    assert rules.MODULES == tuple(importlib.import_module(f"intent_trace.backends.tilelang.{n}") for n in RULE_MODULES)


def test_the_emitter_module_fills_no_table_and_imports_no_rule_module():
    from intent_trace.backends.tilelang import emitter

    assert not hasattr(emitter, "rule")
    imported = _late_imports("intent_trace.backends.tilelang.emitter")
    assert not {m for m in imported if m.rsplit(".", 1)[-1] in (*RULE_MODULES, "rules")}


def test_no_import_circles_in_backends_counting_imports_inside_functions():
    graph = import_graph(everywhere=True)
    backends = {m: {t for t in edges if t.startswith("intent_trace.backends.")}
                for m, edges in graph.items() if m.startswith("intent_trace.backends.")}
    assert [c for c in strongly_connected(backends) if len(c) > 1] == []
