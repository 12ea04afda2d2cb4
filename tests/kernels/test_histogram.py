"""I.histogram (spec §13) on every executable target, against np.bincount.

Covers value and count dtypes, rank > 1 values, validity masks (range conditions folded into valid,
scalar and broadcast masks), empty input, count wrap-around in narrow count dtypes, the run-time error
for an active out-of-range value (outputs untouched) and the TraceErrors of the surface.
"""
import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(7)
NP = {I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.u8: np.uint8, I.u16: np.uint16,
      I.u32: np.uint32, I.u64: np.uint64, I.index: np.int64}

_KERNELS: dict = {}


def hist_kernel(vdtype, cdtype, bins):
    key = (vdtype, cdtype, bins)
    if key not in _KERNELS:
        @intent.kernel
        def k(v: I.In[vdtype, ("R", "C")], out: I.Out[cdtype, (bins,)]):
            out[:] = I.histogram(v[:, :], bins=bins, count_dtype=cdtype)

        _KERNELS[key] = k
    return _KERNELS[key]


@pytest.mark.parametrize("vdtype,cdtype,bins", [(I.i32, I.u32, 5), (I.u8, I.i64, 256), (I.i64, I.index, 1),
                                                (I.u16, I.u16, 33), (I.i8, I.i32, 100)])
def test_histogram_counts_match_bincount(run, vdtype, cdtype, bins):
    v = RNG.integers(0, bins, (6, 7)).astype(NP[vdtype])
    out = np.full(bins, 123, NP[cdtype])
    run(hist_kernel(vdtype, cdtype, bins), v, out)
    np.testing.assert_array_equal(out, np.bincount(v.reshape(-1).astype(np.int64), minlength=bins))
    assert out.sum() == v.size


def test_histogram_empty_input_gives_zeros(run):
    out = np.full(4, 9, np.uint32)
    run(hist_kernel(I.i32, I.u32, 4), np.zeros((0, 3), np.int32), out)
    np.testing.assert_array_equal(out, [0, 0, 0, 0])
    run(hist_kernel(I.i32, I.u32, 4), np.zeros((5, 0), np.int32), out)
    np.testing.assert_array_equal(out, [0, 0, 0, 0])


def wrap(v: int, np_dtype) -> int:
    """``v`` modulo 2^bits, as the (signed or unsigned) value of ``np_dtype``."""
    info = np.iinfo(np_dtype)
    v %= 2 ** info.bits
    return v - 2 ** info.bits if info.min < 0 and v > info.max else v


