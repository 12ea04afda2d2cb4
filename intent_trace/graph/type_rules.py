"""Type rules of the structural ops: the result type from the operand types and the other attributes.

A rule here is the authority both for the tracer (``Trace.emit`` calls it, and records its result as the
node's ``type`` attribute, which the backends read) and for :mod:`.validate`, which re-runs it on every node:
a recorded type that the operands do not give is refused.

Two kinds of rule:

- :func:`derived` rules compute the whole type (transpose, join, get, field, tuple, indices, dim, read, load,
  gather, contract, random_bits, the atomics' results);
- :func:`checked` rules keep a recorded type where the result holds information no operand has (an extent
  the user named with a runtime value, a fresh extent of a slice or domain, a record's field names, a
  buffer's shape, the counting dtype of a histogram, a constant's dtype), and check it against everything
  the operands do determine (rank, dtype, static and inherited extents, the operand that defines a runtime
  extent).

Messages are the ones the surface gives for the same mistake, so a node built by hand fails as a traced one.
"""
from __future__ import annotations

import math

from .. import types as T
from ..errors import TraceTypeError, TraceValueError
from .values import Literal, Var

#: the fields of the record ``atomic_compare_exchange`` returns (spec §16)
CAS_FIELDS = ("old_value", "success")


def derived(compute):
    """A rule that computes the one result type. A recorded ``type`` attribute (kept for the backends that
    read it) must be that type."""

    def rule(op, inputs, attrs):
        t = compute(op, inputs, attrs)
        recorded = attrs.get("type")
        if recorded is not None and recorded != t:
            raise TraceTypeError(f"{op.name}: the recorded result type {recorded!r} is not the type its operands "
                                 f"give, {t!r}")
        return (t,)

    rule.__doc__ = compute.__doc__
    rule.computes = True
    return rule


def checked(check):
    """A rule whose result type is recorded (the ``type`` attribute) and checked against the operands."""

    def rule(op, inputs, attrs):
        t = attrs.get("type")
        if t is None:
            raise TraceValueError(f"{op.name}: the result type must be recorded as the `type` attribute")
        check(op, inputs, attrs, t)
        return (t,)

    rule.__doc__ = check.__doc__
    rule.computes = False
    return rule


# --- shared checks -----------------------------------------------------------------------------

def _type_error(message: str):
    raise TraceTypeError(message)


def _value_error(message: str):
    raise TraceValueError(message)


def _tensor(op, x) -> T.TensorType:
    t = x.type
    if not isinstance(t, T.TensorType):
        _type_error(f"{op.name} takes a ranked tensor, got {t!r}")
    return t


def _value_type(op, x):
    t = x.type
    if not isinstance(t, (T.ScalarType, T.TensorType)):
        _type_error(f"{op.name} takes a scalar or tensor, got {t!r}")
    return t


def _index_scalar(op, x, role: str) -> None:
    t = x.type
    if not isinstance(t, T.ScalarType) or not t.dtype.is_int:
        _type_error(f"{op.name}: {role} must be an integer scalar, got {t!r}")


def _static(x):
    return x.value if x.__class__ is Literal else None


def _extent_of_value(x, extent) -> bool:
    """Whether ``extent`` is the extent an index value stands for: the Dim it carries (``x.shape[0]``) or
    the one Dim the tracer makes for it (``Dim.origin``)."""
    if x.__class__ is not Var:
        return False
    return extent is x.extent if x.extent is not None else isinstance(extent, T.Dim) and extent.origin is x


def _shape_operands(op, t, fresh, operands) -> None:
    """reshape/full: the axes listed in ``extents`` take their extent from the runtime operands."""
    if not isinstance(fresh, tuple) or len(fresh) != len(operands):
        _value_error(f"{op.name}: {len(operands)} extent operands for the runtime axes {fresh!r}")
    for axis, x in zip(fresh, operands):
        if not isinstance(axis, int) or not 0 <= axis < len(t.shape):
            _value_error(f"{op.name}: runtime axis {axis!r} is not an axis of {t!r}")
        _index_scalar(op, x, f"the extent of axis {axis}")
        if not _extent_of_value(x, t.shape[axis]):
            _value_error(f"{op.name}: axis {axis} of {t!r} is not the extent its operand gives")
    for axis, e in enumerate(t.shape):
        if axis not in fresh and not (isinstance(e, int) and e >= 0 or isinstance(e, T.Dim)):
            _value_error(f"{op.name}: extent {e!r} of axis {axis} is neither a size nor a named extent")


