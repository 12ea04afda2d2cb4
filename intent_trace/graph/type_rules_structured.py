"""Type rules of the memory, atomic and structured ops (read, load, gather, histogram, buffer, the atomics,
contract and its scaled, sparse and quantized forms, reduce, scan, the region operations).

Written with the building blocks of :mod:`.type_rules` (derived and checked rules, the operand checks); see
there for what a rule is.
"""
from __future__ import annotations

from .. import types as T
from ..errors import TraceTypeError, TraceValueError
from .type_rules import (broadcast_shapes, checked, derived, extent_of_value, index_scalar, tensor_type, type_error,
                         value_error, value_type)

#: the fields of the record ``atomic_compare_exchange`` returns (spec §16)
CAS_FIELDS = ("old_value", "success")

# --- memory ------------------------------------------------------------------------------------

def indexed_shape(op, target, kinds, operands) -> tuple:
    """The result shape of view-style indexing (read, load, and the atomics' addresses): one axis per domain
    entry (its extent), per ``all`` entry (the target's extent) and per tensor entry (its axes)."""
    if not isinstance(kinds, tuple) or len(kinds) != len(target.shape):
        value_error(f"{op.name}: {len(kinds) if isinstance(kinds, tuple) else kinds!r} index entries for a target "
                     f"of rank {len(target.shape)}")
    rest = list(operands)
    shape = []
    for axis, kind in enumerate(kinds):
        if kind == "all":
            shape.append(target.shape[axis])
            continue
        if not rest:
            value_error(f"{op.name}: index entry {axis} ({kind}) has no operand")
        x = rest.pop(0)
        if kind == "domain":
            if not isinstance(x.type, T.DomainType):
                type_error(f"{op.name}: index entry {axis} must be a domain, got {x.type!r}")
            shape.append(x.type.extent)
        elif kind == "tensor":
            if not isinstance(x.type, T.TensorType) or not x.type.dtype.is_int:
                type_error(f"{op.name}: a tensor index must have an integer dtype, got {x.type!r}")
            shape.extend(x.type.shape)
        elif kind == "point":
            index_scalar(op, x, f"index entry {axis}")
        else:
            value_error(f"{op.name}: unknown index entry {kind!r}")
    if rest:
        value_error(f"{op.name}: {len(rest)} index operands left over for the entries {kinds}")
    return tuple(shape)


def _indexed(target_class, what: str):
    def compute(op, inputs, attrs):
        target = inputs[0].type
        if not isinstance(target, target_class):
            type_error(f"{op.name}: the first operand must be {what}, got {target!r}")
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
    src = tensor_type(op, inputs[0])
    rank = len(src.shape)
    n_valid = 1 if attrs["has_valid"] else 0
    if len(inputs) != 1 + rank + n_valid + 1:
        value_error(f"I.gather: {len(inputs) - 2 - n_valid} index entries for a source of rank {rank}")
    index = inputs[1:1 + rank]
    shape = tensor_type(op, index[0]).shape
    for x in index:
        if not isinstance(x.type, T.TensorType) or not x.type.dtype.is_int or not T.same_shape(x.type.shape, shape):
            type_error(f"I.gather: index {x.type!r} is not an integer tensor of the result shape")
    if n_valid and inputs[1 + rank].type != T.TensorType(T.bool_, shape):
        type_error(f"I.gather: valid {inputs[1 + rank].type!r} is not a bool tensor of the result shape")
    fill = inputs[-1].type
    if getattr(fill, "dtype", None) is not src.dtype:
        type_error(f"I.gather: fill has dtype {getattr(fill, 'dtype', fill)} but the source is {src.dtype}")
    if isinstance(fill, T.TensorType) and not T.same_shape(fill.shape, shape):
        value_error(f"I.gather: fill {fill!r} does not have the result shape")
    return T.TensorType(src.dtype, shape)


def _access_target(op, x):
    """The target of a masked access: a view for masked_read/masked_write, a logical buffer for the others."""
    want = T.ViewType if op.name in ("masked_read", "masked_write") else T.BufferType
    if not isinstance(x.type, want):
        type_error(f"{op.name}: the first operand must be {'a view' if want is T.ViewType else 'a logical buffer'}, "
                   f"got {x.type!r}")
    return x.type