@pytest.mark.parametrize("cdtype,n", [(I.u8, 300), (I.i8, 200), (I.u16, 70000)])
def test_histogram_counts_wrap_in_the_count_dtype(run, cdtype, n):
    v = np.zeros((n, 1), np.int32)
    v[n // 2] = 1
    ones = 1
    out = np.zeros(2, NP[cdtype])
    run(hist_kernel(I.i32, cdtype, 2), v, out)
    assert [int(c) for c in out] == [wrap(n - ones, NP[cdtype]), wrap(ones, NP[cdtype])]
    assert int(out[0]) != n - ones  # it did wrap


@intent.kernel
def hist_in_range(v: I.In[I.i64, ("N",)], lo: I.i64, out: I.Out[I.u32, (8,)]):
    x = v[:]
    shifted = x - lo
    out[:] = I.histogram(shifted, bins=8, valid=(shifted >= 0) & (shifted < 8), count_dtype=I.u32)


def test_histogram_range_conditions_folded_into_valid_ignore_other_values(run):
    v = RNG.integers(-20, 30, 500).astype(np.int64)
    out = np.zeros(8, np.uint32)
    run(hist_in_range, v, 3, out)
    s = v - 3
    np.testing.assert_array_equal(out, np.bincount(s[(s >= 0) & (s < 8)], minlength=8))


@intent.kernel
def hist_masked(v: I.In[I.i16, ("R", "C")], row_ok: I.In[I.bool, ("R", 1)], on: I.bool,
                out: I.Out[I.i64, (4,)], both: I.Out[I.i64, (4,)]):
    x = v[:, :]
    out[:] = I.histogram(x, bins=4, valid=row_ok[:, :], count_dtype=I.i64)
    both[:] = I.histogram(x, bins=4, valid=on, count_dtype=I.i64)


def test_histogram_masks_broadcast_and_masked_values_are_not_checked(run):
    v = RNG.integers(0, 4, (5, 6)).astype(np.int16)
    row_ok = np.array([[1], [0], [1], [0], [1]], bool)
    v[1] = -9  # out of range, but on a masked row
    v[3, 2] = 4
    out, both = np.zeros(4, np.int64), np.zeros(4, np.int64)
    run(hist_masked, v, row_ok, False, out, both)
    np.testing.assert_array_equal(out, np.bincount(v[row_ok[:, 0]].reshape(-1), minlength=4))
    np.testing.assert_array_equal(both, [0, 0, 0, 0])


@intent.kernel
def hist_checked(v: I.In[I.i32, ("N",)], out: I.Out[I.u32, (6,)], z: I.InOut[I.i32, ("N",)]):
    z[:] = z[:] + 1
    out[:] = I.histogram(v[:], bins=6, count_dtype=I.u32)


@pytest.mark.parametrize("bad", [6, -1, 1000])
def test_histogram_active_value_out_of_range_is_a_value_error_and_outputs_stay(run, bad):
    v = np.array([0, 5, 2, bad, 1], np.int32)
    out = np.full(6, 77, np.uint32)
    z = np.arange(5, dtype=np.int32)
    with pytest.raises(ValueError) as e:
        run(hist_checked, v, out, z)
    msg = str(e.value)
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg), msg  # the value
    assert re.search(r"(?<![\d-])6(?!\d)", msg), msg  # the bins
    assert not isinstance(e.value, TraceError)
    np.testing.assert_array_equal(out, np.full(6, 77, np.uint32))
    np.testing.assert_array_equal(z, np.arange(5, dtype=np.int32))


@intent.kernel
def hist_constexpr(v: I.In[I.u8, ("N",)], out: I.Out[I.u64, ("B",)], BINS: I.Constexpr[int]):
    out[I.domain(0, BINS)] = I.histogram(v[:], bins=BINS, count_dtype=I.u64)


@pytest.mark.parametrize("bins", [3, 17])
def test_histogram_bins_from_a_constexpr_parameter(run, bins):
    v = RNG.integers(0, bins, 64).astype(np.uint8)
    out = np.zeros(bins, np.uint64)
    run(hist_constexpr, v, out, BINS=bins)
    np.testing.assert_array_equal(out, np.bincount(v, minlength=bins))


def test_histogram_prints_bins_and_validity():
    text = str(hist_in_range.trace())
    assert re.search(r"u32\[8\] = histogram %\d+, %\d+ \{bins=8, has_valid=True\}", text), text


@pytest.mark.parametrize("body,match", [
    (lambda v, f, n: I.histogram(f[:], bins=4, count_dtype=I.u32), "integer tensor"),
    (lambda v, f, n: I.histogram(v[:], bins=f[0], count_dtype=I.u32), "positive integer .* got a f32 scalar"),
    (lambda v, f, n: I.histogram(v[:], bins=0, count_dtype=I.u32), "positive"),
    (lambda v, f, n: I.histogram(v[:], bins=True, count_dtype=I.u32), "must be a positive integer"),
    (lambda v, f, n: I.histogram(v[:], bins=4, count_dtype=I.f32), "count_dtype must be an integer"),
    (lambda v, f, n: I.histogram(v[:], bins=4, valid=v[:], count_dtype=I.u32), "valid must be a bool"),
    (lambda v, f, n: I.histogram(v[0], bins=4, count_dtype=I.u32), "integer tensor"),
])
def test_histogram_surface_errors_are_trace_errors(body, match):
    @intent.kernel
    def k(v: I.In[I.i32, ("N",)], f: I.In[I.f32, ("N",)], n: I.index):
        body(v, f, n)

    with pytest.raises(TraceError, match=match):
        k.trace()