# --- shape transforms --------------------------------------------------------------------------

@checked
def broadcast_rule(op, inputs, attrs, t):
    """The target is recorded (a broadcast's shape comes from its consumer); the source must stretch to it
    right-aligned: each source axis is a static 1 or provably the target's extent (spec §4)."""
    src = _value_type(op, inputs[0])
    if not isinstance(t, T.TensorType) or t.dtype is not src.dtype:
        _type_error(f"broadcast of {src!r} to {t!r} changes the dtype or is not a tensor")
    shape = T.shape_of(src)
    offset = len(t.shape) - len(shape)
    if offset < 0:
        _value_error(f"broadcast of {src!r} to {t!r} lowers the rank")
    for k, e in enumerate(shape):
        if not (isinstance(e, int) and e == 1) and not T.same_extent(e, t.shape[k + offset]):
            _value_error(f"broadcast: extents {T.extent_str(e)} and {T.extent_str(t.shape[k + offset])} (axis "
                         f"{k + offset} of the broadcast shape) are not provably equal")


def _static_count(op, src_shape, shape) -> None:
    if all(isinstance(e, int) for e in src_shape + shape) and math.prod(src_shape) != math.prod(shape):
        _value_error(f"I.reshape keeps the element count: {math.prod(src_shape)} elements cannot become shape "
                     f"{tuple(shape)}")


@checked
def reshape_rule(op, inputs, attrs, t):
    """The shape is the user's (some extents from runtime operands); dtype kept, static counts equal."""
    src = _value_type(op, inputs[0])
    if not isinstance(t, T.TensorType) or t.dtype is not src.dtype:
        _type_error(f"reshape of {src!r} to {t!r} changes the dtype or is not a tensor")
    _shape_operands(op, t, attrs.get("extents", ()), inputs[1:])
    _static_count(op, T.shape_of(src), t.shape)


@checked
def full_rule(op, inputs, attrs, t):
    """The shape is the user's (some extents from runtime operands); the fill is a scalar of its dtype."""
    if not isinstance(t, T.TensorType):
        _type_error(f"full makes a tensor, not {t!r}")
    fill = inputs[0].type if inputs else None
    if not isinstance(fill, T.ScalarType) or fill.dtype is not t.dtype:
        _type_error(f"I.full fill must be a {t.dtype} scalar, got {fill!r}")
    _shape_operands(op, t, attrs.get("extents", ()), inputs[1:])


@derived
def transpose_rule(op, inputs, attrs):
    """The source axes in ``perm`` order."""
    src = _tensor(op, inputs[0])
    perm, rank = attrs["perm"], len(src.shape)
    if not isinstance(perm, tuple) or len(perm) != rank or sorted(perm) != list(range(rank)):
        _value_error(f"I.transpose permutation {perm} must list each of the {rank} axes 0..{rank - 1} exactly once")
    return T.TensorType(src.dtype, tuple(src.shape[p] for p in perm))


@derived
def slice_rule(op, inputs, attrs):
    """Per axis: ``all`` keeps the extent, ``point`` drops the axis, ``range`` is [start, stop): static when
    both bounds are, the stop's extent when the start is 0, and otherwise a fresh extent the recorded type
    names (checked to be one)."""
    src = _tensor(op, inputs[0])
    kinds = attrs["axes"]
    if len(kinds) != len(src.shape):
        _value_error(f"tensor indexing: {len(kinds)} indices for a value of rank {len(src.shape)}")
    recorded = attrs.get("type")
    rest = list(inputs[1:])
    shape = []
    for axis, (kind, extent) in enumerate(zip(kinds, src.shape)):
        if kind == "all":
            shape.append(extent)
            continue
        if kind not in ("range", "point") or len(rest) < (2 if kind == "range" else 1):
            _value_error(f"slice: axis {axis} entry {kind!r} has no operands")
        if kind == "point":
            _index_scalar(op, rest.pop(0), "tensor index")
            continue
        start, stop = rest.pop(0), rest.pop(0)
        _index_scalar(op, start, "slice start")
        _index_scalar(op, stop, "slice stop")
        s, e = _static(start), _static(stop)
        if s is not None and e is not None:
            shape.append(max(0, e - s))
            continue
        at = len(shape)
        given = recorded.shape[at] if isinstance(recorded, T.TensorType) and at < len(recorded.shape) else None
        if s == 0 and stop.__class__ is Var:
            if stop.extent is not None:
                shape.append(stop.extent)
                continue
            if not _extent_of_value(stop, given):
                _value_error(f"slice: the length of axis {axis} ({given!r}) is not the extent its stop gives")
        elif not isinstance(given, T.Dim):
            _value_error(f"slice: the runtime length of axis {axis} must be an extent recorded in the type, "
                         f"got {given!r}")
        shape.append(given)  # the extent of the stop value, or the fresh length of this slice
    if rest:
        _value_error(f"slice: {len(rest)} operands left over for the axes {kinds}")
    return T.TensorType(src.dtype, tuple(shape))


