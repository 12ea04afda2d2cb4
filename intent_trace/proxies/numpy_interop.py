"""NumPy functions applied to traced values (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``).

A traced value is not an array: NumPy cannot compute with it, and without these hooks it either
fails with its own TypeError (``np.exp(x)``: "loop of ufunc does not support argument 0") or,
worse, wraps the proxy in an object array and returns it unchanged (``np.sum(x)`` "traced" as
``x``). So:

- a ufunc that *is* a Python operator (``np.multiply``, ``np.negative``; NumPy also calls these for
  ``np.float32(2) * x``) traces exactly as the operator does, NumPy scalars taking part like
  Python numbers;
- every other ufunc, ufunc method (``np.add.reduce``) and NumPy function is a TraceError at the
  user's line naming the ``I.*`` spelling to write.

Both maps are derived, not written out: the operator ufuncs by asking NumPy which ufunc each of
the surface table's dunders calls, and the ``I.*`` spellings by looking up each surface name in
NumPy's namespace (``np.exp`` -> ``I.exp``, ``np.asin is np.arcsin`` -> ``I.asin``, ``np.sum`` ->
``I.reduce.sum``).
"""
from __future__ import annotations

import functools

import numpy as np

from ..graph import ops, surface
from ..graph.traits import REDUCTIONS
from .context import fail


class _Probe(np.ndarray):
    """A 0-d array whose ufunc calls return the ufunc NumPy picked (to read NumPy's dunder -> ufunc map)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return ufunc


@functools.cache
def operator_ufuncs() -> dict:
    """ufunc -> the canonical op of the Python operator NumPy implements with it (np.multiply -> mul)."""
    probe = np.zeros(()).view(_Probe)
    table = {}
    for dunder, (op, reflected) in surface.BINARY_DUNDERS.items():
        if not reflected:
            table.setdefault(getattr(probe, dunder)(probe), op)
    for dunder, op in surface.UNARY_DUNDERS.items():
        table.setdefault(getattr(probe, dunder)(), op)
    table.setdefault(np.positive, None)  # +x: the value itself
    return table


@functools.cache
def spellings() -> dict:
    """NumPy ufunc/function -> the ``I.*`` spelling of the same operation (from the surface table's names)."""
    table = {}
    # I.sum-like names first, then dotted ones; among those, reductions first (np.max is I.reduce.max, not
    # I.atomic.max)
    names = sorted(surface.SHORTHANDS, key=lambda n: (n.count("."), REDUCTIONS.isdisjoint(
        (ops.REGISTRY[surface.SHORTHANDS[n]],))))
    for name in names:
        leaf = name.rsplit(".", 1)[-1]
        obj = getattr(np, name, None) if "." not in name else getattr(np, leaf, None)
        computes = isinstance(obj, np.ufunc) or hasattr(obj, "_implementation")  # ufuncs, array functions
        if computes and obj not in table:
            table[obj] = f"I.{name}"
    return table


def _suggestion(func) -> str:
    spelling = spellings().get(func)
    if spelling is not None:
        return f"write {spelling}(...)"
    return "write the I.* operation (the I namespace lists them) or Python operators on traced values"


def array_ufunc(proxy, ufunc, method, inputs, kwargs):
    """``Proxy.__array_ufunc__``: trace an operator ufunc, refuse the rest."""
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if method != "__call__":
        staged = "I.scan" if method == "accumulate" else "I.reduce"
        fail(f"{name} cannot run on a traced value (NumPy computes on arrays; kernels are traced); write {staged} "
             f"with the combine you need (or its builtins, e.g. I.reduce.sum, I.cumsum)", "type")
    if kwargs:
        fail(f"{name} with {', '.join(sorted(kwargs))}= cannot run on a traced value; write the operation on "
             f"traced values (Python operators or I.*), whose results are values, not outputs", "type")
    # NumPy hands some scalar operands over as 0-d arrays (np.float32(2) < x): those are numbers.
    inputs = tuple(x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in inputs)
    for x in inputs:
        if isinstance(x, np.ndarray):
            fail(f"{name}: a NumPy array cannot take part in a traced kernel; pass it as a view parameter "
                 f"(I.In[...]) and index it, or use Python numbers", "type")
    table = operator_ufuncs()
    if ufunc in table:
        op = table[ufunc]
        # the operator's node, built as the operator builds it (Proxy.build_elementwise: proxies/build.py)
        return inputs[0] if op is None else proxy.build_elementwise(op, tuple(inputs))
    fail(f"{name} cannot run on a traced value (NumPy computes on arrays; kernels are traced); "
         f"{_suggestion(ufunc)}", "type")


def array_function(func, types, args, kwargs):
    """``Proxy.__array_function__``: every NumPy function is refused with the I.* spelling to write."""
    name = f"np.{getattr(func, '__name__', 'function')}"
    fail(f"{name} cannot run on a traced value (NumPy computes on arrays; kernels are traced); "
         f"{_suggestion(func)}", "type")


def array(proxy, dtype=None, copy=None):
    """``Proxy.__array__``: a traced value never becomes a NumPy array (np.asarray, np.array([...]))."""
    fail("a traced value cannot become a NumPy array (it has no value while the kernel is traced); keep it "
         "traced: index views, and compute with Python operators and I.* operations", "type")
