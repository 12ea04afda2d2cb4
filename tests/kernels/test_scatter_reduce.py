"""I.scatter_reduce (spec §15, T9, DESIGN §3) on every executable target, against np.ufunc.at.

Covers every builtin combine (exact integer results with collisions, IEEE maximum/minimum with NaN
and signed zeros, float add within the T5 bound), helper combines, 2-D destinations with broadcast
index tensors and values, buffers as destinations, scatter inside a parallel body, out-of-range
errors (outputs untouched) and the TraceErrors of the surface.
"""
import math
import re
from fractions import Fraction

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(31337)
NP = {I.i8: np.int8, I.i32: np.int32, I.i64: np.int64, I.u8: np.uint8, I.u32: np.uint32, I.bool: np.bool_,
      I.f32: np.float32, I.f64: np.float64, I.f16: np.float16}
UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor}

_KERNELS: dict = {}


def scatter_kernel(dtype, combine):
    key = (dtype, combine)
    if key not in _KERNELS:
        @intent.kernel
        def k(idx: I.In[I.i32, ("K",)], v: I.In[dtype, ("K",)], dest: I.InOut[dtype, ("N",)]):
            I.scatter_reduce(dest, idx[:], v[:], combine=combine)

        _KERNELS[key] = k
    return _KERNELS[key]


def _values(dtype, k):
    if dtype is I.bool:
        return RNG.integers(0, 2, k).astype(bool)
    info = np.iinfo(NP[dtype])
    return RNG.integers(info.min, info.max, k, endpoint=True, dtype=np.int64).astype(NP[dtype])


@pytest.mark.parametrize("dtype,combine", [(I.i32, "add"), (I.u8, "add"), (I.i64, "add"), (I.i8, "max"),
                                           (I.u32, "min"), (I.i32, "and"), (I.u8, "or"), (I.i64, "xor"),
                                           (I.bool, "or"), (I.bool, "and"), (I.bool, "xor")])
def test_scatter_reduce_integer_combines_are_exact_with_collisions(run, dtype, combine):
    n, k = 6, 50  # many collisions per element, some elements untouched
    idx = RNG.integers(0, n - 1, k).astype(np.int32)
    v = _values(dtype, k)
    dest = _values(dtype, n)
    want = dest.copy()
    UFUNC[combine].at(want, idx, v)  # integer add wraps modulo 2^bits in NumPy as in T2
    run(scatter_kernel(dtype, combine), idx, v, dest)
    np.testing.assert_array_equal(dest, want)


def test_scatter_reduce_float_max_min_follow_ieee_maximum_minimum(run):
    nan = np.float32("nan")
    idx = np.array([0, 0, 1, 1, 2, 2, 3, 4], np.int32)
    v = np.array([1.5, 3.0, nan, 2.0, 0.0, -0.0, -7.0, 0.0], np.float32)
    dest = np.array([2.0, 0.0, -0.0, -8.0, -0.0], np.float32)
    run(scatter_kernel(I.f32, "max"), idx, v, dest)
    want = np.array([3.0, nan, 0.0, -7.0, 0.0], np.float32)
    np.testing.assert_array_equal(dest, want)
    assert not np.signbit(dest[2]) and not np.signbit(dest[4])  # -0 < +0
    dest = np.array([2.0, 0.0, 0.0, -8.0, 0.0], np.float32)
    run(scatter_kernel(I.f32, "min"), idx, v, dest)
    np.testing.assert_array_equal(dest, np.array([1.5, nan, -0.0, -8.0, 0.0], np.float32))
    assert np.signbit(dest[2]) and not np.signbit(dest[4])


def test_scatter_reduce_float_add_is_within_the_t5_bound(run):
    n, k = 5, 400
    idx = RNG.integers(0, n, k).astype(np.int32)
    v = (RNG.standard_normal(k) * 10.0 ** RNG.integers(-3, 4, k)).astype(np.float32)
    dest0 = RNG.standard_normal(n).astype(np.float32)
    dest = dest0.copy()
    run(scatter_kernel(I.f32, "add"), idx, v, dest)
    u = Fraction(1, 2 ** 24)
    for e in range(n):
        terms = [Fraction(float(dest0[e]))] + [Fraction(float(t)) for t in v[idx == e]]
        m = len(terms)
        bound = m * u / (1 - m * u) * sum(abs(t) for t in terms)
        assert abs(Fraction(float(dest[e])) - sum(terms)) <= bound, e
    np.testing.assert_allclose(dest, _add_at(dest0, idx, v), rtol=1e-4, atol=1e-3)


