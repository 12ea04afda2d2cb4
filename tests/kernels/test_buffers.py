"""Logical buffers, I.buffer (spec §15, DESIGN §3), on every executable target.

A buffer is kernel-local mutable state indexed like a view: reads are ``load`` and writes ``store``,
in program order. Covers inits (scalar, broadcast tensor, none), dynamic and value-derived shapes,
per-iteration buffers in ordered and parallel loops, narrow float and bool elements, rank 0, the
read-before-write TraceError, the parallel conflict rules, and run-time index errors.
"""
import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(99)


@intent.kernel
def scalar_init(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("N",)]):
    b = I.buffer((x.shape[0],), I.f32, init=-1.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = x[idx[k]] * 2.0  # a unique store at data-derived coordinates
    y[:] = b[:]


def test_buffer_scalar_init_then_partial_store(run):
    x = RNG.standard_normal(7).astype(np.float32)
    idx = np.array([5, 0, 3], np.int32)
    y = np.zeros(7, np.float32)
    run(scalar_init, x, idx, y)
    want = np.full(7, -1.0, np.float32)
    want[idx] = x[idx] * np.float32(2.0)
    np.testing.assert_array_equal(y, want)


@intent.kernel
def tensor_init(row: I.In[I.i64, ("M",)], y: I.Out[I.i64, ("N", "M")]):
    b = I.buffer((y.shape[0], row.shape[0]), I.i64, init=row[:])  # (M,) broadcast over N rows
    n = I.domain(0, y.shape[0])
    for i in n:
        b[i, 0] = b[i, 0] + I.cast(i, I.i64)
    y[:, :] = b[:, :]


def test_buffer_tensor_init_broadcasts_to_the_shape(run):
    row = np.array([4, -2, 9], np.int64)
    y = np.zeros((5, 3), np.int64)
    run(tensor_init, row, y)
    want = np.tile(row, (5, 1))
    want[:, 0] += np.arange(5)
    np.testing.assert_array_equal(y, want)


@intent.kernel
def prefix_rows(x: I.In[I.f64, ("N", "M")], y: I.Out[I.f64, ("N", "M")], total: I.Out[I.f64, ("N",)]):
    cols = I.domain(0, x.shape[1])
    for r in I.domain(0, x.shape[0]):
        run_sum = I.buffer((), I.f64, init=0.0)  # per iteration: starts at 0 for every row
        for c in cols:
            run_sum[()] = run_sum[()] + x[r, c]
            y[r, c] = run_sum[()]
        total[r] = run_sum[()]


def test_buffer_created_in_a_loop_body_is_fresh_each_iteration(run):
    x = RNG.integers(-5, 5, (4, 6)).astype(np.float64)
    y, total = np.zeros((4, 6)), np.zeros(4)
    run(prefix_rows, x, y, total)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))
    np.testing.assert_array_equal(total, x.sum(axis=1))


@intent.kernel
def private_scratch(x: I.In[I.i32, ("N", "M")], y: I.Out[I.i32, ("N", "M")]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        scratch = I.buffer((x.shape[1],), I.i32)  # one per point: stores not indexed by r never conflict
        scratch[cols] = x[r, cols]
        for c in I.domain(1, x.shape[1]):
            scratch[c] = scratch[c] + scratch[c - 1]
        y[r, cols] = scratch[cols]


def test_buffer_inside_a_parallel_body_is_private_to_each_point(run):
    x = RNG.integers(-50, 50, (6, 5)).astype(np.int32)
    y = np.zeros((6, 5), np.int32)
    run(private_scratch, x, y)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1, dtype=np.int32))


