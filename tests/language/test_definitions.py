"""Language §1: @intent.kernel / @intent.fn definitions, helper binding, captures and provenance."""
from __future__ import annotations

import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph.provenance import IndexRelation


def _nodes(graph, name):
    return [n for n in graph.walk() if n.op.name == name]


def _without_locations(text: str) -> str:
    """Printed KIR without the ``# file:line`` comments (they differ between inline and helper code)."""
    return "\n".join(re.sub(r"\s+#.*$", "", line) for line in text.splitlines())


# --- definitions ------------------------------------------------------------------------------------

def test_kernel_decorator_gives_a_kernel_with_its_name():
    @intent.kernel
    def my_kernel(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    assert isinstance(my_kernel, intent.Kernel)
    assert my_kernel.name == "my_kernel"
    assert my_kernel.trace().name == "my_kernel"
    assert [p.name for p in my_kernel.trace().params] == ["x", "y"]


def test_fn_decorator_gives_a_helper_and_is_idempotent():
    def plain(v):
        return v + 1.0

    h = intent.fn(plain)
    assert isinstance(h, intent.Helper)
    assert h.name == "plain"
    assert intent.fn(h) is h


def test_helper_call_outside_tracing_is_a_trace_error():
    @intent.fn
    def lonely(v):
        return v

    with pytest.raises(intent.TraceError, match="lonely"):
        lonely(1.0)


def test_kernel_returning_a_value_is_a_trace_error():
    @intent.kernel
    def returns(x: I.In[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        return x[d]

    with pytest.raises(intent.TraceError, match="returns") as e:
        returns.trace()
    assert "Out" in str(e.value)


def test_kernel_helper_runs_like_inline_code(run):
    @intent.fn
    def softplus(v):
        return I.log1p(I.exp(v))

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = softplus(x[d]) * 2.0

    x = np.array([-2.0, 0.0, 0.5, 3.0], np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    want = (np.log1p(np.exp(x.astype(np.float64))) * 2.0).astype(np.float32)
    np.testing.assert_allclose(y, want, rtol=1e-6)


# --- binding by the Python signature -------------------------------------------------------------------

@intent.fn
def _affine(a, b, *, scale, shift=10.0):
    return a * scale + b + shift


def test_helper_binding_positional_keyword_keyword_only_and_defaults(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N", 4)]):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d):
            v = x[i]
            y[i, 0] = _affine(v, 1.0, scale=2.0)                  # positional + keyword-only, default shift
            y[i, 1] = _affine(b=v, a=3.0 * v, scale=1.0)          # keywords in another order
            y[i, 2] = _affine(v, v, shift=0.0, scale=-1.0)        # keyword-only given out of order
            y[i, 3] = _affine(*(v, 2.0), **{"scale": 0.5, "shift": 1.0})  # unpacked call

    x = np.array([0.0, 1.0, -2.0], np.float32)
    y = np.zeros((3, 4), np.float32)
    run(k, x, y)
    want = np.stack([x * 2 + 1 + 10, 3 * x + x + 10, -x + x + 0, x * 0.5 + 2 + 1], axis=1).astype(np.float32)
    np.testing.assert_array_equal(y, want)


def test_helper_missing_keyword_only_argument_is_a_trace_error_naming_the_helper():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _affine(x[d], x[d])

    with pytest.raises(intent.TraceError, match="_affine") as e:
        k.trace()
    assert isinstance(e.value, TypeError)
    assert "scale" in str(e.value)


def test_helper_keyword_only_passed_positionally_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _affine(x[d], x[d], 2.0)

    with pytest.raises(intent.TraceError, match="_affine") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


def test_helper_unknown_keyword_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _affine(x[d], x[d], scale=1.0, offset=2.0)

    with pytest.raises(intent.TraceError, match="offset"):
        k.trace()


def test_helper_arguments_read_in_source_order_not_parameter_order():
    @intent.fn
    def pair(first, second):
        return second - first

    @intent.kernel
    def k(a: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, a.shape[0])
        # b is read first in the source although it binds the *second* parameter ...
        y[d] = pair(second=b[d], first=a[d])

    g = k.trace()
    reads = [n.inputs[0] for n in _nodes(g, "read")]
    assert reads == [g.param("b").var, g.param("a").var]


def test_helper_arguments_effects_keep_source_order_through_keywords(run):
    @intent.fn
    def diff(lhs, rhs):
        return lhs - rhs

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], z: I.InOut[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = diff(rhs=z[d], lhs=x[d])

    g = k.trace()
    assert [n.inputs[0] for n in _nodes(g, "read")] == [g.param("z").var, g.param("x").var]
    x = np.array([5.0, 6.0], np.float32)
    z = np.array([1.0, 4.0], np.float32)
    y = np.zeros(2, np.float32)
    run(k, x, z, y)
    np.testing.assert_array_equal(y, x - z)


def test_helper_argument_lowered_once_even_when_used_many_times(run):
    @intent.fn
    def cube(v):
        return v * v * v

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = cube(x[d] + 1.0)

    g = k.trace()
    assert len(_nodes(g, "read")) == 1
    assert len(_nodes(g, "add")) == 1
    x = np.array([0.0, 1.0, -3.0], np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, (x + 1) ** 3)


def test_helper_default_arguments_bind_as_splat_literals():
    @intent.fn
    def scaled(v, factor=2.0):
        return v * factor + factor

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = scaled(x[d])

    g = k.trace()
    assert [n.op.name for n in g.walk()] == ["domain", "read", "mul", "add", "write"]


def test_helper_may_contain_effects_allowed_at_the_call_site(run):
    @intent.fn
    def store_twice(out, d, v):
        out[d] = v + v

    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        store_twice(y, d, x[d])

    x = np.array([1, -2, 7], np.int32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_helper_returns_tuple_and_record(run):
    @intent.fn
    def stats(v):
        return v + 1.0, I.record(double=v * 2.0, neg=-v)

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N", 3)]):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d):
            inc, r = stats(x[i])
            y[i, 0] = inc
            y[i, 1] = r.double
            y[i, 2] = r.neg

    x = np.array([1.0, -0.5], np.float32)
    y = np.zeros((2, 3), np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.stack([x + 1, 2 * x, -x], axis=1))


# --- captures ---------------------------------------------------------------------------------------

def test_helper_closing_over_runtime_scalar_is_a_trace_error_naming_it():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], scale: I.f32):
        d = I.domain(0, x.shape[0])

        @intent.fn
        def scaled(v):
            return v * scale

        y[d] = scaled(x[d])

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    msg = str(e.value)
    assert "scaled" in msg and "`scale`" in msg and "parameter" in msg


def test_helper_closing_over_runtime_tensor_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        row = x[d]

        @intent.fn
        def add_row(v):
            return v + row

        y[d] = add_row(x[d])

    with pytest.raises(intent.TraceError, match="`row`"):
        k.trace()


def test_helper_closing_over_view_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])

        @intent.fn
        def load(dom):
            return x[dom]

        y[d] = load(d)

    with pytest.raises(intent.TraceError, match="`x`"):
        k.trace()


def test_helper_closing_over_runtime_value_inside_tuple_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], s: I.f32):
        d = I.domain(0, x.shape[0])
        pair = (2.0, s)

        @intent.fn
        def use(v):
            return v * pair[1]

        y[d] = use(x[d])

    with pytest.raises(intent.TraceError, match="`pair`"):
        k.trace()