@derived
def join_rule(op, inputs, attrs):
    """Two values of one type, stacked along a new trailing axis of extent 2."""
    a, b = (_value_type(op, x) for x in inputs)
    if a != b:
        _type_error(f"I.join needs the same dtype and shape on both sides, got {a!r} and {b!r}")
    return T.TensorType(a.dtype, T.shape_of(a) + (2,))


# --- aggregates --------------------------------------------------------------------------------

@derived
def tuple_rule(op, inputs, attrs):
    """The tuple of the operand types."""
    return T.TupleType(tuple(x.type for x in inputs))


@derived
def get_rule(op, inputs, attrs):
    """Item ``index`` of a tuple."""
    t, i = inputs[0].type, attrs["index"]
    if not isinstance(t, T.TupleType):
        _type_error(f"get takes a tuple, got {t!r}")
    if not isinstance(i, int) or not 0 <= i < len(t.items):
        _value_error(f"get: index {i!r} is out of range for {t!r}")
    return t.items[i]


@checked
def record_rule(op, inputs, attrs, t):
    """The field names are recorded in the type; the field types are the operands' types, in order."""
    if not isinstance(t, T.RecordType) or not t.fields:
        _type_error(f"record makes a record type with at least one field, not {t!r}")
    if tuple(ft for _, ft in t.fields) != tuple(x.type for x in inputs):
        _type_error(f"record {t!r}: its field types are not its operands' types "
                    f"{[x.type for x in inputs]}")


@derived
def field_rule(op, inputs, attrs):
    """The type of field ``name`` of a record."""
    t, name = inputs[0].type, attrs["name"]
    if not isinstance(t, T.RecordType):
        _type_error(f"field takes a record, got {t!r}")
    if name not in t.names:
        _value_error(f"record {t!r} has no field {name!r}; fields: {', '.join(t.names)}")
    return t.field_type(name)


# --- domains -----------------------------------------------------------------------------------

def _domain_extent(op, t, static_extent, end, begin_static) -> None:
    if not isinstance(t, T.DomainType):
        _type_error(f"{op.name} makes a domain, not {t!r}")
    e = t.extent
    if static_extent is not None:
        if e != static_extent or not isinstance(e, int):
            _value_error(f"{op.name}: extent {T.extent_str(e)} is not the member count {static_extent} of its bounds")
    elif not isinstance(e, T.Dim):
        _value_error(f"{op.name}: runtime bounds give a runtime extent, not {e!r}")
    elif begin_static == 0 and end.__class__ is Var and not _extent_of_value(end, e):
        _value_error(f"{op.name}: the extent {e!r} of a domain from 0 is not the extent its end gives")