@intent.kernel
def shared_rows(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    b = I.buffer((x.shape[0],), I.f32, init=0.0)
    for i in I.parallel(I.domain(0, x.shape[0])):
        b[i] = x[i] + 1.0  # indexed by the point: no conflict
    y[:] = b[:]


def test_buffer_shared_by_a_parallel_loop_with_point_indexed_stores(run):
    x = RNG.standard_normal(9).astype(np.float32)
    y = np.zeros(9, np.float32)
    run(shared_rows, x, y)
    np.testing.assert_array_equal(y, x + np.float32(1.0))


def test_buffer_shared_store_not_indexed_by_the_point_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        b = I.buffer((4,), I.f32, init=0.0)
        for i in I.parallel(I.domain(0, x.shape[0])):
            b[0] = x[i]

    with pytest.raises(TraceError, match=r"same elements of buffer@"):
        k.trace()


@intent.kernel
def shared_data_indexed(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[I.f32, (4,)]):
    b = I.buffer((4,), I.f32, init=0.0)
    for i in I.parallel(I.domain(0, x.shape[0])):
        b[idx[i]] = x[i]
    y[:] = b[:]


def test_generic_checks_parallel_store_conflicts_on_shared_buffers():
    exe = intent.compile(shared_data_indexed, target="generic")
    y = np.zeros(4, np.float32)
    exe(np.arange(3, dtype=np.float32), np.array([2, 0, 3], np.int32), y)
    np.testing.assert_array_equal(y, [1.0, 0.0, 0.0, 2.0])
    y[:] = 5.0
    with pytest.raises(RuntimeError, match=r"buffer@.*parallel points 0 and 2 both write element 1"):
        exe(np.arange(3, dtype=np.float32), np.array([1, 0, 1], np.int32), y)
    np.testing.assert_array_equal(y, [5.0, 5.0, 5.0, 5.0])


def test_buffer_read_before_any_store_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        b = I.buffer((x.shape[0],), I.f32)
        y[:] = b[:]

    with pytest.raises(TraceError, match=r"buffer@.*read before any store"):
        k.trace()


@intent.kernel
def store_then_load(x: I.In[I.u16, ("N",)], y: I.Out[I.u16, ("N",)]):
    b = I.buffer(x.shape, I.u16)  # no init: defined by the store below
    b[:] = x[:] ^ 0xFF
    y[:] = b[:] + 1


def test_buffer_without_init_is_defined_by_its_first_store(run):
    x = RNG.integers(0, 2 ** 16, 10).astype(np.uint16)
    y = np.zeros(10, np.uint16)
    run(store_then_load, x, y)
    np.testing.assert_array_equal(y, ((x ^ 0xFF) + 1).astype(np.uint16))


def _narrow_roundtrip(dtype):
    @intent.kernel
    def k(x: I.In[dtype, ("N",)], y: I.Out[dtype, ("N",)], s: I.Out[dtype, ("N",)]):
        b = I.buffer((x.shape[0],), dtype)
        b[:] = x[:]
        s[:] = b[:] + b[:]  # rounded once per add, like any f16/bf16 arithmetic
        y[:] = b[:]

    return k


_NARROW = {"f16": (np.float16, _narrow_roundtrip(I.f16)), "bf16": (ml_dtypes.bfloat16, _narrow_roundtrip(I.bf16))}


@pytest.mark.parametrize("name", sorted(_NARROW))
def test_buffer_of_f16_and_bf16_keeps_values_exactly(run, name):
    np_dtype, k = _NARROW[name]
    x = (RNG.standard_normal(33) * 1000).astype(np_dtype)
    x[:3] = np.array([0.0, -0.0, np.inf], np.float32).astype(np_dtype)
    y, s = np.zeros(33, np_dtype), np.zeros(33, np_dtype)
    run(k, x, y, s)
    np.testing.assert_array_equal(y.view(np.uint16), x.view(np.uint16))
    np.testing.assert_array_equal(s.view(np.uint16), (x.astype(np.float32) * 2).astype(np_dtype).view(np.uint16))


@intent.kernel
def bool_flags(idx: I.In[I.i32, ("K",)], seen: I.Out[I.bool, ("N",)]):
    flags = I.buffer((seen.shape[0],), I.bool, init=False)
    for i in I.domain(0, idx.shape[0]):
        flags[idx[i]] = True
    seen[:] = flags[:]


def test_buffer_of_bool_marks_seen_indices(run):
    idx = np.array([3, 1, 3, 6], np.int32)
    seen = np.ones(8, bool)
    run(bool_flags, idx, seen)
    np.testing.assert_array_equal(seen, np.isin(np.arange(8), idx))


@intent.kernel
def value_shaped(x: I.In[I.i32, ("N",)], n: I.index, y: I.Out[I.i32, ("N",)]):
    b = I.buffer((n,), I.i32, init=7)  # an extent computed from a runtime value
    d = I.domain(0, n)
    b[d] = b[d] + I.cast(I.indices(d), I.i32)
    y[:] = x[:]
    y[d] = b[d] + y[d]


@pytest.mark.parametrize("n", [0, 3, 5])
def test_buffer_with_an_extent_from_a_runtime_value(run, n):
    x = np.arange(10, 15, dtype=np.int32)
    y = np.zeros(5, np.int32)
    run(value_shaped, x, n, y)
    want = x.copy()
    want[:n] += 7 + np.arange(n, dtype=np.int32)
    np.testing.assert_array_equal(y, want)


def test_buffer_with_a_negative_runtime_extent_is_a_value_error(run):
    y = np.full(5, 3, np.int32)
    with pytest.raises(ValueError, match=r"extent -2 \(axis 0\) is negative"):
        run(value_shaped, np.zeros(5, np.int32), -2, y)
    np.testing.assert_array_equal(y, np.full(5, 3, np.int32))


@intent.kernel
def shape_and_dtype(x: I.In[I.f32, ("N", "M")], y: I.Out[I.f32, ("N", "M")]):
    b = I.buffer(x.shape, I.f32, init=x[:, :])
    assert b.dtype is I.f32 and b.rank == 2
    b[:, :] = b[:, :] + I.full(b.shape, 0.5, b.dtype)
    y[:, :] = b[:, :]


def test_buffer_shape_and_dtype_build_values(run):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y = np.zeros((3, 4), np.float32)
    run(shape_and_dtype, x, y)
    np.testing.assert_array_equal(y, x + np.float32(0.5))


@intent.kernel
def checked_store(idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, (4,)], z: I.InOut[I.f32, ("K",)]):
    z[:] = z[:] * 2.0
    b = I.buffer((4,), I.f32, init=0.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = z[k]
    y[:] = b[:]


@intent.kernel
def checked_load(idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("K",)]):
    b = I.buffer((3, 4), I.f32, init=1.0)
    k = I.domain(0, idx.shape[0])
    y[k] = b[1, idx[k]]


