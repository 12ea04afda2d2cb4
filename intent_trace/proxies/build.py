"""Surface -> canonical KIR: literal typing, explicit broadcasts, shape transforms, aggregates.

Every function here turns a user spelling into one canonical node (plus the explicit
``broadcast`` nodes the spec requires, §4), checking the rules that the spelling implies before
the node exists, so errors point at the user's line.
"""
from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from .. import types as T
from ..floatbits import largest_finite, number_text, round_number
from ..errors import TraceError
from ..graph import ops, type_rules
from ..graph.provenance import AxisPos, BinExpr, Const, Ref, simplify_add, through_arith, through_axes
from ..graph.values import Literal, Var
from .context import current, fail
from .newaxis import insert_positions, new_axis_positions, split_new_axes, with_ones
from .values import Proxy, ScalarProxy, TensorProxy, ValueProxy, wrap

_PY_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)
# the ops whose results keep a coordinate's provenance (an affine expression of it), and their symbols
_AFFINE = {ops.add: "+", ops.sub: "-", ops.mul: "*", ops.floordiv: "//", ops.mod: "%"}


def is_py_number(x) -> bool:
    return isinstance(x, _PY_NUMBER)


# --- literals ------------------------------------------------------------------------------

def make_literal(value, dtype: T.DType, role: str = "literal") -> Literal:
    """A Python number taking ``dtype`` (T1): integers must fit exactly, floats round RNE."""
    if isinstance(value, (bool, np.bool_)):
        if not dtype.is_bool:
            fail(f"{role} {value!r} is a bool but the other operand is {dtype}; bool is not a number here", "type")
        return Literal(bool(value), T.ScalarType(dtype))
    if dtype.is_bool:
        fail(f"{role} {value!r} cannot be a bool; write True or False", "type")
    if dtype.is_int:
        if not isinstance(value, (Integral, np.integer)):
            fail(f"{role} {value!r} is not an integer but the other operand is {dtype}; "
                 f"write an integer or I.cast the other operand to a float dtype", "type")
        v = int(value)
        if not dtype.min <= v <= dtype.max:
            fail(f"{role} {number_text(v)} does not fit {dtype} (range {dtype.min}..{dtype.max}); cast the other "
                 f"operand to a wider dtype", "value")
        return Literal(v, T.ScalarType(dtype))
    if dtype.is_float:
        stored, overflowed = round_number(value, dtype.np)
        if overflowed:
            fail(f"{role} {number_text(value)} overflows {dtype} (largest finite value "
                 f"{largest_finite(dtype.np)!r})", "value")
        return Literal(stored[()], T.ScalarType(dtype))
    fail(f"{dtype} values have no arithmetic", "type")


def constant(value, dtype: T.DType) -> ScalarProxy:
    lit = make_literal(value, dtype, "constant")
    (out,) = current().emit(ops.constant, (), (("value", lit.value), ("type", lit.type)))
    return ScalarProxy(out)


# --- operands and broadcasting ----------------------------------------------------------

def shape_of(x) -> tuple:
    t = x.type
    return t.shape if isinstance(t, T.TensorType) else ()


def broadcast_shapes(shapes, what: str) -> tuple:
    """Right-aligned broadcast (the registry's rule, :func:`intent_trace.graph.type_rules.broadcast_shapes`),
    failing at the user's line."""
    try:
        return type_rules.broadcast_shapes(shapes, what)
    except TraceError as e:
        fail(e.bare_message, "value")


def broadcast_to(x, shape: tuple, tensor: bool = True):
    """An explicit broadcast node unless ``x`` already has the target type. Literals stay splat constants."""
    if x.__class__ is Literal:
        return x
    t = x.type
    target = T.TensorType(t.dtype, shape) if tensor else t
    if t == target:
        return x
    src = shape_of(x)
    offset = len(shape) - len(src)

    def new_axis_of_old(k):
        if isinstance(src[k], int) and src[k] == 1 and not (isinstance(shape[k + offset], int) and shape[k + offset] == 1):
            return Const(0)
        return AxisPos(k + offset)

    rel = through_axes(x.provenance, new_axis_of_old) if x.provenance is not None else None
    (out,) = current().emit(ops.broadcast, (x,), (("type", target),), provenance=rel)
    return out


