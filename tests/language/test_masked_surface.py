"""The masked-access surface (spec §15): ``I.load``/``I.store`` with ``valid=``/``fill=``, ``I.gather`` of a view or
buffer, ``I.scatter_reduce(..., valid=)``: the canonical nodes and their printed form, the type rules, the errors
of the surface, and the race detector, which counts a masked-off lane as no access.

Runtime results on every target against NumPy are in ``tests/kernels/test_masked_access.py (this file: tests/language/test_masked_surface.py)``.
"""

import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace import types as T
from intent_trace.errors import TraceError
from intent_trace.graph import ops
from intent_trace.graph.validate import GraphInvalid, validate
from intent_trace.graph.values import Literal, Var


def _text(kernel, **constexprs) -> str:
    """The printed graph without its source locations (they follow this file's line numbers)."""
    return re.sub(r"  # [^\n]*", "", str(kernel.trace(**constexprs)))


def _ops(kernel) -> list:
    return [n.op for n in kernel.trace().walk()]


# --- canonical nodes and the printed graph ---------------------------------------------------------------------

@intent.kernel
def tail_copy(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
    d = I.domain(0, y.shape[0])
    c = I.indices(d)
    v = I.load(x, d, valid=c < x.shape[0], fill=-1.0)
    I.store(y, d, v * 2.0, valid=c < y.shape[0])


def test_masked_load_and_store_print_their_coordinates_mask_and_fill():
    assert _text(tail_copy) == """kernel tail_copy(x: In[f32, (N,)], y: Out[f32, (M,)])
  extents N, M: index
{
  %0: domain[M] = domain 0:index, M, 1:index
  %1: index[M] = indices %0  ⟨indices of %0 axis 0: m = a0⟩
  %2: index[M] = broadcast N
  %3: bool[M] = lt %1, %2
  %4: index[M] = indices %0  ⟨indices of %0 axis 0: m = a0⟩
  %5: f32[M] = masked_read x[%4] if %3 else -1.0:f32
  %6: f32[M] = mul %5, 2.0:f32
  %7: index[M] = broadcast M
  %8: bool[M] = lt %1, %7
  %9: index[M] = indices %0  ⟨indices of %0 axis 0: m = a0⟩
  masked_write y[%9] = %6 if %8
}"""


@intent.kernel
def outer_key(x: I.In[I.i32, ("A", "B", "C")], r: I.In[I.i64, ("K",)], y: I.Out[I.i32, ("K", "C")], p: I.index):
    k = I.domain(0, r.shape[0])
    y[k, :] = I.load(x, (p, r[k], slice(None)), valid=p < x.shape[0], fill=7)


def test_an_outer_key_becomes_one_coordinate_per_axis_broadcast_to_the_access_shape():
    text = _text(outer_key)
    # a point stays a scalar, the tensor entry takes result axis 0, the whole axis the indices of axis 2 on axis 1
    assert re.search(r"%\d+: i64\[K, 1\] = reshape %1\n *%\d+: i64\[K, C\] = broadcast", text), text
    assert re.search(r"%\d+: i32\[K, C\] = masked_read x\[p, %\d+, %\d+\] if %\d+ else 7:i32", text), text
    (node,) = [n for n in outer_key.trace().walk() if n.op is ops.masked_read]
    point, rows, cols = node.inputs[1:4]
    assert point.type == T.ScalarType(T.index) and rows.type.shape == cols.type.shape == node.outputs[0].type.shape
    assert node.inputs[4].type == T.ScalarType(T.bool_)  # a scalar mask is not broadcast


@intent.kernel
def buffers_and_scatter(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("N",)], y: I.InOut[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    i = idx[d]
    ok = i >= 0
    b = I.buffer((x.shape[0],), I.f32, init=0.0)
    I.store(b, i, x[d], valid=ok)
    y[d] = I.gather(b, i, valid=ok, fill=3.0) + I.gather(x, i, valid=ok)
    I.scatter_reduce(y, i, x[d], combine="max", valid=ok)


def test_buffers_views_and_scatter_have_their_own_masked_ops():
    used = _ops(buffers_and_scatter)
    assert ops.masked_store in used and ops.masked_load in used and ops.masked_read in used
    assert ops.store not in used and ops.load not in used and ops.gather not in used
    text = _text(buffers_and_scatter)
    # a data coordinate (an integer tensor entry): the targets check at run time that the valid lanes are distinct
    assert re.search(r"masked_store %\d+\[%\d+\] = %\d+ if %\d+ \{data_indexed=True\}", text), text
    assert "data_indexed" not in _text(tail_copy)  # domains only: distinct lanes address distinct elements
    assert re.search(r"masked_load %\d+\[%\d+\] if %\d+ else 3.0:f32", text), text
    assert re.search(r"scatter_reduce y, %\d+, %\d+, %\d+ \{combine=max, has_valid=True\}", text), text


@intent.kernel
def unmasked(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    I.store(y, d, I.load(x, d, fill=2.0), valid=True)


def test_without_a_mask_load_and_store_are_the_plain_read_and_write():
    assert [op.name for op in _ops(unmasked)] == ["domain", "read", "write"]


@intent.kernel
def never_valid(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.load(x, d, valid=False, fill=2.5)


@pytest.mark.parametrize("target", ["generic", "cpu"])
def test_a_constant_false_mask_reads_nothing(target):
    y = np.zeros(3, np.float32)
    intent.compile(never_valid, target=target)(np.zeros(3, np.float32), y)
    np.testing.assert_array_equal(y, [2.5, 2.5, 2.5])


# --- the type rules ------------------------------------------------------------------------------------------------

def _view(dtype=T.f32, shape=(4,), access="In"):
    return Var(T.ViewType(access, dtype, shape))


def test_masked_read_type_rule_derives_the_result_and_checks_each_operand():
    v, c = _view(), Var(T.TensorType(T.i32, (3,)))
    ok, fill = Var(T.TensorType(T.bool_, (3,))), Literal(0.0, T.ScalarType(T.f32))
    assert ops.masked_read.infer(ops.masked_read, (v, c, ok, fill), {}) == (T.TensorType(T.f32, (3,)),)
    scalar = Var(T.ScalarType(T.index))
    assert ops.masked_read.infer(ops.masked_read, (v, scalar, Literal(True, T.ScalarType(T.bool_)), fill), {}) == \
        (T.ScalarType(T.f32),)
    bad = [
        ((v, c, Var(T.TensorType(T.i32, (3,))), fill), TypeError, "valid"),
        ((v, c, ok, Literal(0.0, T.ScalarType(T.f64))), TypeError, "fill has dtype f64"),
        ((v, Var(T.TensorType(T.f32, (3,))), ok, fill), TypeError, "coordinate"),
        ((v, c, Var(T.TensorType(T.bool_, (2,))), fill), TypeError, "valid"),
        ((v, c, ok, Var(T.TensorType(T.f32, (2,)))), ValueError, "fill"),
        ((v, c, c, ok, fill), ValueError, "2 coordinates for a target of rank 1"),
        ((Var(T.BufferType(T.f32, (4,))), c, ok, fill), TypeError, "must be a view"),
    ]
    for operands, exc, match in bad:
        with pytest.raises(exc, match=match):
            ops.masked_read.infer(ops.masked_read, operands, {})
    with pytest.raises(TypeError, match="must be a logical buffer"):
        ops.masked_load.infer(ops.masked_load, (v, c, ok, fill), {})


def test_masked_write_and_scatter_type_rules():
    y, c, ok = _view(access="Out"), Var(T.TensorType(T.i32, (3,))), Var(T.TensorType(T.bool_, (3,)))
    value = Var(T.TensorType(T.f32, (3,)))
    assert ops.masked_write.infer(ops.masked_write, (y, value, c, ok), {}) == ()
    with pytest.raises(TypeError, match="writing f64 values"):
        ops.masked_write.infer(ops.masked_write, (y, Var(T.TensorType(T.f64, (3,))), c, ok), {})
    with pytest.raises(TypeError, match="coordinate"):  # a scalar value at tensor coordinates: not broadcast
        ops.masked_write.infer(ops.masked_write, (y, Literal(1.0, T.ScalarType(T.f32)), c, ok), {})
    attrs = {"combine": "add", "has_valid": True, "type": T.TensorType(T.f32, (3,))}
    assert ops.scatter_reduce.infer(ops.scatter_reduce, (y, value, c, ok), attrs) == ()
    with pytest.raises(TypeError, match="valid"):
        ops.scatter_reduce.infer(ops.scatter_reduce, (y, value, c, c), attrs)


def test_validate_refuses_a_masked_write_into_an_in_view():
    g = tail_copy.trace()
    validate(g)
    (node,) = [n for n in g.walk() if n.op is ops.masked_write]
    import attrs

    x = g.params[0].var
    nodes = tuple(attrs.evolve(n, inputs=(x, *n.inputs[1:])) if n is node else n for n in g.body.nodes)
    with pytest.raises(GraphInvalid, match="writes an In view"):
        validate(attrs.evolve(g, body=attrs.evolve(g.body, nodes=nodes)))


# --- surface errors ---------------------------------------------------------------------------------------------

def _trace_error(body, exc, match):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], i: I.In[I.i32, ("M",)], y: I.Out[I.f32, ("N",)], b: I.In[I.i8, ("N",)],
          s: I.In[I.f32, (3,)]):
        body(x, i, y, b, s)

    with pytest.raises(TraceError) as info:
        k.trace()
    assert isinstance(info.value, exc), info.value
    assert re.search(match, str(info.value)), str(info.value)


def _all(v):
    return I.domain(0, v.shape[0])


@pytest.mark.parametrize("body,exc,match", [
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=i[:]), TypeError, "valid must be a bool .* got i32"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=1), TypeError, "valid must be a bool"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=i[:] > 0), ValueError, "extents M and N"),
    (lambda x, i, y, b, s: I.load(s, _all(s), valid=I.full((4,), True, I.bool)), ValueError, "4.*3|3.*4"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=x[:] > 0, fill=I.cast(0, I.f64)), TypeError,
     "fill has dtype f64 but the target is f32"),
    (lambda x, i, y, b, s: I.load(i, _all(i), valid=i[:] > 0, fill=1.5), TypeError, "not an integer"),
    (lambda x, i, y, b, s: I.load(b, _all(b), valid=b[:] > 0, fill=300), ValueError, "does not fit i8"),
    (lambda x, i, y, b, s: I.load(b, _all(b), valid=b[:] > 0, fill=True), TypeError, "bool"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=x[:] > 0, fill=I.cast(i[:], I.f32)), ValueError, "M and N"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=x[:] > 0, fill="0"), TypeError, "fill must be a number"),
    (lambda x, i, y, b, s: I.load(x, _all(x), fill=I.cast(0, I.f64)), TypeError, "fill has dtype f64"),
    (lambda x, i, y, b, s: I.load(x, _all(x), mask=x[:] > 0), TypeError, "valid= \\(Triton's mask=\\)"),
    (lambda x, i, y, b, s: I.store(y, _all(y), 1.0, mask=x[:] > 0), TypeError, "unexpected keyword argument 'mask'"),
    (lambda x, i, y, b, s: I.load(x, _all(x), valid=x[:] > 0, other=1.0), TypeError, "fill= \\(Triton's other=\\)"),
    (lambda x, i, y, b, s: I.load(x[:], _all(x), valid=x[:] > 0), TypeError, "must be a view or a logical buffer"),
    (lambda x, i, y, b, s: I.store(x, _all(x), 1.0, valid=x[:] > 0), ValueError, "x is an In view"),
    (lambda x, i, y, b, s: I.load(y, _all(y), valid=x[:] > 0), ValueError, "y is an Out view"),
    (lambda x, i, y, b, s: I.store(y, _all(y), i[:], valid=x[:] > 0), TypeError, "writing i32 values into y"),
    (lambda x, i, y, b, s: I.store(y, _all(y), I.cast(i[:], I.f32), valid=x[:] > 0), ValueError, "M and N"),
    (lambda x, i, y, b, s: I.load(x, x[:], valid=x[:] > 0), TypeError, "integer dtype, got f32"),
    (lambda x, i, y, b, s: I.load(x, (_all(x), 0), valid=x[:] > 0), ValueError, "2 indices for a value of rank 1"),
    (lambda x, i, y, b, s: I.load(x, x[0], valid=x[0] > 0), TypeError, "must be an integer"),
    (lambda x, i, y, b, s: I.gather(x, I.cast(x[:], I.f32), valid=x[:] > 0), TypeError, "integer dtype"),
    (lambda x, i, y, b, s: I.scatter_reduce(I.buffer((3,), I.f32, init=0.0), i[:], 1.0, combine="add", valid=i[:]),
     TypeError, "valid must be a bool"),
    (lambda x, i, y, b, s: I.scatter_reduce(I.buffer((3,), I.f32, init=0.0), i[:], 1.0, combine="add",
                                            valid=x[:] > 0), ValueError, "extents N and M"),
])
def test_masked_access_surface_errors(body, exc, match):
    _trace_error(body, exc, match)