def _add_at(dest, idx, v):
    out = dest.astype(np.float64)
    np.add.at(out, idx, v.astype(np.float64))
    return out


def test_scatter_reduce_f16_add_of_exact_values_is_exact(run):
    idx = np.array([1, 1, 1, 0, 3, 3], np.int32)
    v = np.array([0.5, 0.25, 1.0, -2.0, 8.0, 8.0], np.float16)
    dest = np.array([1.0, 1.0, 1.0, 1.0], np.float16)
    run(scatter_kernel(I.f16, "add"), idx, v, dest)
    np.testing.assert_array_equal(dest, np.array([-1.0, 2.75, 1.0, 17.0], np.float16))


@intent.fn
def add_square(existing, incoming):
    return existing + incoming * incoming


def saturating_add(existing, incoming):  # a plain function is wrapped as a helper
    return I.minimum(existing + incoming, I.cast(100, I.i64))


@intent.kernel
def helper_combines(idx: I.In[I.i32, ("K",)], v: I.In[I.i64, ("K",)], sq: I.InOut[I.i64, ("N",)],
                    sat: I.InOut[I.i64, ("N",)]):
    I.scatter_reduce(sq, idx[:], v[:], combine=add_square)
    I.scatter_reduce(sat, idx[:], v[:], combine=saturating_add)


def test_scatter_reduce_helper_combines_are_order_insensitive_here_and_exact(run):
    idx = RNG.integers(0, 4, 40).astype(np.int32)
    v = RNG.integers(0, 30, 40).astype(np.int64)
    sq, sat = np.arange(4, dtype=np.int64), np.array([0, 95, 50, 100], np.int64)
    want_sq, want_sat = sq.copy(), sat.copy()
    np.add.at(want_sq, idx, v * v)
    np.add.at(want_sat, idx, v)
    want_sat = np.minimum(want_sat, 100)
    run(helper_combines, idx, v, sq, sat)
    np.testing.assert_array_equal(sq, want_sq)
    np.testing.assert_array_equal(sat, want_sat)


@intent.kernel
def control_combine(idx: I.In[I.i32, ("K",)], v: I.In[I.f16, ("K",)], s: I.f16, out: I.Out[I.f16, ("N",)]):
    b = I.buffer((out.shape[0],), I.f16, init=s)
    # A combine with structured control inside (not a pointwise region): keep the larger value.
    I.scatter_reduce(b, idx[:], v[:], combine=lambda e, i: I.if_(i > e, lambda: i, lambda: e))
    out[:] = b[:]


def test_scatter_reduce_combine_with_control_flow(run):
    idx = RNG.integers(0, 5, 30).astype(np.int32)
    v = (RNG.standard_normal(30) * 4).astype(np.float16)
    out = np.zeros(6, np.float16)
    run(control_combine, idx, v, 0.25, out)
    want = np.full(6, 0.25, np.float16)
    np.maximum.at(want, idx, v)
    np.testing.assert_array_equal(out, want)


def test_cpu_scatter_reduce_without_checks_drops_the_bounds_checks():
    exe = intent.compile(scatter_kernel(I.i32, "add"), target="cpu", checks=False)
    assert "err[0] =" not in exe.source
    dest = np.zeros(3, np.int32)
    exe(np.array([2, 0, 2], np.int32), np.array([5, 6, 7], np.int32), dest)
    np.testing.assert_array_equal(dest, [6, 0, 12])