def _masked_operands(op, target, coords, valid, shape: tuple) -> None:
    """One integer coordinate per target axis and the valid mask, each a scalar (the same for every lane) or of the
    access ``shape``."""
    if len(coords) != len(target.shape):
        value_error(f"{op.name}: {len(coords)} coordinates for a target of rank {len(target.shape)}")
    for x in coords:
        t = x.type
        fits = isinstance(t, T.ScalarType) or isinstance(t, T.TensorType) and T.same_shape(t.shape, shape)
        if not fits or not t.dtype.is_int:
            type_error(f"{op.name}: coordinate {t!r} is not an integer scalar or tensor of the access shape")
    want = T.TensorType(T.bool_, shape) if shape else T.ScalarType(T.bool_)
    if not (valid.type == want or valid.type == T.ScalarType(T.bool_)):
        type_error(f"{op.name}: valid {valid.type!r} is not a bool scalar or {want!r}")


def _access_shape(op, coords) -> tuple:
    """The shape of the tensor coordinates (a scalar coordinate is the same for every lane); () when none is."""
    return next((x.type.shape for x in coords if isinstance(x.type, T.TensorType)), ())


@derived
def masked_read_rule(op, inputs, attrs):
    """Elements of the target at per-element coordinates: the target's dtype, the coordinates' shape. The fill has
    the target's dtype (a scalar or of that shape)."""
    if len(inputs) < 3:
        value_error(f"{op.name}: operands are the target, its coordinates, valid and fill")
    target = _access_target(op, inputs[0])
    coords, valid, fill = inputs[1:-2], inputs[-2], inputs[-1]
    shape = _access_shape(op, coords)
    _masked_operands(op, target, coords, valid, shape)
    f = value_type(op, fill)
    if f.dtype is not target.dtype:
        type_error(f"{op.name}: fill has dtype {f.dtype} but the target is {target.dtype}")
    if isinstance(f, T.TensorType) and not (shape and T.same_shape(f.shape, shape)):
        value_error(f"{op.name}: fill {f!r} does not have the access shape")
    return T.TensorType(target.dtype, shape) if shape else T.ScalarType(target.dtype)


def masked_write_rule(op, inputs, attrs):
    """No result: the value has the target's dtype and gives the access shape; the coordinates and valid follow;
    ``data_indexed``, when recorded, is a bool."""
    if not isinstance(attrs.get("data_indexed", False), bool):
        type_error(f"{op.name}: data_indexed must be a bool, got {attrs['data_indexed']!r}")
    if len(inputs) < 3:
        value_error(f"{op.name}: operands are the target, the value, its coordinates and valid")
    target = _access_target(op, inputs[0])
    v = value_type(op, inputs[1])
    if v.dtype is not target.dtype:
        type_error(f"{op.name}: writing {v.dtype} values into a {target.dtype} target")
    shape = v.shape if isinstance(v, T.TensorType) else ()
    _masked_operands(op, target, inputs[2:-1], inputs[-1], shape)
    return ()


def scatter_reduce_rule(op, inputs, attrs):
    """No result: the values (of the recorded index shape) have the destination's dtype; one integer index tensor
    of that shape per destination axis; [a bool valid of that shape]."""
    dest = inputs[0].type
    if not isinstance(dest, (T.ViewType, T.BufferType)):
        type_error(f"{op.name}: the destination must be a view or a buffer, got {dest!r}")
    t = attrs.get("type")
    if not isinstance(t, T.TensorType) or t.dtype is not dest.dtype or inputs[1].type != t:
        type_error(f"{op.name}: values {inputs[1].type!r} are not the recorded {t!r} of the destination's dtype")
    n_valid = 1 if attrs.get("has_valid") else 0
    index = inputs[2:len(inputs) - n_valid]
    if len(index) != len(dest.shape):
        value_error(f"{op.name}: {len(index)} index entries for a destination of rank {len(dest.shape)}")
    for x in index:
        if not isinstance(x.type, T.TensorType) or not x.type.dtype.is_int or not T.same_shape(x.type.shape, t.shape):
            type_error(f"{op.name}: index {x.type!r} is not an integer tensor of the index shape")
    if n_valid and inputs[-1].type != T.TensorType(T.bool_, t.shape):
        type_error(f"{op.name}: valid {inputs[-1].type!r} is not a bool tensor of the index shape")
    return ()


