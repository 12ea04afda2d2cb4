"""The TileLang lowering's rule tables are explicit: each rule module owns its table and imports only downward,
one module composes them, every op is either lowered or rejected with its reason, every module of the backend
imports first and alone, and no op is named by a string.

These tests read the package's source and import its modules; they compile nothing.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import intent_trace
from intent_trace.graph import ops

PACKAGE = pathlib.Path(intent_trace.__file__).parent
TILELANG = PACKAGE / "backends" / "tilelang"
ROOT = PACKAGE.parent
RULE_MODULES = ("elementwise", "structure", "structured", "memory", "region", "atomic", "quant", "random", "scaled",
                "sparse")
# helper D rewrites these onto the pattern engine (issue 16, item 5); their op-name comparisons go with it
PATTERN_MODULES = {"cuda_kernels.py", "cuda_matmul.py", "cuda_attention.py"}


def _modules() -> list:
    out = []
    for path in sorted((PACKAGE / "backends").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out.append(".".join(parts))
    return out


def _imports(path: pathlib.Path, module: str, everywhere: bool = False) -> set:
    """The intent_trace modules ``module`` (at ``path``) imports: at module level, or ``everywhere`` (function
    bodies too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    nodes = ast.walk(tree) if everywhere else [n for n in tree.body]
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("intent_trace"):
                continue
            submodules = {f"{target}.{a.name}" for a in node.names
                          if ROOT.joinpath(*target.split("."), f"{a.name}.py").exists()
                          or ROOT.joinpath(*target.split("."), a.name, "__init__.py").exists()}
            # ``from . import structure`` imports the submodule (its package is already initialised)
            out |= submodules or {target}
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("intent_trace"))
    return out


def _graph(everywhere: bool) -> dict:
    mods = set(_modules())
    graph = {}
    for m in mods:
        path = ROOT.joinpath(*m.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        graph[m] = {t for t in _imports(path, m, everywhere) if t in mods and t != m}
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_backend_module_imports_first_and_alone():
    # Each in a fresh interpreter: a module that only works when another one was imported before it fails here.
    code = ("import importlib, sys\nbad = []\nfor m in sys.argv[1:]:\n"
            "    r = __import__('subprocess').run([sys.executable, '-c', f'import {m}'], capture_output=True, text=True)\n"
            "    if r.returncode: bad.append((m, r.stderr.strip().splitlines()[-1:]))\nprint(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", code, *_modules()], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_module_level_import_circles_in_backends():
    assert _cycles(_graph(everywhere=False)) == []


def test_rule_modules_import_no_sibling_rule_module():
    for name in RULE_MODULES:
        module = f"intent_trace.backends.tilelang.{name}"
        imported = _imports(TILELANG / f"{name}.py", module, everywhere=True)
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
    imported = _imports(TILELANG / "emitter.py", "intent_trace.backends.tilelang.emitter", everywhere=True)
    assert not {m for m in imported if m.rsplit(".", 1)[-1] in (*RULE_MODULES, "rules")}


def _name_comparisons(path: pathlib.Path) -> list:
    """``x.op.name == "..."``, ``op.name in ("...", ...)``, ``@rule("...")``: an op named by a string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set(ops.REGISTRY)
    found = []

    def is_op_name(e) -> bool:
        return isinstance(e, ast.Attribute) and e.attr == "name" and (
            (isinstance(e.value, ast.Attribute) and e.value.attr == "op") or
            (isinstance(e.value, ast.Name) and e.value.id in ("op", "_op")))

    def strings(e) -> list:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return [e.value]
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return [x for el in e.elts for x in strings(el)]
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and (is_op_name(node.left) or any(is_op_name(c) for c in node.comparators)):
            found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "rule":
            if any(s in names for a in node.args for s in strings(a)):
                found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("path", sorted(p for p in (PACKAGE / "backends").rglob("*.py")
                                        if p.name not in PATTERN_MODULES), ids=lambda p: p.name)
def test_no_op_is_named_by_a_string(path):
    assert _name_comparisons(path) == []


def test_no_import_circles_in_backends_counting_imports_inside_functions():
    # cuda_kernels, cuda_matmul and cuda_attention (PATTERN_MODULES) import each other inside functions until the
    # pattern engine replaces them (issue 16, item 5); every other backend module is outside any circle
    pattern = {f"intent_trace.backends.tilelang.{p[:-3]}" for p in PATTERN_MODULES}
    assert [c for c in _cycles(_graph(everywhere=True)) if not set(c) <= pattern] == []