def test_scatter_reduce_records_its_combine_as_one_region():
    text = str(helper_combines.trace())
    assert "scatter_reduce sq, %" in text and "{combine=helper}" in text, text
    assert re.search(r"\^\(%\d+: i64, %\d+: i64\)", text), text
    assert "mul" in text and "minimum" in text
    text = str(scatter_kernel(I.i32, "xor").trace())
    assert "{combine=xor}" in text and re.search(r"i32 = xor %\d+, %\d+", text), text


@intent.kernel
def counts_2d(r: I.In[I.i32, ("K",)], c: I.In[I.i32, ("L",)], grid: I.Out[I.u32, ("N", "M")],
              w: I.In[I.u32, ("L",)], weighted: I.Out[I.u32, ("N", "M")]):
    grid[:, :] = I.zeros(grid.shape, I.u32)
    weighted[:, :] = I.zeros(weighted.shape, I.u32)
    rows = I.reshape(r[:], (r.shape[0], 1))
    cols = I.reshape(c[:], (1, c.shape[0]))
    I.scatter_reduce(grid, (rows, cols), 1, combine="add")  # a number broadcast to the (K, L) index shape
    I.scatter_reduce(weighted, (rows, cols), w[:], combine="add")  # (L,) broadcast to (K, L)


def test_scatter_reduce_2d_with_broadcast_index_tensors_and_values(run):
    r = np.array([0, 2, 2, 1, 2], np.int32)
    c = np.array([3, 0, 3, 3], np.int32)
    w = np.array([1, 10, 100, 1000], np.uint32)
    grid, weighted = np.full((3, 4), 9, np.uint32), np.full((3, 4), 9, np.uint32)
    run(counts_2d, r, c, grid, w, weighted)
    want, want_w = np.zeros((3, 4), np.uint32), np.zeros((3, 4), np.uint32)
    rr, cc = np.broadcast_arrays(r[:, None], c[None, :])
    np.add.at(want, (rr, cc), 1)
    np.add.at(want_w, (rr, cc), np.broadcast_to(w[None, :], rr.shape))
    np.testing.assert_array_equal(grid, want)
    np.testing.assert_array_equal(weighted, want_w)


@intent.kernel
def into_buffer(idx: I.In[I.i64, ("K",)], v: I.In[I.f64, ("K",)], top: I.Out[I.f64, ("N",)]):
    best = I.buffer((top.shape[0],), I.f64, init=-math.inf)
    I.scatter_reduce(best, idx[:], v[:], combine="max")
    top[:] = best[:]


def test_scatter_reduce_into_a_buffer_with_init(run):
    idx = np.array([1, 3, 1, 1, 0], np.int64)
    v = np.array([2.0, -1.0, 7.0, 3.0, 0.5])
    top = np.zeros(5)
    run(into_buffer, idx, v, top)
    want = np.full(5, -np.inf)
    np.maximum.at(want, idx, v)
    np.testing.assert_array_equal(top, want)


@intent.kernel
def parallel_rows(idx: I.In[I.i32, ("R", "C")], counts: I.InOut[I.i64, ("B",)], per_row: I.Out[I.i64, ("R", 4)]):
    cols = I.domain(0, idx.shape[1])
    for r in I.parallel(I.domain(0, idx.shape[0])):
        I.scatter_reduce(counts, idx[r, cols], 1, combine="add")  # a reduction effect: points may collide
        mine = I.buffer((4,), I.i64, init=0)  # private to the point
        I.scatter_reduce(mine, idx[r, cols] % 4, 1, combine="add")
        per_row[r, :] = mine[:]


def test_scatter_reduce_in_a_parallel_body_combines_across_points(run):
    idx = RNG.integers(0, 6, (7, 9)).astype(np.int32)
    counts = np.arange(6, dtype=np.int64)
    per_row = np.zeros((7, 4), np.int64)
    run(parallel_rows, idx, counts, per_row)
    np.testing.assert_array_equal(counts, np.arange(6) + np.bincount(idx.reshape(-1), minlength=6))
    np.testing.assert_array_equal(per_row, [np.bincount(row % 4, minlength=4) for row in idx])