@checked
def histogram_rule(op, inputs, attrs, t):
    """Counts of each of ``bins`` bins: a (bins,) tensor of the recorded integer counting dtype. ``bins`` is the
    static attribute, or (without it) the last operand, an integer scalar whose extent is the result's."""
    values = tensor_type(op, inputs[0])
    if not values.dtype.is_int:
        type_error(f"I.histogram takes an integer tensor, got {values.dtype} values")
    has_valid, bins = attrs["has_valid"], attrs.get("bins")
    if len(inputs) != 1 + bool(has_valid) + (bins is None):
        value_error(f"I.histogram takes the values{', valid' if has_valid else ''}"
                    f"{' and the runtime bin count' if bins is None else ''}, got {len(inputs)} operands")
    if has_valid and inputs[1].type != T.TensorType(T.bool_, values.shape):
        type_error("I.histogram: valid must be a bool tensor of the values' shape")
    if bins is None:
        index_scalar(op, inputs[-1], "the runtime bin count")
        if not isinstance(t, T.TensorType) or not t.dtype.is_int or len(t.shape) != 1 or \
                not extent_of_value(inputs[-1], t.shape[0]):
            type_error(f"I.histogram counts a runtime number of bins into an integer tensor whose one extent is the "
                       f"bin count's, not {t!r}")
    elif not isinstance(t, T.TensorType) or not t.dtype.is_int or t.shape != (bins,):
        type_error(f"I.histogram counts {bins} bins into an integer ({bins},) tensor, not {t!r}")


@checked
def buffer_rule(op, inputs, attrs, t):
    """The buffer's shape and dtype are the user's; an init is a scalar or a tensor of its dtype and shape."""
    if not isinstance(t, T.BufferType):
        type_error(f"buffer makes a logical buffer, not {t!r}")
    if len(inputs) > 1:
        value_error(f"buffer takes at most one init operand, got {len(inputs)}")
    if inputs:
        init = value_type(op, inputs[0])
        if init.dtype is not t.dtype:
            type_error(f"I.buffer init has dtype {init.dtype} but the buffer is {t.dtype}")
        if isinstance(init, T.TensorType) and not T.same_shape(init.shape, t.shape):
            value_error(f"I.buffer init {init!r} does not have the buffer shape {t.shape_text()}")


def _atomic_address(op, inputs, values: int) -> T.DType:
    view = inputs[0].type
    if not isinstance(view, T.ViewType):
        type_error(f"{op.name}: the first operand must be a view, got {view!r}")
    for x in inputs[1:1 + values]:
        if x.type != T.ScalarType(view.dtype):
            type_error(f"{op.name}: operand {x.type!r} is not a {view.dtype} scalar")
    return view.dtype


def _element_address(op, inputs, attrs, values: int) -> T.DType:
    dtype = _atomic_address(op, inputs, values)
    if indexed_shape(op, inputs[0].type, attrs["index"], inputs[1 + values:]):
        value_error(f"{op.name}: the address must be one element (points only)")
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
                value_error(f"{who}: {what} pairs are (lhs_axis, rhs_axis), got {pair!r}")
            a, b = pair
            if not 0 <= a < len(lhs_shape) or not 0 <= b < len(rhs_shape):
                value_error(f"{who}: {what} pair ({a}, {b}) names an axis the operands do not have")
            if ("l", a) in seen or ("r", b) in seen:
                value_error(f"{who}: an axis of pair ({a}, {b}) is paired twice")
            seen |= {("l", a), ("r", b)}
            ea, eb = lhs_shape[a], rhs_shape[b]
            if not T.same_extent(ea, eb):
                value_error(f"{who}: {what} pair ({a}, {b}) pairs lhs axis {a} of extent {T.extent_str(ea)} with "
                             f"rhs axis {b} of extent {T.extent_str(eb)}; paired extents must be provably equal "
                             f"(dynamic extents are equal only when they are the same named extent or come from "
                             f"the same value)")


@derived
def contract_rule(op, inputs, attrs):
    """acc_dtype over the result axes of the paired-axis multiply-add (``contract_shape``)."""
    lhs, rhs = (tensor_type(op, x) for x in inputs)
    if lhs.dtype is not rhs.dtype:
        type_error(f"I.contract operands must have one dtype, got {lhs.dtype} and {rhs.dtype}")
    acc = attrs["acc_dtype"]
    if not isinstance(acc, T.DType) or not acc.is_numeric:
        type_error(f"I.contract: acc_dtype must be a numeric dtype, got {acc!r}")
    reduce, batch = attrs["reduce"], attrs["batch"]
    check_pairs(lhs.shape, rhs.shape, reduce, batch, "I.contract")
    return T.TensorType(acc, contract_shape(lhs.shape, rhs.shape, reduce, batch))


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

