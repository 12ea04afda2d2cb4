"""The package's structure: every module imports on its own, the import graph has no cycles, and no code
outside ``graph/`` compares an op's name with a string (issue 16, item 3).

How the package is read (module names, the import graph, op-name comparisons) is ``package_source.py``.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from package_source import MODULES, ROOT, import_graph, op_name_uses, strongly_connected


def _check_none(failing: dict, what: str) -> None:
    """``failing``: entry -> description; fail naming every entry."""
    assert not failing, f"{what}:\n" + "\n".join(f"  {k}: {v}" for k, v in sorted(failing.items()))


# --- every module importable alone ---------------------------------------------------------------------------

# Only third-party libraries: the point is that no intent_trace module is imported before the one under test.
_PRELOAD = ("numpy", "numba", "attrs", "ml_dtypes", "scipy", "llvmlite", "tilelang", "torch")

_WORKER = r"""
import importlib, json, os, sys, traceback
for lib in PRELOAD:
    try:
        importlib.import_module(lib)
    except Exception:
        pass
assert not [m for m in sys.modules if m == "intent_trace" or m.startswith("intent_trace.")]
failures, running = {}, {}
def reap():
    pid, status = os.wait()
    name, read_end = running.pop(pid)
    with os.fdopen(read_end) as f:
        text = f.read()
    if status != 0:
        failures[name] = text or f"exit status {status}"
for name in MODULES:
    if len(running) >= WIDTH:
        reap()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            importlib.import_module(name)
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(write_end)
    running[pid] = (name, read_end)
while running:
    reap()
print("RESULT " + json.dumps(failures))
"""

def test_every_module_imports_alone():
    script = f"PRELOAD = {_PRELOAD!r}\nMODULES = {sorted(MODULES)!r}\nWIDTH = {max(2, os.cpu_count() or 2)}\n" + _WORKER
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"the import worker failed:\n{proc.stdout}\n{proc.stderr}"
    failures = json.loads(lines[-1][len("RESULT "):])
    described = {name: "\n    ".join(text.strip().splitlines()[-3:]) for name, text in failures.items()}
    _check_none(described, "modules that fail when imported first")


# --- no import cycles ------------------------------------------------------------------------------------------

def test_no_import_cycles():
    cycles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    failing = {m: "in the cycle " + " <-> ".join(c) for c in cycles for m in c}
    _check_none(failing, "modules in import cycles")


def test_the_import_graph_resolves_relative_imports():
    graph = import_graph()
    # ``from .generic_base import ...``, ``from ..graph.interpreter import ...``, ``from . import numerics as N``
    assert {"intent_trace.oracle.generic_base", "intent_trace.graph.interpreter",
            "intent_trace.oracle.numerics"} <= graph["intent_trace.oracle.generic_elementwise"]
    # ``from .. import types as T`` names the submodule, not the package
    assert "intent_trace.types" in graph["intent_trace.graph.ops"]
    assert "intent_trace" not in graph["intent_trace.graph.ops"]
    # an import inside a function is late by design: not an edge
    assert "intent_trace.oracle.numba.emitter" not in graph["intent_trace.oracle.numba.target"]


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(c for c in strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]


# --- no op-name string comparisons outside graph/ --------------------------------------------------------------

def test_no_op_name_strings_outside_graph():
    failing = {}
    for name, path in MODULES.items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("intent_trace/graph/"):
            continue
        uses = op_name_uses(ast.parse(path.read_text(), rel))
        if uses:
            failing[rel] = "; ".join(f"{rel}:{line}: {what}" for line, what in uses)
    _check_none(failing, "op-name string comparisons outside graph/")


def test_the_op_name_check_flags_each_spelling():
    source = '''
if node.op.name == "add": pass
if "read" != op.name: pass
if consumer.op.name in ("write", "store"): pass
if n.op.name in frozenset({"reduce", "scan"}): pass
if d.name == "f16": pass
@rule("broadcast", "full")
def f(): pass
rule("get")(g)
@rule(ops.read)
def h(): pass
'''
    lines = [line for line, _ in op_name_uses(ast.parse(source))]
    assert lines == [2, 3, 4, 5, 7, 9]
