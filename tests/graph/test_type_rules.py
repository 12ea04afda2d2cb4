"""The registry's type rules: each rule's result for hand-built operands, and validation refusing a node whose
recorded result type is not what its operands give (the node is built directly, so nothing but the rule can
catch the planted type)."""
import pytest

from intent_trace import types as T
from intent_trace.errors import TraceError
from intent_trace.graph import ops
from intent_trace.graph.validate import GraphInvalid, validate
from intent_trace.graph.values import KernelGraph, Literal, Node, Param, Region, Var

M, N = T.Dim("M"), T.Dim("N")
f32, i32, idx = T.ScalarType(T.f32), T.ScalarType(T.i32), T.ScalarType(T.index)


def lit(v, t=idx):
    return Literal(v, t)


def var(t, **kw):
    return Var(t, **kw)


def infer(op, inputs, **attrs):
    return op.infer(op, tuple(inputs), attrs)


def graph_with(op, inputs, attrs: dict, out_types, views=()):
    """One node of ``op`` over ``inputs`` (region parameters, or view parameters) with the given results."""
    params = tuple(Param(f"v{k}", "view", v) for k, v in enumerate(views))
    free = tuple(x for x in inputs if isinstance(x, Var) and x not in views)
    node = Node(op, tuple(inputs), tuple((k, attrs[k]) for k in op.attrs if k in attrs),
                tuple(Var(t) for t in out_types))
    return KernelGraph("k", params, (), Region(free, (node,)))


def refused(op, inputs, attrs: dict, planted, views=()):
    """The node records ``planted`` (as its ``type`` attribute where the op has one, and as its result)."""
    if "type" in op.attrs:
        attrs = dict(attrs, type=planted)
    with pytest.raises(GraphInvalid, match=op.name):
        validate(graph_with(op, inputs, attrs, (planted,), views))


def accepted(op, inputs, attrs: dict, views=()):
    (t,) = infer(op, inputs, **attrs)
    if "type" in op.attrs:
        attrs = dict(attrs, type=t)
    validate(graph_with(op, inputs, attrs, (t,), views))
    return t


# --- shape transforms ----------------------------------------------------------------------------------

def test_transpose_rule_permutes_the_axes():
    x = var(T.TensorType(T.f32, (M, 3, N)))
    assert accepted(ops.transpose, [x], {"perm": (2, 0, 1)}) == T.TensorType(T.f32, (N, M, 3))
    refused(ops.transpose, [x], {"perm": (2, 0, 1)}, T.TensorType(T.f32, (M, 3, N)))
    with pytest.raises(TraceError, match=r"must list each of the 3 axes 0..2 exactly once"):
        infer(ops.transpose, [x], perm=(0, 0, 1))


def test_join_rule_adds_a_trailing_axis_of_two():
    a, b = var(T.TensorType(T.i32, (M,))), var(T.TensorType(T.i32, (M,)))
    assert accepted(ops.join, [a, b], {}) == T.TensorType(T.i32, (M, 2))
    refused(ops.join, [a, b], {}, T.TensorType(T.i32, (2, M)))
    with pytest.raises(TraceError, match="I.join needs the same dtype and shape"):
        infer(ops.join, [a, var(T.TensorType(T.f32, (M,)))])


def test_slice_rule_static_ranges_points_and_whole_axes():
    x = var(T.TensorType(T.f32, (M, 8, 5)))
    inputs = [x, lit(2), lit(7), lit(1)]
    attrs = {"axes": ("all", "range", "point")}
    assert accepted(ops.slice, inputs, attrs) == T.TensorType(T.f32, (M, 5))
    refused(ops.slice, inputs, attrs, T.TensorType(T.f32, (M, 6)))
    refused(ops.slice, inputs, attrs, T.TensorType(T.f32, (M, 5, 1)))


