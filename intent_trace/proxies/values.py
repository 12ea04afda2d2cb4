"""Proxy classes: what kernel code holds while it is traced.

A proxy wraps one KIR Var. The methods that build nodes (the operator dunders, generated from the
registry's spellings, and a tensor's ``shape``, ``T`` and indexing) are installed by :mod:`.build`, which
builds the nodes and so stands above this module; records and tuples are in :mod:`.aggregates`. Proxies refuse every Python protocol that would need a
concrete value (``bool``, ``int``, ``len``, iteration) with a TraceError naming the staged form.
"""
from __future__ import annotations

from ..graph.values import Var
from ..types import ScalarType, TensorType
from . import numpy_interop as _numpy
from .context import fail


class Proxy:
    __slots__ = ("_var",)

    def __init__(self, var: Var):
        self._var = var

    @property
    def type(self):
        return self._var.type

    def __bool__(self):
        fail("a traced value has no Python truth value: a plain `if` (or `and`/`or`/`not`) on it cannot be "
             "staged; use I.if_(pred, then_fn, else_fn) for control, I.select(pred, a, b) for values, "
             "and `&`, `|`, `~` for logic", "type")

    def __index__(self):
        fail("a traced value cannot be used as a Python integer; keep it traced (domains, indexing and "
             "I.* functions accept traced index values)", "type")

    __int__ = __index__

    def __float__(self):
        fail("a traced value cannot be used as a Python float", "type")

    def __len__(self):
        fail("len() of a traced value is not a Python int; use .shape (extents stay traced)", "type")

    def __hash__(self):
        return id(self)

    # NumPy on a traced value: operator ufuncs trace as the operator, anything else is a TraceError.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _numpy.array_ufunc(self, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _numpy.array_function(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        return _numpy.array(self, dtype, copy)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._var.type!r}>"


class ValueProxy(Proxy):
    """A scalar or tensor SSA value."""

    __slots__ = ()

    @property
    def dtype(self):
        return self._var.type.dtype

    def __pos__(self):
        return self

    def __iter__(self):
        fail("a traced value cannot be iterated in Python; iterate a domain (`for i in I.domain(...)`) "
             "or index with one", "type")


class ScalarProxy(ValueProxy):
    __slots__ = ()


class TensorProxy(ValueProxy):
    __slots__ = ()

    # shape, T and indexing build nodes: proxies/build.py installs them with the operator dunders.

    @property
    def rank(self) -> int:
        return len(self._var.type.shape)

    @property
    def ndim(self) -> int:
        return len(self._var.type.shape)


def wrap(var: Var):
    """The user-facing value for a Var: a proxy, or a Python tuple for a tuple-typed value."""
    t = var.type
    cls = _PROXY_OF.get(t.__class__)
    if cls is None:
        raise TypeError(f"no proxy for {t!r}")
    return cls(var)


def var_of(x):
    return x._var if isinstance(x, Proxy) else None


# Value type -> what wraps a Var of it. The modules that define the other proxies register them (domains,
# views, buffers in their modules; records and tuples in .aggregates).
_PROXY_OF = {ScalarType: ScalarProxy, TensorType: TensorProxy}


def register_proxy(type_cls, proxy_cls) -> None:
    """``proxy_cls(var)`` wraps a Var of ``type_cls`` (a class, or a function such as tuple unpacking)."""
    _PROXY_OF[type_cls] = proxy_cls