@checked
def domain_rule(op, inputs, attrs, t):
    """begin, end, step are index scalars; the member count is static when they are, else an extent."""
    for x, role in zip(inputs, ("begin", "end", "step")):
        _index_scalar(op, x, role)
    b, e, s = (_static(x) for x in inputs)
    if s is not None and s <= 0:
        _value_error(f"I.domain step must be positive, got {s}")
    count = max(0, -(-(e - b) // s)) if None not in (b, e, s) else None
    _domain_extent(op, t, count, inputs[1], b if s == 1 else None)


@checked
def subregion_rule(op, inputs, attrs, t):
    """A parent domain and member positions begin, end; static when both are, else an extent."""
    if not isinstance(inputs[0].type, T.DomainType):
        _type_error(f"subregion takes a parent domain, got {inputs[0].type!r}")
    for x, role in zip(inputs[1:], ("begin", "end")):
        _index_scalar(op, x, f"subregion {role}")
    b, e = _static(inputs[1]), _static(inputs[2])
    _domain_extent(op, t, max(0, e - b) if None not in (b, e) else None, inputs[2], b)


@derived
def indices_rule(op, inputs, attrs):
    """One index per member of the domain."""
    d = inputs[0].type
    if not isinstance(d, T.DomainType):
        _type_error(f"I.indices takes a domain, got {d!r}")
    return T.TensorType(T.index, (d.extent,))


@derived
def dim_rule(op, inputs, attrs):
    """An index scalar: the extent of one axis of a shaped value, or a domain's member count (axis 0)."""
    t, axis = inputs[0].type, attrs["axis"]
    if isinstance(t, T.DomainType):
        rank = 1
    elif isinstance(t, (T.TensorType, T.ViewType, T.BufferType)):
        rank = len(t.shape)
    else:
        _type_error(f"dim takes a tensor, view, buffer or domain, got {t!r}")
    if not isinstance(axis, int) or not 0 <= axis < rank:
        _value_error(f"dim: axis {axis!r} is not an axis of {t!r}")
    return T.ScalarType(T.index)


# --- memory ------------------------------------------------------------------------------------

def indexed_shape(op, target, kinds, operands) -> tuple:
    """The result shape of view-style indexing (read, load, and the atomics' addresses): one axis per domain
    entry (its extent), per ``all`` entry (the target's extent) and per tensor entry (its axes)."""
    if not isinstance(kinds, tuple) or len(kinds) != len(target.shape):
        _value_error(f"{op.name}: {len(kinds) if isinstance(kinds, tuple) else kinds!r} index entries for a target "
                     f"of rank {len(target.shape)}")
    rest = list(operands)
    shape = []
    for axis, kind in enumerate(kinds):
        if kind == "all":
            shape.append(target.shape[axis])
            continue
        if not rest:
            _value_error(f"{op.name}: index entry {axis} ({kind}) has no operand")
        x = rest.pop(0)
        if kind == "domain":
            if not isinstance(x.type, T.DomainType):
                _type_error(f"{op.name}: index entry {axis} must be a domain, got {x.type!r}")
            shape.append(x.type.extent)
        elif kind == "tensor":
            if not isinstance(x.type, T.TensorType) or not x.type.dtype.is_int:
                _type_error(f"{op.name}: a tensor index must have an integer dtype, got {x.type!r}")
            shape.extend(x.type.shape)
        elif kind == "point":
            _index_scalar(op, x, f"index entry {axis}")
        else:
            _value_error(f"{op.name}: unknown index entry {kind!r}")
    if rest:
        _value_error(f"{op.name}: {len(rest)} index operands left over for the entries {kinds}")
    return tuple(shape)


def _indexed(target_class, what: str):
    def compute(op, inputs, attrs):
        target = inputs[0].type
        if not isinstance(target, target_class):
            _type_error(f"{op.name}: the first operand must be {what}, got {target!r}")
        shape = indexed_shape(op, target, attrs["index"], inputs[1:])
        return T.TensorType(target.dtype, shape) if shape else T.ScalarType(target.dtype)

    compute.__doc__ = f"Elements of {what} at the index entries: the view's dtype, the entries' axes."
    return derived(compute)


read_rule = _indexed(T.ViewType, "a view")
load_rule = _indexed(T.BufferType, "a logical buffer")


@derived
def gather_rule(op, inputs, attrs):
    """One integer index tensor per source axis, all of the result's shape; [a bool mask of that shape]; a
    fill of the source dtype (a scalar or a tensor of that shape)."""
    src = _tensor(op, inputs[0])
    rank = len(src.shape)
    n_valid = 1 if attrs["has_valid"] else 0
    if len(inputs) != 1 + rank + n_valid + 1:
        _value_error(f"I.gather: {len(inputs) - 2 - n_valid} index entries for a source of rank {rank}")
    index = inputs[1:1 + rank]
    shape = _tensor(op, index[0]).shape
    for x in index:
        if not isinstance(x.type, T.TensorType) or not x.type.dtype.is_int or not T.same_shape(x.type.shape, shape):
            _type_error(f"I.gather: index {x.type!r} is not an integer tensor of the result shape")
    if n_valid and inputs[1 + rank].type != T.TensorType(T.bool_, shape):
        _type_error(f"I.gather: valid {inputs[1 + rank].type!r} is not a bool tensor of the result shape")
    fill = inputs[-1].type
    if getattr(fill, "dtype", None) is not src.dtype:
        _type_error(f"I.gather: fill has dtype {getattr(fill, 'dtype', fill)} but the source is {src.dtype}")
    if isinstance(fill, T.TensorType) and not T.same_shape(fill.shape, shape):
        _value_error(f"I.gather: fill {fill!r} does not have the result shape")
    return T.TensorType(src.dtype, shape)


@checked
def histogram_rule(op, inputs, attrs, t):
    """Counts of each of ``bins`` bins: a (bins,) tensor of the recorded integer counting dtype."""
    values = _tensor(op, inputs[0])
    if not values.dtype.is_int:
        _type_error(f"I.histogram takes an integer tensor, got {values.dtype} values")
    if attrs["has_valid"] and (len(inputs) != 2 or inputs[1].type != T.TensorType(T.bool_, values.shape)):
        _type_error("I.histogram: valid must be a bool tensor of the values' shape")
    if not isinstance(t, T.TensorType) or not t.dtype.is_int or t.shape != (attrs["bins"],):
        _type_error(f"I.histogram counts {attrs['bins']} bins into an integer ({attrs['bins']},) tensor, not {t!r}")


@checked
def buffer_rule(op, inputs, attrs, t):
    """The buffer's shape and dtype are the user's; an init is a scalar or a tensor of its dtype and shape."""
    if not isinstance(t, T.BufferType):
        _type_error(f"buffer makes a logical buffer, not {t!r}")
    if len(inputs) > 1:
        _value_error(f"buffer takes at most one init operand, got {len(inputs)}")
    if inputs:
        init = _value_type(op, inputs[0])
        if init.dtype is not t.dtype:
            _type_error(f"I.buffer init has dtype {init.dtype} but the buffer is {t.dtype}")
        if isinstance(init, T.TensorType) and not T.same_shape(init.shape, t.shape):
            _value_error(f"I.buffer init {init!r} does not have the buffer shape {t.shape_text()}")


# --- values ------------------------------------------------------------------------------------

@checked
def constant_rule(op, inputs, attrs, t):
    """A typed scalar constant: the recorded type is its dtype; the value must be of that dtype's kind."""
    if not isinstance(t, T.ScalarType) or t.dtype.kind == "mx":
        _type_error(f"constant makes a scalar of an arithmetic dtype, not {t!r}")
    v = attrs.get("value")
    d = t.dtype
    ok = isinstance(v, bool) if d.is_bool else \
        (isinstance(v, int) and not isinstance(v, bool) and d.min <= v <= d.max) if d.is_int else \
        not isinstance(v, bool) and isinstance(v, (int, float)) or hasattr(v, "dtype")
    if not ok:
        _value_error(f"constant {v!r} is not a value of {d}")


@derived
def random_bits_rule(op, inputs, attrs):
    """u32 bits, one per counter element, under a u64 seed scalar."""
    seed, counter = inputs[0].type, _value_type(op, inputs[1])
    if seed != T.ScalarType(T.u64):
        _type_error(f"I.random.bits: the seed must be a u64 scalar, got {seed!r}")
    if not counter.dtype.is_int:
        _type_error(f"I.random.bits: counter must have an integer dtype, got {counter.dtype}")
    return T.TensorType(T.u32, counter.shape) if isinstance(counter, T.TensorType) else T.ScalarType(T.u32)


def _atomic_address(op, inputs, values: int) -> T.DType:
    view = inputs[0].type
    if not isinstance(view, T.ViewType):
        _type_error(f"{op.name}: the first operand must be a view, got {view!r}")
    for x in inputs[1:1 + values]:
        if x.type != T.ScalarType(view.dtype):
            _type_error(f"{op.name}: operand {x.type!r} is not a {view.dtype} scalar")
    return view.dtype


def _element_address(op, inputs, attrs, values: int) -> T.DType:
    dtype = _atomic_address(op, inputs, values)
    if indexed_shape(op, inputs[0].type, attrs["index"], inputs[1 + values:]):
        _value_error(f"{op.name}: the address must be one element (points only)")
    return dtype


@derived
def atomic_load_rule(op, inputs, attrs):
    """The element's old value: a scalar of the view's dtype."""
    return T.ScalarType(_element_address(op, inputs, attrs, 0))


@derived
def atomic_rmw_rule(op, inputs, attrs):
    """The element's old value: a scalar of the view's dtype (the operand has that dtype too)."""
    return T.ScalarType(_element_address(op, inputs, attrs, 1))


@derived
def atomic_compare_exchange_rule(op, inputs, attrs):
    """The record {old_value, success} (expected and desired have the view's dtype)."""
    d = _element_address(op, inputs, attrs, 2)
    return T.RecordType(((CAS_FIELDS[0], T.ScalarType(d)), (CAS_FIELDS[1], T.ScalarType(T.bool_))))


# --- contraction -------------------------------------------------------------------------------

def contract_shape(lhs_shape: tuple, rhs_shape: tuple, reduce: tuple, batch: tuple) -> tuple:
    """lhs axes not reduced (batch representatives included), in lhs order, then rhs axes neither reduced nor
    batched, in rhs order (spec §10)."""
    lhs_red = {a for a, _ in reduce}
    rhs_gone = {b for _, b in reduce} | {b for _, b in batch}
    return tuple(e for k, e in enumerate(lhs_shape) if k not in lhs_red) + \
        tuple(e for k, e in enumerate(rhs_shape) if k not in rhs_gone)


def check_pairs(lhs_shape, rhs_shape, reduce, batch, who: str) -> None:
    """Each axis in at most one pair, in range, and paired extents provably equal."""
    seen = set()
    for what, pairs in (("reduce", reduce), ("batch", batch)):
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(a, int) for a in pair)):
                _value_error(f"{who}: {what} pairs are (lhs_axis, rhs_axis), got {pair!r}")
            a, b = pair
            if not 0 <= a < len(lhs_shape) or not 0 <= b < len(rhs_shape):
                _value_error(f"{who}: {what} pair ({a}, {b}) names an axis the operands do not have")
            if ("l", a) in seen or ("r", b) in seen:
                _value_error(f"{who}: an axis of pair ({a}, {b}) is paired twice")
            seen |= {("l", a), ("r", b)}
            ea, eb = lhs_shape[a], rhs_shape[b]
            if not T.same_extent(ea, eb):
                _value_error(f"{who}: {what} pair ({a}, {b}) pairs lhs axis {a} of extent {T.extent_str(ea)} with "
                             f"rhs axis {b} of extent {T.extent_str(eb)}; paired extents must be provably equal "
                             f"(dynamic extents are equal only when they are the same named extent or come from "
                             f"the same value)")


