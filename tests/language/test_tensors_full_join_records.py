"""Language §4: building tensor and composite values — full/zeros, join, tuples, records."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I
from intent_trace import types as T


# --- full / zeros ---------------------------------------------------------------------------------------------------

def test_full_from_shape_values(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], m: I.Out[I.bool, ("M", "N")]):
        v = x[:, :]
        y[:, :] = v + I.full(v.shape, fill=1.5, dtype=I.f32)
        m[:, :] = I.full(x.shape, fill=True, dtype=I.bool)

    g = k.trace()
    full = _nodes(g, "full")
    assert [repr(n.outputs[0].type) for n in full] == ["f32[M, N]", "bool[M, N]"]
    assert not _nodes(g, "broadcast")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, mask = np.zeros_like(x), np.zeros((2, 3), bool)
    run(k, x, y, mask)
    np.testing.assert_array_equal(y, x + 1.5)
    assert mask.all()


def test_full_rank0_and_zeros(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.i32, ("N", 2)], s: I.f32):
        r0 = I.full((), s, I.f32)
        assert isinstance(r0.type, T.TensorType) and r0.type.rank == 0
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * r0
        z[:, :] = I.zeros((x.shape[0], 2), I.i32)

    x = np.array([1.0, 2.0, -1.0], np.float32)
    y, z = np.zeros(3, np.float32), np.ones((3, 2), np.int32)
    run(k, x, y, z, 4.0)
    np.testing.assert_array_equal(y, x * 4)
    np.testing.assert_array_equal(z, 0)


def test_full_with_runtime_extent(run):
    @intent.kernel
    def k(y: I.Out[I.i32, (8,)], n: I.index):
        y[:] = I.zeros((8,), I.i32)
        d = I.domain(0, n)
        y[d] = I.full((n,), 7, I.i32)

    y = np.full(8, -1, np.int32)
    run(k, y, 3)
    np.testing.assert_array_equal(y, [7, 7, 7, 0, 0, 0, 0, 0])


def test_full_extents_from_one_traced_value_are_the_same_extent(run):
    # §4: dynamic extents keep their identity; two shapes built from the same SSA value agree.
    @intent.kernel
    def k(y: I.Out[I.i32, ("N",)]):
        m = y.shape[0] - 1
        a = I.full((m,), 1, I.i32)
        b = I.full((m,), 2, I.i32)
        y[:] = I.zeros((y.shape[0],), I.i32)
        y[I.domain(0, m)] = a + b

    y = np.full(4, -1, np.int32)
    run(k, y)
    np.testing.assert_array_equal(y, [3, 3, 3, 0])


def test_broadcast_error_names_derived_extents_readably():
    @intent.kernel
    def k(y: I.Out[I.i32, (8,)], n: I.index, m: I.index):
        y[:] = I.zeros((8,), I.i32)
        bad = I.full((n,), 1, I.i32) + I.full((m,), 2, I.i32)
        y[I.domain(0, n)] = bad

    with pytest.raises(intent.TraceError, match="provably equal") as e:
        k.trace()
    assert "Dim@" not in str(e.value)  # a memory address names nothing the user wrote


def test_full_fill_of_wrong_dtype_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.i32, (4,)], s: I.f32):
        y[:] = I.full((4,), s, I.i32)

    with pytest.raises(intent.TraceError, match="i32"):
        k.trace()


def test_full_negative_extent_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.i32, (4,)]):
        y[:] = I.full((-4,), 0, I.i32)

    with pytest.raises(intent.TraceError, match="negative"):
        k.trace()


# --- join ---------------------------------------------------------------------------------------------------------

def test_join_adds_trailing_axis_of_two(run):
    @intent.kernel
    def k(a: I.In[I.f32, ("M", "N")], b: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N", 2)]):
        pair = I.join(a[:, :], b[:, :])
        assert pair.shape[2] == 2
        y[:, :, :] = pair

    g = k.trace()
    (j,) = _nodes(g, "join")
    assert repr(j.outputs[0].type) == "f32[M, N, 2]"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = -a - 1
    y = np.zeros((2, 3, 2), np.float32)
    run(k, a, b, y)
    np.testing.assert_array_equal(y[..., 0], a)
    np.testing.assert_array_equal(y[..., 1], b)


def test_join_of_scalars_is_a_rank1_pair(run):
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N", 2)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            y[i, :] = I.join(x[i], x[i] * 2)

    x = np.array([3, -1], np.int32)
    y = np.zeros((2, 2), np.int32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.stack([x, 2 * x], axis=-1))


@pytest.mark.parametrize("other", ["dtype", "shape"])
def test_join_mismatch_is_a_trace_error(other):
    @intent.kernel
    def k(a: I.In[I.f32, (2, 3)], b: I.In[I.f16, (2, 3)], c: I.In[I.f32, (3, 2)], y: I.Out[I.f32, (2, 3, 2)]):
        rhs = I.cast(b[:, :], I.f16) if other == "dtype" else c[:, :]
        y[:, :, :] = I.join(a[:, :], rhs)

    with pytest.raises(intent.TraceError, match="I.join") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


# --- tuples and records ------------------------------------------------------------------------------------------

def test_tuple_values_are_positional_and_typed(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        pair = I.if_(x[0] > 0.0, lambda: (x[d], I.cast(1, I.i32)), lambda: (-x[d], I.cast(2, I.i32)))
        values, tag = pair
        y[d] = values
        z[d] = I.full((x.shape[0],), tag, I.i32)

    g = k.trace()
    (node,) = _nodes(g, "if")
    assert repr(node.outputs[0].type) == "(f32[N], i32)"
    assert [n.attr("index") for n in _nodes(g, "get")] == [0, 1]
    x = np.array([2.0, -3.0], np.float32)
    y, z = np.zeros(2, np.float32), np.zeros(2, np.int32)
    run(k, x, y, z)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, [1, 1])
    run(k, -x, y, z)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, [2, 2])


def test_tuple_component_order_is_part_of_the_type():
    assert T.TupleType((T.ScalarType(T.f32), T.ScalarType(T.i32))) != T.TupleType((T.ScalarType(T.i32),
                                                                                      T.ScalarType(T.f32)))


def test_tuple_of_python_number_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        t = I.loop(d, (x[0], 0.0), lambda i, c: c)
        y[d] = x[d] + t[0]

    with pytest.raises(intent.TraceError, match="I.cast"):
        k.trace()


def test_record_static_field_selection(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(values=x[d], count=I.cast(7, I.i32), nested=I.record(scale=I.cast(2.0, I.f32)))
        y[d] = r.values * r.nested.scale
        z[d] = I.full((x.shape[0],), r.count, I.i32)

    g = k.trace()
    rec = _nodes(g, "record")
    assert repr(rec[-1].outputs[0].type) == "{values: f32[N], count: i32, nested: {scale: f32}}"
    x = np.array([1.0, -2.0], np.float32)
    y, z = np.zeros(2, np.float32), np.zeros(2, np.int32)
    run(k, x, y, z)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, 7)


def test_record_field_order_and_names_are_part_of_the_type():
    f, i = T.ScalarType(T.f32), T.ScalarType(T.i32)
    assert T.RecordType((("a", f), ("b", i))) != T.RecordType((("b", i), ("a", f)))
    assert T.RecordType((("a", f),)) != T.RecordType((("b", f),))
    assert T.RecordType((("a", f),)) == T.RecordType((("a", f),))


def test_record_unknown_field_is_a_trace_error_listing_fields():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(lo=x[d], hi=x[d] + 1.0)
        y[d] = r.mid

    with pytest.raises(intent.TraceError, match="'mid'") as e:
        k.trace()
    assert "lo" in str(e.value) and "hi" in str(e.value)


def test_record_is_immutable():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(lo=x[d])
        r.lo = x[d] + 1.0
        y[d] = r.lo

    with pytest.raises(intent.TraceError, match="immutable"):
        k.trace()


def test_record_needs_a_field():
    @intent.kernel
    def k(y: I.Out[I.f32, (2,)]):
        I.record()
        y[:] = I.zeros((2,), I.f32)

    with pytest.raises(intent.TraceError, match="at least one field"):
        k.trace()


@pytest.mark.parametrize("name", ["not valid", "class", "_hidden", "1st"])
def test_record_invalid_field_name_is_a_trace_error(name):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        I.record(**{name: x[d]})
        y[d] = x[d]

    with pytest.raises(intent.TraceError, match=repr(name)):
        k.trace()


def test_record_python_number_field_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(v=x[d], w=1.0)
        y[d] = r.v

    with pytest.raises(intent.TraceError, match="'w'"):
        k.trace()


def test_record_has_no_comparison_or_truth():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(v=x[d])
        if r == r:
            y[d] = r.v

    with pytest.raises(intent.TraceError, match="record"):
        k.trace()


def test_record_scalar_and_domain_have_no_shape():
    seen = {}

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        r = I.record(v=x[d])
        for attr, value in (("record.shape", lambda: r.shape), ("record.dtype", lambda: r.dtype),
                            ("scalar.shape", lambda: x[0].shape), ("domain.shape", lambda: d.shape)):
            try:
                value()
            except (AttributeError, intent.TraceError) as e:
                seen[attr] = e
        y[d] = r.v

    k.trace()
    assert sorted(seen) == ["domain.shape", "record.dtype", "record.shape", "scalar.shape"]
    assert "'shape'" in str(seen["record.shape"]) and "v" in str(seen["record.shape"])
