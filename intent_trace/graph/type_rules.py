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

The rules of the memory, atomic and structured ops are in :mod:`.type_rules_structured`.

Messages are the ones the surface gives for the same mistake, so a node built by hand fails as a traced one.
"""
from __future__ import annotations

import math

from .. import types as T
from ..errors import TraceTypeError, TraceValueError
from .values import Literal, Var

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

def type_error(message: str):
    raise TraceTypeError(message)


def value_error(message: str):
    raise TraceValueError(message)


def tensor_type(op, x) -> T.TensorType:
    t = x.type
    if not isinstance(t, T.TensorType):
        type_error(f"{op.name} takes a ranked tensor, got {t!r}")
    return t


def value_type(op, x):
    t = x.type
    if not isinstance(t, (T.ScalarType, T.TensorType)):
        type_error(f"{op.name} takes a scalar or tensor, got {t!r}")
    return t


def index_scalar(op, x, role: str) -> None:
    t = x.type
    if not isinstance(t, T.ScalarType) or not t.dtype.is_int:
        type_error(f"{op.name}: {role} must be an integer scalar, got {t!r}")


def _static(x):
    return x.value if x.__class__ is Literal else None


def extent_of_value(x, extent) -> bool:
    """Whether ``extent`` is the extent an index value stands for: the Dim it carries (``x.shape[0]``) or
    the one Dim the tracer makes for it (``Dim.origin``, or a value it proved equal: ``Dim.givers``)."""
    if x.__class__ is not Var:
        return False
    if x.extent is not None:
        return extent is x.extent
    return isinstance(extent, T.Dim) and (extent.origin is x or x in extent.givers)


def _shape_operands(op, t, fresh, operands) -> None:
    """reshape/full: the axes listed in ``extents`` take their extent from the runtime operands."""
    if not isinstance(fresh, tuple) or len(fresh) != len(operands):
        value_error(f"{op.name}: {len(operands)} extent operands for the runtime axes {fresh!r}")
    for axis, x in zip(fresh, operands):
        if not isinstance(axis, int) or not 0 <= axis < len(t.shape):
            value_error(f"{op.name}: runtime axis {axis!r} is not an axis of {t!r}")
        index_scalar(op, x, f"the extent of axis {axis}")
        if not extent_of_value(x, t.shape[axis]):
            value_error(f"{op.name}: axis {axis} of {t!r} is not the extent its operand gives")
    for axis, e in enumerate(t.shape):
        if axis not in fresh and not (isinstance(e, int) and e >= 0 or isinstance(e, T.Dim)):
            value_error(f"{op.name}: extent {e!r} of axis {axis} is neither a size nor a named extent")


# --- shape transforms --------------------------------------------------------------------------

@checked
def broadcast_rule(op, inputs, attrs, t):
    """The target is recorded (a broadcast's shape comes from its consumer); the source must stretch to it
    right-aligned: each source axis is a static 1 or provably the target's extent (spec §4)."""
    src = value_type(op, inputs[0])
    if not isinstance(t, T.TensorType) or t.dtype is not src.dtype:
        type_error(f"broadcast of {src!r} to {t!r} changes the dtype or is not a tensor")
    shape = T.shape_of(src)
    offset = len(t.shape) - len(shape)
    if offset < 0:
        value_error(f"broadcast of {src!r} to {t!r} lowers the rank")
    for k, e in enumerate(shape):
        if not (isinstance(e, int) and e == 1) and not T.same_extent(e, t.shape[k + offset]):
            value_error(f"broadcast: extents {T.extent_str(e)} and {T.extent_str(t.shape[k + offset])} (axis "
                         f"{k + offset} of the broadcast shape) are not provably equal")


def _static_count(op, src_shape, shape) -> None:
    if all(isinstance(e, int) for e in src_shape + shape) and math.prod(src_shape) != math.prod(shape):
        value_error(f"I.reshape keeps the element count: {math.prod(src_shape)} elements cannot become shape "
                     f"{tuple(shape)}")


@checked
def reshape_rule(op, inputs, attrs, t):
    """The shape is the user's (some extents from runtime operands); dtype kept, static counts equal."""
    src = value_type(op, inputs[0])
    if not isinstance(t, T.TensorType) or t.dtype is not src.dtype:
        type_error(f"reshape of {src!r} to {t!r} changes the dtype or is not a tensor")
    _shape_operands(op, t, attrs.get("extents", ()), inputs[1:])
    _static_count(op, T.shape_of(src), t.shape)


@checked
def full_rule(op, inputs, attrs, t):
    """The shape is the user's (some extents from runtime operands); the fill is a scalar of its dtype."""
    if not isinstance(t, T.TensorType):
        type_error(f"full makes a tensor, not {t!r}")
    fill = inputs[0].type if inputs else None
    if not isinstance(fill, T.ScalarType) or fill.dtype is not t.dtype:
        type_error(f"I.full fill must be a {t.dtype} scalar, got {fill!r}")
    _shape_operands(op, t, attrs.get("extents", ()), inputs[1:])


@derived
def transpose_rule(op, inputs, attrs):
    """The source axes in ``perm`` order."""
    src = tensor_type(op, inputs[0])
    perm, rank = attrs["perm"], len(src.shape)
    if not isinstance(perm, tuple) or len(perm) != rank or sorted(perm) != list(range(rank)):
        value_error(f"I.transpose permutation {perm} must list each of the {rank} axes 0..{rank - 1} exactly once")
    return T.TensorType(src.dtype, tuple(src.shape[p] for p in perm))


@derived
def slice_rule(op, inputs, attrs):
    """Per axis: ``all`` keeps the extent, ``point`` drops the axis, ``range`` is [start, stop): static when
    both bounds are, the stop's extent when the start is 0, and otherwise a fresh extent the recorded type
    names (checked to be one)."""
    src = tensor_type(op, inputs[0])
    kinds = attrs["axes"]
    if len(kinds) != len(src.shape):
        value_error(f"tensor indexing: {len(kinds)} indices for a value of rank {len(src.shape)}")
    recorded = attrs.get("type")
    rest = list(inputs[1:])
    shape = []
    for axis, (kind, extent) in enumerate(zip(kinds, src.shape)):
        if kind == "all":
            shape.append(extent)
            continue
        if kind not in ("range", "point") or len(rest) < (2 if kind == "range" else 1):
            value_error(f"slice: axis {axis} entry {kind!r} has no operands")
        if kind == "point":
            index_scalar(op, rest.pop(0), "tensor index")
            continue
        start, stop = rest.pop(0), rest.pop(0)
        index_scalar(op, start, "slice start")
        index_scalar(op, stop, "slice stop")
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
            if not extent_of_value(stop, given):
                value_error(f"slice: the length of axis {axis} ({given!r}) is not the extent its stop gives")
        elif not isinstance(given, T.Dim):
            value_error(f"slice: the runtime length of axis {axis} must be an extent recorded in the type, "
                         f"got {given!r}")
        shape.append(given)  # the extent of the stop value, or the fresh length of this slice
    if rest:
        value_error(f"slice: {len(rest)} operands left over for the axes {kinds}")
    return T.TensorType(src.dtype, tuple(shape))


@derived
def join_rule(op, inputs, attrs):
    """Two values of one type, stacked along a new trailing axis of extent 2."""
    a, b = (value_type(op, x) for x in inputs)
    if a != b:
        type_error(f"I.join needs the same dtype and shape on both sides, got {a!r} and {b!r}")
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
        type_error(f"get takes a tuple, got {t!r}")
    if not isinstance(i, int) or not 0 <= i < len(t.items):
        value_error(f"get: index {i!r} is out of range for {t!r}")
    return t.items[i]


@checked
def record_rule(op, inputs, attrs, t):
    """The field names are recorded in the type; the field types are the operands' types, in order."""
    if not isinstance(t, T.RecordType) or not t.fields:
        type_error(f"record makes a record type with at least one field, not {t!r}")
    if tuple(ft for _, ft in t.fields) != tuple(x.type for x in inputs):
        type_error(f"record {t!r}: its field types are not its operands' types "
                    f"{[x.type for x in inputs]}")


@derived
def field_rule(op, inputs, attrs):
    """The type of field ``name`` of a record."""
    t, name = inputs[0].type, attrs["name"]
    if not isinstance(t, T.RecordType):
        type_error(f"field takes a record, got {t!r}")
    if name not in t.names:
        value_error(f"record {t!r} has no field {name!r}; fields: {', '.join(t.names)}")
    return t.field_type(name)


# --- domains -----------------------------------------------------------------------------------

def _domain_extent(op, t, static_extent, end, begin_static) -> None:
    if not isinstance(t, T.DomainType):
        type_error(f"{op.name} makes a domain, not {t!r}")
    e = t.extent
    if static_extent is not None:
        if e != static_extent or not isinstance(e, int):
            value_error(f"{op.name}: extent {T.extent_str(e)} is not the member count {static_extent} of its bounds")
    elif not isinstance(e, T.Dim):
        value_error(f"{op.name}: runtime bounds give a runtime extent, not {e!r}")
    elif begin_static == 0 and end.__class__ is Var and not extent_of_value(end, e):
        value_error(f"{op.name}: the extent {e!r} of a domain from 0 is not the extent its end gives")


@checked
def domain_rule(op, inputs, attrs, t):
    """begin, end, step are index scalars; the member count is static when they are, else an extent."""
    for x, role in zip(inputs, ("begin", "end", "step")):
        index_scalar(op, x, role)
    b, e, s = (_static(x) for x in inputs)
    if s is not None and s <= 0:
        value_error(f"I.domain step must be positive, got {s}")
    count = max(0, -(-(e - b) // s)) if None not in (b, e, s) else None
    _domain_extent(op, t, count, inputs[1], b if s == 1 else None)


@checked
def subregion_rule(op, inputs, attrs, t):
    """A parent domain and member positions begin, end; static when both are, else an extent."""
    if not isinstance(inputs[0].type, T.DomainType):
        type_error(f"subregion takes a parent domain, got {inputs[0].type!r}")
    for x, role in zip(inputs[1:], ("begin", "end")):
        index_scalar(op, x, f"subregion {role}")
    b, e = _static(inputs[1]), _static(inputs[2])
    _domain_extent(op, t, max(0, e - b) if None not in (b, e) else None, inputs[2], b)


@derived
def indices_rule(op, inputs, attrs):
    """One index per member of the domain."""
    d = inputs[0].type
    if not isinstance(d, T.DomainType):
        type_error(f"I.indices takes a domain, got {d!r}")
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
        type_error(f"dim takes a tensor, view, buffer or domain, got {t!r}")
    if not isinstance(axis, int) or not 0 <= axis < rank:
        value_error(f"dim: axis {axis!r} is not an axis of {t!r}")
    return T.ScalarType(T.index)


@derived
def assume_equal_rule(op, inputs, attrs):
    """Two index scalars stated equal (``I.assume_equal``; checked when the kernel runs): their common value."""
    for x, role in zip(inputs, ("lhs", "rhs")):
        if x.type != T.ScalarType(T.index):
            type_error(f"I.assume_equal: the {role} must be an index scalar, got {x.type!r}")
    for key in ("lhs", "rhs"):
        if not isinstance(attrs.get(key), str):
            value_error(f"I.assume_equal: the `{key}` attribute must describe that side (text for the run-time error)")
    return T.ScalarType(T.index)


# --- values ------------------------------------------------------------------------------------

@checked
def constant_rule(op, inputs, attrs, t):
    """A typed scalar constant: the recorded type is its dtype; the value must be of that dtype's kind."""
    if not isinstance(t, T.ScalarType) or t.dtype.kind == "mx":
        type_error(f"constant makes a scalar of an arithmetic dtype, not {t!r}")
    v = attrs.get("value")
    d = t.dtype
    ok = isinstance(v, bool) if d.is_bool else \
        (isinstance(v, int) and not isinstance(v, bool) and d.min <= v <= d.max) if d.is_int else \
        not isinstance(v, bool) and isinstance(v, (int, float)) or hasattr(v, "dtype")
    if not ok:
        value_error(f"constant {v!r} is not a value of {d}")


@derived
def random_bits_rule(op, inputs, attrs):
    """u32 bits, one per counter element, under a u64 seed scalar."""
    seed, counter = inputs[0].type, value_type(op, inputs[1])
    if seed != T.ScalarType(T.u64):
        type_error(f"I.random.bits: the seed must be a u64 scalar, got {seed!r}")
    if not counter.dtype.is_int:
        type_error(f"I.random.bits: counter must have an integer dtype, got {counter.dtype}")
    return T.TensorType(T.u32, counter.shape) if isinstance(counter, T.TensorType) else T.ScalarType(T.u32)


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
                value_error(f"{what}: extents {T.extent_str(chosen)} and {T.extent_str(e)} (axis {axis} of the "
                             f"broadcast shape) are not provably equal; dynamic extents are equal only when they "
                             f"are the same named extent or come from the same value")
        out.append(chosen)
    return tuple(out)