@derived
def contract_rule(op, inputs, attrs):
    """acc_dtype over the result axes of the paired-axis multiply-add (``contract_shape``)."""
    lhs, rhs = (_tensor(op, x) for x in inputs)
    if lhs.dtype is not rhs.dtype:
        _type_error(f"I.contract operands must have one dtype, got {lhs.dtype} and {rhs.dtype}")
    acc = attrs["acc_dtype"]
    if not isinstance(acc, T.DType) or not acc.is_numeric:
        _type_error(f"I.contract: acc_dtype must be a numeric dtype, got {acc!r}")
    reduce, batch = attrs["reduce"], attrs["batch"]
    check_pairs(lhs.shape, rhs.shape, reduce, batch, "I.contract")
    return T.TensorType(acc, contract_shape(lhs.shape, rhs.shape, reduce, batch))


# --- control -----------------------------------------------------------------------------------

def _carries(position: int):
    def rule(op, inputs, attrs):
        init = inputs[position].type if len(inputs) > position else None
        types = attrs.get("types")
        if types is not None and tuple(types) != (init,):
            raise TraceTypeError(f"{op.name}: the recorded carry types {list(types)} are not the init's {init!r}")
        return (init,)

    rule.__doc__ = "The carry: the type of the init operand (one value; tuples are packed)."
    rule.computes = True
    return rule