def test_cpu_scatter_reduce_into_shared_state_runs_its_parallel_loop_serially():
    source = intent.compile(parallel_rows, target="cpu").source
    assert re.search(r"for o\d+ in range\(", source) and not re.search(r"for o\d+ in prange\(", source), source

    @intent.kernel
    def private_only(idx: I.In[I.i32, ("R", "C")], per_row: I.Out[I.i64, ("R", 4)]):
        cols = I.domain(0, idx.shape[1])
        for r in I.parallel(I.domain(0, idx.shape[0])):
            mine = I.buffer((4,), I.i64, init=0)
            I.scatter_reduce(mine, idx[r, cols] % 4, 1, combine="add")
            per_row[r, :] = mine[:]

    assert re.search(r"for o\d+ in prange\(", intent.compile(private_only, target="cpu").source)


@intent.kernel
def checked(r: I.In[I.i32, ("K",)], c: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)],
            dest: I.InOut[I.f32, ("N", "M")], z: I.Out[I.f32, ("K",)]):
    z[:] = v[:] * 3.0
    I.scatter_reduce(dest, (r[:], c[:]), v[:], combine="add")


@pytest.mark.parametrize("axis,bad,extent", [(0, 2, 2), (1, 3, 3), (0, -1, 2), (1, -7, 3)])
def test_scatter_reduce_out_of_range_is_an_index_error_and_outputs_stay(run, axis, bad, extent):
    r = np.array([0, 1, 1, 0], np.int32)
    c = np.array([2, 0, 1, 1], np.int64)
    (r if axis == 0 else c)[3] = bad
    v = np.ones(4, np.float32)
    dest = np.arange(6, dtype=np.float32).reshape(2, 3)
    z = np.full(4, -2.0, np.float32)
    with pytest.raises(IndexError) as e:
        run(checked, r, c, v, dest, z)
    msg = str(e.value)
    assert re.search(r"\bdest\b", msg) and re.search(rf"\baxis {axis}\b", msg), msg
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg) and re.search(rf"extent {extent}\b", msg), msg
    np.testing.assert_array_equal(dest, np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(z, np.full(4, -2.0, np.float32))


@pytest.mark.parametrize("body,match", [
    (lambda i, f, o, io, x: I.scatter_reduce(x, i[:], f[:], combine="add"), "In view"),
    (lambda i, f, o, io, x: I.scatter_reduce(o, i[:], f[:], combine="add"), "Out view not written yet"),
    (lambda i, f, o, io, x: I.scatter_reduce(I.buffer((4,), I.f32), i[:], f[:], combine="add"), "no init"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:], combine="mul"), "is not one of"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:], combine="xor"), "integer or bool"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:] > 0, combine="add"), "values have dtype bool"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], I.cast(f[:], I.f64), combine="max"), r"I\.cast"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, (i[:], i[:]), f[:], combine="add"), "2 index entries"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], I.zeros((2, 3), I.f32), combine="add"), "do not broadcast"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:], combine=lambda a, b: I.cast(a + b, I.f64)),
     "must return the accumulator schema f32"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:], combine=lambda a, b: a + b + x[0]),
     "must be pure"),
    (lambda i, f, o, io, x: I.scatter_reduce(io, i[:], f[:], combine=5), "combine must be one of"),
    (lambda i, f, o, io, x: I.scatter_reduce(f[:], i[:], f[:], combine="add"), "dest must be a view or a buffer"),
])
def test_scatter_reduce_surface_errors_are_trace_errors(body, match):
    @intent.kernel
    def k(i: I.In[I.i32, ("K",)], f: I.In[I.f32, ("K",)], o: I.Out[I.f32, ("N",)], io: I.InOut[I.f32, ("N",)],
          x: I.In[I.f32, ("N",)]):
        body(i, f, o, io, x)

    with pytest.raises(TraceError, match=match):
        k.trace()


def test_scatter_reduce_add_on_bool_is_a_trace_error():
    @intent.kernel
    def k(i: I.In[I.i32, ("K",)], b: I.InOut[I.bool, ("N",)]):
        I.scatter_reduce(b, i[:], True, combine="add")

    with pytest.raises(TraceError, match="needs a numeric destination, got bool; use 'or'/'and' for bool"):
        k.trace()
