"""cpu's float sums in their fixed lane order (intent_trace/oracle/numba/lanes.py, lane_sum.py).

A reduce whose combine is the float ``add`` of its two parameters sums element ``k`` of each run along the
innermost reduced axis into lane ``k mod W`` (W = 64 for f32, 32 for f64), every lane starting at the identity,
then sums the lanes by halving. T5 allows a reduce any order; the order is fixed so that both builds (serial,
parallel), both row-kernel spellings and every machine give the same bits. Each test checks the result against
two independent references: the documented order replayed in NumPy (float32/float64 adds are correctly rounded,
so the replay gives the order's exact bits) and T5's bound gamma_n * sum|x_i| around ``math.fsum``. Row lengths
sit around every lane boundary and beyond (W - 1, W, W + 1, 255-257, 1000, 4097). Special values: NaN-ness
and infinities as the generic interpreter (whose sequential fold is the authority), signed zeros of all-zero
rows as generic's.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import bits_equal
from hypothesis import given, settings
from hypothesis import strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

LENGTHS = (1, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 4097)
WIDTH = {np.float32: 64, np.float64: 32}


@pytest.fixture(params=["serial", "parallel"])
def build(request, monkeypatch):
    """Every call of the test runs this build (the parallel one by the threshold lowered to 0)."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if request.param == "parallel" else 1 << 62)
    return request.param


def call(kernel, *args):
    """Run ``kernel`` on cpu; return its source (to tell which lane path it took)."""
    exe = intent.compile(kernel, target="cpu")
    exe(*args)
    return exe.source


def lane_order(runs, dtype, identity=0.0):
    """The documented order replayed in NumPy: ``runs`` are [rows, n] arrays, one per position of the outer reduced
    axes in turn, each along the innermost reduced axis."""
    w = WIDTH[dtype]
    acc = np.full((runs[0].shape[0], w), identity, dtype)
    for run in runs:
        for c in range(0, run.shape[1], w):
            chunk = run[:, c:c + w].astype(dtype)
            acc[:, :chunk.shape[1]] = acc[:, :chunk.shape[1]] + chunk
    while acc.shape[1] > 1:
        h = acc.shape[1] // 2
        acc = acc[:, :h] + acc[:, h:]
    return acc[:, 0]


def assert_within_t5(got, terms, dtype):
    """T5: |sum - exact| <= gamma_n * sum|t_i| per row (exact reference: math.fsum of the terms as doubles)."""
    u = 2.0**-24 if dtype == np.float32 else 2.0**-53
    for r in range(terms.shape[0]):
        row = [float(t) for t in terms[r].ravel()]
        n = len(row)
        gamma = n * u / (1 - n * u)
        assert abs(float(got[r]) - math.fsum(row)) <= gamma * math.fsum(abs(t) for t in row), (r, n)


