"""Language §2: In/Out/InOut views, runtime scalars, constexprs, I.Enum, shapes and call-time checks."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I


def _nodes(graph, name):
    return [n for n in graph.walk() if n.op.name == name]


# --- views ------------------------------------------------------------------------------------------

def test_view_in_out_inout_roundtrip(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], acc: I.InOut[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 2.0
        acc[d] = acc[d] + x[d]

    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.zeros(3, np.float32)
    acc = np.array([10.0, 20.0, 30.0], np.float32)
    run(k, x, y, acc)
    np.testing.assert_array_equal(y, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(acc, [11.0, 22.0, 33.0])
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])


def test_view_inout_keeps_elements_the_kernel_does_not_write(run):
    @intent.kernel
    def k(state: I.InOut[I.i32, ("N",)]):
        d = I.domain(0, state.shape[0])
        tail = d[2:]
        state[tail] = state[tail] * 10

    state = np.array([1, 2, 3, 4, 5], np.int32)
    run(k, state)
    np.testing.assert_array_equal(state, [1, 2, 30, 40, 50])


def test_view_types_in_graph_params():
    @intent.kernel
    def k(x: I.In[I.f16, ("M", "N")], y: I.Out[I.f16, ("M", "N")], s: I.InOut[I.f32, ("M",)], scale: I.f32):
        rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[rows, cols] = x[rows, cols]
        s[rows] = s[rows] * scale

    g = k.trace()
    assert [(p.name, p.kind) for p in g.params] == [("x", "view"), ("y", "view"), ("s", "view"), ("scale", "scalar")]
    assert [repr(p.type) for p in g.params] == ["In[f16, (M, N)]", "Out[f16, (M, N)]", "InOut[f32, (M,)]", "f32"]
    assert [e.hint for e in g.extents] == ["M", "N"]


def test_view_writing_in_view_is_a_trace_error_naming_it():
    @intent.kernel
    def k(src: I.In[I.f32, ("N",)]):
        d = I.domain(0, src.shape[0])
        src[d] = src[d] + 1.0

    with pytest.raises(intent.TraceError, match=r"\bsrc\b") as e:
        k.trace()
    assert "In" in str(e.value)


def test_view_reading_out_before_writing_is_a_trace_error_naming_it():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], dst: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        dst[d] = dst[d] + x[d]

    with pytest.raises(intent.TraceError, match=r"\bdst\b") as e:
        k.trace()
    assert "Out" in str(e.value) and "InOut" in str(e.value)


def test_view_reading_out_after_writing_it_is_allowed(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + 1.0
        y[d] = y[d] * 3.0

    x = np.array([0.0, 1.0], np.float32)
    y = np.full(2, np.nan, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, (x + 1) * 3)


def test_view_annotation_without_shape_is_a_type_error():
    with pytest.raises(TypeError, match="I.In"):
        I.In[I.f32]


def test_view_annotation_with_non_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="dtype"):
        I.Out[np.float32, ("N",)]


def test_view_annotation_negative_static_extent_is_a_value_error():
    with pytest.raises(ValueError, match="-3"):
        I.In[I.f32, (-3,)]


def test_view_annotation_bad_extent_name_is_a_value_error():
    with pytest.raises(ValueError, match="2N"):
        I.In[I.f32, ("2N",)]


def test_view_of_microscaling_format_is_a_type_error():
    with pytest.raises(TypeError, match="e2m1"):
        I.In[I.e2m1, ("N",)]


def test_kernel_parameter_without_annotation_is_a_type_error():
    with pytest.raises(TypeError, match="needs an annotation"):
        @intent.kernel
        def k(x: I.In[I.f32, ("N",)], y):
            pass


def test_kernel_runtime_parameter_with_default_is_a_type_error():
    with pytest.raises(TypeError, match="scale"):
        @intent.kernel
        def k(x: I.In[I.f32, ("N",)], scale: I.f32 = 1.0):
            pass


def test_kernel_extent_name_equal_to_parameter_name_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("n",)], n: I.i32):
        pass

    with pytest.raises(intent.TraceError, match=r"\bn\b"):
        k.trace()


# --- runtime scalars -----------------------------------------------------------------------------------

def test_scalar_runtime_parameters(run):
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], z: I.Out[I.f32, ("N",)], shift: I.i32,
          scale: I.f32, flip: I.bool):
        d = I.domain(0, x.shape[0])
        y[d] = I.select(flip, -x[d], x[d]) + shift
        z[d] = I.cast(x[d], I.f32) * scale

    x = np.array([1, -2, 3], np.int32)
    y, z = np.zeros(3, np.int32), np.zeros(3, np.float32)
    run(k, x, y, z, 5, 0.5, True)
    np.testing.assert_array_equal(y, -x + 5)
    np.testing.assert_array_equal(z, x.astype(np.float32) * 0.5)
    run(k, x, y, z, -1, 3, False)  # a Python int is accepted for an f32 scalar
    np.testing.assert_array_equal(y, x - 1)
    np.testing.assert_array_equal(z, x.astype(np.float32) * 3)


def test_scalar_runtime_parameter_is_not_a_python_value_while_tracing():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], flag: I.bool):
        d = I.domain(0, x.shape[0])
        if flag:
            y[d] = x[d]

    with pytest.raises(intent.TraceError, match="I.if_"):
        k.trace()


@pytest.mark.parametrize("bad", [1.5, True, "3"], ids=["float", "bool", "str"])
def test_scalar_wrong_python_type_is_a_type_error(run, bad):
    @intent.kernel
    def k(y: I.Out[I.i32, ("N",)], shift: I.i32):
        d = I.domain(0, y.shape[0])
        y[d] = I.full((y.shape[0],), shift, I.i32)

    y = np.zeros(2, np.int32)
    with pytest.raises(TypeError, match="shift"):
        run(k, y, bad)


def test_scalar_out_of_range_integer_is_a_value_error(run):
    @intent.kernel
    def k(y: I.Out[I.i8, ("N",)], v: I.i8):
        d = I.domain(0, y.shape[0])
        y[d] = I.full((y.shape[0],), v, I.i8)

    with pytest.raises(ValueError, match=r"\bv\b"):
        run(k, np.zeros(2, np.int8), 300)


# --- constexprs -------------------------------------------------------------------------------------------

@intent.kernel
def _masked(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], CAUSAL: I.Constexpr[bool] = False,
            REPEAT: I.Constexpr[int] = 1):
    d = I.domain(0, x.shape[0])
    v = x[d]
    for _ in range(REPEAT):
        v = v + 1.0
    if CAUSAL:
        v = v * -1.0
    y[d] = v


def test_constexpr_defaults_and_keywords_select_branches(run):
    x = np.array([1.0, 2.0], np.float32)
    y = np.zeros_like(x)
    run(_masked, x, y)
    np.testing.assert_array_equal(y, x + 1)
    run(_masked, x, y, CAUSAL=True)
    np.testing.assert_array_equal(y, -(x + 1))
    run(_masked, x, y, CAUSAL=True, REPEAT=3)
    np.testing.assert_array_equal(y, -(x + 3))


def test_constexpr_branches_are_resolved_while_tracing():
    plain, causal = _masked.trace(), _masked.trace(CAUSAL=True, REPEAT=2)
    assert [n.op.name for n in plain.walk()].count("mul") == 0
    assert [n.op.name for n in causal.walk()].count("mul") == 1
    assert [n.op.name for n in causal.walk()].count("add") == 2
    assert not any(n.op.name == "if" for n in causal.walk())
    assert dict(causal.constexprs) == {"CAUSAL": True, "REPEAT": 2}
    assert "constexprs CAUSAL=True, REPEAT=2" in str(causal)
    assert _masked.trace(CAUSAL=True, REPEAT=2) is causal  # traces are cached per constexpr values
    assert intent.trace(_masked, CAUSAL=True, REPEAT=2) is causal


def test_constexpr_are_not_runtime_parameters():
    g = _masked.trace(CAUSAL=True)
    assert [p.name for p in g.params] == ["x", "y"]
    assert _masked.constexpr_params == ["CAUSAL", "REPEAT"]


@pytest.mark.parametrize("kw", [{"CAUSAL": 1}, {"CAUSAL": "yes"}, {"REPEAT": True}, {"REPEAT": 2.0}],
                         ids=["bool<-int", "bool<-str", "int<-bool", "int<-float"])
def test_constexpr_wrong_type_is_a_type_error_naming_it(kw):
    (name,) = kw
    with pytest.raises(TypeError, match=name):
        _masked.trace(**kw)


def test_constexpr_wrong_type_at_compile_is_a_type_error():
    with pytest.raises(TypeError, match="CAUSAL"):
        intent.compile(_masked, target="generic", CAUSAL=0)


def test_constexpr_unknown_name_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="CASUAL") as e:
        _masked.trace(CASUAL=True)
    assert "CAUSAL" in str(e.value)  # the message lists the real constexprs


def test_constexpr_without_default_must_be_given():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], FLIP: I.Constexpr[bool]):
        d = I.domain(0, x.shape[0])
        y[d] = -x[d] if FLIP else x[d]

    with pytest.raises(TypeError, match="FLIP"):
        k.trace()
    assert "FLIP=True" in str(k.trace(FLIP=True))


def test_constexpr_of_unsupported_type_is_a_type_error():
    with pytest.raises(TypeError, match="I.Constexpr"):
        I.Constexpr[list]


def test_constexpr_int_sets_static_extents():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], W: I.Constexpr[int] = 2):
        d = I.domain(0, W)
        y[d] = x[d]

    g = k.trace(W=3)
    (dom,) = _nodes(g, "domain")
    assert repr(dom.outputs[0].type) == "domain[3]"


# --- enums --------------------------------------------------------------------------------------------

class Mode(I.Enum):
    SUM = 1
    MAX = 2


class Other(I.Enum):
    SUM = 1


class Named(I.Enum):
    LEFT = "left"
    RIGHT = "right"


@intent.kernel
def _reduce_pair(x: I.In[I.f32, ("N", 2)], y: I.Out[I.f32, ("N",)], MODE: I.Constexpr[Mode] = Mode.SUM,
                 SIDE: I.Constexpr[Named] = Named.LEFT):
    d = I.domain(0, x.shape[0])
    a, b = x[d, 0], x[d, 1]
    if MODE == Mode.SUM:
        v = a + b
    else:
        v = I.maximum(a, b)
    if SIDE == Named.RIGHT:
        v = v * 10.0
    y[d] = v


def test_enum_constexpr_selects_branches(run):
    x = np.array([[1.0, 5.0], [4.0, -2.0]], np.float32)
    y = np.zeros(2, np.float32)
    run(_reduce_pair, x, y)
    np.testing.assert_array_equal(y, x.sum(axis=1))
    run(_reduce_pair, x, y, MODE=Mode.MAX)
    np.testing.assert_array_equal(y, x.max(axis=1))
    run(_reduce_pair, x, y, MODE=Mode.MAX, SIDE=Named.RIGHT)
    np.testing.assert_array_equal(y, x.max(axis=1) * 10)


@pytest.mark.parametrize("value", [Other.SUM, 1, "SUM"], ids=["other-enum", "int", "str"])
def test_enum_constexpr_wrong_value_is_a_type_error(value):
    with pytest.raises(TypeError, match="MODE"):
        _reduce_pair.trace(MODE=value)


def test_enum_empty_is_rejected_as_constexpr_type():
    class Empty(I.Enum):
        pass

    with pytest.raises(TypeError, match="Empty"):
        I.Constexpr[Empty]


def test_enum_alias_values_are_rejected():
    class Aliased(I.Enum):
        A = 1
        B = 1

    with pytest.raises(TypeError, match="Aliased") as e:
        I.Constexpr[Aliased]
    assert "B" in str(e.value)


def test_enum_value_must_be_int_or_str():
    class Floaty(I.Enum):
        A = 1.5

    with pytest.raises(TypeError, match="Floaty.A"):
        I.Constexpr[Floaty]


def test_enum_as_runtime_parameter_annotation_is_rejected():
    with pytest.raises(TypeError, match="Constexpr") as e:
        @intent.kernel
        def k(x: I.In[I.f32, ("N",)], mode: Mode):
            pass
    assert "mode" in str(e.value)


def test_enum_is_not_a_view_dtype():
    with pytest.raises(TypeError, match="Mode"):
        I.In[Mode, ("N",)]


def test_enum_is_not_a_tensor_dtype_or_runtime_value():
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], MODE: I.Constexpr[Mode] = Mode.SUM):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + MODE

    with pytest.raises(intent.TraceError, match="Mode") as e:
        k.trace()
    assert isinstance(e.value, TypeError)

    @intent.kernel
    def k2(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], MODE: I.Constexpr[Mode] = Mode.SUM):
        d = I.domain(0, x.shape[0])
        y[d] = I.cast(x[d], MODE)

    with pytest.raises(intent.TraceError, match="dtype"):
        k2.trace()


def test_enum_has_no_arithmetic():
    with pytest.raises(TypeError):
        Mode.SUM + 1
    with pytest.raises(TypeError):
        Mode.SUM + Mode.MAX
    with pytest.raises(TypeError):
        -Mode.MAX
    with pytest.raises(TypeError):
        int(Mode.MAX)


def test_enum_has_no_ordering_or_truth_value():
    with pytest.raises(TypeError):
        Mode.SUM < Mode.MAX
    with pytest.raises(TypeError, match="truth"):
        bool(Mode.SUM)


def test_enum_comparison_across_enum_types_is_a_type_error():
    with pytest.raises(TypeError, match="Other"):
        Mode.SUM == Other.SUM  # noqa: B015
    with pytest.raises(TypeError):
        Mode.SUM != Other.SUM  # noqa: B015
    with pytest.raises(TypeError):
        Mode.SUM == 1  # noqa: B015


def test_enum_comparison_within_one_type():
    assert Mode.SUM == Mode.SUM
    assert Mode.SUM != Mode.MAX
    assert not (Mode.SUM == Mode.MAX)
    assert len({Mode.SUM, Mode.MAX, Mode.SUM}) == 2


def test_enum_comparison_across_types_inside_kernel_is_a_type_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], MODE: I.Constexpr[Mode] = Mode.SUM):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] if MODE == Other.SUM else -x[d]

    with pytest.raises(TypeError, match="Other"):
        k.trace()


def test_enum_member_as_runtime_scalar_argument_is_a_type_error(run):
    @intent.kernel
    def k(y: I.Out[I.i32, ("N",)], v: I.i32):
        d = I.domain(0, y.shape[0])
        y[d] = I.full((y.shape[0],), v, I.i32)

    with pytest.raises(TypeError, match=r"\bv\b"):
        run(k, np.zeros(2, np.int32), Mode.SUM)


# --- shapes ------------------------------------------------------------------------------------------------

def test_shape_same_name_is_the_same_extent():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + z[d]

    g = k.trace()
    shapes = [p.type.shape for p in g.params]
    assert shapes[0][0] is shapes[1][0] is shapes[2][0]
    assert not _nodes(g, "broadcast")


def test_shape_different_names_are_different_extents():
    @intent.kernel
    def k(x: I.In[I.f32, ("M",)], z: I.In[I.f32, ("N",)]):
        pass

    g = k.trace()
    assert g.params[0].type.shape[0] is not g.params[1].type.shape[0]
    assert [e.hint for e in g.extents] == ["M", "N"]


def test_shape_static_and_dynamic_extents(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N", 3)], y: I.Out[I.f32, ("N", 3)]):
        rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        assert x.shape[1] == 3  # a static extent is a Python int while tracing
        y[rows, cols] = x[rows, cols] + 1.0

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ValueError, match="3") as e:
        run(k, np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    assert "4" in str(e.value) and "x" in str(e.value)


def test_shape_extents_named_alike_must_agree_at_call_time(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    with pytest.raises(ValueError) as e:
        run(k, np.zeros(3, np.float32), np.zeros(5, np.float32))
    msg = str(e.value)
    assert "N" in msg and "3" in msg and "5" in msg


def test_shape_extent_disagreement_on_inner_axis_names_extent_and_values(run):
    @intent.kernel
    def k(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        pass

    with pytest.raises(ValueError, match=r"\bK\b") as e:
        run(k, np.zeros((2, 7), np.float32), np.zeros((6, 4), np.float32), np.zeros((2, 4), np.float32))
    assert "7" in str(e.value) and "6" in str(e.value)


# --- call-time argument checks --------------------------------------------------------------------------------

@intent.kernel
def _copy2(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], s: I.InOut[I.f32, ("M",)], scale: I.f32):
    rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[rows, cols] = x[rows, cols] * scale
    s[rows] = s[rows] + 1.0


def test_call_wrong_dtype_is_a_type_error_naming_the_view(run):
    with pytest.raises(TypeError, match=r"\bx\b") as e:
        run(_copy2, np.zeros((2, 2), np.float64), np.zeros((2, 2), np.float32), np.zeros(2, np.float32), 1.0)
    assert "float64" in str(e.value)


def test_call_wrong_rank_is_a_value_error_naming_the_view(run):
    with pytest.raises(ValueError, match=r"\by\b") as e:
        run(_copy2, np.zeros((2, 2), np.float32), np.zeros((2, 2, 1), np.float32), np.zeros(2, np.float32), 1.0)
    assert "rank" in str(e.value)


@pytest.mark.parametrize("nargs", [3, 5])
def test_call_wrong_argument_count_is_a_type_error(run, nargs):
    args = [np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), np.zeros(2, np.float32), 1.0, 2.0][:nargs]
    with pytest.raises(TypeError, match="4"):
        run(_copy2, *args)


def test_call_non_array_for_view_is_a_type_error(run):
    with pytest.raises(TypeError, match=r"\bx\b"):
        run(_copy2, [[1.0, 2.0]], np.zeros((1, 2), np.float32), np.zeros(1, np.float32), 1.0)


def test_call_read_only_array_for_out_view_is_a_value_error(run):
    y = np.zeros((2, 2), np.float32)
    y.flags.writeable = False
    with pytest.raises(ValueError, match=r"\by\b"):
        run(_copy2, np.ones((2, 2), np.float32), y, np.zeros(2, np.float32), 1.0)


@pytest.mark.parametrize("bad", ["dtype", "extent", "scalar", "count"])
def test_call_nothing_written_when_argument_checks_fail(run, bad):
    x = np.ones((2, 3), np.float32)
    y = np.full((2, 3), 7.0, np.float32)
    s = np.full(2, 5.0, np.float32)
    args = [x, y, s, 2.0]
    if bad == "dtype":
        args[2] = np.full(2, 5.0, np.float64)
        s = args[2]
    elif bad == "extent":
        args[2] = np.full(3, 5.0, np.float32)
        s = args[2]
    elif bad == "scalar":
        args[3] = "two"
    else:
        args.append(1.0)
    with pytest.raises((TypeError, ValueError)):
        run(_copy2, *args)
    np.testing.assert_array_equal(y, np.full((2, 3), 7.0, np.float32))
    np.testing.assert_array_equal(s, np.full(s.shape, 5.0, s.dtype))


@pytest.mark.parametrize("mixin", [int, str, float], ids=lambda t: t.__name__)
def test_an_enum_with_a_data_type_mixin_is_refused_where_it_is_defined(mixin):
    # class E(int, I.Enum) would regain int arithmetic (MODE * 10 tracing to a number) - issue 15, item 10
    with pytest.raises(TypeError, match=f"enum Mixed mixes in {mixin.__name__}: I.Enum members have no arithmetic"):
        class Mixed(mixin, I.Enum):
            A = 1
            B = 2
