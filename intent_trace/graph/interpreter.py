"""One walk over KIR that every backend reuses (torch.fx's Interpreter pattern).

A backend subclasses :class:`Interpreter` and fills ``rules``: a table keyed by OpDef whose
entries take ``(interp, node, args)`` — ``args`` being the backend's values of the node's
operands — and return the node's output value (for one output), a sequence of values (for several) or None. The
generic reference interpreter computes NumPy arrays; code emitters return source expressions.
"""
from __future__ import annotations

from typing import Callable, ClassVar

from . import ops
from .values import Literal, Node, Region


class MissingRule(NotImplementedError):
    pass


class Interpreter:
    rules: ClassVar[dict] = {}
    target_name: ClassVar[str] = "interpreter"

    def __init__(self):
        self.env: dict = {}

    # Backends override how a Literal operand becomes a value.
    def literal(self, lit: Literal):
        return lit.value

    def operand(self, x):
        return self.literal(x) if x.__class__ is Literal else self.env[x]

    def run_node(self, node: Node):
        rule: Callable | None = self.rules.get(node.op)
        if rule is None:
            raise MissingRule(f"{self.target_name} has no rule for op {node.op.name}")
        args = [self.operand(x) for x in node.inputs]
        out = rule(self, node, args)
        outputs = node.outputs
        if not outputs:
            return
        if len(outputs) == 1:
            self.env[outputs[0]] = out
        else:
            for var, value in zip(outputs, out):
                self.env[var] = value

    def run_region(self, region: Region, params=()) -> list:
        env = self.env
        for var, value in zip(region.params, params):
            env[var] = value
        for node in region.nodes:
            self.run_node(node)
        return [self.operand(r) for r in region.results]


def rule_table(*tables: dict) -> dict:
    """A backend's rule table: the union of its rule modules' tables (OpDef -> rule).

    The one place a backend's table is built (its composing module), so nothing fills a table as an import
    side effect. An op that two modules both give a rule is an error (``RuntimeError``), never a silent
    override: which module an op's rule lives in must be unambiguous."""
    out: dict = {}
    for t in tables:
        for op, fn in t.items():
            if not isinstance(op, ops.OpDef):
                raise TypeError(f"rule tables are keyed by OpDef, got {op!r}")
            if op in out and out[op] is not fn:
                raise RuntimeError(f"two rules for op {op.name} in one rule table")
            out[op] = fn
    return out


def rule_registrar(rules: dict):
    """A rule module's ``@rule(*ops)`` decorator: it enters the decorated function in ``rules`` (the module's
    own table, OpDef -> rule) for each op and returns it unchanged. Ops are OpDefs (``ops.broadcast``); op-name
    strings are accepted only while the backends move off them."""
    def rule(*keys):
        def register(fn):
            for k in keys:
                op = k if isinstance(k, ops.OpDef) else ops.REGISTRY[k]
                if op in rules:
                    raise RuntimeError(f"two rules for op {op.name}")
                rules[op] = fn
            return fn
        return register
    return rule