def test_a_parallel_store_whose_mask_alone_depends_on_the_point_is_accepted_and_one_that_does_not_is_refused():
    @intent.kernel
    def same(y: I.Out[I.f32, ("N",)], ok: I.In[I.bool, ("N",)]):
        d = I.domain(0, y.shape[0])
        for p in I.parallel(d):
            I.store(y, d, I.cast(I.indices(d), I.f32), valid=ok[:])

    with pytest.raises(TraceError, match="every point of the enclosing parallel domain writes the same elements"):
        same.trace()


# --- the race detector: a masked-off lane is no access ---------------------------------------------------------------

@intent.kernel
def own_lane(y: I.InOut[I.f32, ("N",)], SHARE: I.Constexpr[bool]):
    d = I.domain(0, y.shape[0])
    lanes = I.indices(d)
    for p in I.parallel(d):
        mine = (lanes <= p) if SHARE else (lanes == p)
        v = I.load(y, d, valid=mine, fill=0.0)  # reads y[p] (and, shared, every element before it)
        I.store(y, d, I.cast(lanes, I.f32) + I.reduce.sum(v, axis=0), valid=lanes == p)


@intent.kernel
def write_many(y: I.InOut[I.f32, ("N",)], SHARE: I.Constexpr[bool]):
    d = I.domain(0, y.shape[0])
    lanes = I.indices(d)
    for p in I.parallel(d):
        I.store(y, d, I.cast(lanes + p, I.f32), valid=(lanes >= p) if SHARE else (lanes == p))