@intent.kernel
def row_sum32(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def row_sum64(x: I.In[I.f64, ("M", "N")], y: I.Out[I.f64, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def row_sum_squares(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :] * x[:, :], axis=1)


@intent.kernel
def row_sum_squares64(x: I.In[I.f64, ("M", "N")], y: I.Out[I.f64, ("M",)]):
    y[:] = I.reduce.sum(x[:, :] * x[:, :], axis=1)


SQUARES = {np.float32: row_sum_squares, np.float64: row_sum_squares64}


@intent.kernel
def row_sum_f16(x: I.In[I.f16, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def doubled_row_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """``c`` is used twice, so the row group materialises it into a row buffer the sum reads directly; every
    element of ``y``'s row is the sum (``c * 0`` is a signed zero, which adds nothing to a nonzero sum)."""
    c = x[:, :] * 2.0
    s = I.reduce.sum(c, axis=1)
    y[:, :] = c * 0.0 + I.reshape(s, (x.shape[0], 1))


@intent.kernel
def doubled_and_summed(x: I.In[I.f32, ("M", "N")], c_out: I.Out[I.f32, ("M", "N")], s: I.Out[I.f32, ("M",)]):
    """``c`` feeds a write and a sum written straight out (no row group): a 2-D local array, summed row by row
    in place."""
    c = x[:, :] * 2.0
    c_out[:, :] = c
    s[:] = I.reduce.sum(c, axis=1)


@intent.kernel
def plane_sum(x: I.In[I.f32, ("M", "A", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :, :], axis=(1, 2))


@intent.kernel
def column_sum(x: I.In[I.f32, ("N", "M")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=0)


@intent.kernel
def add_reduce_neg_zero(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce(x[:, :], axis=1, identity=I.full((x.shape[0],), -0.0, I.f32), combine=lambda a, b: a + b)


def _rows(rng, n, dtype, m=3):
    return (rng.standard_normal((m, n)) * 4).astype(dtype)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_row_sums_follow_the_lane_order_at_every_boundary(build, n, dtype):
    x = _rows(np.random.default_rng(n), n, dtype)
    y = np.full(3, np.nan, dtype)
    source = call(row_sum32 if dtype == np.float32 else row_sum64, x, y)
    assert "R.lanes_add(" in source and "arg0[" in source.split("R.lanes_add(")[1].split("\n")[0]  # the direct path
    assert bits_equal(y, lane_order([x], dtype))
    assert_within_t5(y, x, dtype)


@pytest.mark.parametrize("n", (33, 65, 257, 1000))
def test_strided_and_reversed_rows_are_read_at_their_stride(build, n):
    big = _rows(np.random.default_rng(7), 2 * n, np.float32)
    for x in (big[:, :n], big[:, ::2], big[:, ::-2], big[:, ::-1][:, :n]):  # unit stride, not C-contiguous: 'A' 
        y = np.full(3, np.nan, np.float32)
        call(row_sum32, x, y)
        assert bits_equal(y, lane_order([np.ascontiguousarray(x)], np.float32))
        assert_within_t5(y, x, np.float32)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_computed_elements_go_through_the_lanes_loop_in_the_same_order(build, n, dtype):
    x = _rows(np.random.default_rng(n + 1), n, dtype)
    y = np.full(3, np.nan, dtype)
    source = call(SQUARES[dtype], x, y)
    assert "R.lanes_array(" in source and re.search(rf"for k\d+ in range\({WIDTH[dtype]}\):", source)  # the lanes loop
    squares = x * x  # products in the element dtype: correctly rounded, as the kernel's
    assert bits_equal(y, lane_order([squares], dtype))
    assert_within_t5(y, squares.astype(np.float64), dtype)


@pytest.mark.parametrize("n", (1, 63, 64, 65, 300))
def test_a_materialised_row_is_summed_in_place_in_the_same_order(build, n):
    x = _rows(np.random.default_rng(n + 2), n, np.float32)
    y = np.full((3, n), np.nan, np.float32)
    source = call(doubled_row_sum, x, y)
    assert any(line.strip().startswith("v") and "R.lanes_add(" in line and ", a" in line
               for line in source.splitlines())  # the local row buffer, read in place
    want = lane_order([x * np.float32(2.0)], np.float32)
    assert bits_equal(y[:, 0], want)


@pytest.mark.parametrize("n", (1, 63, 64, 65, 300))
def test_a_materialised_2d_local_is_summed_row_by_row_in_place(build, n):
    x = _rows(np.random.default_rng(n + 6), n, np.float32)
    c, s = np.full((3, n), np.nan, np.float32), np.full(3, np.nan, np.float32)
    source = call(doubled_and_summed, x, c, s)
    assert any("R.lanes_add(" in line and re.search(r", a\d+\[\w+\], ", line) for line in source.splitlines())
    assert bits_equal(s, lane_order([x * np.float32(2.0)], np.float32))


@pytest.mark.parametrize("n", (1, 64, 65, 1000))
def test_f16_rows_accumulate_in_f32_in_the_lane_order(build, n):
    x = _rows(np.random.default_rng(n + 3), n, np.float16)
    y = np.full(3, np.nan, np.float32)
    call(row_sum_f16, x, y)
    assert bits_equal(y, lane_order([x.astype(np.float32)], np.float32))
    assert_within_t5(y, x.astype(np.float64), np.float32)


@pytest.mark.parametrize("a, n", [(1, 65), (3, 33), (5, 64), (2, 257)])
def test_several_reduced_axes_restart_the_lanes_per_outer_position(build, a, n):
    x = (np.random.default_rng(a * n).standard_normal((2, a, n)) * 4).astype(np.float32)
    y = np.full(2, np.nan, np.float32)
    call(plane_sum, x, y)
    assert bits_equal(y, lane_order([x[:, i, :] for i in range(a)], np.float32))
    assert_within_t5(y, x.reshape(2, -1), np.float32)


@pytest.mark.parametrize("n", (1, 64, 65, 300))
def test_a_sum_down_the_columns_uses_the_same_order(build, n):
    x = (np.random.default_rng(n + 4).standard_normal((n, 5)) * 4).astype(np.float32)
    y = np.full(5, np.nan, np.float32)
    call(column_sum, x, y)
    assert bits_equal(y, lane_order([np.ascontiguousarray(x.T)], np.float32))
    assert_within_t5(y, x.T, np.float32)


def test_an_empty_row_is_the_identity(build):
    y = np.full(3, np.nan, np.float32)
    call(row_sum32, np.zeros((3, 0), np.float32), y)
    assert bits_equal(y, np.zeros(3, np.float32))
    call(add_reduce_neg_zero, np.zeros((3, 0), np.float32), y)
    assert bits_equal(y, np.full(3, -0.0, np.float32))


def _generic(kernel, *args):
    intent.compile(kernel, target="generic")(*args)


@pytest.mark.parametrize("n", (1, 2, 63, 64, 65, 300, 1000))
def test_special_values_as_the_generic_interpreter(build, n):
    """NaN anywhere gives NaN; +inf and -inf in one row give NaN; infinities of one sign give that infinity;
    rows of zeros give generic's signed zero (-0 only where every term and the identity are -0)."""
    rng = np.random.default_rng(n + 5)
    x = _rows(rng, n, np.float32, m=8)
    x[0, n - 1] = np.nan
    x[1, n // 2] = np.inf
    if n > 1:
        x[2, 0], x[2, n - 1] = np.inf, -np.inf
    x[3, :] = -np.inf
    x[4, :] = -0.0
    x[5, :] = 0.0
    x[6, ::2] = -0.0
    x[6, 1::2] = 0.0
    x[7, :] = -0.0
    exact = [1, 3, 4, 5, 6, 7]  # rows whose sum is exact in any order: an infinity, or zeros
    for kernel, all_neg in ((row_sum32, 0.0), (add_reduce_neg_zero, -0.0)):
        zeros = [all_neg, 0.0, 0.0 if n > 1 else all_neg]  # rows 4-6: all -0, all +0, mixed (all -0 if n == 1)
        got, want = np.full(8, 7.0, np.float32), np.full(8, 7.0, np.float32)
        call(kernel, x, got)
        _generic(kernel, x, want)
        assert bits_equal(np.isnan(got), np.isnan(want))
        assert bits_equal(got[exact], want[exact])
        assert np.isnan(got[0]) and got[1] == np.inf and got[3] == -np.inf
        if n > 1:
            assert np.isnan(got[2])
        assert bits_equal(got[[4, 5, 6]], np.array(zeros, np.float32))  # -0 only from -0 terms and identity


@intent.kernel
def scaled_row_sum(x: I.In[I.f32, ("M", "N")], s: I.f32, y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :] * s, axis=1)


_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 3e38, -3e38, 1e-45, -1e-45, 1.5e-39]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), rows=st.integers(1, 4), scale=st.sampled_from([1.0, -1.0, 0.5, 3.0]),
       picks=st.lists(st.integers(0, len(_SPECIAL) - 1), min_size=1, max_size=64), seed=st.integers(0, 2**16),
       parallel=st.booleans())
def test_computed_elements_with_special_values_follow_the_lane_order(n, rows, scale, picks, seed, parallel):
    """Computed elements (``x * s``: signed zeros, infinities, NaNs, subnormals, overflow to infinity) summed in
    the lanes loop: every non-NaN result has the lane order's exact bits (IEEE adds replayed in NumPy), every NaN
    result is where the replay has one."""
    previous = cpu_target.PARALLEL_THRESHOLD
    cpu_target.PARALLEL_THRESHOLD = 0 if parallel else 1 << 62
    try:
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
        if n:
            at = rng.integers(0, rows * n, size=len(picks))
            x.reshape(-1)[at] = np.array([_SPECIAL[k] for k in picks], np.float32)
        y = np.full(rows, 7.0, np.float32)
        call(scaled_row_sum, x, np.float32(scale), y)
    finally:
        cpu_target.PARALLEL_THRESHOLD = previous
    with np.errstate(over="ignore", invalid="ignore"):
        want = lane_order([x * np.float32(scale)], np.float32)
    assert bits_equal(np.isnan(y), np.isnan(want))
    assert bits_equal(y[~np.isnan(want)], want[~np.isnan(want)])