def _result_type(dtype, inputs):
    tensors = [shape_of(x) for x in inputs if x.__class__ is not Literal and isinstance(x.type, T.TensorType)]
    if not tensors:
        return T.ScalarType(dtype), False
    shape = tensors[0] if len(tensors) == 1 else broadcast_shapes(tensors, "broadcast")
    return T.TensorType(dtype, shape), True


def _operands(opname: str, values) -> tuple:
    """Vars and Literals of one dtype for an elementwise op; Python numbers take the proxies' dtype."""
    dtype = None
    for v in values:
        if isinstance(v, ValueProxy):
            d = v._var.type.dtype
            if dtype is None:
                dtype = d
            elif d is not dtype:
                fail(f"{opname} of {dtype} and {d}: dtypes never convert implicitly; write I.cast(value, I.{d}) "
                     f"or I.cast(value, I.{dtype}) on one operand", "type")
        elif isinstance(v, Proxy):
            fail(f"{opname} takes scalars or tensors, got {type(v).__name__}", "type")
        elif not is_py_number(v):
            fail(f"{opname} takes scalars, tensors or Python numbers, got {type(v).__name__}", "type")
    if dtype is None:
        fail(f"{opname} of Python numbers only has no dtype; give one operand a dtype with I.cast", "type")
    return tuple(v._var if isinstance(v, Proxy) else cached_literal(v, dtype) for v in values), dtype


_LITERALS: dict = {}
_VALUE_PROXY_CLASSES = frozenset({ScalarProxy, TensorProxy})


def cached_literal(value, dtype: T.DType) -> Literal:
    """make_literal, memoised (literals are immutable; -0.0 and 0.0 are kept apart)."""
    key = (dtype, value.__class__, value, math.copysign(1.0, value) if isinstance(value, float) else 0)
    lit = _LITERALS.get(key)
    if lit is None:
        lit = make_literal(value, dtype)
        if len(_LITERALS) < 4096:
            _LITERALS[key] = lit
    return lit


def _fast_operands(values):
    """The common cases (two proxies of one dtype, a proxy and a Python int/float) without the checks'
    slow paths; None when the general path must decide."""
    if len(values) != 2:
        return None
    a, b = values
    ca, cb = a.__class__, b.__class__
    if ca in _VALUE_PROXY_CLASSES:
        va = a._var
        if cb in _VALUE_PROXY_CLASSES:
            vb = b._var
            return ((va, vb), va.type.dtype) if va.type.dtype is vb.type.dtype else None
        if cb is float or cb is int:
            return (va, cached_literal(b, va.type.dtype)), va.type.dtype
    elif (ca is float or ca is int) and cb in _VALUE_PROXY_CLASSES:
        vb = b._var
        return (cached_literal(a, vb.type.dtype), vb), vb.type.dtype
    return None


def elementwise(opname: str, values, attrs: tuple = ()):
    op = ops.REGISTRY[opname]
    fast = _fast_operands(values)
    inputs, dtype = fast if fast is not None else _operands(opname, values)
    if op is ops.div and not dtype.is_float:
        fail(f"`/` is floating division and {dtype} is an integer dtype; use `//` (truncates toward zero) "
             f"or I.cast the operands to a float dtype", "type")
    first = None
    uniform = True
    for x in inputs:
        if x.__class__ is not Literal:
            if first is None:
                first = x.type
            elif x.type != first:
                uniform = False
                break
    if not uniform:
        rtype, is_tensor = _result_type(dtype, inputs)
        if is_tensor:
            inputs = tuple(broadcast_to(x, rtype.shape) for x in inputs)
    provenance = None
    sym = _AFFINE.get(op)
    if sym is not None:
        for x in inputs:
            if x.__class__ is Var and x.provenance is not None:
                provenance = _affine_provenance(sym, inputs)
                break
    elif op is ops.neg:
        provenance = through_arith(inputs[0].provenance, "neg", None, True)
    (out,) = current().emit(op, inputs, attrs, provenance=provenance)
    return ScalarProxy(out) if out.type.__class__ is T.ScalarType else TensorProxy(out)


