"""Call-time argument checks shared by every target (DESIGN §3).

Everything is checked before any target runs, so a bad call never writes anything: wrong dtype
-> TypeError, wrong rank or extent -> ValueError naming the extent and both values.

A view argument is a NumPy array, a CPU torch tensor or another DLPack producer in host memory,
bound as a NumPy array sharing its memory (:mod:`.host_views`), so outputs land in the caller's
object. A target whose kernels read device memory names that device (``device="cuda"``): a tensor
there is bound as the tensor itself (:mod:`.device_views`), with the same checks and messages. Every
target converts its arguments here and nowhere else, so a bad argument reads the same on each.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from . import types as T
from .floatbits import largest_finite, number_text, round_number
from .graph.values import KernelGraph
from .device_views import device_tensor, layout
from .host_views import host_view, strides_overlap


def _scalar(name: str, dtype: T.DType, value):
    if dtype.is_bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"scalar {name} is bool; got {type(value).__name__} {value!r}")
        return np.asarray(bool(value))
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"scalar {name} is {dtype}; got the bool {value!r}")
    if dtype.is_int:
        if not isinstance(value, (Integral, np.integer)):
            raise TypeError(f"scalar {name} is {dtype}; got {type(value).__name__} {value!r}")
        v = int(value)
        if not dtype.min <= v <= dtype.max:
            raise ValueError(f"scalar {name} = {number_text(v)} is out of range for {dtype} ({dtype.min}..{dtype.max})")
        return np.asarray(v, dtype=dtype.np)
    if not isinstance(value, (Real, np.integer, np.floating)):
        raise TypeError(f"scalar {name} is {dtype}; got {type(value).__name__} {value!r}")
    if isinstance(value, np.floating) and value.dtype == dtype.np:
        return np.asarray(value)
    if not isinstance(value, (Integral, np.integer, np.floating)):
        value = float(value)  # other Reals (Fraction, Decimal) through float64, as float literals
    stored, overflowed = round_number(value, dtype.np)
    if overflowed:
        raise ValueError(f"scalar {name} = {number_text(value)} overflows {dtype} (largest finite value "
                         f"{largest_finite(dtype.np)!r}); pass a value of the dtype, or ±inf explicitly")
    return stored


def bind_arguments(graph: KernelGraph, args: tuple, accept=(np.ndarray,), target: str | None = None,
                   device: str | None = None):
    """Check ``args`` against the graph's parameters; return (values in param order, {Dim: int}).

    A view's value is a NumPy array sharing the argument's memory, or, with ``device`` (where the target's
    kernels read, e.g. ``"cuda"``), the argument's own torch tensor when it lives there. ``target`` names the
    target in the messages about where a tensor lives."""
    params = graph.params
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeError(f"kernel {graph.name} takes {len(params)} runtime arguments ({names}), got {len(args)}")
    values, dims, seen = [], {}, {}
    for p, a in zip(params, args):
        t = p.type
        if p.kind == "scalar":
            values.append(_scalar(p.name, t.dtype, a))
            continue
        on_device = device_tensor(p.name, t, a, device, target or "this target") if device else None
        if on_device is None:
            a = host_view(p.name, t, a, accept)
            want = t.dtype.np
            if a.dtype != want:
                raise TypeError(f"view {p.name} is {t!r}: expected dtype {want}, got {a.dtype}")
        else:
            a = on_device
        shape, strides, itemsize = layout(a)
        if len(shape) != t.rank:
            raise ValueError(f"view {p.name} is {t!r}: expected rank {t.rank}, got shape {shape}")
        if t.access != "In" and on_device is None and not a.flags.writeable:
            raise ValueError(f"view {p.name} is {t.access} but the array is read-only")
        if t.access != "In" and strides_overlap(shape, strides, itemsize):
            raise ValueError(f"view {p.name} is {t.access} but its elements overlap in memory (strides "
                             f"{strides} for shape {shape}, e.g. an expanded or broadcast array), so "
                             f"it cannot hold one value per element; pass a contiguous copy")
        for axis, (e, n) in enumerate(zip(t.shape, shape)):
            if isinstance(e, int):
                if e != n:
                    raise ValueError(f"view {p.name} axis {axis} has static extent {e}, got {n}")
            elif e in dims:
                if dims[e] != n:
                    first = seen[e]
                    raise ValueError(f"extent {e.name} disagrees: {first[0]}.shape[{first[1]}] = {dims[e]} but "
                                     f"{p.name}.shape[{axis}] = {n}")
            else:
                dims[e] = n
                seen[e] = (p.name, axis)
        values.append(a)
    return values, dims
