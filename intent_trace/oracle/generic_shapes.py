"""Generic rules for shapes, aggregates, domains and views (spec §3-§6).

Views are NumPy arrays (staged copies for Out/InOut); reads copy, writes assign, every coordinate is
bounds-checked (:func:`.generic_base.index_arrays`). Extents taken from runtime values (``full``,
``reshape``) are checked against the index type and recorded as the extent's value; an ``assume_equal`` is checked
where it stands.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..codegen import checks as C
from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..limits import check_allocation
from .generic_base import DomainValue, read_view, write_view

RULES: dict = {}
rule = rule_registrar(RULES)


@rule(ops.broadcast)
def _broadcast(it, node, args):
    return np.broadcast_to(args[0], it.shape(node.attr("type").shape))


def _fresh_extents(it, node, operands) -> tuple:
    shape = list(node.attr("type").shape)
    for axis, value in zip(node.attr("extents"), operands):
        n = int(value)
        if n < 0:
            raise C.NEGATIVE_EXTENT.error(n, axis=axis)
        if n > T.index.max:
            raise C.EXTENT_RANGE.error(n, axis=axis)
        shape[axis] = n
        it.dims[node.attr("type").shape[axis]] = n
    return it.shape(shape)


@rule(ops.full)
def _full(it, node, args):
    shape = _fresh_extents(it, node, args[1:])
    dtype = node.attr("type").dtype.np
    check_allocation(f"I.full at {node.loc!r} (shape {shape})", shape, dtype.itemsize)
    return np.full(shape, args[0], dtype=dtype)


@rule(ops.reshape)
def _reshape(it, node, args):
    x = args[0]
    shape = _fresh_extents(it, node, args[1:])
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise C.RESHAPE_COUNT.error(x.size, int(np.prod(shape, dtype=np.int64)))
    return x.reshape(shape)


@rule(ops.transpose)
def _transpose(it, node, args):
    return np.transpose(args[0], node.attr("perm"))


@rule(ops.join)
def _join(it, node, args):
    return np.stack([args[0], args[1]], axis=-1)


@rule(ops.slice)
def _slice(it, node, args):
    x, rest = args[0], iter(args[1:])
    key = []
    for axis, kind in enumerate(node.attr("axes")):
        n = x.shape[axis]
        if kind == "all":
            key.append(slice(None))
        elif kind == "range":
            start, stop = int(next(rest)), int(next(rest))
            if start < 0 or (stop > n and stop > start) or stop < 0:
                raise C.SLICE_RANGE.error(start, stop, n, axis=axis)
            key.append(slice(start, max(start, stop)))
        else:
            p = int(next(rest))
            if not 0 <= p < n:
                raise C.SLICE_INDEX.error(p, n, axis=axis)
            key.append(p)
    return np.asarray(x[tuple(key)])


@rule(ops.tuple, ops.record)
def _pack(it, node, args):
    return tuple(args)


@rule(ops.get)
def _get(it, node, args):
    return args[0][node.attr("index")]


@rule(ops.field)
def _field(it, node, args):
    return args[0][node.inputs[0].type.names.index(node.attr("name"))]


# --- domains -------------------------------------------------------------------------------------

@rule(ops.domain)
def _domain(it, node, args):
    b, e, s = (int(a) for a in args)
    if s <= 0:
        raise C.DOMAIN_STEP.error(s)
    n = max(0, -(-(e - b) // s))  # exact (Python ints): the bounds may be u64 values
    if n and not (T.index.min <= b and b + (n - 1) * s <= T.index.max):
        raise C.DOMAIN_RANGE.error(b, e, s, at=repr(node.loc))
    check_allocation(f"the domain at {node.loc!r} ({n} members)", (n,), 8)
    return _bound_extent(it, node, DomainValue(np.arange(b, e, s, dtype=np.int64) if n else np.zeros(0, np.int64)))


def _bound_extent(it, node, d: DomainValue) -> DomainValue:
    """Record a domain's runtime member count as the value of its (dynamic) extent."""
    ext = node.attr("type").extent
    if not isinstance(ext, int):
        it.dims[ext] = len(d)
    return d


@rule(ops.subregion)
def _subregion(it, node, args):
    parent, b, e = args[0], int(args[1]), int(args[2])
    n = len(parent)
    if b < 0 or e < 0:
        raise C.SUBREGION_NEGATIVE.error(b, e)
    if e > b and e > n:
        raise C.SUBREGION_PAST.error(b, e, n)
    return _bound_extent(it, node, DomainValue(parent.coords[b:e] if e > b else np.zeros(0, np.int64)))


@rule(ops.indices)
def _indices(it, node, args):
    return args[0].coords.copy()


@rule(ops.assume_equal)
def _assume_equal(it, node, args):
    """The kernel's statement that two extents are equal, checked here (ValueError naming both sides)."""
    a, b = int(args[0]), int(args[1])
    if a != b:
        raise C.EXTENT_EQUAL.error(a, b, lhs=node.attr("lhs"), rhs=node.attr("rhs"))
    return np.asarray(a, dtype=np.int64)


@rule(ops.dim)
def _dim(it, node, args):
    x = args[0]
    n = len(x) if isinstance(x, DomainValue) else x.shape[node.attr("axis")]
    return np.asarray(n, dtype=np.int64)


# --- views ---------------------------------------------------------------------------------------

rule(ops.read)(read_view)
rule(ops.write, ops.unique_store)(write_view)