loop_rule = _carries(1)
while_rule = _carries(0)


def if_rule(op, inputs, attrs):
    """The branches' yields, recorded as ``types`` (validation checks both branches against them); the
    predicate is a bool scalar."""
    if inputs[0].type != T.ScalarType(T.bool_):
        raise TraceTypeError(f"I.if_ needs a bool scalar predicate, got {inputs[0].type!r}")
    types = tuple(attrs["types"])
    if not all(T.is_value_type(t) for t in types):
        raise TraceTypeError(f"I.if_ branches yield values, not {list(types)}")
    return types


if_rule.computes = False


# --- structured operations ---------------------------------------------------------------------

def map_leaves(t: T.Type, fn) -> T.Type:
    """``t`` with every scalar/tensor component replaced by ``fn(component)`` (tuples and records kept)."""
    if isinstance(t, T.TupleType):
        return T.TupleType(tuple(map_leaves(it, fn) for it in t.items))
    if isinstance(t, T.RecordType):
        return T.RecordType(tuple((n, map_leaves(ft, fn)) for n, ft in t.fields))
    return fn(t)


def reduced_type(t: T.Type, axes) -> T.Type:
    """A source component with ``axes`` removed (a scalar when none remain)."""
    if not isinstance(t, T.TensorType):
        raise TraceTypeError(f"a reduced source component must be a tensor, got {t!r}")
    kept = tuple(e for k, e in enumerate(t.shape) if k not in axes)
    return T.TensorType(t.dtype, kept) if kept else T.ScalarType(t.dtype)