def test_slice_rule_runtime_lengths():
    x = var(T.TensorType(T.f32, (M,)))
    stop = var(idx, extent=N)  # e.g. y.shape[0]: x[0:stop] has the extent N
    assert infer(ops.slice, [x, lit(0), stop], axes=("range",)) == (T.TensorType(T.f32, (N,)),)
    fresh = T.Dim(label="a slice length")
    start = var(idx)
    given = T.TensorType(T.f32, (fresh,))
    assert accepted(ops.slice, [x, start, stop], {"axes": ("range",), "type": given}) == given
    refused(ops.slice, [x, start, stop], {"axes": ("range",)}, T.TensorType(T.f32, (4,)))
    refused(ops.slice, [x, lit(0), stop], {"axes": ("range",)}, T.TensorType(T.f32, (M,)))


def test_reshape_rule_checks_dtype_count_and_runtime_axes():
    x = var(T.TensorType(T.f32, (4, 6)))
    t = T.TensorType(T.f32, (3, 8))
    assert accepted(ops.reshape, [x], {"type": t, "extents": ()}) == t
    refused(ops.reshape, [x], {"extents": ()}, T.TensorType(T.f32, (5, 5)))
    refused(ops.reshape, [x], {"extents": ()}, T.TensorType(T.i32, (3, 8)))
    n = var(idx)
    dim = T.Dim(origin=n)
    t = T.TensorType(T.f32, (dim,))
    assert accepted(ops.reshape, [x, n], {"type": t, "extents": (0,)}) == t
    refused(ops.reshape, [x, n], {"extents": (0,)}, T.TensorType(T.f32, (M,)))  # M is not the operand's extent
    with pytest.raises(TraceError, match="I.reshape keeps the element count: 24 elements"):
        infer(ops.reshape, [x], type=T.TensorType(T.f32, (5,)), extents=())


def test_full_rule_checks_the_fill():
    t = T.TensorType(T.i32, (M, 2))
    assert accepted(ops.full, [lit(0, i32)], {"type": t, "extents": ()}) == t
    refused(ops.full, [lit(0, i32)], {"extents": ()}, T.TensorType(T.f32, (M, 2)))
    refused(ops.full, [lit(0, i32)], {"extents": ()}, i32)


def test_broadcast_rule_checks_right_alignment():
    x = var(T.TensorType(T.f32, (1, N)))
    t = T.TensorType(T.f32, (3, M, N))
    assert accepted(ops.broadcast, [x], {"type": t}) == t
    refused(ops.broadcast, [x], {}, T.TensorType(T.f32, (3, N, M)))  # N against M: not provably equal
    refused(ops.broadcast, [x], {}, T.TensorType(T.f32, (N,)))  # lowers the rank
    refused(ops.broadcast, [x], {}, T.TensorType(T.f64, (2, N)))


# --- aggregates ----------------------------------------------------------------------------------------

def test_tuple_get_record_field_rules():
    a, b = var(f32), var(T.TensorType(T.i32, (M,)))
    tup = T.TupleType((f32, b.type))
    assert accepted(ops.tuple, [a, b], {}) == tup
    refused(ops.tuple, [a, b], {}, T.TupleType((b.type, f32)))
    p = var(tup)
    assert accepted(ops.get, [p], {"index": 1}) == b.type
    refused(ops.get, [p], {"index": 1}, f32)
    rec = T.RecordType((("x", f32), ("n", b.type)))
    assert accepted(ops.record, [a, b], {"type": rec}) == rec
    refused(ops.record, [a, b], {}, T.RecordType((("x", f32), ("n", f32))))
    r = var(rec)
    assert accepted(ops.field, [r], {"name": "n"}) == b.type
    refused(ops.field, [r], {"name": "n"}, f32)
    with pytest.raises(TraceError, match="has no field 'z'; fields: x, n"):
        infer(ops.field, [r], name="z")


# --- domains -------------------------------------------------------------------------------------------

