"""Zero extents, static (``("M", 0)``) and dynamic (an extent that is 0 at the call), on inputs and outputs of
ranks 1 to 3, on every executable target: the outputs keep their (empty) shape, a reduction over an empty axis
gives its identity, and the non-empty outputs match NumPy."""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I


@intent.kernel
def static_rank1(x: I.In[I.f32, (0,)], y: I.Out[I.f32, (0,)], n: I.Out[I.i64, (1,)]):
    y[:] = x[:] + 1.0
    n[0] = I.cast(x.shape[0], I.i64)


@intent.kernel
def static_rank2(a: I.In[I.f32, ("M", 0)], b: I.In[I.i32, (0, "N")], y: I.Out[I.f32, ("M", 0)],
                 z: I.Out[I.i32, (0, "N")], rows: I.Out[I.f32, ("M",)], cols: I.Out[I.i32, ("N",)]):
    y[:, :] = a[:, :] * 2.0
    z[:, :] = b[:, :] - 1
    rows[:] = I.reduce.sum(a[:, :], axis=1) + 1.0  # the sum over an empty axis is 0
    cols[:] = I.reduce.max(b[:, :], axis=0)  # the max over an empty axis is the dtype's minimum


@intent.kernel
def static_rank3(x: I.In[I.f64, ("A", 0, "B")], y: I.Out[I.f64, ("A", 0, "B")], s: I.Out[I.f64, ("A", "B")]):
    y[:, :, :] = -x[:, :, :]
    s[:, :] = I.reduce.sum(x[:, :, :], axis=1) + 0.5


@intent.kernel
def dynamic(x: I.In[I.f32, ("A", "B", "C")], y: I.Out[I.f32, ("A", "B", "C")], s: I.Out[I.f32, ("A", "C")],
            v: I.In[I.i16, ("K",)], w: I.Out[I.i16, ("K",)]):
    y[:, :, :] = x[:, :, :] * 3.0
    s[:, :] = I.reduce.sum(x[:, :, :], axis=1)
    w[:] = v[:] + 2


def test_static_zero_extent_rank1(run):
    y, n = np.zeros(0, np.float32), np.full(1, -1, np.int64)
    run(static_rank1, np.zeros(0, np.float32), y, n)
    assert y.shape == (0,) and n[0] == 0


@pytest.mark.parametrize("m, n", [(3, 2), (1, 0), (0, 4), (0, 0)])
def test_static_zero_extents_rank2(run, m, n):
    a, b = np.zeros((m, 0), np.float32), np.zeros((0, n), np.int32)
    y, z = np.zeros((m, 0), np.float32), np.zeros((0, n), np.int32)
    rows, cols = np.full(m, -5.0, np.float32), np.full(n, 7, np.int32)
    run(static_rank2, a, b, y, z, rows, cols)
    np.testing.assert_array_equal(rows, np.ones(m, np.float32))
    np.testing.assert_array_equal(cols, np.full(n, np.iinfo(np.int32).min, np.int32))
    assert y.shape == (m, 0) and z.shape == (0, n)


@pytest.mark.parametrize("a, b", [(2, 3), (0, 3), (2, 0)])
def test_static_zero_extent_rank3(run, a, b):
    x, y = np.zeros((a, 0, b)), np.zeros((a, 0, b))
    s = np.full((a, b), -1.0)
    run(static_rank3, x, y, s)
    np.testing.assert_array_equal(s, np.full((a, b), 0.5))


@pytest.mark.parametrize("shape", [(0, 3, 2), (2, 0, 3), (2, 3, 0), (0, 0, 0), (2, 2, 2)])
@pytest.mark.parametrize("k", [0, 3])
def test_dynamic_zero_extents(run, shape, k):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    y, s = np.full(shape, 9.0, np.float32), np.full((shape[0], shape[2]), 9.0, np.float32)
    v, w = np.arange(k, dtype=np.int16), np.zeros(k, np.int16)
    run(dynamic, x, y, s, v, w)
    np.testing.assert_array_equal(y, x * np.float32(3.0))
    np.testing.assert_allclose(s, x.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(w, v + 2)


@intent.kernel
def static_zero_buffer(idx: I.In[I.i32, (0,)], y: I.Out[I.f32, (0,)], t: I.Out[I.f32, (2,)]):
    b = I.buffer((0,), I.f32, init=1.0)  # an empty local buffer, and an empty unique store's mask
    y[idx[:]] = b[:] * 2.0
    t[:] = I.full((2,), I.reduce.sum(b[:], axis=0) + 4.0, I.f32)


def test_static_zero_buffer_and_unique_store(run):
    t = np.zeros(2, np.float32)
    run(static_zero_buffer, np.zeros(0, np.int32), np.zeros(0, np.float32), t)
    np.testing.assert_array_equal(t, [4.0, 4.0])
