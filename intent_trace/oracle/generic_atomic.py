"""Atomic operations on view elements (spec §16, numerics T9).

Generic runs the points of a ``parallel`` body one after another, so every atomic is a plain
read-modify-write of its element, done at once: no other point can come between the read and the
write. The element's coordinates are bounds-checked like a view read (``IndexError`` naming the
view, the coordinate and the extent; the executable's staging leaves caller arrays unchanged).
Atomics are *combines* for the race detector (:mod:`.generic_races`): any number of points may
update (or atomically load) the same element through atomics, but a plain read or write of that element
by another point conflicts with them. Memory orders constrain only concurrent executions, so they change
nothing here.

The combined value follows the elementwise ops: integer add wraps modulo 2^bits (T2), f32 add is
one RNE f32 addition, max/min are IEEE 754-2019 maximum/minimum (NaN wins, -0 < +0) as
``I.maximum``/``I.minimum`` with the element as first operand.
"""
from __future__ import annotations

import numpy as np

from ..graph import ops
from ..graph.interpreter import rule_registrar
from . import numerics as N
from .generic_base import flat_indices, index_arrays
from .generic_races import COMBINE, record

RULES: dict = {}
rule = rule_registrar(RULES)

_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _element(it, node, args, first: int):
    """The view array and the index tuple of the node's element (checked); index operands from ``first``."""
    array = args[0]
    idx = index_arrays(it, node, node.inputs[0], array, args[first:])
    if it.race_frames:
        record(it, node.inputs[0], array.shape, flat_indices(idx, array.shape), COMBINE)
    return array, idx


def combine(kind: str, old: np.ndarray, value: np.ndarray) -> np.ndarray:
    """The element's new value after ``kind`` with ``value`` (both of the view's dtype, 0-d)."""
    dtype = old.dtype
    value = np.asarray(value, dtype=dtype)
    if kind == "exchange":
        return value
    if kind == "add":
        if dtype.kind == "f":
            return N.float_binary(np.add, old, value)
        with N.errstate():
            return np.asarray(np.add(old, value)).astype(dtype)  # wraps modulo 2^bits (T2)
    if kind in ("max", "min"):
        return N.ieee_maximum(old, value, kind == "max")
    return np.asarray(_BITWISE[kind](old, value)).astype(dtype)


@rule(ops.atomic_load)
def _atomic_load(it, node, args):
    array, idx = _element(it, node, args, 1)
    return np.array(array[idx])


@rule(ops.atomic_store)
def _atomic_store(it, node, args):
    array, idx = _element(it, node, args, 2)
    array[idx] = np.asarray(args[1], dtype=array.dtype)


@rule(ops.atomic_rmw)
def _atomic_rmw(it, node, args):
    array, idx = _element(it, node, args, 2)
    old = np.array(array[idx])
    array[idx] = combine(node.attr("kind"), old, args[1])
    return old


@rule(ops.atomic_compare_exchange)
def _atomic_compare_exchange(it, node, args):
    array, idx = _element(it, node, args, 3)
    old = np.array(array[idx])
    expected, desired = (np.asarray(a, dtype=array.dtype) for a in args[1:3])
    success = bool(old == expected)  # integer elements: value equality is bit equality
    if success:
        array[idx] = desired
    return old, np.asarray(success)
