"""Tuples and records (spec §4): immutable typed aggregates, packed into one KIR value where they cross
a region boundary, and selected statically. Selections keep the provenance of the component."""
from __future__ import annotations

import keyword

from .. import types as T
from ..graph import ops
from ..graph.values import Var
from .build import is_py_number
from .context import current, fail
from .values import Proxy, ValueProxy, register_proxy, wrap


class RecordProxy(Proxy):
    """An immutable typed record; fields are selected statically with ``.name``."""

    __slots__ = ()

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return record_field(self, name)

    def __setattr__(self, name, value):
        if name == "_var":
            object.__setattr__(self, name, value)
        else:
            fail("records are immutable; build a new one with I.record(...)", "type")

    def __eq__(self, other):
        fail("records have no comparison; compare their fields", "type")

    __hash__ = Proxy.__hash__


def check_field_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        fail(f"record field name {name!r} must be a Python identifier that is not a keyword and does not "
             f"start with '_'", "value")


def record(**fields):
    if not fields:
        fail("I.record needs at least one field", "value")
    names, vars_ = [], []
    for name, value in fields.items():
        check_field_name(name)
        names.append(name)
        vars_.append(pack(value, f"record field {name!r}"))
    t = T.RecordType(tuple((n, v.type) for n, v in zip(names, vars_)))
    trace = current()
    (out,) = trace.emit(ops.record, tuple(vars_), (("type", t),))
    trace.aggregate_parts[out] = tuple(vars_)
    return RecordProxy(out)


def _select(trace, aggregate: Var, i: int, op, attrs: tuple) -> Var:
    """Component ``i`` of ``aggregate`` as a new Var with the component's provenance (spec §1).

    A component that is itself a tuple or record passes its own components on: the selection's Var
    stands for the same aggregate, so a selection from it (``r.pair[1]``) finds the component that was
    packed and keeps its relation however deep the nesting."""
    parts = trace.aggregate_parts.get(aggregate)
    part = parts[i] if parts is not None else None
    (out,) = trace.emit(op, (aggregate,), attrs, provenance=part.provenance if part is not None else None)
    inner = trace.aggregate_parts.get(part) if part is not None else None
    if inner is not None:
        trace.aggregate_parts[out] = inner
    return out


def record_field(r: RecordProxy, name: str):
    t = r._var.type
    if name not in t.names:
        fail(f"record {t!r} has no field {name!r}; fields: {', '.join(t.names)}", "value")
    return wrap(_select(current(), r._var, t.names.index(name), ops.field, (("name", name),)))


def pack(value, role: str) -> Var:
    """A user value as one Var (tuples become tuple values)."""
    if isinstance(value, (ValueProxy, RecordProxy)):
        return value._var
    if isinstance(value, tuple):
        items = tuple(pack(v, f"{role} item {i}") for i, v in enumerate(value))
        trace = current()
        (out,) = trace.emit(ops.tuple, items)
        trace.aggregate_parts[out] = items
        return out
    if is_py_number(value):
        fail(f"{role} is a Python number and has no dtype; write I.cast({value!r}, I.f32) (or the dtype you mean)",
             "type")
    if isinstance(value, list):
        fail(f"{role} is a list; use a tuple", "type")
    fail(f"{role} must be a scalar, tensor, tuple or record, got {type(value).__name__}", "type")


def unpack_tuple(var: Var) -> tuple:
    trace = current()
    return tuple(wrap(_select(trace, var, i, ops.get, (("index", i),))) for i in range(len(var.type.items)))


register_proxy(T.RecordType, RecordProxy)
register_proxy(T.TupleType, unpack_tuple)  # a tuple value is a Python tuple of its items' proxies
