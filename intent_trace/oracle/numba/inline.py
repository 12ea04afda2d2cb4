"""Inlined combines and result arrays, shared by the structured rules (reduce, scan, region ops) and
scatter_reduce: a module below those rule modules and the base emitter (whose ``inline_combine`` and
``result_array`` the shared folds call, :mod:`intent_trace.codegen.folds`).
"""
from __future__ import annotations

from ... import types as T
from ...graph.lowering import leaf_values, pointwise_shape, scalar_param
from .scalar_rules import np_type
from .values import Aggregate, Lazy, Scalar, shape_text


def pointwise_combine(node) -> bool:
    """A pointwise combine (:func:`~intent_trace.graph.lowering.pointwise_shape`) whose captures are scalars."""
    return pointwise_shape(node) is not None and all(isinstance(c.type, T.ScalarType) for c in node.inputs[2:])


def inline_combine(em, node, acc_t: T.Type, lhs: list, rhs: list, captures: list, idx) -> list:
    """Inline the combine region per element: scalar expressions of the result's leaves."""
    (region,) = node.regions

    def param(names):
        return scalar_param(acc_t, names, scalar=Scalar, lazy=Lazy, aggregate=Aggregate)

    em.pointwise += 1
    try:
        (result,) = em.run_region(region, (param(lhs), param(rhs), *captures))
        return [em.assign(em.elem(leaf, idx), "r") for leaf in leaf_values(result, Aggregate)]
    finally:
        em.pointwise -= 1


def result_arrays(em, leaf_types: list, shape: tuple) -> list:
    """One new array of ``shape`` per leaf type (the names), or None per leaf for a rank-0 result."""
    outs = []
    for t in leaf_types:
        if shape:
            outs.append(em.allocate(shape, np_type(t.dtype), f"the result of `{em.node.op.name}` of shape "
                                                             f"{shape_text(t)}"))
        else:
            outs.append(None)
    return outs
