"""Language §4: tensor values — broadcasting, dtype rules for operands and literals, reshape/transpose,
.shape."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I
from intent_trace import types as T
from intent_trace.graph.values import Literal
from intent_trace.proxies.values import ScalarProxy


# --- broadcasting ----------------------------------------------------------------------------------------

@intent.kernel
def _bcast(x: I.In[I.f32, ("M", "N")], c: I.In[I.f32, ("M", 1)], r: I.In[I.f32, ("N",)],
           y: I.Out[I.f32, ("M", "N")], s: I.f32):
    rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    one = I.domain(0, 1)
    y[rows, cols] = x[rows, cols] + c[rows, one] + r[cols] * s + 1.0


def test_broadcast_scalar_size_one_and_rank(run):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    c = rng.standard_normal((3, 1)).astype(np.float32)
    r = rng.standard_normal(4).astype(np.float32)
    y = np.zeros_like(x)
    run(_bcast, x, c, r, y, 0.5)
    want = ((x + c) + (r * np.float32(0.5))) + np.float32(1.0)
    np.testing.assert_array_equal(y, want)


def test_broadcast_nodes_are_explicit_in_the_graph():
    g = _bcast.trace()
    bcasts = _nodes(g, "broadcast")
    got = sorted((repr(n.inputs[0].type), repr(n.outputs[0].type)) for n in bcasts)
    assert got == sorted([("f32[M, 1]", "f32[M, N]"), ("f32", "f32[N]"), ("f32[N]", "f32[M, N]")])
    # Every elementwise op sees operands of one type (or splat literals).
    for n in g.walk():
        if n.op.family == "binary":
            types = {x.type for x in n.inputs if x.__class__.__name__ == "Var"}
            assert len(types) == 1, n


def test_broadcast_literal_is_a_splat_constant_not_a_node():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = 2.0 * x[d] + 1.0

    g = k.trace()
    assert not _nodes(g, "broadcast")
    literals = [a for n in g.walk() if n.op.name in ("mul", "add") for a in n.inputs if isinstance(a, Literal)]
    assert [(float(a.value), a.type) for a in literals] == [(2.0, T.ScalarType(T.f32)), (1.0, T.ScalarType(T.f32))]


def test_broadcast_dynamic_extents_with_different_names_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("M",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
        dm, dn = I.domain(0, x.shape[0]), I.domain(0, z.shape[0])
        y[dm] = x[dm] + z[dn]

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    msg = str(e.value)
    assert isinstance(e.value, ValueError)
    assert "M" in msg and "N" in msg and "provably equal" in msg


def test_broadcast_dynamic_extents_with_same_name_works(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        dx, dz = I.domain(0, x.shape[0]), I.domain(0, z.shape[0])
        y[dx] = x[dx] + z[dz]

    x = np.array([1.0, 2.0, 3.0], np.float32)
    z = np.array([10.0, 20.0, 30.0], np.float32)
    y = np.zeros(3, np.float32)
    run(k, x, z, y)
    np.testing.assert_array_equal(y, x + z)


def test_broadcast_static_mismatch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, (3,)], z: I.In[I.f32, (4,)], y: I.Out[I.f32, (3,)]):
        y[:] = x[:] + z[:]

    with pytest.raises(intent.TraceError, match="3 and 4"):
        k.trace()


def test_broadcast_write_cannot_widen_past_region():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
        rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[cols] = x[rows, cols]

    with pytest.raises(intent.TraceError, match=r"\by\b"):
        k.trace()


# --- dtype rules for operands and literals -------------------------------------------------------------------

def test_mixing_dtypes_is_a_trace_error_naming_the_cast():
    @intent.kernel
    def k(a: I.In[I.f32, ("N",)], b: I.In[I.f16, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, a.shape[0])
        y[d] = a[d] + b[d]

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    assert isinstance(e.value, TypeError)
    assert "I.cast(value, I.f16)" in str(e.value) or "I.cast(value, I.f32)" in str(e.value)


def test_mixing_int_dtypes_is_a_trace_error():
    @intent.kernel
    def k(a: I.In[I.i32, ("N",)], b: I.In[I.i64, ("N",)], y: I.Out[I.i64, ("N",)]):
        d = I.domain(0, a.shape[0])
        y[d] = a[d] * b[d]

    with pytest.raises(intent.TraceError, match=r"I\.cast\(value, I\.i(32|64)\)"):
        k.trace()


def test_mixing_dtypes_then_cast_works(run):
    @intent.kernel
    def k(a: I.In[I.f32, ("N",)], b: I.In[I.f16, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, a.shape[0])
        y[d] = a[d] + I.cast(b[d], I.f32)

    a = np.array([1.5, 2.0], np.float32)
    b = np.array([0.25, -4.0], np.float16)
    y = np.zeros(2, np.float32)
    run(k, a, b, y)
    np.testing.assert_array_equal(y, a + b.astype(np.float32))


@pytest.mark.parametrize("literal", [300, -129])
def test_literal_that_does_not_fit_is_a_trace_error(literal):
    @intent.kernel
    def k(x: I.In[I.i8, ("N",)], y: I.Out[I.i8, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + literal

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    assert str(literal) in str(e.value) and "i8" in str(e.value)


def test_literal_that_fits_takes_the_operand_dtype(run):
    @intent.kernel
    def k(x: I.In[I.i8, ("N",)], y: I.Out[I.i8, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + 127

    g = k.trace()
    assert repr(_nodes(g, "add")[0].inputs[1]) == "127:i8"
    x = np.array([0, -100], np.int8)
    y = np.zeros(2, np.int8)
    run(k, x, y)
    np.testing.assert_array_equal(y, [127, 27])


def test_float_literal_into_int_operand_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 1.5

    with pytest.raises(intent.TraceError, match="1.5") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


def test_float_literal_overflow_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f16, ("N",)], y: I.Out[I.f16, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + 1e6

    with pytest.raises(intent.TraceError, match="overflows f16"):
        k.trace()


def test_float_literal_rounds_to_nearest_even(run):
    @intent.kernel
    def k(x: I.In[I.f16, ("N",)], y: I.Out[I.f16, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 0.0 + 2049.0  # halfway between f16 2048 and 2050: ties to even -> 2048

    x = np.zeros(2, np.float16)
    y = np.ones(2, np.float16)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.float16(2048.0))


def test_writing_other_dtype_into_view_is_a_trace_error_naming_the_cast():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f16, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    with pytest.raises(intent.TraceError, match=r"I\.cast\(value, I\.f16\)"):
        k.trace()


def test_unary_on_scalar_keeps_a_scalar(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N", 3)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            v = x[i]
            y[i, 0] = -v
            y[i, 1] = abs(v)
            y[i, 2] = I.exp(v)

    x = np.array([1.0, -0.5, 0.0], np.float32)
    y = np.zeros((3, 3), np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y[:, 0], -x)
    np.testing.assert_array_equal(y[:, 1], np.abs(x))
    np.testing.assert_allclose(y[:, 2], np.exp(x), rtol=1e-6)


# --- reshape and transpose -------------------------------------------------------------------------------------

def test_reshape_keeps_row_major_order(run):
    @intent.kernel
    def k(x: I.In[I.f32, (2, 6)], y: I.Out[I.f32, (3, 4)], z: I.Out[I.f32, (12,)]):
        v = x[:, :]
        y[:, :] = I.reshape(v, (3, 4))
        z[:] = I.reshape(v, 12)

    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    y, z = np.zeros((3, 4), np.float32), np.zeros(12, np.float32)
    run(k, x, y, z)
    np.testing.assert_array_equal(y, x.reshape(3, 4))
    np.testing.assert_array_equal(z, x.reshape(12))


def test_reshape_static_element_count_mismatch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, (2, 6)], y: I.Out[I.f32, (5, 2)]):
        y[:, :] = I.reshape(x[:, :], (5, 2))

    with pytest.raises(intent.TraceError, match="12") as e:
        k.trace()
    assert isinstance(e.value, ValueError)


def test_reshape_dynamic_element_count_is_checked_at_run_time(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("K",)]):
        d = I.domain(0, y.shape[0])
        y[d] = I.reshape(x[:, :], (y.shape[0],))

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.zeros(6, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x.reshape(6))
    y = np.zeros(5, np.float32)
    with pytest.raises(ValueError, match="6"):
        run(k, x, y)
    np.testing.assert_array_equal(y, 0)


def test_reshape_scalar_to_rank0_and_rank1(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            r0 = I.reshape(x[i], ())
            assert isinstance(r0.type, T.TensorType) and r0.type.shape == ()
            y[i] = I.reshape(r0, (1,))[0] + 1.0

    x = np.array([1.0, 2.0], np.float32)
    y = np.zeros(2, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_transpose_default_reverses_axes(run):
    @intent.kernel
    def k(x: I.In[I.f32, (2, 3, 4)], y: I.Out[I.f32, (4, 3, 2)], z: I.Out[I.f32, (3, 4, 2)]):
        v = x[:, :, :]
        y[:, :, :] = I.transpose(v)
        z[:, :, :] = I.transpose(v, (1, 2, 0))

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y, z = np.zeros((4, 3, 2), np.float32), np.zeros((3, 4, 2), np.float32)
    run(k, x, y, z)
    np.testing.assert_array_equal(y, x.transpose())
    np.testing.assert_array_equal(z, x.transpose(1, 2, 0))


def test_transpose_keeps_dynamic_extents():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N", "M")]):
        y[:, :] = x[:, :].T

    g = k.trace()
    (t,) = _nodes(g, "transpose")
    assert repr(t.outputs[0].type) == "f32[N, M]"
    assert t.attr("perm") == (1, 0)


@pytest.mark.parametrize("perm", [(0, 1), (0, 0, 1), (0, 1, 3), (2, 1, 1)], ids=["short", "dup", "range", "dup2"])
def test_transpose_bad_permutation_is_a_trace_error(perm):
    @intent.kernel
    def k(x: I.In[I.f32, (2, 3, 4)], y: I.Out[I.f32, (4, 3, 2)]):
        y[:, :, :] = I.transpose(x[:, :, :], perm)

    with pytest.raises(intent.TraceError, match="permutation") as e:
        k.trace()
    assert isinstance(e.value, ValueError)
    assert str(perm) in str(e.value)


def test_transpose_of_scalar_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            y[i] = I.transpose(x[i])

    with pytest.raises(intent.TraceError, match="I.transpose"):
        k.trace()


# --- .shape ---------------------------------------------------------------------------------------------------

def test_shape_static_ints_and_traced_dynamic_extents():
    seen = {}

    @intent.kernel
    def k(x: I.In[I.f32, ("M", 3)], y: I.Out[I.f32, ("M", 3)]):
        v = x[:, :]
        seen["view"] = x.shape
        seen["tensor"] = v.shape
        seen["reshaped"] = I.reshape(v, (3, x.shape[0])).shape
        y[:, :] = v

    g = k.trace()
    m = g.param("x").type.shape[0]
    for key in ("view", "tensor"):
        dyn, static = seen[key]
        assert static == 3 and isinstance(static, int)
        assert isinstance(dyn, ScalarProxy) and dyn.dtype is I.index
        assert dyn._var.extent is m  # the value keeps the extent's identity
    static, dyn = seen["reshaped"]
    assert static == 3 and dyn._var.extent is m


def test_shape_values_usable_in_arithmetic_and_domains(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        n = x.shape[0]
        half = n // 2
        first = I.domain(0, half)
        rest = I.domain(half, n)
        y[first] = x[first] * 2.0
        y[rest] = x[rest] * 3.0

    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.concatenate([x[:2] * 2, x[2:] * 3]))