class _Mode(I.Enum):
    FAST = 1
    SLOW = 2


def test_helper_immutable_constexpr_captures_are_allowed(run):
    factor = 3.0
    offsets = (1.0, 2.0)
    mode = _Mode.SLOW

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], NEG: I.Constexpr[bool] = True):
        d = I.domain(0, x.shape[0])

        @intent.fn
        def f(v):
            w = v * factor + offsets[1]
            if mode == _Mode.SLOW:
                w = w + 100.0
            return -w if NEG else w

        y[d] = f(x[d])

    x = np.array([0.0, 1.0, 2.0], np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, -(x * 3 + 2 + 100))
    run(k, x, y, NEG=False)
    np.testing.assert_array_equal(y, x * 3 + 2 + 100)


@pytest.mark.parametrize("captured", [[1.0, 2.0], {"a": 1.0}, {1.0}], ids=["list", "dict", "set"])
def test_helper_mutable_capture_is_a_trace_error(captured):
    table = captured

    @intent.fn
    def uses_table(v):
        return v + (1.0 if table else 0.0)

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = uses_table(x[d])

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    msg = str(e.value)
    assert "`table`" in msg and "mutable" in msg and "uses_table" in msg


_MUTABLE_GLOBAL_TABLE = [1.0, 2.0]


@intent.fn
def _reads_mutable_global(v):
    return v * _MUTABLE_GLOBAL_TABLE[0]


def test_helper_capture_of_mutable_module_global_is_a_trace_error():
    # §1: only immutable Constexpr values may be captured lexically; a module-level list is a lexical capture.
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _reads_mutable_global(x[d])

    with pytest.raises(intent.TraceError, match="_MUTABLE_GLOBAL_TABLE"):
        k.trace()


# --- recursion and kernel launches ------------------------------------------------------------------------

@intent.fn
def _countdown(v, n):
    return v if n == 0 else _countdown(v + 1.0, n - 1)


@intent.fn
def _ping(v, n):
    return v if n == 0 else _pong(v, n - 1)


@intent.fn
def _pong(v, n):
    return _ping(v * 2.0, n)


def test_helper_recursion_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _countdown(x[d], 3)

    with pytest.raises(intent.TraceError, match="recursi") as e:
        k.trace()
    assert "_countdown" in str(e.value)


def test_helper_mutual_recursion_is_a_trace_error_naming_the_chain():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = _ping(x[d], 4)

    with pytest.raises(intent.TraceError, match="recursi") as e:
        k.trace()
    assert "_ping" in str(e.value) and "_pong" in str(e.value)


def test_helper_called_twice_in_sequence_is_not_recursion(run):
    @intent.fn
    def inc(v):
        return v + 1.0

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = inc(inc(x[d]))

    x = np.array([1.0, 2.0], np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, x + 2)