@pytest.mark.parametrize("target", ["generic", "cpu"])
def test_masked_off_lanes_are_not_accesses_of_other_points(target):
    y = np.arange(6, dtype=np.float32)
    intent.compile(own_lane, target=target, SHARE=False)(y)
    np.testing.assert_array_equal(y, np.arange(6) * 2.0)
    y = np.zeros(6, np.float32)
    intent.compile(write_many, target=target, SHARE=False)(y)
    np.testing.assert_array_equal(y, np.arange(6) * 2.0)


@pytest.mark.parametrize("target", ["generic", "cpu"])
@pytest.mark.parametrize("kernel,verb", [(own_lane, "reads"), (write_many, "writes")])
def test_valid_lanes_of_two_points_on_one_element_race(target, kernel, verb):
    y = np.arange(6, dtype=np.float32)
    before = y.copy()
    with pytest.raises(RuntimeError, match="y") as info:
        intent.compile(kernel, target=target, SHARE=True)(y)
    assert "point" in str(info.value) and verb in str(info.value), str(info.value)
    np.testing.assert_array_equal(y, before)


# --- the README's masked-access snippet runs as written ----------------------------------------------------------

def test_the_readme_masked_softmax_snippet_runs_and_matches_numpy():
    import math
    import pathlib
    import textwrap

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    (body,) = [textwrap.dedent(b) for _, b in re.findall(r"^( *)```python\n(.*?)^\1```", readme, re.S | re.M)
               if "def masked_softmax" in b]
    namespace = {"intent": intent, "I": I, "math": math}
    exec(compile(body, "README.md", "exec"), namespace)  # noqa: S102 (the README's own text)
    x = (np.random.default_rng(5).standard_normal((3, 45)) * 3).astype(np.float32)
    y = np.full_like(x, np.nan)
    intent.compile(namespace["masked_softmax"], target="cpu", BLOCK=64)(x, y)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(axis=1, keepdims=True), rtol=60 * 2.0 ** -23)
