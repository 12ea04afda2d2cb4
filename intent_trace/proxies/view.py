"""External views: kernel parameters backed by caller memory (spec §2, §15).

``x[rows, cols]`` is a read and ``y[rows, cols] = v`` a write. Each index entry is a domain or
subregion (one result axis), an integer scalar (no axis), an integer tensor (its axes), ``:``
(the whole axis) or ``None`` (a new size-one axis: the access, then a reshape). Entries are
independent ("outer" indexing): the result axes are the entries' axes in order.
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from ..graph.values import Literal
from .build import (broadcast_shapes, broadcast_to, index_operand, insert_axes, make_literal, normalize_key, reshape,
                    shape_values)
from .context import current, fail
from .domain import DomainProxy
from .newaxis import new_axis_positions, split_new_axes
from .values import Proxy, ScalarProxy, TensorProxy, ValueProxy, register_proxy


class IndexedProxy(Proxy):
    """Shared by views and logical buffers: a named, shaped thing indexed with view spellings."""

    __slots__ = ("name",)

    def __init__(self, var, name: str):
        super().__init__(var)
        self.name = name

    @property
    def shape(self) -> tuple:
        return shape_values(self._var, self._var.type.shape)

    @property
    def dtype(self):
        return self._var.type.dtype

    @property
    def rank(self) -> int:
        return self._var.type.rank


class ViewProxy(IndexedProxy):
    __slots__ = ()

    def __getitem__(self, key):
        t = self._var.type
        trace = current()
        if t.access == "Out" and self._var not in trace.written_views:
            fail(f"{self.name} is an Out view: it cannot be read before the kernel writes it "
                 f"(declare it InOut to read the caller's contents)", "value")
        entries, slots = split_new_axes(key, t.rank, f"indexing {self.name}")
        kinds, operands, shape = _index(self, entries)
        (out,) = trace.emit(ops.read, (self._var, *operands), (("index", kinds),))
        out = TensorProxy(out) if shape else ScalarProxy(out)
        return insert_axes(out, new_axis_positions(entries, slots)) if slots else out

    def __setitem__(self, key, value):
        t = self._var.type
        trace = current()
        if t.access == "In":
            fail(f"{self.name} is an In view (read-only); declare it Out or InOut to write it", "value")
        entries, slots = split_new_axes(key, t.rank, f"indexing {self.name}")
        kinds, operands, shape = _index(self, entries)
        if slots and isinstance(value, TensorProxy):
            value = _drop_new_axes(value, new_axis_positions(entries, slots), len(shape) + len(slots), self.name)
        if isinstance(value, ValueProxy):
            if value.dtype is not t.dtype:
                fail(f"writing {value.dtype} values into {self.name} ({t.dtype}): write I.cast(value, I.{t.dtype})",
                     "type")
            vshape = value.type.shape if isinstance(value.type, T.TensorType) else ()
            fits = len(vshape) <= len(shape) and \
                T.same_shape(broadcast_shapes([vshape, shape], f"write to {self.name}"), shape)
            if not fits:
                fail(f"a value of shape {value.type!r} does not broadcast to the written region "
                     f"{T.TensorType(t.dtype, shape)!r} of {self.name}", "value")
            v = broadcast_to(value._var, shape) if shape else value._var
        elif isinstance(value, Proxy):
            fail(f"cannot write a {type(value).__name__} into a view", "type")
        else:
            v = make_literal(value, t.dtype, "written value")
        if trace.scope.point_deps is not None and not _depends_on_point(trace.scope.point_deps, operands):
            fail(f"every point of the enclosing parallel domain writes the same elements of {self.name}; index the "
                 f"write with the point (or use an ordered loop)", "value")
        op = ops.unique_store if "tensor" in kinds else ops.write  # spec §15 keeps the two canonical ops apart
        trace.emit(op, (self._var, v, *operands), (("index", kinds),), types=())
        trace.written_views.add(self._var)

    def __iter__(self):
        fail(f"view {self.name} cannot be iterated; iterate a domain over its extent instead", "type")

    def __repr__(self) -> str:
        return f"<view {self.name}: {self._var.type!r}>"


register_proxy(T.ViewType, lambda var: ViewProxy(var, var.hint or "view"))


def _drop_new_axes(value: TensorProxy, positions, rank: int, name: str):
    """A value written through ``y[..., None, ...]``: the axes of ``value`` that line up (right-aligned, as
    broadcasting aligns them) with the inserted size-one axes must have extent 1, and are reshaped away."""
    shape = value.shape
    drop = [p - (rank - len(shape)) for p in positions if p - (rank - len(shape)) >= 0]
    for q in drop:
        if value.type.shape[q] != 1:  # a traced extent is not provably 1
            fail(f"writing a value of shape {value.type!r} into {name}[...]: its axis {q} lines up with a size-one "
                 f"axis that `None` inserts, so its extent must be 1, not {T.extent_str(value.type.shape[q])}", "value")
    return reshape(value, tuple(e for k, e in enumerate(shape) if k not in drop)) if drop else value


def _depends_on_point(deps, operands) -> bool:
    return any(x in deps for x in operands if x.__class__ is not Literal)


def _index(view: ViewProxy, key):
    """(kinds, operands, result shape) of an index expression on a view."""
    t = view._var.type
    if any(k is None for k in (key if isinstance(key, tuple) else (key,))):  # views split them off first
        fail(f"{view.name}[...]: `None` (a new size-one axis) is not an index of a buffer; index the buffer, then "
             f"subscript the value with None (or I.expand_dims it)", "type")
    entries = normalize_key(key, t.rank, f"indexing {view.name}")
    kinds, operands, shape = [], [], []
    for axis, k in enumerate(entries):
        if isinstance(k, DomainProxy):
            kinds.append("domain")
            operands.append(k._var)
            shape.append(k._var.type.extent)
        elif isinstance(k, slice):
            if k.start is not None or k.stop is not None or k.step is not None:
                fail(f"{view.name}[...]: slice views with a domain or subregion (e.g. cols[a:b]), not a:b", "type")
            kinds.append("all")
            shape.append(t.shape[axis])
        elif isinstance(k, TensorProxy):
            if not k.dtype.is_int:
                fail(f"{view.name}[...]: a tensor index must have an integer dtype, got {k.dtype}", "type")
            kinds.append("tensor")
            operands.append(k._var)
            shape.extend(k.type.shape)
        else:
            idx = index_operand(k, f"index of {view.name} axis {axis}")
            if idx.__class__ is Literal:
                e = t.shape[axis]
                if idx.value < 0 or (isinstance(e, int) and idx.value >= e):
                    fail(f"index {idx.value} is out of range for axis {axis} of {view.name} (extent "
                         f"{T.extent_str(e)})", "value")
            kinds.append("point")
            operands.append(idx)
    return tuple(kinds), tuple(operands), tuple(shape)
