"""Outside graph/, the front end names ops by their OpDef, never by comparing a name with a string: a renamed or
added op then fails at import (``ops.divide`` does not exist) instead of silently taking another branch."""
import ast
import os

from intent_trace.graph import ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the front end's files outside graph/ (the verification catalogue has operations of its own, named by the
# verification spec: "reduce_sum", "quantize_q4_k", ...)
CHECKED = ["intent_trace/kernel.py", "intent_trace/compiler.py", "intent_trace/targets.py", "intent_trace/language.py",
           "intent_trace/types.py", "intent_trace/oracle/verification/kernel_bounds.py",
           "intent_trace/oracle/verification/kernel_policy.py", "intent_trace/oracle/verification/kernels.py"]
CHECKED += [os.path.join("intent_trace/proxies", f) for f in sorted(os.listdir(os.path.join(ROOT, "intent_trace/proxies")))
            if f.endswith(".py")]


def _names_an_op(node) -> bool:
    """``x.name`` or ``opname``/``op_name``: a value that may hold an op's name."""
    return isinstance(node, ast.Attribute) and node.attr == "name" or \
        isinstance(node, ast.Name) and node.id in ("opname", "op_name", "name")


def _op_literals(node) -> list:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [x.value for x in items if isinstance(x, ast.Constant) and x.value in ops.REGISTRY]


def op_name_comparisons(source: str) -> list:
    """(line, op names) of every comparison of a name with a string literal that names a registry op."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_an_op(s) for s in sides):
                names = [n for s in sides for n in _op_literals(s)]
                if names:
                    found.append((node.lineno, names))
    return found


def test_the_finder_sees_the_spellings():
    assert op_name_comparisons('if node.op.name == "read": pass') == [(1, ["read"])]
    assert op_name_comparisons('ok = opname in ("div", "mod")') == [(1, ["div", "mod"])]
    assert op_name_comparisons('if dtype.name == "f32": pass') == []
    assert op_name_comparisons('if node.op is ops.read: pass') == []


def test_no_op_name_string_comparisons_in_the_front_end():
    found = {}
    for rel in CHECKED:
        hits = op_name_comparisons(open(os.path.join(ROOT, rel), encoding="utf-8").read())
        if hits:
            found[rel] = hits
    assert not found, found