def test_domain_and_subregion_rules():
    t = T.DomainType(4)
    assert accepted(ops.domain, [lit(1), lit(9), lit(2)], {"type": t}) == t
    refused(ops.domain, [lit(1), lit(9), lit(2)], {}, T.DomainType(8))
    end = var(idx, extent=N)
    assert accepted(ops.domain, [lit(0), end, lit(1)], {"type": T.DomainType(N)}) == T.DomainType(N)
    refused(ops.domain, [lit(0), end, lit(1)], {}, T.DomainType(M))
    parent = var(T.DomainType(N))
    assert accepted(ops.subregion, [parent, lit(2), lit(5)], {"type": T.DomainType(3)}) == T.DomainType(3)
    refused(ops.subregion, [parent, lit(2), lit(5)], {}, T.DomainType(N))


def test_indices_and_dim_rules():
    d = var(T.DomainType(M))
    assert accepted(ops.indices, [d], {}) == T.TensorType(T.index, (M,))
    refused(ops.indices, [d], {}, T.TensorType(T.index, (N,)))
    x = var(T.TensorType(T.f32, (M, N)))
    assert accepted(ops.dim, [x], {"axis": 1}) == idx
    refused(ops.dim, [x], {"axis": 1}, i32)
    refused(ops.dim, [x], {"axis": 2}, idx)


# --- memory --------------------------------------------------------------------------------------------

def test_read_rule_one_axis_per_domain_whole_axis_and_tensor_entry():
    view = var(T.ViewType("In", T.f32, (M, N, 7, 5)))
    rows, where = var(T.DomainType(3)), var(T.TensorType(T.i64, (2, 4)))
    inputs = [view, rows, where, lit(1)]
    attrs = {"index": ("domain", "all", "tensor", "point")}
    assert accepted(ops.read, inputs, attrs, views=(view,)) == T.TensorType(T.f32, (3, N, 2, 4))
    refused(ops.read, inputs, attrs, T.TensorType(T.f32, (3, N, 2)), views=(view,))
    assert accepted(ops.read, [view, lit(0), lit(0), lit(0), lit(0)], {"index": ("point",) * 4},
                    views=(view,)) == f32


def test_load_rule_needs_a_buffer():
    buf = var(T.BufferType(T.i32, (M,)))
    assert accepted(ops.load, [buf, lit(0)], {"index": ("point",)}) == i32
    refused(ops.load, [buf, lit(0)], {"index": ("point",)}, f32)
    view = var(T.ViewType("In", T.i32, (M,)))
    with pytest.raises(TraceError, match="must be a logical buffer"):
        infer(ops.load, [view, lit(0)], index=("point",))


def test_gather_rule_result_has_the_index_shape():
    src = var(T.TensorType(T.f32, (M, N)))
    i, j = var(T.TensorType(T.i64, (3, 2))), var(T.TensorType(T.i64, (3, 2)))
    assert accepted(ops.gather, [src, i, j, lit(0.0, f32)], {"has_valid": False}) == T.TensorType(T.f32, (3, 2))
    refused(ops.gather, [src, i, j, lit(0.0, f32)], {"has_valid": False}, T.TensorType(T.f32, (M, N)))
    mask = var(T.TensorType(T.bool_, (3, 2)))
    assert accepted(ops.gather, [src, i, j, mask, lit(0.0, f32)], {"has_valid": True}) == T.TensorType(T.f32, (3, 2))
    with pytest.raises(TraceError, match="fill has dtype i32 but the source is f32"):
        infer(ops.gather, [src, i, j, lit(0, i32)], has_valid=False)


def test_histogram_and_buffer_rules():
    v = var(T.TensorType(T.i32, (M,)))
    t = T.TensorType(T.i64, (5,))
    assert accepted(ops.histogram, [v], {"bins": 5, "has_valid": False, "type": t}) == t
    refused(ops.histogram, [v], {"bins": 5, "has_valid": False}, T.TensorType(T.i64, (4,)))
    refused(ops.histogram, [v], {"bins": 5, "has_valid": False}, T.TensorType(T.f32, (5,)))
    b = T.BufferType(T.f32, (M, 2))
    assert accepted(ops.buffer, [lit(0.0, f32)], {"type": b}) == b
    refused(ops.buffer, [lit(0, i32)], {}, b)


