"""The front end imports without cycles: the graph, the proxies, the kernel, the compiler and the verifier form a layered
import graph (every import counted, module level or inside a function, except annotation-only ones), and each
of those modules imports on its own in a fresh interpreter."""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "intent_trace")
# the front end: the KIR, the tracer and the surface
AREA = ("intent_trace.graph", "intent_trace.proxies", "intent_trace.kernel", "intent_trace.compiler",
        "intent_trace.targets", "intent_trace.language", "intent_trace.types", "intent_trace.oracle.verification")


def _modules() -> dict:
    """module name -> path, for every module of the package."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(folder, f)
    return out


def _imports(name: str, path: str, modules: dict) -> set:
    tree = ast.parse(open(path, encoding="utf-8").read())
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _in_area(name: str) -> bool:
    return any(name == a or name.startswith(a + ".") for a in AREA)


def _cycle(graph: dict):
    """One import cycle of ``graph`` as a list of modules, or None."""
    state: dict = {}
    stack: list = []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_front_end_has_no_import_cycle():
    modules = _modules()
    graph = {m: {n for n in _imports(m, p, modules) if _in_area(n)} for m, p in modules.items() if _in_area(m)}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", ["intent_trace.graph.values", "intent_trace.graph.printer",
                                    "intent_trace.graph.type_rules_structured", "intent_trace.proxies.values",
                                    "intent_trace.proxies.aggregates", "intent_trace.proxies.numpy_interop",
                                    "intent_trace.proxies.context", "intent_trace.kernel", "intent_trace.compiler",
                                    "intent_trace.oracle.verification.coverage_cases"])
def test_module_imports_alone(module):
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True)
