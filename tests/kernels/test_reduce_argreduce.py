"""I.arg_reduce.max (spec §7, numerics T5) on every executable target.

The reference is a hand-written fold with T5's rules written out here: NaN is the maximum and the
first NaN wins, ties go to the lowest index; the indices have the index dtype.
"""

import numpy as np
import pytest

import intent_trace as intent
from conftest import bits_equal
from intent_trace import I
from intent_trace.errors import TraceError
from reduce_support import NAMES, NP, _all


# --- arg_reduce.max ----------------------------------------------------------------------------------

def argmax_reference(row) -> tuple:
    """Hand-written T5 rule: NaN is the maximum and the first NaN wins; ties go to the lowest index."""
    best, best_i = None, None
    for i, v in enumerate(row):
        v = row.dtype.type(v)
        if best is None:
            best, best_i = v, i
            continue
        best_nan = isinstance(best, np.floating) and np.isnan(best)
        v_nan = isinstance(v, np.floating) and np.isnan(v)
        if best_nan:
            continue
        if v_nan or v > best:
            best, best_i = v, i
    return best, best_i


_ARG_KERNELS: dict = {}


def argmax_kernel(dt, rank: int, axis: int, idx_dt=I.index):
    key = (dt, rank, axis, idx_dt)
    if key not in _ARG_KERNELS:
        names = NAMES[:rank]
        a = axis % rank
        kept = tuple(n for k, n in enumerate(names) if k != a)

        @intent.kernel
        def k(x: I.In[dt, names], v: I.Out[dt, kept], i: I.Out[idx_dt, kept]):
            values, where = I.arg_reduce.max(x[_all(rank)], axis=axis)
            v[_all(len(kept))] = values
            i[_all(len(kept))] = where

        _ARG_KERNELS[key] = k
    return _ARG_KERNELS[key]


def run_argmax(run, x, dt, axis):
    a = axis % x.ndim
    kept = tuple(e for k, e in enumerate(x.shape) if k != a)
    v = np.zeros(kept, NP[dt])
    i = np.full(kept, -1, np.int64)
    run(argmax_kernel(dt, x.ndim, axis), x, v, i)
    return v, i


def check_argmax(x, axis, v, i):
    a = axis % x.ndim
    moved = np.moveaxis(x, a, -1)
    assert i.dtype == np.int64 and v.shape == i.shape == moved.shape[:-1]
    for pos in np.ndindex(*moved.shape[:-1]):
        want_v, want_i = argmax_reference(moved[pos])
        assert i[pos] == want_i, (pos, moved[pos], i[pos], want_i)
        assert bits_equal(v[pos], np.asarray(want_v, x.dtype)), (pos, v[pos], want_v)


@pytest.mark.parametrize("dt", [I.f32, I.f64], ids=str)
def test_arg_reduce_max_ties_and_nans(run, dt):
    nan, inf = np.nan, np.inf
    rows = [
        [3, 1, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0],     # tie: lowest index
        [1, nan, 5, nan, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # first NaN wins over larger values and later NaNs
        [-inf] * 13,                                 # all equal to the identity value: index 0
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 7],      # max in the bulk of a partial chain, tie in the tail
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nan, nan],  # NaN only in the tail
        [inf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nan],  # NaN beats +inf even when it comes last
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
        [-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -0.5],
    ]
    x = np.array(rows, NP[dt])
    v, i = run_argmax(run, x, dt, 1)
    check_argmax(x, 1, v, i)
    assert list(i) == [0, 1, 0, 9, 11, 12, 0, 12]
    assert np.isnan(v[1]) and np.isnan(v[4]) and np.isnan(v[5])


@pytest.mark.parametrize("dt", [I.i32, I.u8, I.i64], ids=str)
def test_arg_reduce_max_integers(run, dt):
    info = np.iinfo(NP[dt])
    x = np.array([[info.min] * 10, [5, info.max, 1, info.max, 0, 0, 0, 0, 0, info.max],
                  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], NP[dt])
    v, i = run_argmax(run, x, dt, -1)
    check_argmax(x, 1, v, i)
    assert list(i) == [0, 1, 9]


def test_arg_reduce_max_axis0_of_matrix(run):
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 3, (9, 5)).astype(np.float32)  # many ties
    x[4, 2] = np.nan
    x[7, 2] = np.nan
    v, i = run_argmax(run, x, I.f32, -2)
    check_argmax(x, 0, v, i)
    assert i[2] == 4


def test_arg_reduce_max_no_remaining_axes_gives_scalars(run):
    x = np.array([0.5, 2.0, -1.0, 2.0], np.float64)
    v, i = run_argmax(run, x, I.f64, 0)
    assert v.shape == () and i.shape == () and i.dtype == np.int64
    assert float(v) == 2.0 and int(i) == 1


def test_arg_reduce_max_indices_are_index_dtype(run):
    k = argmax_kernel(I.f32, 1, 0, idx_dt=I.i32)
    with pytest.raises(TypeError) as e:
        run(k, np.zeros(3, np.float32), np.zeros((), np.float32), np.zeros((), np.int32))
    msg = str(e.value)
    assert isinstance(e.value, TraceError) and "index" in msg and "i32" in msg


def test_arg_reduce_max_rank3_middle_axis(run):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (2, 6, 3)).astype(np.int16)
    v, i = run_argmax(run, x, I.i16, 1)
    check_argmax(x, 1, v, i)