def test_atomic_rules():
    view = var(T.ViewType("InOut", T.i32, (M,)))
    assert accepted(ops.atomic_load, [view, lit(3)], {"index": ("point",), "order": "relaxed"},
                    views=(view,)) == i32
    refused(ops.atomic_rmw, [view, lit(1, i32), lit(3)], {"index": ("point",), "kind": "add", "order": "relaxed"},
            f32, views=(view,))
    cas = T.RecordType((("old_value", i32), ("success", T.ScalarType(T.bool_))))
    attrs = {"index": ("point",), "order": "relaxed", "failure_order": "relaxed"}
    assert accepted(ops.atomic_compare_exchange, [view, lit(1, i32), lit(2, i32), lit(3)], attrs, views=(view,)) == cas
    refused(ops.atomic_compare_exchange, [view, lit(1, i32), lit(2, i32), lit(3)], attrs, i32, views=(view,))


# --- values and contraction ----------------------------------------------------------------------------

def test_random_bits_rule_has_the_counter_shape():
    seed, counter = var(T.ScalarType(T.u64)), var(T.TensorType(T.index, (M,)))
    assert accepted(ops.random_bits, [seed, counter], {}) == T.TensorType(T.u32, (M,))
    refused(ops.random_bits, [seed, counter], {}, T.TensorType(T.u64, (M,)))


def test_constant_rule_checks_the_value_against_its_dtype():
    assert accepted(ops.constant, [], {"value": 3, "type": i32}) == i32
    refused(ops.constant, [], {"value": 1.5}, i32)
    refused(ops.constant, [], {"value": 300}, T.ScalarType(T.i8))


def test_contract_rule_result_axes_and_accumulator():
    a, b = var(T.TensorType(T.f16, (2, M, 4))), var(T.TensorType(T.f16, (2, 4, N)))
    attrs = {"reduce": ((2, 1),), "batch": ((0, 0),), "acc_dtype": T.f32}
    assert accepted(ops.contract, [a, b], attrs) == T.TensorType(T.f32, (2, M, N))
    refused(ops.contract, [a, b], attrs, T.TensorType(T.f16, (2, M, N)))
    refused(ops.contract, [a, b], attrs, T.TensorType(T.f32, (M, N)))
    with pytest.raises(TraceError, match="pairs lhs axis 1 of extent M with rhs axis 2 of extent N"):
        infer(ops.contract, [a, b], reduce=((1, 2),), batch=(), acc_dtype=T.f32)


def test_loop_and_while_carry_the_init_type():
    d, init = var(T.DomainType(M)), var(f32)
    assert infer(ops.loop, [d, init], types=(f32,)) == (f32,)
    with pytest.raises(TraceError, match="carry types"):
        infer(ops.loop, [d, init], types=(i32,))
    assert infer(ops.while_, [init], types=(f32,)) == (f32,)


# --- structured, quantized, scaled and sparse ----------------------------------------------------------

def test_reduce_and_scan_rules_use_the_accumulator_schema():
    x = var(T.TensorType(T.f32, (M, N)))
    acc = T.TensorType(T.f32, (M,))
    assert infer(ops.reduce, [x, var(acc)], axes=(1,), helper="add", types=(acc,)) == (acc,)
    with pytest.raises(TraceError, match="identity must have the accumulator schema f32\\[M\\]"):
        infer(ops.reduce, [x, var(T.TensorType(T.f32, (N,)))], axes=(1,), helper="add", types=(acc,))
    with pytest.raises(TraceError, match="recorded result types"):
        infer(ops.reduce, [x, var(acc)], axes=(1,), helper="add", types=(x.type,))
    assert infer(ops.scan, [x, var(T.TensorType(T.f32, (N,)))], axis=0, inclusive=True, reverse=False,
                 helper="add", types=(x.type,)) == (x.type,)
    with pytest.raises(TraceError, match="recorded result types"):
        infer(ops.scan, [x, var(T.TensorType(T.f32, (N,)))], axis=0, inclusive=True, reverse=False,
              helper="add", types=(acc,))