def _schema(compute):
    """A rule for ops that record their results as ``types``: the recorded schema must be the computed one."""

    def rule(op, inputs, attrs):
        types = tuple(compute(op, inputs, attrs))
        recorded = attrs.get("types")
        if recorded is not None and tuple(recorded) != types:
            raise TraceTypeError(f"{op.name}: the recorded result types {list(recorded)} are not the ones its "
                                 f"operands give, {list(types)}")
        return types

    rule.__doc__ = compute.__doc__
    rule.computes = True
    return rule


def _accumulator(op, inputs, axes) -> T.Type:
    acc = map_leaves(inputs[0].type, lambda c: reduced_type(c, axes))
    if inputs[1].type != acc:
        raise TraceTypeError(f"{op.name}: identity must have the accumulator schema {acc!r}, got {inputs[1].type!r}")
    return acc


@_schema
def reduce_rule(op, inputs, attrs):
    """The accumulator: every source component with ``axes`` removed (the identity has that schema)."""
    return (_accumulator(op, inputs, attrs["axes"]),)


@_schema
def scan_rule(op, inputs, attrs):
    """The source's schema (the identity has the accumulator schema: the source without ``axis``)."""
    _accumulator(op, inputs, (attrs["axis"],))
    return (inputs[0].type,)


@_schema
def region_fold_rule(op, inputs, attrs):
    """The summary schema, which the identity has."""
    return (inputs[1].type,)


def region_scan_rule(op, inputs, attrs):
    """(outputs, final state): the state is the initial state's type; the outputs (the emit helper's, recorded
    in ``types``) keep the source's extent along ``axis``."""
    out_t, state_t = tuple(attrs["types"])
    if state_t != inputs[2].type:
        raise TraceTypeError(f"region_scan: the final state {state_t!r} is not the initial state's type "
                             f"{inputs[2].type!r}")
    axis = attrs["axis"]
    leaves = T.leaf_types(inputs[0].type)
    extent = leaves[0].shape[axis] if isinstance(leaves[0], T.TensorType) and axis < len(leaves[0].shape) else None
    for c in T.leaf_types(out_t):
        if not isinstance(c, T.TensorType) or len(c.shape) <= axis or not T.same_extent(c.shape[axis], extent):
            raise TraceValueError(f"region_scan: output {c!r} does not keep the source extent along axis {axis}")
    return out_t, state_t


region_scan_rule.computes = False


# --- quantized, scaled and sparse contractions -------------------------------------------------

