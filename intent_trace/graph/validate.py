"""Structural validation of a KernelGraph: schemas, scoping, types, effects and control.

The tracer builds valid graphs; this re-derives every fact from the registry so that rewrites
and hand-built graphs are held to the same rules (the test suite validates every traced graph).
"""
from __future__ import annotations

from .. import types as T
from ..errors import TraceError
from . import ops
from .ops import REGISTRY
from .values import KernelGraph, Literal, Region, Var

_ORDERED = frozenset({ops.for_, ops.loop, ops.while_})  # the loops `break` and `continue` may leave
_VIEW_ACCESS = frozenset({ops.read, ops.write, ops.unique_store, ops.masked_read, ops.masked_write})
_VIEW_READS = frozenset({ops.read, ops.masked_read})
_BUFFER_ACCESS = frozenset({ops.load, ops.store, ops.masked_load, ops.masked_store})
_LOOP_EXITS = frozenset({ops.break_, ops.continue_})


class GraphInvalid(TraceError):
    """A graph that breaks a KIR invariant (a bug in whatever built it)."""


def validate(graph: KernelGraph) -> KernelGraph:
    visible = {p.var for p in graph.params} | set(graph.extents)
    written: set = set()
    _region(graph, graph.body, visible, [], written)
    return graph


def _fail(node, message: str):
    raise GraphInvalid(f"{node.op.name}: {message}", where=repr(node.loc) if node.loc else None)


def _region(graph, region: Region, visible: set, loops: list, written: set) -> None:
    visible = set(visible) | set(region.params)
    for node in region.nodes:
        op = node.op
        if REGISTRY.get(op.name) is not op:
            _fail(node, "op is not in the registry")
        if op.arity is not None and len(node.inputs) != op.arity:
            _fail(node, f"takes {op.arity} operands, has {len(node.inputs)}")
        names = [k for k, _ in node.attrs]
        if len(set(names)) != len(names) or not set(names) <= set(op.attrs):
            _fail(node, f"attributes {names} do not match the schema {op.attrs}")
        if len(node.regions) != op.regions:
            _fail(node, f"has {len(node.regions)} regions, the op has {op.regions}")
        for x in node.inputs:
            if isinstance(x, Var) and x not in visible:
                _fail(node, "uses a value that is not defined in an enclosing scope before it")
            if not isinstance(x, (Var, Literal)):
                _fail(node, f"operand {x!r} is neither a Var nor a Literal")
        try:
            inferred = op.infer(op, node.inputs, dict(node.attrs))
        except TraceError as e:
            _fail(node, f"its type rule refuses it: {e.bare_message}")
        if tuple(inferred) != tuple(v.type for v in node.outputs):
            _fail(node, f"result types {[v.type for v in node.outputs]} differ from its type rule's {list(inferred)}")
        if op in _VIEW_ACCESS:
            view = node.inputs[0]
            if not isinstance(view.type, T.ViewType):
                _fail(node, "the first operand must be a view")
            if op not in _VIEW_READS:
                if view.type.access == "In":
                    _fail(node, "writes an In view")
                written.add(view)
            elif view.type.access == "Out" and view not in written:
                _fail(node, "reads an Out view before any write to it")
        if op in _BUFFER_ACCESS and not isinstance(node.inputs[0].type, T.BufferType):
            _fail(node, "the first operand must be a logical buffer")
        if op in _LOOP_EXITS:
            if not loops or loops[-1] not in _ORDERED:
                _fail(node, "is not inside an ordered loop")
        inner_loops = loops + [op] if op in _ORDERED | {ops.parallel} else loops
        for r in node.regions:
            _region(graph, r, visible, inner_loops if op is not ops.if_ else loops + [op], written)
        _check_region_schemas(node)
        for r in node.regions:
            for res in r.results:
                if isinstance(res, Var) and res not in visible | set(r.params) | _defined(r):
                    _fail(node, "a region yields a value it cannot see")
        visible.update(node.outputs)


def _defined(region: Region) -> set:
    return {v for n in region.nodes for v in n.outputs}


def _check_region_schemas(node) -> None:
    """Carries and branch results keep the op's declared schema."""
    op = node.op
    types = tuple(node.attr("types") or ())
    if op is ops.if_:
        for r in node.regions:
            if tuple(x.type for x in r.results) != types:
                _fail(node, f"a branch yields {[x.type for x in r.results]}, the op declares {list(types)}")
    elif op is ops.loop:
        (r,) = node.regions
        if tuple(x.type for x in r.results) != types or tuple(p.type for p in r.params[1:]) != types \
                or (node.inputs[1].type,) != types:
            _fail(node, "carry schema differs between init, region parameters and yielded values")
    elif op is ops.while_:
        cond, body = node.regions
        if tuple(x.type for x in cond.results) != (T.ScalarType(T.bool_),):
            _fail(node, "the condition must yield one bool scalar")
        if tuple(x.type for x in body.results) != types or (node.inputs[0].type,) != types:
            _fail(node, "carry schema differs between init and the body's yielded values")