def test_region_fold_and_scan_rules():
    x, s = var(T.TensorType(T.f32, (N,))), var(f32)
    assert infer(ops.region_fold, [x, s], axis=0, helpers=("f", "g"), types=(f32,)) == (f32,)
    with pytest.raises(TraceError, match="recorded result types"):
        infer(ops.region_fold, [x, s], axis=0, helpers=("f", "g"), types=(i32,))
    state = var(i32)
    out = T.TensorType(T.f32, (N,))
    assert infer(ops.region_scan, [x, s, state], axis=0, helpers=("a", "b", "c", "d"), types=(out, i32)) == (out, i32)
    with pytest.raises(TraceError, match="final state"):
        infer(ops.region_scan, [x, s, state], axis=0, helpers=("a", "b", "c", "d"), types=(out, f32))
    with pytest.raises(TraceError, match="does not keep the source extent"):
        infer(ops.region_scan, [x, s, state], axis=0, helpers=("a", "b", "c", "d"),
              types=(T.TensorType(T.f32, (M,)), i32))


def test_quantize_and_quantized_dot_rules():
    from intent_trace.proxies.quant_formats import q4_k, q8_k

    x = var(T.TensorType(T.f32, (M, 512)))
    rec = T.RecordType((("d", T.TensorType(T.f32, (M, 2))), ("qs", T.TensorType(T.i8, (M, 2, 256))),
                        ("bsums", T.TensorType(T.i16, (M, 2, 16)))))
    assert accepted(ops.quantize, [x], {"format": q8_k}) == rec
    refused(ops.quantize, [x], {"format": q4_k}, rec)
    a, b = var(q4_k.record_type((M,), 2)), var(rec)
    attrs = {"lhs_format": q4_k, "rhs_format": q8_k, "acc_dtype": T.f32}
    assert accepted(ops.quantized_dot, [a, b], attrs) == T.TensorType(T.f32, (M,))
    refused(ops.quantized_dot, [a, b], attrs, f32)


def test_scaled_and_sparse_contract_rules():
    u8 = T.u8
    a, sa = var(T.TensorType(u8, (M, 2, 16))), var(T.TensorType(u8, (M, 2)))
    b, sb = var(T.TensorType(u8, (2, 16, N))), var(T.TensorType(u8, (N, 2)))
    attrs = {"lhs_format": T.e2m1, "rhs_format": T.e2m1, "group_size": 32, "acc_dtype": T.f32}
    assert accepted(ops.scaled_contract, [a, sa, b, sb], attrs) == T.TensorType(T.f32, (M, N))
    refused(ops.scaled_contract, [a, sa, b, sb], attrs, T.TensorType(T.f32, (N, M)))
    c, meta, r = var(T.TensorType(T.f16, (M, 4))), var(T.TensorType(T.u8, (M, 4))), var(T.TensorType(T.f16, (8, N)))
    attrs = {"format": "2:4", "reduce": ((1, 0),), "batch": (), "acc_dtype": T.f32}
    assert accepted(ops.sparse_contract, [c, meta, r], attrs) == T.TensorType(T.f32, (M, N))
    refused(ops.sparse_contract, [c, meta, r], attrs, T.TensorType(T.f16, (M, N)))


def test_if_rule_needs_a_bool_predicate_and_value_results():
    p = var(T.ScalarType(T.bool_))
    assert infer(ops.if_, [p], types=(f32, i32)) == (f32, i32)
    with pytest.raises(TraceError, match="bool scalar predicate"):
        infer(ops.if_, [var(i32)], types=(f32,))
    with pytest.raises(TraceError, match="yield values"):
        infer(ops.if_, [p], types=(T.DomainType(M),))
