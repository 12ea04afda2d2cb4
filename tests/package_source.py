"""The package's modules read as source: their names, the import graph and the op-name comparisons.

Shared by the structure tests (``test_package_structure.py``, ``backends/test_tilelang_rule_tables.py``);
nothing here imports a module of the package except the op registry.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

from intent_trace.graph import ops

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "intent_trace"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict:
    """module name -> path, for every .py file of the package."""
    out = {}
    for directory, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(directory) / name
                out[_module_name(path)] = path
    return out


MODULES = _sources()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level_imports(body: list):
    """Import statements executed when the module is imported: the module body, including its top-level
    ``try``/``if``/``with`` blocks, never function or class bodies, never ``if TYPE_CHECKING:``."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                yield from _top_level_imports(stmt.body)
            yield from _top_level_imports(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from _top_level_imports(block)
        elif isinstance(stmt, ast.With):
            yield from _top_level_imports(stmt.body)


def _package_of(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def import_graph(everywhere: bool = False) -> dict:
    """module -> the package modules its top-level imports name (relative imports resolved); with
    ``everywhere``, the imports inside functions too (late imports, which a load-time cycle ignores)."""
    graph = {}
    for name, path in MODULES.items():
        edges = set()
        tree = ast.parse(path.read_text(), str(path))
        statements = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] if everywhere \
            else _top_level_imports(tree.body)
        for stmt in statements:
            if isinstance(stmt, ast.Import):
                targets = [a.name for a in stmt.names]
            else:
                if stmt.level:
                    base = _package_of(name)
                    for _ in range(stmt.level - 1):
                        base = base.rpartition(".")[0]
                    source = f"{base}.{stmt.module}" if stmt.module else base
                else:
                    source = stmt.module
                # ``from pkg import sub`` depends on the submodule; any other name, on the module that defines it
                # (a package's __init__ runs before any of its submodules, which is no cycle).
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in stmt.names]
            edges.update(t for t in targets if t in MODULES and t != name)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict) -> list:
    """Tarjan's strongly connected components (iterative), each a sorted list."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                out.append(sorted(component))
    return out


OP_NAMES = frozenset(ops.REGISTRY)


def _str_constants(node: ast.expr):
    """The str constants of a constant or a tuple/list/set/frozenset(...) display of constants, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set",
                                                                                           "tuple") \
            and len(node.args) == 1 and not node.keywords:
        return _str_constants(node.args[0])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and \
            all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _is_name_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "name"


def _is_rule_call(node: ast.Call) -> bool:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == "rule"
    if isinstance(f, ast.Attribute):
        return f.attr == "rule"
    return isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "rule_registrar"


def op_name_uses(tree: ast.AST) -> list:
    """(line, what) for each op-name string comparison and each rule registration by op-name string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for a, b in zip(operands, operands[1:]):
                for attr, other in ((a, b), (b, a)):
                    names = _str_constants(other)
                    if _is_name_attribute(attr) and names and OP_NAMES.intersection(names):
                        found.append((node.lineno, f"`{ast.unparse(node)}` compares an op name with a string"))
        elif isinstance(node, ast.Call) and _is_rule_call(node):
            strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if strs:
                found.append((node.lineno, f"`{ast.unparse(node.func)}({', '.join(map(repr, strs))}, ...)` "
                                           f"registers a rule by op-name string"))
    return sorted(set(found))
