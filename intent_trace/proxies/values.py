"""Proxy classes: what kernel code holds while it is traced.

A proxy wraps one KIR Var. Arithmetic dunders are generated from the surface table; each builds
one canonical node through :mod:`.build`. Proxies refuse every Python protocol that would need a
concrete value (``bool``, ``int``, ``len``, iteration) with a TraceError naming the staged form.
"""
from __future__ import annotations

from ..graph import surface
from ..graph.values import Var
from ..types import RecordType, ScalarType, TensorType, TupleType
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


def _make_binary(opname: str, reflected: bool):
    if reflected:
        def method(self, other):
            return _build.elementwise(opname, (other, self))
    else:
        def method(self, other):
            return _build.elementwise(opname, (self, other))
    method.__name__ = opname
    return method


def _make_unary(opname: str):
    def method(self):
        return _build.elementwise(opname, (self,))
    method.__name__ = opname
    return method


for _dunder, (_op, _refl) in surface.BINARY_DUNDERS.items():
    setattr(ValueProxy, _dunder, _make_binary(_op, _refl))
for _dunder, _op in surface.UNARY_DUNDERS.items():
    setattr(ValueProxy, _dunder, _make_unary(_op))
ValueProxy.__hash__ = Proxy.__hash__  # defining __eq__ would otherwise drop it


class ScalarProxy(ValueProxy):
    __slots__ = ()


class TensorProxy(ValueProxy):
    __slots__ = ()

    @property
    def shape(self) -> tuple:
        return _build.shape_values(self._var, self._var.type.shape)

    @property
    def rank(self) -> int:
        return len(self._var.type.shape)

    @property
    def ndim(self) -> int:
        return len(self._var.type.shape)

    @property
    def T(self):
        return _build.transpose(self, None)

    def __getitem__(self, key):
        return _build.slice_tensor(self, key)


class RecordProxy(Proxy):
    """An immutable typed record; fields are selected statically with ``.name``."""

    __slots__ = ()

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return _build.record_field(self, name)

    def __setattr__(self, name, value):
        if name == "_var":
            object.__setattr__(self, name, value)
        else:
            fail("records are immutable; build a new one with I.record(...)", "type")

    def __eq__(self, other):
        fail("records have no comparison; compare their fields", "type")

    __hash__ = Proxy.__hash__


def wrap(var: Var):
    """The user-facing value for a Var: a proxy, or a Python tuple for a tuple-typed value."""
    t = var.type
    cls = _PROXY_OF.get(t.__class__)
    if cls is not None:
        return cls(var)
    if isinstance(t, TupleType):
        return _build.unpack_tuple(var)
    raise TypeError(f"no proxy for {t!r}")


def var_of(x):
    return x._var if isinstance(x, Proxy) else None


_PROXY_OF = {ScalarType: ScalarProxy, TensorType: TensorProxy, RecordType: RecordProxy}


def register_proxy(type_cls, proxy_cls) -> None:
    _PROXY_OF[type_cls] = proxy_cls


from . import build as _build  # noqa: E402  (build uses the classes above)