def _affine_provenance(sym: str, inputs):
    a, b = inputs
    pa = a.provenance if a.__class__ is Var else None
    pb = b.provenance if b.__class__ is Var else None
    if (pa is None) == (pb is None):
        return None
    if pa is not None:
        if b.__class__ is Var and isinstance(b.type, T.TensorType):
            return None  # a whole tensor operand: no longer an affine coordinate expression
        return through_arith(pa, sym, b.value if b.__class__ is Literal else b, True)
    if a.__class__ is Var and isinstance(a.type, T.TensorType):
        return None
    return through_arith(pb, sym, a.value if a.__class__ is Literal else a, False)


def binary(opname: str, a, b, attrs: tuple = ()):
    return elementwise(opname, (a, b), attrs)


def unary(opname: str, x, attrs: tuple = ()):
    if not isinstance(x, ValueProxy):
        fail(f"{opname} takes a scalar or tensor value, got {type(x).__name__}", "type")
    return elementwise(opname, (x,), attrs)


def math_options(opname: str, x, approximate, flush_to_zero, allowed=("approximate", "flush_to_zero")) -> tuple:
    """Per-op numeric options (spec §4, numerics T4): constexpr bools, f32 only, FTZ needs approximate."""
    for name, v in (("approximate", approximate), ("flush_to_zero", flush_to_zero)):
        if not isinstance(v, bool):
            fail(f"{opname}: {name} must be a constexpr bool (True/False), got {type(v).__name__}", "type")
    if flush_to_zero and not approximate:
        fail(f"{opname}: flush_to_zero=True must be chosen together with approximate=True", "value")
    if approximate:
        dtype = getattr(getattr(x, "type", None), "dtype", None)
        if dtype is not T.f32:
            fail(f"{opname}: approximate/flush_to_zero modes accept only f32 operands, got {dtype}", "type")
    # Only the options that change the op are recorded: ``I.fdiv(a, b)`` is the same canonical node as ``a / b``
    # (and ``I.exp2(x, approximate=False)`` as ``I.exp2(x)``), so graphs, printouts and caches agree.
    return tuple((n, True) for n, v in (("approximate", approximate), ("flush_to_zero", flush_to_zero))
                 if n in allowed and v)


def select(pred, a, b):
    if not isinstance(pred, ValueProxy):
        if isinstance(pred, (bool, np.bool_)):
            fail("I.select with a Python bool predicate: choose the value in Python", "type")
        fail(f"I.select needs a bool scalar or tensor predicate, got {type(pred).__name__}", "type")
    if pred.dtype is not T.bool_:
        fail(f"I.select needs a bool predicate, got {pred.dtype}; compare first (e.g. x > 0)", "type")
    (va, vb), dtype = _operands("select", (a, b))
    p = pred._var
    rtype, is_tensor = _result_type(dtype, (p, va, vb))
    if is_tensor:
        p = broadcast_to(p, rtype.shape)
        va, vb = broadcast_to(va, rtype.shape), broadcast_to(vb, rtype.shape)
    (out,) = current().emit(ops.select, (p, va, vb))
    return wrap(out)


# --- conversions ----------------------------------------------------------------------------

def as_dtype(d, role: str = "dtype") -> T.DType:
    if isinstance(d, T.DType):
        return d
    if d is bool:
        return T.bool_
    fail(f"{role} must be an intent dtype such as I.f32, got {d!r}", "type")


def convert(opname: str, x, dtype):
    op = ops.REGISTRY[opname]
    dtype = as_dtype(dtype)
    if dtype.kind == "mx":
        fail(f"{dtype} is a microscaling format: it is only a scaled_contract operand format (T6), not a "
             f"{opname} target here", "type")
    if is_py_number(x):
        if op is ops.bitcast:
            fail("I.bitcast needs a typed value; I.cast the number first", "type")
        return constant(x, dtype)
    if not isinstance(x, ValueProxy):
        fail(f"I.{opname} takes a scalar or tensor, got {type(x).__name__}", "type")
    if x.dtype.kind == "mx":
        fail(f"I.{opname} of a {x.dtype} value", "type")
    (out,) = current().emit(op, (x._var,), (("dtype", dtype),))
    return wrap(out)


# --- shapes ----------------------------------------------------------------------------------

def shape_values(var: Var, shape: tuple) -> tuple:
    """``.shape``: static ints, and index scalars that carry their extent's identity."""
    trace = current()
    out = []
    for axis, e in enumerate(shape):
        if isinstance(e, int):
            out.append(e)
            continue
        v = trace.dim_vars.get(e)
        if v is None or not trace.defined_in[v].active:
            (v,) = trace.emit(ops.dim, (var,), (("axis", axis),), extent=e)
        out.append(ScalarProxy(v))
    return tuple(out)


