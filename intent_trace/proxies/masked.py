"""Masked access (spec §15): ``I.load``, ``I.store`` and ``I.gather`` of a view or a logical buffer.

- ``I.load(target, index, *, valid=None, fill=0)`` reads ``target[index]`` (the view index spellings:
  domains, subregions, integer points, integer tensors, ``:``; outer indexing) where ``valid`` holds, and
  gives ``fill`` elsewhere;
- ``I.store(target, index, value, *, valid=None)`` writes ``target[index] = value`` where ``valid`` holds;
- ``I.gather(target, index, *, valid=None, fill=0)`` of a view or buffer reads at paired per-element
  coordinates (``index`` as for the gather of a tensor value).

An invalid lane does not touch memory: a read gives the fill, a write has no effect, and its coordinates are
never bounds-checked (a padded tile or ragged row may address far outside the target there). A valid lane is
checked as an unmasked access is (IndexError naming the target, the axis, the coordinate and the extent).
``valid`` is a bool scalar or a bool tensor that broadcasts to the access shape; ``fill`` has the target's dtype
(a Python number is converted by T1, as a written literal is). Without ``valid`` (or with ``valid=True``) the
call is the plain access, ``target[index]`` (canonical ``read``/``load``/``write``/``store``).

Canonical form: the index becomes one integer coordinate per target axis, each broadcast to the access shape
(a domain's coordinates are ``I.indices`` of it, so its relation is kept), and the access is one
``masked_read``/``masked_load``/``masked_write``/``masked_store`` node with the mask (and fill) as operands.
Triton's ``tl.load(ptr, mask=m, other=f)`` is ``I.load(view, index, valid=m, fill=f)``; ``tl.store(ptr, v,
mask=m)`` is ``I.store(view, index, v, valid=m)``. A masked write is a unique store: the valid lanes'
coordinates must be distinct (generic and cpu check it at run time).
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.values import Literal
from .build import broadcast_shapes, broadcast_to, index_operand, insert_axes, is_py_number, make_literal, normalize_key
from .context import current, fail
from .domain import DomainProxy, domain, indices
from .values import Proxy, TensorProxy, ValueProxy
from .view import IndexedProxy, ViewProxy, _depends_on_point

_READS = {True: ops.masked_read, False: ops.masked_load}  # keyed by "the target is a view"
_WRITES = {True: ops.masked_write, False: ops.masked_store}


def _type_text(x) -> str:
    return repr(x.type) if isinstance(x, Proxy) else type(x).__name__


def _shape(var) -> tuple:
    return var.type.shape if isinstance(var.type, T.TensorType) else ()


def _fits(shape: tuple, target: tuple, what: str) -> bool:
    return len(shape) <= len(target) and T.same_shape(broadcast_shapes([shape, target], what), target)


def _target(target, who: str, write: bool) -> bool:
    """Checks the target (a view or a logical buffer) may be read or written here; returns whether it is a view."""
    from .memory import BufferProxy

    trace = current()
    if isinstance(target, ViewProxy):
        access = target._var.type.access
        if write and access == "In":
            fail(f"{who}: {target.name} is an In view (read-only); declare it Out or InOut to write it", "value")
        if not write and access == "Out" and target._var not in trace.written_views:
            fail(f"{who}: {target.name} is an Out view: it cannot be read before the kernel writes it (declare it "
                 f"InOut to read the caller's contents)", "value")
        return True
    if isinstance(target, BufferProxy):
        if not write and target._var not in trace.written_views:
            fail(f"{who}: {target.name} has no init and is read before any store to it; give it init=... or store "
                 f"into it first", "value")
        return False
    fail(f"{who}: the target must be a view or a logical buffer, got {_type_text(target)}", "type")


def _outer_coordinates(target: IndexedProxy, key, who: str) -> tuple:
    """(one coordinate Var per target axis broadcast to the access shape, the access shape, the key's operands)
    of an outer index (the spellings of ``target[key]``). Points are not range-checked here: a masked lane may
    address anything."""
    t = target._var.type
    entries = normalize_key(key, t.rank, f"{who} index of {target.name}")
    parts, shape, operands = [], [], []  # parts: (coordinate proxy or Var, its first result axis, its rank)
    for axis, k in enumerate(entries):
        if isinstance(k, DomainProxy):
            parts.append((indices(k), len(shape), 1))
            operands.append(k._var)
            shape.append(k._var.type.extent)
        elif isinstance(k, slice):
            if k.start is not None or k.stop is not None or k.step is not None:
                fail(f"{who}: slice {target.name} with a domain or subregion (e.g. cols[a:b]), not a:b", "type")
            parts.append((indices(domain(0, target.shape[axis])), len(shape), 1))
            shape.append(t.shape[axis])
        elif k is None:
            fail(f"{who}: `None` (a new size-one axis) is not an index here; I.expand_dims the result instead",
                 "type")
        elif isinstance(k, TensorProxy):
            if not k.dtype.is_int:
                fail(f"{who}: a tensor index of {target.name} must have an integer dtype, got {k.dtype}", "type")
            parts.append((k, len(shape), k.type.rank))
            operands.append(k._var)
            shape.extend(k.type.shape)
        else:
            var = index_operand(k, f"{who}: index of {target.name} axis {axis}")
            parts.append((var, None, 0))
            operands.append(var)
    shape = tuple(shape)
    coords = []
    for part, first, rank in parts:
        if first is None:  # a point: a scalar, the same coordinate for every lane
            coords.append(part)
            continue
        placed = [p for p in range(len(shape)) if not first <= p < first + rank]
        coords.append(broadcast_to(insert_axes(part, tuple(placed))._var if placed else part._var, shape))
    return tuple(coords), shape, tuple(operands)


def _paired_coordinates(target: IndexedProxy, index, who: str) -> tuple:
    """The gather spelling: one integer tensor (rank-1 target) or a tuple with one per axis, broadcast together."""
    from .memory import _index_entries

    coords, shape = _index_entries(index, target._var.type.rank, who, "source", (None,) * target._var.type.rank)
    return coords, shape, coords


def _unmasked(valid) -> bool:
    return valid is None or (isinstance(valid, (bool, np.bool_)) and bool(valid))


def _valid(valid, shape: tuple, who: str):
    """``valid`` as an operand: a bool scalar, or a bool tensor broadcast to the access shape; None when every lane
    is valid (``None`` or ``True``)."""
    if _unmasked(valid):
        return None
    if isinstance(valid, (bool, np.bool_)):
        return Literal(False, T.ScalarType(T.bool_))
    if not isinstance(valid, ValueProxy):
        fail(f"{who}: valid must be a bool scalar or tensor, got {_type_text(valid)}", "type")
    if valid.dtype is not T.bool_:
        fail(f"{who}: valid must be a bool scalar or tensor, got {valid.dtype} values; compare them (e.g. "
             f"valid=cols < n)", "type")
    var = valid._var
    if not isinstance(var.type, T.TensorType):
        return var
    if not _fits(var.type.shape, shape, f"{who} valid"):
        fail(f"{who}: valid {var.type!r} does not broadcast to the access shape {T.TensorType(T.bool_, shape)!r} "
             f"(extents {', '.join(map(T.extent_str, shape)) or 'none'})", "value")
    return broadcast_to(var, shape)


def _fill(fill, dtype: T.DType, shape: tuple, who: str):
    if isinstance(fill, ValueProxy):
        if fill.dtype is not dtype:
            fail(f"{who}: fill has dtype {fill.dtype} but the target is {dtype}; write I.cast(fill, I.{dtype})", "type")
        if not _fits(_shape(fill._var), shape, f"{who} fill"):
            fail(f"{who}: fill {fill.type!r} does not broadcast to the access shape {T.TensorType(dtype, shape)!r}",
                 "value")
        return broadcast_to(fill._var, shape) if isinstance(fill, TensorProxy) else fill._var
    if is_py_number(fill):
        if dtype.is_bool and type(fill) is int and fill == 0:
            fill = False  # the default fill of a bool target
        return make_literal(fill, dtype, f"{who} fill")
    fail(f"{who}: fill must be a number or a {dtype} scalar/tensor, got {_type_text(fill)}", "type")


def _wrap(var):
    from .values import ScalarProxy

    return TensorProxy(var) if isinstance(var.type, T.TensorType) else ScalarProxy(var)


def masked_read(target, index, valid, fill, who: str, paired: bool):
    """The read of ``I.load`` (outer index) and of ``I.gather`` of a view or buffer (paired coordinates)."""
    is_view = _target(target, who, write=False)
    coords, shape, _ = (_paired_coordinates if paired else _outer_coordinates)(target, index, who)
    mask = _valid(valid, shape, who)
    fill_v = _fill(fill, target.dtype, shape, who)
    if mask is None:
        mask = Literal(True, T.ScalarType(T.bool_))
    (out,) = current().emit(_READS[is_view], (target._var, *coords, mask, fill_v))
    return _wrap(out)


def load(target, index, *, valid=None, fill=0, **unknown):
    who = "I.load"
    _no_triton_names(who, unknown)
    if _unmasked(valid) and isinstance(target, IndexedProxy):
        _fill(fill, target.dtype, _shape(fill._var) if isinstance(fill, ValueProxy) else (), who)  # its errors
        return target[index]  # every lane valid: the plain read
    return masked_read(target, index, valid, fill, who, paired=False)


def store(target, index, value, *, valid=None, **unknown):
    from .memory import _private_to_point, _stored_value

    who = "I.store"
    _no_triton_names(who, unknown)
    if _unmasked(valid) and isinstance(target, IndexedProxy):
        target[index] = value  # every lane valid: the plain write
        return
    is_view = _target(target, who, write=True)
    trace = current()
    coords, shape, operands = _outer_coordinates(target, index, who)
    mask = _valid(valid, shape, who)
    v = _stored_value(value, target.dtype, shape, target.name)
    deps = trace.scope.point_deps
    if deps is not None and not (not is_view and _private_to_point(trace, target._var)) and \
            not _depends_on_point(deps, (*operands, *((mask,) if mask is not None else ()))):
        fail(f"every point of the enclosing parallel domain writes the same elements of {target.name}; index the "
             f"store (or its valid mask) with the point, or use an ordered loop", "value")
    data_indexed = any(isinstance(x.type, T.TensorType) for x in operands)  # an integer tensor entry: data
    trace.emit(_WRITES[is_view], (target._var, v, *coords, mask), (("data_indexed", True),) if data_indexed else (),
               types=())
    trace.written_views.add(target._var)


def _no_triton_names(who: str, unknown: dict) -> None:
    if not unknown:
        return
    names = {"mask": "valid", "other": "fill"}
    name = next(iter(unknown))
    hint = f"; the mask is valid= (Triton's mask=) and the value of masked lanes fill= (Triton's other=)" \
        if name in names else ""
    fail(f"{who}() got an unexpected keyword argument {name!r}{hint}", "type")


__all__ = ["load", "store", "masked_read"]
