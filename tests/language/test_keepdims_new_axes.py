"""Size-one axes (issue 15 item 5): ``keepdims=True`` on the reductions, ``None`` in a subscript and
``I.expand_dims``, on every executable target against NumPy's own spellings (``np.sum(..., keepdims=True)``,
``x[:, None]``, ``np.expand_dims``). None of them is an op: the graph shows the reduction or access, then a
``reshape``.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I
from intent_trace.errors import TraceError
from intent_trace.proxies.newaxis import new_axis_positions, split_new_axes, with_ones

FILE = os.path.basename(__file__)
RNG = np.random.default_rng(5)
F = np.float32


# --- keepdims -------------------------------------------------------------------------------------------

@intent.kernel
def _builtins(x: I.In[I.f32, ("A", "B", "C")], b: I.In[I.bool, ("A", "B", "C")],
              s0: I.Out[I.f32, (1, "B", "C")], s02: I.Out[I.f32, (1, "B", 1)], mx: I.Out[I.f32, ("A", "B", 1)],
              an: I.Out[I.bool, ("A", 1, "C")], al: I.Out[I.bool, (1, 1, 1)],
              av: I.Out[I.f32, ("A", 1, "C")], ai: I.Out[I.index, ("A", 1, "C")]):
    v, m = x[:, :, :], b[:, :, :]
    s0[:, :, :] = I.reduce.sum(v, axis=0, keepdims=True)
    s02[:, :, :] = I.reduce.sum(v, axis=(2, 0), keepdims=True)
    mx[:, :, :] = I.reduce.max(v, axis=-1, keepdims=True)
    an[:, :, :] = I.reduce.any(m, axis=1, keepdims=True)
    al[:, :, :] = I.reduce.all(m, axis=(0, 1, 2), keepdims=True)  # every axis: a [1, 1, 1] tensor, not a scalar
    values, where = I.arg_reduce.max(v, axis=1, keepdims=True)
    av[:, :, :] = values
    ai[:, :, :] = where


@pytest.mark.parametrize("shape", [(3, 4, 5), (1, 6, 2)])
def test_builtin_reductions_keep_their_axes(run, shape):
    # small integers: every float sum is exact, so any association order gives NumPy's value
    x = RNG.integers(-8, 8, shape).astype(F)
    x[0, -1, 0] = x[0, 0, 0]  # a tie along axis 1: the lower position wins, as np.argmax's
    b = RNG.random(shape) < 0.3
    a, bb, c = shape
    outs = [np.full((1, bb, c), 7, F), np.full((1, bb, 1), 7, F), np.full((a, bb, 1), 7, F),
            np.zeros((a, 1, c), bool), np.zeros((1, 1, 1), bool), np.full((a, 1, c), 7, F),
            np.full((a, 1, c), 7, np.int64)]
    run(_builtins, x, b, *outs)
    want = [np.sum(x, axis=0, keepdims=True), np.sum(x, axis=(0, 2), keepdims=True), np.max(x, axis=-1, keepdims=True),
            np.any(b, axis=1, keepdims=True), np.all(b, axis=None, keepdims=True), np.max(x, axis=1, keepdims=True),
            np.argmax(x, axis=1, keepdims=True)]
    for got, w in zip(outs, want):
        assert got.shape == w.shape
        np.testing.assert_array_equal(got, w)


def _pair_sum(lhs, rhs):
    return lhs[0] + rhs[0], I.maximum(lhs[1], rhs[1])


def _record_sum(lhs, rhs):
    return I.record(total=lhs.total + rhs.total, top=I.maximum(lhs.top, rhs.top))


@intent.kernel
def _generic(x: I.In[I.f32, ("M", "N")], ts: I.Out[I.f32, ("M", 1)], tm: I.Out[I.f32, ("M", 1)],
             rs: I.Out[I.f32, (1, "N")], rm: I.Out[I.f32, (1, "N")]):
    v = x[:, :]
    m, n = x.shape
    zero_m, low_m = I.zeros((m,), I.f32), I.full((m,), -np.inf, I.f32)
    s, t = I.reduce((v, v), axis=1, identity=(zero_m, low_m), combine=_pair_sum, keepdims=True)
    ts[:, :] = s
    tm[:, :] = t
    r = I.reduce(I.record(total=v, top=v), axis=0, combine=_record_sum, keepdims=True,
                 identity=I.record(total=I.zeros((n,), I.f32), top=I.full((n,), -np.inf, I.f32)))
    rs[:, :] = r.total
    rm[:, :] = r.top


def test_generic_reduce_keeps_the_axes_of_every_component(run):
    x = RNG.integers(-8, 8, (3, 5)).astype(F)
    outs = [np.full(s, 7, F) for s in ((3, 1), (3, 1), (1, 5), (1, 5))]
    run(_generic, x, *outs)
    want = [x.sum(1, keepdims=True), x.max(1, keepdims=True), x.sum(0, keepdims=True), x.max(0, keepdims=True)]
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got, w)


@intent.kernel
def _softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """The row softmax written with keepdims: no reshape helper, the [M, 1] results broadcast against [M, N]."""
    v = x[:, :]
    e = I.exp(v - I.reduce.max(v, axis=1, keepdims=True))
    y[:, :] = e / I.reduce.sum(e, axis=1, keepdims=True)


@pytest.mark.parametrize("shape", [(3, 7), (1, 1), (4, 33)])
def test_row_softmax_with_keepdims(run, shape):
    x = (RNG.standard_normal(shape) * 4).astype(F)
    y = np.full(shape, np.nan, F)
    run(_softmax, x, y)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - np.max(x64, axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / np.sum(e, axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_keepdims_is_a_reshape_in_the_graph():
    g = _softmax.trace()
    text = str(g)
    assert "f32[M, 1] = reshape" in text
    assert {n.op.name for n in g.walk()} <= {"read", "write", "constant", "full", "reduce", "maximum", "add", "sub",
                                             "exp", "div", "reshape", "broadcast"}
    reduced = {n.outputs[0] for n in _nodes(g, "reduce")}
    assert [n.inputs[0] in reduced for n in _nodes(g, "reshape")] == [True, True]


# --- None in a subscript, I.expand_dims ------------------------------------------------------------------

@intent.kernel
def _new_axes(x: I.In[I.f32, ("M", "N")], idx: I.In[I.i32, ("K",)],
              a: I.Out[I.f32, ("M", 1, "N")], b: I.Out[I.f32, ("M", "N", 1)], c: I.Out[I.f32, (1, "M", "N")],
              d: I.Out[I.f32, ("N", 1)], e: I.Out[I.f32, (1,)], f: I.Out[I.f32, ("M", 1, "N")],
              g: I.Out[I.f32, ("M", "N", 1, 1)], h: I.Out[I.f32, ("M", 1)], p: I.Out[I.f32, ("K", 1, "N")],
              o: I.Out[I.f32, ("M", "N")], w: I.Out[I.f32, ("M", "N")], u: I.Out[I.f32, ("N",)]):
    v = x[:, :]
    a[:, :, :] = x[:, None, :]  # a view read
    b[:, :, :] = x[..., None]
    c[:, :, :] = v[None, ...]  # a tensor subscript
    d[:, :] = v[1, :, None]
    e[:] = x[0, 1, None]  # a scalar read becomes a [1] tensor
    f[:, :, :] = I.expand_dims(v, 1)
    g[:, :, :, :] = I.expand_dims(v, (-1, -2))
    h[:, :] = x[I.domain(0, x.shape[0]), None, 0]  # a domain entry
    p[:, :, :] = x[idx[:], None, :]  # a tensor index: its axes, then the new one
    o[:, :] = v[:, 1, None] * v[None, 0, :]  # [M, 1] * [1, N]: an outer product by broadcasting
    w[:, None, :] = x[:, None, :]  # a write through None: the value's size-one axis is reshaped away
    u[None, :] = v[2, :]  # a value of lower rank broadcasts as before


def test_new_axes_match_numpy(run):
    m, n = 3, 4
    x = RNG.standard_normal((m, n)).astype(F)
    idx = np.array([2, 0, 2, 1, 0], np.int32)
    shapes = [(m, 1, n), (m, n, 1), (1, m, n), (n, 1), (1,), (m, 1, n), (m, n, 1, 1), (m, 1), (5, 1, n), (m, n),
              (m, n), (n,)]
    outs = [np.full(s, np.nan, F) for s in shapes]
    run(_new_axes, x, idx, *outs)
    want = [x[:, None, :], x[..., None], x[None, ...], x[1, :, None], x[0, 1, None], np.expand_dims(x, 1),
            np.expand_dims(x, (-1, -2)), x[:, None, 0], x[idx, None, :], x[:, 1, None] * x[None, 0, :], x,
            x[2, :]]
    for got, wv in zip(outs, want):
        assert got.shape == wv.shape
        np.testing.assert_array_equal(got, wv)


def test_new_axes_are_reshapes_in_the_graph():
    g = _new_axes.trace()
    ops_used = {n.op.name for n in g.walk()}
    assert "reshape" in ops_used and not {"expand_dims", "new_axis", "newaxis"} & ops_used
    text = str(g)
    assert "f32[M, 1, N] = reshape" in text and "f32[1] = reshape" in text


# The pure position arithmetic against NumPy's basic indexing on concrete arrays: one entry per axis (`:` or an
# integer), Nones inserted anywhere (at least one), and a run of the entries folded into `...` or not.
@given(st.data())
def test_new_axis_positions_follow_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), max_size=3)))
    key = [data.draw(st.sampled_from([slice(None), 0])) for _ in shape]
    if data.draw(st.booleans()):
        lo = data.draw(st.integers(0, len(key)))
        hi = data.draw(st.integers(lo, len(key)))
        key[lo:hi] = [Ellipsis]
    for _ in range(data.draw(st.integers(1, 3))):
        key.insert(data.draw(st.integers(0, len(key))), None)
    key = tuple(key)
    entries, slots = split_new_axes(key, len(shape), "test")
    kept = tuple(e for e, k in zip(shape, entries) if isinstance(k, slice))
    assert len(entries) == len(shape)
    assert with_ones(kept, new_axis_positions(entries, slots)) == np.empty(shape)[key].shape


# --- errors ---------------------------------------------------------------------------------------------

def _trace_error(body):
    def kern(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        body(x, y)
    with pytest.raises(TraceError) as info:
        intent.kernel(kern).trace()
    assert FILE in str(info.value)
    return info.value


@pytest.mark.parametrize("body, kind, words", [
    (lambda x, y: I.reduce.sum(x[:, :], axis=2, keepdims=True), ValueError, "axis 2 is out of range for rank 2"),
    (lambda x, y: I.reduce.max(x[:, :], axis=-3, keepdims=True), ValueError, "axis -3 is out of range"),
    (lambda x, y: I.arg_reduce.max(x[:, :], axis=5, keepdims=True), ValueError, "axis 5 is out of range"),
    (lambda x, y: I.reduce.sum(x[:, :], axis=1, keepdims="yes"), TypeError, "keepdims must be a Python bool"),
    (lambda x, y: I.expand_dims(x[:, :], 3), ValueError, "axis 3 is out of range for rank 3"),
    (lambda x, y: I.expand_dims(x[:, :], (0, -4)), ValueError, "axis 0 is listed twice"),
    (lambda x, y: I.expand_dims(x[:, :], 1.0), TypeError, "axis must be an int"),
    (lambda x, y: I.expand_dims(x, 0), TypeError, "I.expand_dims takes a scalar or tensor value"),
    (lambda x, y: x[None, :, :, :], ValueError, "3 indices for a value of rank 2"),
    (lambda x, y: x[:, :][..., None, ...], ValueError, "at most one `...`"),
    (lambda x, y: I.buffer((2, 3), I.f32, init=0.0)[:, None, :], TypeError, "is not an index of a buffer"),
    (lambda x, y: y.__setitem__((slice(None), None, slice(None)), I.full((3, 2, 4), 1.0, I.f32)), ValueError,
     "its axis 1 lines up with a size-one axis"),
])
def test_bad_axes_are_trace_errors_naming_them(body, kind, words):
    err = _trace_error(body)
    assert isinstance(err, kind) and words in str(err), str(err)