def quantize_rule(op, inputs, attrs):
    """The format's record of logical fields for f32[..., K] (quantization.md Q1, Q2): ``record_type(leading,
    blocks)`` with blocks = K // block size. A static K is a positive multiple of the block size, and the rule
    computes the record; a dynamic K comes with a second operand, the block count, whose extent is the recorded
    record's blocks (K a multiple of the block size is then the run's check)."""
    src, fmt = tensor_type(op, inputs[0]), attrs["format"]
    k = src.shape[-1] if src.shape else None
    recorded = attrs.get("type")
    if src.dtype is not T.f32 or k is None:
        type_error(f"I.quantize: values must be f32[..., K], got {src!r}")
    if isinstance(k, int):
        if len(inputs) != 1 or k <= 0 or k % fmt.block_size:
            type_error(f"I.quantize: values must be f32[..., K] with K a positive multiple of {fmt.block_size} "
                       f"(and no block-count operand), got {src!r}")
        blocks = k // fmt.block_size
    else:
        if len(inputs) != 2:
            value_error("I.quantize over a dynamic last extent K takes the block count K // 256 as its second operand")
        index_scalar(op, inputs[1], "the block count")
        first = recorded.fields[0][1] if isinstance(recorded, T.RecordType) and recorded.fields else None
        blocks = first.shape[-1] if isinstance(first, T.TensorType) and first.shape else None
        if not extent_of_value(inputs[1], blocks):
            value_error("I.quantize: the record's blocks axis is not the extent its block-count operand gives")
    t = fmt.record_type(src.shape[:-1], blocks)
    if recorded is not None and recorded != t:
        type_error(f"I.quantize: the recorded type {recorded!r} is not the {fmt!r} record of {src!r}, {t!r}")
    return (t,)


quantize_rule.computes = True  # for a static K; a dynamic one's blocks extent is recorded (its operand's)


def _quantized(op, x, fmt):
    t = x.type
    first = t.fields[0][1] if isinstance(t, T.RecordType) and t.fields else None
    if not isinstance(first, T.TensorType) or not first.shape:
        type_error(f"I.quantized_dot: operand {t!r} is not a {fmt!r} record")
    lead, blocks = first.shape[:-1], first.shape[-1]
    if t != fmt.record_type(lead, blocks):
        type_error(f"I.quantized_dot: operand {t!r} is not the {fmt!r} record {fmt.record_type(lead, blocks)!r}")
    return lead, blocks


@derived
def quantized_dot_rule(op, inputs, attrs):
    """f32 over the right-aligned broadcast of the operands' leading axes (a scalar if none; Q3)."""
    la, ba = _quantized(op, inputs[0], attrs["lhs_format"])
    lb, bb = _quantized(op, inputs[1], attrs["rhs_format"])
    if not T.same_extent(ba, bb):
        value_error(f"I.quantized_dot: the operands have {T.extent_str(ba)} and {T.extent_str(bb)} blocks; the "
                     f"blocks axis is contracted and must be provably equal")
    shape = broadcast_shapes([la, lb], "I.quantized_dot leading axes") if (la or lb) else ()
    return T.TensorType(attrs["acc_dtype"], shape) if shape else T.ScalarType(attrs["acc_dtype"])


@derived
def scaled_contract_rule(op, inputs, attrs):
    """acc_dtype[M, N] from u8 codes [M, G, C_lhs], scales [M, G], codes [G, C_rhs, N], scales [N, G] (§11)."""
    shapes = []
    for x, rank in zip(inputs, (3, 2, 3, 2)):
        t = tensor_type(op, x)
        if t.dtype is not T.u8 or len(t.shape) != rank:
            type_error(f"I.scaled_contract operands are u8 tensors of ranks 3, 2, 3, 2, got {t!r}")
        shapes.append(t.shape)
    (m, g, _), (sm, sg), (g2, _, n), (sn, sg2) = shapes
    if not all(T.same_extent(a, b) for a, b in ((g, g2), (m, sm), (g, sg), (n, sn), (g, sg2))):
        value_error("I.scaled_contract: the M, G and N extents of the codes and scales are not provably equal")
    return T.TensorType(attrs["acc_dtype"], (m, n))


@derived
def sparse_contract_rule(op, inputs, attrs):
    """As contract, with the compressed lhs's first reduce axis paired to the dense logical axis (§12)."""
    c, m, r = (tensor_type(op, x) for x in inputs)
    if c.dtype is not r.dtype or not m.dtype.is_int or not T.same_shape(c.shape, m.shape):
        type_error("I.sparse_contract: compressed and rhs share a dtype, and the metadata is an integer tensor "
                    "of the compressed shape")
    reduce, batch = attrs["reduce"], attrs["batch"]
    if not reduce:
        value_error("I.sparse_contract: reduce must list at least one pair (the compression axis)")
    check_pairs(c.shape, r.shape, reduce[1:], batch, "I.sparse_contract")
    (ca, rb) = reduce[0]
    if not 0 <= ca < len(c.shape) or not 0 <= rb < len(r.shape):
        value_error(f"I.sparse_contract: the compression pair ({ca}, {rb}) names an axis the operands do not have")
    return T.TensorType(attrs["acc_dtype"], contract_shape(c.shape, r.shape, reduce, batch))