@intent.kernel
def _inner_kernel(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d]


def test_kernel_called_inside_kernel_is_a_trace_error():
    @intent.kernel
    def outer(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        _inner_kernel(x, y)

    with pytest.raises(intent.TraceError, match="_inner_kernel") as e:
        outer.trace()
    assert "@intent.fn" in str(e.value)


def test_kernel_called_inside_helper_is_a_trace_error():
    @intent.fn
    def launcher(x, y):
        _inner_kernel(x, y)

    @intent.kernel
    def outer(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        launcher(x, y)

    with pytest.raises(intent.TraceError, match="_inner_kernel"):
        outer.trace()


# --- helper inlining keeps provenance -----------------------------------------------------------------

@intent.fn
def _window_coords(sub):
    t = I.indices(sub)
    return I.reshape(t, (2, 2)) * 2 + 1


@intent.fn
def _reverse(i, n):
    return n - 1 - i


@intent.kernel
def _coords_inline(x: I.In[I.f32, ("N",)], y: I.Out[I.i64, (2, 2)], z: I.Out[I.f32, ("N",)]):
    n = x.shape[0]
    d = I.domain(0, n)
    sub = d[1:5]
    t = I.indices(sub)
    y[:, :] = I.cast(I.reshape(t, (2, 2)) * 2 + 1, I.i64)
    for i in d:
        j = n - 1 - i
        z[j] = x[i]


@intent.kernel
def _coords_helper(x: I.In[I.f32, ("N",)], y: I.Out[I.i64, (2, 2)], z: I.Out[I.f32, ("N",)]):
    n = x.shape[0]
    d = I.domain(0, n)
    sub = d[1:5]
    y[:, :] = I.cast(_window_coords(sub), I.i64)
    for i in d:
        j = _reverse(i, n)
        z[j] = x[i]


def test_helper_inlining_prints_the_same_graph_as_inline_code():
    inline = _without_locations(str(_coords_inline.trace()))
    helper = _without_locations(str(_coords_helper.trace()))
    assert helper.replace("_coords_helper", "K") == inline.replace("_coords_inline", "K")
    assert "⟨indices of %0 axis 0" in helper and "value = (" in helper


def test_helper_inlining_keeps_index_relation_objects():
    def relations(graph):
        return [(n.op.name, v.provenance) for n in graph.walk() for v in n.outputs if v.provenance is not None]

    inline, helper = _coords_inline.trace(), _coords_helper.trace()
    ri, rh = relations(inline), relations(helper)
    assert [name for name, _ in ri] == [name for name, _ in rh]
    src_i = _nodes(inline, "domain")[0].outputs[0]
    src_h = _nodes(helper, "domain")[0].outputs[0]
    for (_, a), (_, b) in zip(ri, rh):
        assert isinstance(a, IndexRelation) and isinstance(b, IndexRelation)
        assert a.source is src_i and b.source is src_h
        assert (a.kind, a.source_axis, repr(a.member)) == (b.kind, b.source_axis, repr(b.member))
    # The reshape/arith chain only uses constants, so whole relations are equal up to the source Var.
    rel_i = _nodes(inline, "add")[0].outputs[0].provenance
    rel_h = _nodes(helper, "add")[0].outputs[0].provenance
    assert rel_i == IndexRelation(rel_i.kind, src_i, rel_i.source_axis, rel_i.member, rel_i.coord)
    assert rel_h.kind == rel_i.kind == "indices"
    assert rel_h.member == rel_i.member and rel_h.coord == rel_i.coord


def test_helper_call_in_same_trace_gives_equal_relation_to_inline_code():
    got = {}

    @intent.fn
    def shifted(i):
        return i * 2 + 1

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        sub = d[1:3]
        t = I.indices(sub)
        got["inline"] = (t * 2 + 1)._var.provenance
        got["helper"] = shifted(t)._var.provenance
        y[sub] = x[sub]

    k.trace()
    assert got["inline"] is not None
    assert got["helper"] == got["inline"]


def test_helper_returning_record_keeps_coordinate_provenance():
    # §1: tensor/tuple/record components derived from I.indices keep their source identity through helpers.
    got = {}

    @intent.fn
    def with_coords(sub):
        return I.record(coords=I.indices(sub), count=I.cast(2, I.i32))

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        sub = d[1:3]
        got["direct"] = I.indices(sub)._var.provenance
        got["via_record"] = with_coords(sub).coords._var.provenance
        y[sub] = x[sub]

    k.trace()
    assert got["direct"] is not None
    assert got["via_record"] == got["direct"]


def test_helper_values_run_the_same_as_inline(run):
    x = np.arange(6, dtype=np.float32)
    outs = []
    for kern in (_coords_inline, _coords_helper):
        y = np.zeros((2, 2), np.int64)
        z = np.zeros(6, np.float32)
        run(kern, x, y, z)
        outs.append((y, z))
    np.testing.assert_array_equal(outs[0][0], np.array([[3, 5], [7, 9]]))  # coords 1..4, times 2 plus 1
    np.testing.assert_array_equal(outs[0][1], x[::-1])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