def extent_operand(x, role: str):
    """An extent given by the user: (Extent, operand Var or None)."""
    if isinstance(x, (bool, np.bool_)):
        fail(f"{role} must be an integer, got {x!r}", "type")
    if isinstance(x, (int, np.integer)):
        if x < 0:
            fail(f"{role} {number_text(x)} is negative", "value")
        return fits_index(int(x), role), None
    if isinstance(x, ScalarProxy) and x.dtype.is_int:
        v = x._var
        if v.extent is not None:
            return v.extent, None
        return current().value_dim(v), v
    fail(f"{role} must be an integer or a traced integer scalar (for example x.shape[0]), got "
         f"{getattr(x, 'type', type(x).__name__)!r}", "type")


def _shape_arg(shape, role: str):
    if isinstance(shape, (int, np.integer, ScalarProxy)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        fail(f"{role} must be a tuple of extents, got {type(shape).__name__}", "type")
    extents, fresh, operands = [], [], []
    for k, e in enumerate(shape):
        ext, var = extent_operand(e, f"{role} entry {k}")
        extents.append(ext)
        if var is not None:
            fresh.append(k)
            operands.append(var)
    check_static_count(extents, role)
    return tuple(extents), tuple(fresh), tuple(operands)


def check_static_count(extents, role: str) -> None:
    """A static shape's element count must be an index value too (flat offsets are computed in 64 bits)."""
    if all(isinstance(e, int) for e in extents):
        fits_index(math.prod(extents), f"{role} {tuple(extents)} has an element count that")


def full(shape, fill, dtype):
    dtype = as_dtype(dtype)
    extents, fresh, operands = _shape_arg(shape, "I.full shape")
    if isinstance(fill, ValueProxy):
        if not isinstance(fill, ScalarProxy) or fill.dtype is not dtype:
            fail(f"I.full fill must be a {dtype} scalar, got {fill.type!r}", "type")
        fill_v = fill._var
    elif is_py_number(fill):
        fill_v = make_literal(fill, dtype, "fill")
    else:
        fail(f"I.full fill must be a number or a scalar, got {type(fill).__name__}", "type")
    t = T.TensorType(dtype, extents)
    (out,) = current().emit(ops.full, (fill_v, *operands), (("type", t), ("extents", fresh)))
    return wrap(out)


def _tensor_arg(x, who: str) -> Var:
    if not isinstance(x, ValueProxy):
        fail(f"{who} takes a tensor, got {type(x).__name__}", "type")
    if not isinstance(x.type, T.TensorType):
        fail(f"{who} takes a ranked tensor, got the scalar {x.type!r}; I.full((), ...) or I.reshape(x, ()) "
             f"makes a rank-0 tensor", "type")
    return x._var


def reshape(x, shape):
    if isinstance(x, ScalarProxy):
        var = x._var
        src_shape = ()
    else:
        var = _tensor_arg(x, "I.reshape")
        src_shape = var.type.shape
    extents, fresh, operands = _shape_arg(shape, "I.reshape shape")
    t = T.TensorType(var.type.dtype, extents)  # the user's shape: recorded, and checked by the type rule
    rel = _reshape_relation(var.provenance, src_shape, extents)
    (out,) = current().emit(ops.reshape, (var, *operands), (("type", t), ("extents", fresh)), provenance=rel)
    return wrap(out)


def insert_axes(x, positions):
    """``x`` (a scalar or tensor) reshaped with a size-one axis at each of the final-rank ``positions``."""
    return reshape(x, with_ones(x.shape if isinstance(x, TensorProxy) else (), positions))


def expand_dims(x, axis):
    """``I.expand_dims(x, axis)``: size-one axes at ``axis`` (positions in the result, as NumPy's), a reshape."""
    if not isinstance(x, ValueProxy):
        fail(f"I.expand_dims takes a scalar or tensor value, got {type(x).__name__}", "type")
    rank = x.type.rank if isinstance(x, TensorProxy) else 0
    return insert_axes(x, insert_positions(axis, rank, "I.expand_dims"))


def _extent_expr(e):
    return Const(e) if isinstance(e, int) else Ref(e)


def _reshape_relation(rel, old, new):
    """Row-major reshape: old axis positions as expressions of the new axes."""
    if rel is None:
        return None
    flat = Const(0)
    for k, e in enumerate(new):
        scaled = flat if not k or (isinstance(e, int) and e == 1) else BinExpr("*", flat, _extent_expr(e))
        flat = simplify_add(scaled, AxisPos(k)) if k else AxisPos(0)
    if len(old) == 1:
        return through_axes(rel, lambda k: flat)
    stride_after = []
    for k in range(len(old)):
        rest = [_extent_expr(e) for e in old[k + 1:]]
        s = rest[0] if rest else Const(1)
        for r in rest[1:]:
            s = BinExpr("*", s, r)
        stride_after.append(s)
    return through_axes(rel, lambda k: BinExpr("%", BinExpr("//", flat, stride_after[k]), _extent_expr(old[k])))


def transpose(x, perm=None):
    var = _tensor_arg(x, "I.transpose")
    rank = var.type.rank
    if perm is None:
        perm = tuple(reversed(range(rank)))
    if not isinstance(perm, (tuple, list)) or not all(isinstance(p, (int, np.integer)) for p in perm):
        fail(f"I.transpose permutation must be a tuple of axis numbers, got {perm!r}", "type")
    perm = tuple(int(p) for p in perm)
    inverse = {p: i for i, p in enumerate(perm)}
    rel = through_axes(var.provenance, lambda k: AxisPos(inverse.get(k, k)))  # (a bad perm fails in the rule)
    (out,) = current().emit(ops.transpose, (var,), (("perm", perm),), provenance=rel)
    return wrap(out)


def join(a, b):
    for v in (a, b):
        if not isinstance(v, ValueProxy):
            fail(f"I.join takes two values of one dtype and shape, got {type(v).__name__}", "type")
    (out,) = current().emit(ops.join, (a._var, b._var))
    return wrap(out)


def fits_index(n: int, role: str) -> int:
    """``n``, or a TraceError when it is not a value of the ``index`` type (signed 64-bit, T1): every
    coordinate, bound and extent is one, and every target computes with them in 64 bits."""
    if not T.index.min <= n <= T.index.max:
        fail(f"{role} {number_text(n)} does not fit the index type (signed 64-bit, {T.index.min}..{T.index.max})",
             "value")
    return n


def index_operand(x, role: str):
    """An index given by the user: a Literal index or an integer scalar Var."""
    if isinstance(x, (bool, np.bool_)):
        fail(f"{role} must be an integer, got {x!r}", "type")
    if isinstance(x, (int, np.integer)):
        return Literal(fits_index(int(x), role), T.ScalarType(T.index))
    if isinstance(x, ScalarProxy) and x.dtype.is_int:
        return x._var
    fail(f"{role} must be an integer or a traced integer scalar, got {getattr(x, 'type', type(x).__name__)!r}",
         "type")


def normalize_key(key, rank: int, who: str) -> list:
    key = key if isinstance(key, tuple) else (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        fail(f"{who}: at most one `...`", "value")
    if Ellipsis in [k for k in key if not isinstance(k, Proxy)]:
        i = next(j for j, k in enumerate(key) if not isinstance(k, Proxy) and k is Ellipsis)
        fill = rank - (len(key) - 1)
        if fill < 0:
            fail(f"{who}: {len(key) - 1} indices for rank {rank}", "value")
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) != rank:
        fail(f"{who}: {len(key)} indices for a value of rank {rank}; index every axis (use `:` or `...`)", "value")
    return list(key)


def slice_tensor(x, key):
    """``t[a:b, i, :]``: contiguous positions, no clamping and no negative wrap (like subregions); a ``None``
    entry inserts a size-one axis (the slice, then a reshape: .newaxis)."""
    entries, slots = split_new_axes(key, x._var.type.rank, "tensor indexing")
    if slots:
        whole = len(entries) == x._var.type.rank and all(
            isinstance(e, slice) and e.start is None and e.stop is None and e.step is None for e in entries)
        return insert_axes(x if whole else slice_tensor(x, entries), new_axis_positions(entries, slots))
    var = x._var
    shape = var.type.shape
    entries = normalize_key(key, len(shape), "tensor indexing")
    kinds, operands, new_shape, old_to_new = [], [], [], {}
    for axis, (k, extent) in enumerate(zip(entries, shape)):
        if isinstance(k, slice):
            if k.step not in (None, 1):
                fail("tensor slices take no step", "value")
            if k.start is None and k.stop is None:
                kinds.append("all")
                old_to_new[axis] = AxisPos(len(new_shape))
                new_shape.append(extent)
                continue
            start = index_operand(0 if k.start is None else k.start, "slice start")
            if k.stop is None:
                stop = Literal(extent, T.ScalarType(T.index)) if isinstance(extent, int) else None
                if stop is None:
                    stop = shape_values(var, shape)[axis]._var
            else:
                stop = index_operand(k.stop, "slice stop")
            _check_static_range(start, stop, extent)
            kinds.append("range")
            operands += [start, stop]
            old_to_new[axis] = simplify_add(AxisPos(len(new_shape)), _operand_expr(start))
            new_shape.append(_range_extent(start, stop, extent))
        elif isinstance(k, Proxy) and not isinstance(k, ScalarProxy):
            fail(f"tensors are indexed by integers and slices, got {type(k).__name__}; use I.gather for tensor "
                 f"indices", "type")
        else:
            idx = index_operand(k, "tensor index")
            _check_static_range(idx, None, extent)
            kinds.append("point")
            operands.append(idx)
            old_to_new[axis] = _operand_expr(idx)
    t = T.TensorType(var.type.dtype, tuple(new_shape))  # the rule computes it; it names the fresh lengths
    rel = through_axes(var.provenance, lambda k: old_to_new[k])
    (out,) = current().emit(ops.slice, (var, *operands), (("axes", tuple(kinds)), ("type", t)), provenance=rel)
    return wrap(out)


def _operand_expr(x):
    return Const(x.value) if x.__class__ is Literal else Ref(x)


def _check_static_range(start, stop, extent) -> None:
    s = start.value if start.__class__ is Literal else None
    e = stop.value if stop is not None and stop.__class__ is Literal else None
    if s is not None and s < 0 or e is not None and e < 0:
        fail("negative positions are not wrapped (no implicit clamping or wrap-around); write the position "
             "explicitly, e.g. t[n - 1]", "value")
    if isinstance(extent, int):
        if stop is None and s is not None and s >= extent:
            fail(f"index {s} is out of range for an axis of extent {extent}", "value")
        if e is not None and e > extent:
            fail(f"slice stop {e} is past the axis extent {extent} (no implicit clamping)", "value")


def _range_extent(start, stop, extent):
    if start.__class__ is Literal and stop.__class__ is Literal:
        return max(0, stop.value - start.value)
    if start.__class__ is Literal and start.value == 0 and stop.__class__ is Var:
        return stop.extent if stop.extent is not None else current().value_dim(stop)
    return T.Dim(label=f"the length of the slice at {current().location()}")



# --- the proxy methods that build nodes --------------------------------------------------------------
# A deliberate registration: the proxy classes (.values) sit below this module, which builds the nodes their
# methods stand for. The operator dunders are generated from the registry's spellings (OpDef.dunders).

def _operator(opname: str, reflected: bool):
    if reflected:
        def method(self, other):
            return elementwise(opname, (other, self))
    else:
        def method(self, other):
            return elementwise(opname, (self, other))
    method.__name__ = opname
    return method


def _unary_operator(opname: str):
    def method(self):
        return elementwise(opname, (self,))
    method.__name__ = opname
    return method


def _install_proxy_methods() -> None:
    for op in ops.REGISTRY.values():
        for dunder, reflected in op.dunders:
            method = _operator(op.name, reflected) if op.arity == 2 else _unary_operator(op.name)
            setattr(ValueProxy, dunder, method)
    ValueProxy.__hash__ = Proxy.__hash__  # defining __eq__ drops it
    Proxy.build_elementwise = staticmethod(elementwise)  # NumPy's operator ufuncs on a proxy (.numpy_interop)
    TensorProxy.shape = property(lambda self: shape_values(self._var, self._var.type.shape))
    TensorProxy.T = property(lambda self: transpose(self, None))
    TensorProxy.__getitem__ = slice_tensor


_install_proxy_methods()