@pytest.mark.parametrize("bad", [4, -1])
def test_buffer_out_of_range_store_and_load_are_index_errors_and_outputs_stay(run, bad):
    idx = np.array([0, bad, 2], np.int32)
    y = np.full(4, 6.0, np.float32)
    z = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(IndexError) as e:
        run(checked_store, idx, y, z)
    msg = str(e.value)
    assert re.search(r"buffer@test_buffers\.py:\d+", msg), msg
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg) and re.search(r"extent 4\b", msg), msg
    np.testing.assert_array_equal(y, np.full(4, 6.0, np.float32))
    np.testing.assert_array_equal(z, [1.0, 2.0, 3.0])
    y3 = np.full(3, 6.0, np.float32)
    with pytest.raises(IndexError, match=rf"buffer@.*coordinate {bad} on axis 1 is outside its extent 4"):
        run(checked_load, idx, y3)
    np.testing.assert_array_equal(y3, np.full(3, 6.0, np.float32))


@intent.kernel
def unique_store(idx: I.In[I.i32, ("K",)], y: I.Out[I.i32, (5,)]):
    b = I.buffer((5,), I.i32, init=0)
    b[idx[:]] = I.cast(I.indices(I.domain(0, idx.shape[0])), I.i32)
    y[:] = b[:]


def test_buffer_store_at_colliding_indices_is_a_runtime_error(run):
    y = np.zeros(5, np.int32)
    run(unique_store, np.array([4, 0, 2], np.int32), y)
    np.testing.assert_array_equal(y, [1, 0, 2, 0, 0])
    y[:] = -1
    with pytest.raises(RuntimeError, match="not injective"):
        run(unique_store, np.array([4, 0, 4], np.int32), y)
    np.testing.assert_array_equal(y, np.full(5, -1, np.int32))


def test_buffer_prints_with_its_type_loads_and_stores():
    text = str(scalar_init.trace())
    assert re.search(r"(%\d+): Buffer\[f32, \(N,\)\] = buffer -1\.0:f32", text), text
    name = re.search(r"(%\d+): Buffer", text).group(1)
    assert re.search(rf"store {name}\[%\d+\] = %\d+", text), text
    assert re.search(rf"f32\[N\] = load {name}\[:\]", text), text


@pytest.mark.parametrize("body,match", [
    (lambda x: I.buffer((4,), I.f32, init=I.cast(1, I.i32)), "init has dtype i32"),
    (lambda x: I.buffer((3,), I.f32, init=x[:]), "extents N and 3 .* not provably equal"),
    (lambda x: I.buffer((3,), I.f32, init=I.zeros((2, 3), I.f32)), "does not broadcast"),
    (lambda x: I.buffer((-1,), I.f32), "negative"),
    (lambda x: I.buffer((2.5,), I.f32), "must be an integer"),
    (lambda x: I.buffer((4,), "f32"), "dtype"),
    (lambda x: I.buffer((4,), I.f32, init=0.0).__setitem__(0, I.cast(1, I.f64)), "I.cast"),
    (lambda x: I.buffer((4,), I.f32, init=0.0)[5], "out of range"),
    (lambda x: I.buffer((4,), I.f32, init=0.0)[0, 1], "2 indices for a value of rank 1"),
    (lambda x: [v for v in I.buffer((4,), I.f32, init=0.0)], "cannot be iterated"),
])
def test_buffer_surface_errors_are_trace_errors(body, match):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)]):
        body(x)

    with pytest.raises(TraceError, match=match):
        k.trace()


def test_buffer_allocation_in_a_pure_combine_is_rejected():
    def combine(a, b):
        t = I.buffer((), I.f32, init=a)
        return t[()] + b

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        y[0] = I.reduce(x[:], axis=0, identity=I.cast(0.0, I.f32), combine=combine)

    with pytest.raises(TraceError, match="must be pure"):
        k.trace()