@derived
def quantize_rule(op, inputs, attrs):
    """The format's record of logical fields for f32[..., K] (K a multiple of the block size; quantization.md
    Q1, Q2): the format attribute gives the record (``record_type(leading, blocks)``)."""
    src, fmt = _tensor(op, inputs[0]), attrs["format"]
    k = src.shape[-1] if src.shape else None
    if src.dtype is not T.f32 or not isinstance(k, int) or k <= 0 or k % fmt.block_size:
        _type_error(f"I.quantize: values must be f32[..., K] with K a positive multiple of {fmt.block_size}, "
                    f"got {src!r}")
    return fmt.record_type(src.shape[:-1], k // fmt.block_size)


def _quantized(op, x, fmt):
    t = x.type
    first = t.fields[0][1] if isinstance(t, T.RecordType) and t.fields else None
    if not isinstance(first, T.TensorType) or not first.shape:
        _type_error(f"I.quantized_dot: operand {t!r} is not a {fmt!r} record")
    lead, blocks = first.shape[:-1], first.shape[-1]
    if t != fmt.record_type(lead, blocks):
        _type_error(f"I.quantized_dot: operand {t!r} is not the {fmt!r} record {fmt.record_type(lead, blocks)!r}")
    return lead, blocks


@derived
def quantized_dot_rule(op, inputs, attrs):
    """f32 over the right-aligned broadcast of the operands' leading axes (a scalar if none; Q3)."""
    la, ba = _quantized(op, inputs[0], attrs["lhs_format"])
    lb, bb = _quantized(op, inputs[1], attrs["rhs_format"])
    if not T.same_extent(ba, bb):
        _value_error(f"I.quantized_dot: the operands have {T.extent_str(ba)} and {T.extent_str(bb)} blocks; the "
                     f"blocks axis is contracted and must be provably equal")
    shape = broadcast_shapes([la, lb], "I.quantized_dot leading axes") if (la or lb) else ()
    return T.TensorType(attrs["acc_dtype"], shape) if shape else T.ScalarType(attrs["acc_dtype"])


@derived
def scaled_contract_rule(op, inputs, attrs):
    """acc_dtype[M, N] from u8 codes [M, G, C_lhs], scales [M, G], codes [G, C_rhs, N], scales [N, G] (§11)."""
    shapes = []
    for x, rank in zip(inputs, (3, 2, 3, 2)):
        t = _tensor(op, x)
        if t.dtype is not T.u8 or len(t.shape) != rank:
            _type_error(f"I.scaled_contract operands are u8 tensors of ranks 3, 2, 3, 2, got {t!r}")
        shapes.append(t.shape)
    (m, g, _), (sm, sg), (g2, _, n), (sn, sg2) = shapes
    if not all(T.same_extent(a, b) for a, b in ((g, g2), (m, sm), (g, sg), (n, sn), (g, sg2))):
        _value_error("I.scaled_contract: the M, G and N extents of the codes and scales are not provably equal")
    return T.TensorType(attrs["acc_dtype"], (m, n))


@derived
def sparse_contract_rule(op, inputs, attrs):
    """As contract, with the compressed lhs's first reduce axis paired to the dense logical axis (§12)."""
    c, m, r = (_tensor(op, x) for x in inputs)
    if c.dtype is not r.dtype or not m.dtype.is_int or not T.same_shape(c.shape, m.shape):
        _type_error("I.sparse_contract: compressed and rhs share a dtype, and the metadata is an integer tensor "
                    "of the compressed shape")
    reduce, batch = attrs["reduce"], attrs["batch"]
    if not reduce:
        _value_error("I.sparse_contract: reduce must list at least one pair (the compression axis)")
    check_pairs(c.shape, r.shape, reduce[1:], batch, "I.sparse_contract")
    (ca, rb) = reduce[0]
    if not 0 <= ca < len(c.shape) or not 0 <= rb < len(r.shape):
        _value_error(f"I.sparse_contract: the compression pair ({ca}, {rb}) names an axis the operands do not have")
    return T.TensorType(attrs["acc_dtype"], contract_shape(c.shape, r.shape, reduce, batch))


def broadcast_shapes(shapes, what: str) -> tuple:
    """Right-aligned broadcast; size-one static axes stretch; dynamic extents must be identical (spec §4)."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        chosen = 1
        for s in shapes:
            k = axis - (rank - len(s))
            if k < 0:
                continue
            e = s[k]
            if isinstance(chosen, int) and chosen == 1:
                chosen = e
            elif isinstance(e, int) and e == 1:
                continue
            elif not T.same_extent(chosen, e):
                _value_error(f"{what}: extents {T.extent_str(chosen)} and {T.extent_str(e)} (axis {axis} of the "
                             f"broadcast shape) are not provably equal; dynamic extents are equal only when they "
                             f"are the same named extent or come from the same value")
        out.append(chosen)
    return tuple(out)
