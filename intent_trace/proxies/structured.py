"""Generic reduce and scan, and the builtins that normalise to them (spec §7, §8; numerics T5).

A combine is a typed pure helper traced once into an *isolated* region: it sees only its
parameters (accumulator-shaped lhs and rhs, then the explicit operands), so runtime captures must
be passed as operands, and any read, write or other effect inside it is a TraceError naming the
helper.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.values import Var
from .aggregates import RecordProxy, pack, record, record_field
from .build import constant, convert, insert_axes, is_py_number
from .context import current, fail
from .control import _schema_mismatch
from .domain import domain, indices
from .newaxis import check_keepdims, normalize_axes
from .values import ValueProxy, wrap

# --- schemas ------------------------------------------------------------------------------------


_components = T.leaf_types


def _map_leaves(t: T.Type, fn):
    if isinstance(t, T.TupleType):
        return T.TupleType(tuple(_map_leaves(it, fn) for it in t.items))
    if isinstance(t, T.RecordType):
        return T.RecordType(tuple((n, _map_leaves(ft, fn)) for n, ft in t.fields))
    return fn(t)


def _source(value, who: str) -> Var:
    if isinstance(value, (ValueProxy, RecordProxy, tuple)):
        var = pack(value, f"{who} source")
    else:
        fail(f"{who} takes a tensor, or a tuple/record of tensors, got {type(value).__name__}", "type")
    for c in _components(var.type):
        if not isinstance(c, T.TensorType):
            fail(f"{who}: every source component must be a ranked tensor, got {c!r}", "type")
    return var


def _reduced_type(t: T.TensorType, axes) -> T.Type:
    kept = tuple(e for k, e in enumerate(t.shape) if k not in axes)
    return T.TensorType(t.dtype, kept) if kept else T.ScalarType(t.dtype)


def _check_reduced_extents(source: Var, axes, who: str) -> None:
    comps = _components(source.type)
    first = comps[0]
    for c in comps:
        if c.rank != first.rank:
            fail(f"{who}: source components have ranks {first.rank} and {c.rank}; the reduced axes must line up", "value")
        for a in axes:
            if not T.same_extent(c.shape[a], first.shape[a]):
                fail(f"{who}: source components disagree on the extent of reduced axis {a} "
                     f"({T.extent_str(first.shape[a])} vs {T.extent_str(c.shape[a])})", "value")


# --- combine regions ----------------------------------------------------------------------------

def _helper_name(fn) -> str:
    return getattr(fn, "name", None) or getattr(fn, "__name__", "combine")


def trace_pure(fn, who: str, params: list, result_type: T.Type | None, arrange=None):
    """Trace ``fn(*params)`` into an isolated region; returns (region, result Var).

    ``arrange`` maps the list of wrapped parameters to the call's arguments (to interleave
    constexpr operands, which stay Python values and never become parameters)."""
    from ..kernel import Helper

    if not callable(fn):
        fail(f"{who} must be a function (an @intent.fn helper or a plain function), got {type(fn).__name__}", "type")
    helper = fn if isinstance(fn, Helper) else Helper(fn)
    name = _helper_name(helper)
    trace = current()
    scope = trace.open("combine", params=tuple(params), isolated=f"{who} helper `{name}`")
    try:
        wrapped = [wrap(p) for p in params]
        result = helper(*(arrange(wrapped) if arrange is not None else wrapped))
        if result is None:
            fail(f"{who} helper `{name}` returned nothing; it must return the accumulator", "type")
        out = pack(result, f"{who} helper `{name}` result")
    except BaseException:
        trace.abandon(scope)
        raise
    for node in scope.nodes:
        effects = ops.region_effects(node)
        if effects:
            trace.abandon(scope)
            fail(f"{who} helper `{name}` must be pure, but it performs a {sorted(effects)[0]} "
                 f"({node.op.name} at {node.loc!r}); combine functions may not read or write views", "value")
    if result_type is not None:
        mismatch = _schema_mismatch(result_type, out.type)
        if mismatch:
            trace.abandon(scope)
            fail(f"{who} helper `{name}` must return the accumulator schema {result_type!r}: {mismatch}", "type")
    return trace.close(scope, (out,)), out


def _operands(operands, who: str) -> list:
    if not isinstance(operands, tuple):
        fail(f"{who}: combine_operands must be a tuple", "type")
    return [pack(o, f"{who} combine operand {i}") for i, o in enumerate(operands)]


def _identity(identity, acc_type: T.Type, who: str) -> Var:
    if identity is None:
        fail(f"{who} needs an identity with the accumulator schema {acc_type!r}", "value")
    if is_py_number(identity):
        fail(f"{who}: identity {identity!r} has no dtype; write I.cast({identity!r}, I.<dtype>) (or I.full for "
             f"tensor accumulators)", "type")
    var = pack(identity, f"{who} identity")
    mismatch = _schema_mismatch(acc_type, var.type)
    if mismatch:
        fail(f"{who}: identity must have the accumulator schema {acc_type!r}: {mismatch}", "type")
    return var


def keep_dims(result, axes):
    """``keepdims=True``: every component of a reduction's result reshaped with a size-one axis at each reduced
    axis (the reduced value, then a reshape; components of a tuple or record alike)."""
    if isinstance(result, tuple):
        return tuple(keep_dims(r, axes) for r in result)
    if isinstance(result, RecordProxy):
        return record(**{n: keep_dims(record_field(result, n), axes) for n in result.type.names})
    return insert_axes(result, axes)


def generic_reduce(value, *, axis, identity, combine, combine_operands=(), keepdims=False, _who="I.reduce"):
    """Reduce ``axis`` of every source component with a pure, associative and commutative ``combine``."""
    keepdims = check_keepdims(keepdims, _who)
    source = _source(value, _who)
    rank = _components(source.type)[0].rank
    axes = normalize_axes(axis, rank, _who)
    _check_reduced_extents(source, axes, _who)
    acc_type = _map_leaves(source.type, lambda c: _reduced_type(c, axes))
    ident = _identity(identity, acc_type, _who)
    operand_vars = _operands(combine_operands, _who)
    params = [Var(acc_type), Var(acc_type), *(Var(o.type) for o in operand_vars)]
    region, _ = trace_pure(combine, _who, params, acc_type)
    (out,) = current().emit(ops.reduce, (source, ident, *operand_vars),
                            (("axes", axes), ("helper", _helper_name(combine)), ("types", (acc_type,))),
                            regions=(region,))
    return keep_dims(wrap(out), axes) if keepdims else wrap(out)


# --- builtins -----------------------------------------------------------------------------------

def default_sum_dtype(d: T.DType) -> T.DType:
    """T5: f16/bf16 -> f32, f32 -> f32, f64 -> f64, bool and signed -> i64, unsigned -> u64."""
    if d.is_float:
        return T.f64 if d is T.f64 else T.f32
    if d.kind == "uint":
        return T.u64
    return T.i64


def _tensor(value, who: str):
    if not isinstance(value, ValueProxy) or not isinstance(value.type, T.TensorType):
        fail(f"{who} takes a ranked tensor, got {getattr(value, 'type', type(value).__name__)!r}", "type")
    return value


def _acc(value, acc_dtype, default: T.DType, who: str):
    if acc_dtype is None:
        acc = default
    elif isinstance(acc_dtype, T.DType) and acc_dtype.kind != "mx" and not acc_dtype.is_bool:
        acc = acc_dtype
    else:
        fail(f"{who}: acc_dtype must be a numeric intent dtype, got {acc_dtype!r}", "type")
    return (value if value.dtype is acc else convert("cast", value, acc)), acc


def _lowest(d: T.DType):
    return -np.inf if d.is_float else d.min


def reduce_sum(value, *, axis, acc_dtype=None, keepdims=False):
    value = _tensor(value, "I.reduce.sum")
    if value.dtype.kind == "mx":
        fail("I.reduce.sum of a microscaling format", "type")
    value, acc = _acc(value, acc_dtype, default_sum_dtype(value.dtype), "I.reduce.sum")
    return _builtin(value, axis, acc, 0, lambda a, b: a + b, "I.reduce.sum", keepdims)


def reduce_max(value, *, axis, acc_dtype=None, keepdims=False):
    value = _tensor(value, "I.reduce.max")
    if value.dtype.is_bool:
        fail("I.reduce.max of bool: use I.reduce.any", "type")
    value, acc = _acc(value, acc_dtype, value.dtype, "I.reduce.max")
    from .build import binary

    return _builtin(value, axis, acc, _lowest(acc), lambda a, b: binary("maximum", a, b), "I.reduce.max", keepdims)


def _bool_reduce(value, axis, is_any: bool, keepdims=False):
    who = "I.reduce.any" if is_any else "I.reduce.all"
    value = _tensor(value, who)
    if not value.dtype.is_bool:
        fail(f"{who} takes a bool tensor, got {value.dtype}; compare first (e.g. x > 0)", "type")
    return _builtin(value, axis, T.bool_, not is_any, (lambda a, b: a | b) if is_any else (lambda a, b: a & b), who,
                    keepdims)


def _kept_extents(value, axes) -> tuple:
    """The extents left after removing ``axes``, as ints or traced index values (``.shape`` keeps identity)."""
    shape = value.shape
    return tuple(e for k, e in enumerate(shape) if k not in axes)


def _builtin(value, axis, acc: T.DType, identity_value, combine, who: str, keepdims=False):
    axes = normalize_axes(axis, value.type.rank, who)
    identity = _full_like(_kept_extents(value, axes), identity_value, acc)
    combine.__name__ = who.split(".")[-1]
    return generic_reduce(value, axis=axes, identity=identity, combine=combine, keepdims=keepdims, _who=who)


def _full_like(extents: tuple, fill, dtype: T.DType):
    """A constant (no extents) or a tensor over ``extents`` (ints or traced extent values)."""
    from .build import full

    c = constant(fill, dtype) if not dtype.is_bool else constant(bool(fill), dtype)
    return full(extents, c, dtype) if extents else c


class _Reduce:
    """``I.reduce(...)`` is the generic reduce; ``I.reduce.sum/max/any/all`` are its builtins."""

    def __call__(self, value, *, axis, identity, combine, combine_operands=(), keepdims=False):
        return generic_reduce(value, axis=axis, identity=identity, combine=combine,
                              combine_operands=combine_operands, keepdims=keepdims)

    @staticmethod
    def sum(value, *, axis, acc_dtype=None, keepdims=False):
        return reduce_sum(value, axis=axis, acc_dtype=acc_dtype, keepdims=keepdims)

    @staticmethod
    def max(value, *, axis, acc_dtype=None, keepdims=False):
        return reduce_max(value, axis=axis, acc_dtype=acc_dtype, keepdims=keepdims)

    @staticmethod
    def any(value, *, axis, keepdims=False):
        return _bool_reduce(value, axis, True, keepdims)

    @staticmethod
    def all(value, *, axis, keepdims=False):
        return _bool_reduce(value, axis, False, keepdims)

    def __repr__(self) -> str:
        return "I.reduce"


def _argmax_combine(lhs, rhs):
    """The larger value wins; NaN is the largest (the lower-index NaN wins); ties go to the lower index."""
    from .build import select

    lv, li = lhs
    rv, ri = rhs
    lower = li <= ri
    if lv.dtype.is_float:
        l_nan, r_nan = lv != lv, rv != rv
        take_l = (l_nan & (~r_nan | lower)) | (~l_nan & ~r_nan & ((lv > rv) | ((lv == rv) & lower)))
    else:
        take_l = (lv > rv) | ((lv == rv) & lower)
    return select(take_l, lv, rv), select(take_l, li, ri)


def arg_max(value, *, axis, keepdims=False):
    """(values, indices): the maximum along ``axis`` and its lowest logical position (T5)."""
    who = "I.arg_reduce.max"
    value = _tensor(value, who)
    if value.dtype.is_bool:
        fail(f"{who} of bool: cast to an integer dtype first", "type")
    (a,) = normalize_axes(axis, value.type.rank, who, single=True)
    t = value.type
    from .build import broadcast_to, reshape

    extent = value.shape[a]
    positions = indices(domain(0, extent))
    shaped = [1] * t.rank
    shaped[a] = extent
    positions = reshape(positions, tuple(shaped))
    positions = wrap(broadcast_to(positions._var, t.shape))
    kept = _kept_extents(value, (a,))
    identity = (_full_like(kept, _lowest(value.dtype), value.dtype), _full_like(kept, T.index.max, T.index))
    return generic_reduce((value, positions), axis=(a,), identity=identity, combine=_argmax_combine,
                          keepdims=keepdims, _who=who)


class _ArgReduce:
    @staticmethod
    def max(value, *, axis, keepdims=False):
        return arg_max(value, axis=axis, keepdims=keepdims)

    def __repr__(self) -> str:
        return "I.arg_reduce"


reduce = _Reduce()
arg_reduce = _ArgReduce()


# --- scan ------------------------------------------------------------------------------------------

def generic_scan(value, *, axis, identity, combine, inclusive=True, reverse=False, combine_operands=(),
                 _who="I.scan"):
    """Prefix combine along one axis; ``combine`` need only be associative (no re-ordering)."""
    for name, flag in (("inclusive", inclusive), ("reverse", reverse)):
        if not isinstance(flag, bool):
            fail(f"{_who}: {name} must be a constexpr bool, got {flag!r}", "type")
    source = _source(value, _who)
    rank = _components(source.type)[0].rank
    (a,) = normalize_axes(axis, rank, _who, single=True)
    _check_reduced_extents(source, (a,), _who)
    acc_type = _map_leaves(source.type, lambda c: _reduced_type(c, (a,)))
    ident = _identity(identity, acc_type, _who)
    operand_vars = _operands(combine_operands, _who)
    params = [Var(acc_type), Var(acc_type), *(Var(o.type) for o in operand_vars)]
    region, _ = trace_pure(combine, _who, params, acc_type)
    result_type = source.type
    (out,) = current().emit(ops.scan, (source, ident, *operand_vars),
                            (("axis", a), ("inclusive", inclusive), ("reverse", reverse),
                             ("helper", _helper_name(combine)), ("types", (result_type,))),
                            regions=(region,))
    return wrap(out)


def _builtin_scan(value, axis, inclusive, reverse, acc: T.DType, identity_value, combine, who: str):
    (a,) = normalize_axes(axis, value.type.rank, who, single=True)
    combine.__name__ = who.split(".")[-1]
    return generic_scan(value, axis=a, identity=_full_like(_kept_extents(value, (a,)), identity_value, acc),
                        combine=combine,
                        inclusive=inclusive, reverse=reverse, _who=who)


def scan(value, *, axis, identity, combine, inclusive=True, reverse=False, combine_operands=()):
    return generic_scan(value, axis=axis, identity=identity, combine=combine, inclusive=inclusive, reverse=reverse,
                        combine_operands=combine_operands)


def cumsum(value, *, axis, inclusive=True, reverse=False, acc_dtype=None):
    value = _tensor(value, "I.cumsum")
    value, acc = _acc(value, acc_dtype, default_sum_dtype(value.dtype), "I.cumsum")
    return _builtin_scan(value, axis, inclusive, reverse, acc, 0, lambda a, b: a + b, "I.cumsum")


def cummax(value, *, axis, inclusive=True, reverse=False, acc_dtype=None):
    value = _tensor(value, "I.cummax")
    if value.dtype.is_bool:
        fail("I.cummax of bool: cast to an integer dtype first", "type")
    value, acc = _acc(value, acc_dtype, value.dtype, "I.cummax")
    from .build import binary

    return _builtin_scan(value, axis, inclusive, reverse, acc, _lowest(acc), lambda a, b: binary("maximum", a, b),
                         "I.cummax")
