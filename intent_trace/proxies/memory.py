"""Indexed access beyond views: gather, histogram, logical buffers, scatter_reduce (spec §13, §15).

- ``I.gather(source, index, *, valid=None, fill=0)``: a pure gather from a tensor value (of a view or buffer:
  the masked read of :mod:`.masked`). ``index``
  is one integer tensor (rank-1 source) or a tuple with one entry per source axis; the entries
  (integer tensors, or integer scalars that broadcast) broadcast together to the result shape.
  Invalid lanes do not read and give ``fill``.
- ``I.histogram(values, *, bins, valid=None, count_dtype)``: counts of each bin of ``[0, bins)``; ``bins`` static (the
  ``bins`` attribute) or a runtime integer (the last operand; the result's extent is its value's, so
  ``bins=counts.shape[0]`` counts straight into ``counts[:]``).
- ``I.buffer(shape, dtype, *, init=None)``: kernel-local mutable state, indexed like a view
  (``b[...]`` is a ``load``, ``b[...] = v`` a ``store``, in program order).
- ``I.scatter_reduce(dest, index, values, *, combine, valid=None)``: combine ``values`` into a view or buffer at
  data-derived coordinates; the combine (a builtin name or a pure helper) is always a region. An invalid lane
  combines nothing and its coordinates are not checked.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.values import Var
from .build import (as_dtype, binary, broadcast_shapes, broadcast_to, check_static_count, constant, extent_operand,
                    fits_index, is_py_number, make_literal)
from .context import current, fail
from .structured import trace_pure
from .values import Proxy, ScalarProxy, TensorProxy, ValueProxy, register_proxy
from .view import IndexedProxy, ViewProxy, _depends_on_point, _index

# --- shared operand handling ---------------------------------------------------------------------


def _type_text(x) -> str:
    return repr(x.type) if isinstance(x, Proxy) else type(x).__name__


def _shape(var: Var) -> tuple:
    return var.type.shape if isinstance(var.type, T.TensorType) else ()


def _fits(shape: tuple, target: tuple, what: str) -> bool:
    """Whether ``shape`` broadcasts to ``target`` (right-aligned, size-one, identical dynamic extents)."""
    return len(shape) <= len(target) and T.same_shape(broadcast_shapes([shape, target], what), target)


def _index_entries(index, rank: int, who: str, target: str, extents: tuple) -> tuple:
    """One index Var per destination/source axis, all broadcast to one shape; returns (vars, shape)."""
    if isinstance(index, (tuple, list)):
        entries = list(index)
    elif isinstance(index, TensorProxy):
        if rank != 1:
            fail(f"{who}: a single index tensor addresses a rank-1 {target}, but it has rank {rank}; pass a tuple "
                 f"with one integer tensor per axis", "value")
        entries = [index]
    else:
        fail(f"{who}: index must be an integer tensor (rank-1 {target}) or a tuple with one per axis, got "
             f"{_type_text(index)}", "type")
    if len(entries) != rank:
        fail(f"{who}: {len(entries)} index entries for a {target} of rank {rank}; give one per axis", "value")
    vars_, shapes = [], []
    for axis, e in enumerate(entries):
        role = f"{who}: index for axis {axis}"
        if isinstance(e, (bool, np.bool_)):
            fail(f"{role} must be an integer, got {e!r}", "type")
        if isinstance(e, (int, np.integer)):
            n = extents[axis]
            if e < 0 or (isinstance(n, int) and e >= n):
                fail(f"{role}: coordinate {int(e)} is outside the extent {T.extent_str(n)} (no wrap-around)", "value")
            vars_.append(constant(int(e), T.index)._var)
            continue
        if not isinstance(e, ValueProxy):
            hint = "; use I.indices(domain) for a domain's coordinates" if isinstance(e, Proxy) else ""
            fail(f"{role} must be an integer tensor or scalar, got {_type_text(e)}{hint}", "type")
        if not e.dtype.is_int:
            fail(f"{role} must have an integer dtype, got {e.dtype}", "type")
        vars_.append(e._var)
        if isinstance(e, TensorProxy):
            shapes.append(e.type.shape)
    if not shapes:
        fail(f"{who}: at least one index entry must be a tensor (for one element use ordinary indexing)", "value")
    shape = broadcast_shapes(shapes, f"{who} index")
    return tuple(broadcast_to(v, shape) for v in vars_), shape


def _valid(valid, shape: tuple, who: str, against: str):
    """The validity mask broadcast to ``shape``: None (every lane active) or a bool tensor Var."""
    if valid is None or (isinstance(valid, (bool, np.bool_)) and bool(valid)):
        return None
    if isinstance(valid, (bool, np.bool_)):
        var = constant(False, T.bool_)._var
    elif isinstance(valid, ValueProxy) and valid.dtype is T.bool_:
        var = valid._var
        if not _fits(_shape(var), shape, f"{who} valid"):
            fail(f"{who}: valid {var.type!r} does not broadcast to {against} {T.TensorType(T.bool_, shape)!r}",
                 "value")
    else:
        fail(f"{who}: valid must be a bool scalar or tensor, got {_type_text(valid)}", "type")
    return broadcast_to(var, shape)


# --- gather --------------------------------------------------------------------------------------

def gather(source, index, *, valid=None, fill=0):
    who = "I.gather"
    if isinstance(source, IndexedProxy):  # a view or a buffer: reads only the valid lanes' elements (masked.py)
        from .masked import masked_read

        return masked_read(source, index, valid, fill, who, paired=True)
    if not isinstance(source, TensorProxy):
        fail(f"{who}: source must be a ranked tensor, got {_type_text(source)}", "type")
    src = source._var
    dtype = src.type.dtype
    idx, shape = _index_entries(index, src.type.rank, who, "source", src.type.shape)
    mask = _valid(valid, shape, who, "the result")
    if isinstance(fill, ValueProxy):
        if fill.dtype is not dtype:
            fail(f"{who}: fill has dtype {fill.dtype} but the source is {dtype}; write I.cast(fill, I.{dtype})",
                 "type")
        if not _fits(_shape(fill._var), shape, f"{who} fill"):
            fail(f"{who}: fill {fill.type!r} does not broadcast to the result {T.TensorType(dtype, shape)!r}", "value")
        fill_v = broadcast_to(fill._var, shape) if isinstance(fill, TensorProxy) else fill._var
    elif is_py_number(fill):
        if dtype.is_bool and type(fill) is int and fill == 0:
            fill = False  # the default fill of a bool source
        fill_v = make_literal(fill, dtype, f"{who} fill")
    else:
        fail(f"{who}: fill must be a number or a {dtype} scalar/tensor, got {_type_text(fill)}", "type")
    inputs = (src, *idx, *((mask,) if mask is not None else ()), fill_v)
    (out,) = current().emit(ops.gather, inputs, (("has_valid", mask is not None),))
    return TensorProxy(out)


# --- histogram -----------------------------------------------------------------------------------

def histogram(values, *, bins, valid=None, count_dtype):
    who = "I.histogram"
    if not isinstance(values, TensorProxy):
        fail(f"{who} takes an integer tensor, got {_type_text(values)}", "type")
    if not values.dtype.is_int:
        fail(f"{who} takes an integer tensor, got {values.dtype} values; I.cast them to an integer dtype "
             f"(and fold range conditions into valid)", "type")
    runtime = isinstance(bins, ScalarProxy)
    if runtime and not bins.dtype.is_int:
        fail(f"{who}: bins must be a positive integer (a Python int, a constexpr, an extent such as counts.shape[0] "
             f"or an integer runtime scalar), got a {bins.dtype} scalar", "type")
    if not runtime:
        if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)):
            fail(f"{who}: bins must be a positive integer (a Python int, a constexpr, an extent such as "
                 f"counts.shape[0] or an integer runtime scalar), got {bins!r}", "type")
        if bins <= 0:
            fail(f"{who}: bins must be positive, got {int(bins)}", "value")
        fits_index(int(bins), f"{who}: bins")
    count = as_dtype(count_dtype, f"{who} count_dtype")
    if not count.is_int:
        fail(f"{who}: count_dtype must be an integer dtype, got {count}", "type")
    var = values._var
    mask = _valid(valid, var.type.shape, who, "the values")
    inputs = (var,) if mask is None else (var, mask)
    if runtime:  # spec §13: a positive logical index, known when the kernel runs (checked there: bins > 0)
        b = bins._var
        extent = b.extent if b.extent is not None else current().value_dim(b)
        attrs = (("has_valid", mask is not None), ("type", T.TensorType(count, (extent,))))
        inputs += (b,)
    else:
        attrs = (("bins", int(bins)), ("has_valid", mask is not None), ("type", T.TensorType(count, (int(bins),))))
    (out,) = current().emit(ops.histogram, inputs, attrs)
    return TensorProxy(out)


# --- logical buffers ------------------------------------------------------------------------------

class BufferProxy(IndexedProxy):
    """A kernel-local logical buffer: ``b[...]`` loads, ``b[...] = v`` stores (view index spellings)."""

    __slots__ = ()

    def __getitem__(self, key):
        t = self._var.type
        trace = current()
        if self._var not in trace.written_views:
            fail(f"{self.name} has no init and is read before any store to it; give it init=... or store into it "
                 f"first", "value")
        kinds, operands, shape = _index(self, key)
        (out,) = trace.emit(ops.load, (self._var, *operands), (("index", kinds),))
        return TensorProxy(out) if shape else ScalarProxy(out)

    def __setitem__(self, key, value):
        t = self._var.type
        trace = current()
        kinds, operands, shape = _index(self, key)
        v = _stored_value(value, t.dtype, shape, self.name)
        deps = trace.scope.point_deps
        if deps is not None and not _private_to_point(trace, self._var) and not _depends_on_point(deps, operands):
            fail(f"every point of the enclosing parallel domain writes the same elements of {self.name}; index the "
                 f"store with the point, allocate the buffer inside the parallel body, or use an ordered loop",
                 "value")
        trace.emit(ops.store, (self._var, v, *operands), (("index", kinds),), types=())
        trace.written_views.add(self._var)

    def __iter__(self):
        fail(f"{self.name} cannot be iterated; iterate a domain over its extent instead", "type")

    def __repr__(self) -> str:
        return f"<{self.name}: {self._var.type!r}>"


register_proxy(T.BufferType, lambda var: BufferProxy(var, "buffer"))


def _stored_value(value, dtype: T.DType, shape: tuple, name: str):
    """A written value as an operand: the dtype must match; tensors broadcast to the written region."""
    if isinstance(value, ValueProxy):
        if value.dtype is not dtype:
            fail(f"writing {value.dtype} values into {name} ({dtype}): write I.cast(value, I.{dtype})", "type")
        if not _fits(_shape(value._var), shape, f"write to {name}"):
            fail(f"a value of shape {value.type!r} does not broadcast to the written region "
                 f"{T.TensorType(dtype, shape)!r} of {name}", "value")
        return broadcast_to(value._var, shape) if shape else value._var
    if isinstance(value, Proxy):
        fail(f"cannot write a {type(value).__name__} into {name}", "type")
    return make_literal(value, dtype, "written value")


def _private_to_point(trace, var: Var) -> bool:
    """A buffer allocated inside the innermost enclosing ``parallel`` body: each point has its own."""
    scope = trace.scope
    while scope is not None and scope.kind != "parallel":
        scope = scope.parent
    s = trace.defined_in.get(var)
    while s is not None:
        if s is scope:
            return True
        s = s.parent
    return False


def buffer(shape, dtype, *, init=None):
    dtype = as_dtype(dtype, "I.buffer dtype")
    if dtype.kind == "mx":
        fail(f"I.buffer of {dtype}: microscaling formats are not element dtypes", "type")
    if isinstance(shape, (int, np.integer, ScalarProxy)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        fail(f"I.buffer shape must be a tuple of extents, got {type(shape).__name__}", "type")
    extents = []
    fresh = False
    for k, e in enumerate(shape):
        ext, var = extent_operand(e, f"I.buffer shape entry {k}")
        extents.append(ext)
        fresh = fresh or var is not None
    extents = tuple(extents)
    check_static_count(extents, "I.buffer shape")
    trace = current()
    name = f"buffer@{trace.location()!r}"
    inputs = ()
    if init is not None:
        if isinstance(init, ValueProxy):
            if init.dtype is not dtype:
                fail(f"I.buffer init has dtype {init.dtype} but the buffer is {dtype}; write I.cast(init, I.{dtype})",
                     "type")
            if not _fits(_shape(init._var), extents, "I.buffer init"):
                fail(f"I.buffer init {init.type!r} does not broadcast to the buffer shape "
                     f"{T.TensorType(dtype, extents)!r}", "value")
            iv = init._var
            if isinstance(init, TensorProxy) and not T.same_shape(iv.type.shape, extents):
                if fresh:
                    fail("I.buffer: a tensor init cannot be broadcast to an extent computed from a runtime value; "
                         "build it with that shape (e.g. I.full(shape, ...)) or give a scalar init", "value")
                iv = broadcast_to(iv, extents)
            inputs = (iv,)
        elif is_py_number(init):
            inputs = (make_literal(init, dtype, "I.buffer init"),)
        else:
            fail(f"I.buffer init must be a number or a {dtype} scalar/tensor, got {_type_text(init)}", "type")
    btype = T.BufferType(dtype, extents)
    (out,) = trace.emit(ops.buffer, inputs, (("type", btype),))
    if inputs:
        trace.written_views.add(out)
    return BufferProxy(out, name)


# --- scatter_reduce ------------------------------------------------------------------------------

def _add(a, b):
    return binary("add", a, b)


def _max(a, b):
    return binary("maximum", a, b)


def _min(a, b):
    return binary("minimum", a, b)


def _and(a, b):
    return binary("and_", a, b)


def _or(a, b):
    return binary("or_", a, b)


def _xor(a, b):
    return binary("xor", a, b)


BUILTIN_COMBINES = {"add": _add, "max": _max, "min": _min, "and": _and, "or": _or, "xor": _xor}
for _name, _fn in BUILTIN_COMBINES.items():
    _fn.__name__ = _fn.__qualname__ = _name  # the helper name shown in source locations


def scatter_reduce(dest, index, values, *, combine, valid=None):
    who = "I.scatter_reduce"
    trace = current()
    if isinstance(dest, ViewProxy):
        access = dest._var.type.access
        if access == "In":
            fail(f"{who}: {dest.name} is an In view (read-only); declare it InOut (or Out and write it first)",
                 "value")
        if access == "Out" and dest._var not in trace.written_views:
            fail(f"{who} combines into the existing elements of {dest.name}, an Out view not written yet; write it "
                 f"first (e.g. {dest.name}[...] = 0) or declare it InOut", "value")
    elif isinstance(dest, BufferProxy):
        if dest._var not in trace.written_views:
            fail(f"{who} combines into the existing elements of {dest.name}, which has no init and no store yet; "
                 f"give it init=...", "value")
    else:
        fail(f"{who}: dest must be a view or a buffer, got {_type_text(dest)}", "type")
    dvar = dest._var
    dtype = dvar.type.dtype
    idx, shape = _index_entries(index, dvar.type.rank, who, "destination", dvar.type.shape)
    mask = _valid(valid, shape, who, "the index shape")
    if isinstance(values, ValueProxy):
        if values.dtype is not dtype:
            fail(f"{who}: values have dtype {values.dtype} but {dest.name} is {dtype}; write "
                 f"I.cast(values, I.{dtype})", "type")
        if not _fits(_shape(values._var), shape, f"{who} values"):
            fail(f"{who}: values {values.type!r} do not broadcast to the index shape "
                 f"{T.TensorType(dtype, shape)!r}", "value")
        vv = broadcast_to(values._var, shape)
    elif is_py_number(values):
        vv = broadcast_to(constant(values, dtype)._var, shape)
    else:
        fail(f"{who}: values must be a {dtype} tensor, scalar or number, got {_type_text(values)}", "type")
    if isinstance(combine, str):
        fn = BUILTIN_COMBINES.get(combine)
        if fn is None:
            fail(f"{who}: combine {combine!r} is not one of {', '.join(map(repr, BUILTIN_COMBINES))} (or pass a pure "
                 f"helper)", "value")
        if combine in ("add", "max", "min") and not dtype.is_numeric:
            fail(f"{who}: combine {combine!r} needs a numeric destination, got {dtype}"
                 + ("; use 'or'/'and' for bool" if dtype.is_bool else ""), "type")
        if combine in ("and", "or", "xor") and not (dtype.is_int or dtype.is_bool):
            fail(f"{who}: combine {combine!r} needs an integer or bool destination, got {dtype}", "type")
        label = combine
    elif callable(combine):
        fn, label = combine, "helper"
    else:
        fail(f"{who}: combine must be one of {', '.join(map(repr, BUILTIN_COMBINES))} or a pure helper "
             f"(existing, incoming) -> element, got {type(combine).__name__}", "type")
    elem = T.ScalarType(dtype)
    region, _ = trace_pure(fn, who, [Var(elem), Var(elem)], elem)
    vtype = T.TensorType(dtype, shape)
    trace.emit(ops.scatter_reduce, (dvar, vv, *idx, *((mask,) if mask is not None else ())),
               (("combine", label), *((("has_valid", True),) if mask is not None else ()), ("type", vtype)), types=(),
               regions=(region,))  # has_valid is recorded only when set: unmasked graphs print as before
    trace.written_views.add(dvar)


__all__ = ["gather", "histogram", "buffer", "scatter_reduce", "BufferProxy", "BUILTIN_COMBINES"]
