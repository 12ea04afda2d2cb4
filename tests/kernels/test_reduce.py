"""Reductions (spec §7, numerics T5) on every executable target.

References are independent of the library: exact sums with ``fractions.Fraction`` / ``math.fsum``
and the T5 bound |computed - exact| <= gamma_n * sum|t_i|, Python integers reduced modulo 2^bits,
hand-written folds for user combines and for arg_reduce (NaN and tie rules written out here).
"""

import functools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64, I.bool: np.bool_,
      I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.index: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64}

# T5, written out independently of the library: the default accumulator of reduce.sum.
T5_SUM_ACC = {I.f16: I.f32, I.bf16: I.f32, I.f32: I.f32, I.f64: I.f64, I.bool: I.i64,
              I.i8: I.i64, I.i16: I.i64, I.i32: I.i64, I.i64: I.i64,
              I.u8: I.u64, I.u16: I.u64, I.u32: I.u64, I.u64: I.u64}
UNIT_ROUNDOFF = {I.f32: Fraction(1, 2 ** 24), I.f64: Fraction(1, 2 ** 53)}
NAMES = ("A", "B", "C")


def gamma(n: int, u: Fraction) -> Fraction:
    return n * u / (1 - n * u)


def wrap_int(v: int, np_dtype) -> int:
    info = np.iinfo(np_dtype)
    bits = info.bits
    v &= (1 << bits) - 1
    if info.min < 0 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    u = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u)))


def normalized(axis, rank: int) -> tuple:
    axes = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % rank for a in axes))


def rows_of(x: np.ndarray, axes: tuple):
    """Move the reduced axes last and flatten them: (kept shape, array (kept..., K))."""
    moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
    kept = moved.shape[:x.ndim - len(axes)]
    return kept, moved.reshape(kept + (int(np.prod([x.shape[a] for a in axes], dtype=np.int64)),))


def assert_sum_within(got: np.ndarray, x: np.ndarray, axes: tuple, acc) -> None:
    """T5: every output within gamma_n * sum|t_i| of the exact sum of its terms (t_i exact in acc)."""
    kept, flat = rows_of(x, axes)
    got = np.asarray(got)
    assert got.shape == kept
    u = UNIT_ROUNDOFF[acc]
    n = flat.shape[-1]
    for pos in np.ndindex(*kept):
        terms = [Fraction(float(t)) for t in flat[pos]]
        value = float(got[pos])
        assert math.isfinite(value), (pos, value)
        exact = sum(terms, Fraction(0))
        bound = gamma(n, u) * sum(abs(t) for t in terms)
        assert abs(Fraction(value) - exact) <= bound, (pos, value, float(exact), float(bound))


def int_sum_reference(x: np.ndarray, axes: tuple, acc_np) -> np.ndarray:
    kept, flat = rows_of(x, axes)
    out = np.zeros(kept, acc_np)
    for pos in np.ndindex(*kept):
        out[pos] = wrap_int(sum(int(v) for v in flat[pos]), acc_np)
    return out


def _all(rank: int) -> tuple:
    return (slice(None),) * rank


_KERNELS: dict = {}


def reduce_kernel(which: str, src, out, rank: int, axis, acc=None):
    """``y = I.reduce.<which>(x, axis=axis[, acc_dtype=acc])`` for x of rank ``rank``; cached."""
    key = (which, src, out, rank, axis, acc)
    if key not in _KERNELS:
        names = NAMES[:rank]
        axes = normalized(axis, rank)
        kept = tuple(n for k, n in enumerate(names) if k not in axes)
        fn = getattr(I.reduce, which)
        extra = {} if which in ("any", "all") or acc is None else {"acc_dtype": acc}

        @intent.kernel
        def k(x: I.In[src, names], y: I.Out[out, kept]):
            y[_all(len(kept))] = fn(x[_all(rank)], axis=axis, **extra)

        _KERNELS[key] = k
    return _KERNELS[key]


def run_reduce(run, which, x, src, out, axis, acc=None):
    axes = normalized(axis, x.ndim)
    kept = tuple(e for k, e in enumerate(x.shape) if k not in axes)
    y = np.full(kept, 7, NP[out]) if out is not I.bool else np.zeros(kept, np.bool_)
    run(reduce_kernel(which, src, out, x.ndim, axis, acc), x, y)
    return y


# --- reduce.sum: default accumulators (T5) ------------------------------------------------------

# Each source is chosen so that accumulating in the source dtype would give a different value.
SUM_DEFAULT_CASES = [
    (I.f16, np.full(40, 2000.0), 80000.0),               # > f16 max (65504)
    (I.bf16, np.array([256.0, 1, 1, 1, 1]), 260.0),     # 256 + 1 rounds to 256 in bf16
    (I.f32, np.array([0.5, 0.25, -1.0, 3.0]), 2.75),
    (I.f64, np.array([2.0 ** 60, 1.0, -(2.0 ** 60)]), None),
    (I.bool, np.array([True, False, True, True] * 100), 300),  # count > 255
    (I.i8, np.full(10, 100), 1000),
    (I.i16, np.full(3, 30000), 90000),
    (I.i32, np.full(2, 2 ** 31 - 1), 2 ** 32 - 2),
    (I.i64, np.array([-5, 7, -(2 ** 62)]), 2 - 2 ** 62),
    (I.u8, np.full(10, 200), 2000),
    (I.u16, np.full(2, 65535), 131070),
    (I.u32, np.full(2, 2 ** 32 - 1), 2 ** 33 - 2),
    (I.u64, np.array([2 ** 63, 5], dtype=np.uint64), 2 ** 63 + 5),
]


@pytest.mark.parametrize("src, values, want", SUM_DEFAULT_CASES, ids=[str(c[0]) for c in SUM_DEFAULT_CASES])
def test_reduce_sum_default_accumulator_dtype_and_value(run, src, values, want):
    acc = T5_SUM_ACC[src]
    x = np.asarray(values).astype(NP[src])
    y = run_reduce(run, "sum", x, src, acc, 0)
    assert y.dtype == NP[acc] and y.shape == ()
    if acc.is_float:
        assert_sum_within(y, x, (0,), acc)
        if want is not None:
            assert float(y) == want
    else:
        assert int(y) == want


WRONG_OUT = {I.f16: I.f16, I.bf16: I.bf16, I.f32: I.f64, I.f64: I.f32, I.bool: I.bool, I.i8: I.i8, I.i32: I.i32,
             I.i64: I.u64, I.u8: I.u8, I.u32: I.i64, I.u64: I.i64}


@pytest.mark.parametrize("src", list(WRONG_OUT), ids=str)
def test_reduce_sum_wrong_out_dtype_is_type_error_at_call(run, src):
    wrong = WRONG_OUT[src]
    x = np.zeros(3, NP[src])
    y = np.zeros((), NP[wrong])
    k = reduce_kernel("sum", src, wrong, 1, 0)
    with pytest.raises(TypeError) as e:
        run(k, x, y)
    msg = str(e.value)
    assert isinstance(e.value, TraceError)
    assert f"{T5_SUM_ACC[src]} values into y ({wrong})" in msg, msg


# --- reduce.sum: explicit acc_dtype --------------------------------------------------------------

def test_reduce_sum_f32_source_f64_accumulator_matches_fsum(run):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 37)) * np.exp2(rng.integers(-20, 20, (4, 37)))).astype(np.float32)
    x[0, :3] = [1e8, 1.0, -1e8]  # exact in f32; in an f32 accumulator the 1 would be lost
    x[0, 3:] = 0.0
    y = run_reduce(run, "sum", x, I.f32, I.f64, 1, acc=I.f64)
    assert y.dtype == np.float64
    assert y[0] == 1.0
    for r in range(4):
        terms = [float(t) for t in x[r]]
        exact = math.fsum(terms)  # correctly rounded f64 of the exact sum
        bound = float(gamma(37, UNIT_ROUNDOFF[I.f64])) * math.fsum(abs(t) for t in terms)
        assert abs(y[r] - exact) <= bound * (1 + 2.0 ** -50) + abs(exact) * 2.0 ** -53
    assert_sum_within(y, x, (1,), I.f64)


def test_reduce_sum_f32_default_accumulator_stays_within_f32_bound(run):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 50)) * 1000).astype(np.float32)
    y = run_reduce(run, "sum", x, I.f32, I.f32, -1)
    assert y.dtype == np.float32
    assert_sum_within(y, x, (1,), I.f32)


def test_reduce_sum_float_source_integer_accumulator_casts_first(run):
    # T3: float -> int truncates toward zero, so the terms are 1, 1, 0, -2 (not 1.7 + 1.7 - 0.9 - 2.5)
    x = np.array([1.7, 1.7, -0.9, -2.5], np.float32)
    y = run_reduce(run, "sum", x, I.f32, I.i32, 0, acc=I.i32)
    assert y.dtype == np.int32 and int(y) == 0


@pytest.mark.parametrize("src, acc, explicit, values", [
    (I.u8, I.u8, True, [200, 100, 255, 1]),                 # 556 mod 256 = 44
    (I.i8, I.i16, True, [127] * 300),                       # cast to i16 first, then wraps past 32767
    (I.i32, I.i32, True, [2 ** 31 - 1, 1, 5]),              # wraps to INT32_MIN + 5
    (I.u16, I.i64, True, [65535, 65535]),                   # unsigned -> wider signed: exact
    (I.i64, I.i64, False, [2 ** 63 - 1, 1]),                # the default accumulator wraps too
    (I.u64, I.u64, False, [2 ** 64 - 1, 2]),
], ids=["u8-u8", "i8-i16", "i32-i32", "u16-i64", "i64-default", "u64-default"])
def test_reduce_sum_integer_accumulator_exact_modulo_2_bits(run, src, acc, explicit, values):
    x = np.array(values, dtype=object).astype(NP[src])
    y = run_reduce(run, "sum", x, src, acc, 0, acc=acc if explicit else None)
    assert y.dtype == NP[acc]
    assert int(y) == wrap_int(sum(int(v) for v in values), NP[acc])


def test_reduce_sum_acc_dtype_bool_is_type_error():
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.bool, ()]):
        y[()] = I.reduce.sum(x[:], axis=0, acc_dtype=I.bool)

    with pytest.raises(TraceError) as e:
        k.trace()
    assert isinstance(e.value, TypeError) and "acc_dtype" in str(e.value)


# --- reduce.sum: axes -----------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3, (0, 2), (-1, -3), (1, 2), (0, 1, 2), (-3, 1, -1)],
                         ids=str)
def test_reduce_sum_multiple_and_negative_axes(run, axis):
    x = np.arange(2 * 3 * 5, dtype=np.int64).reshape(2, 3, 5) * 7 - 40  # integer-valued: exact in f64
    xf = x.astype(np.float64)
    axes = normalized(axis, 3)
    y = run_reduce(run, "sum", xf, I.f64, I.f64, axis)
    assert np.array_equal(y, np.sum(x, axis=axes).astype(np.float64))
    yi = run_reduce(run, "sum", x.astype(np.int32), I.i32, I.i64, axis)
    assert np.array_equal(yi, np.sum(x, axis=axes))


@pytest.mark.parametrize("shape, axis", [((0,), 0), ((3, 0), 1), ((0, 4), 0), ((2, 0, 3), (1,)),
                                         ((2, 0, 3), (0, 1)), ((0, 3), 1), ((2, 0, 3), 2)],
                         ids=["n0", "3x0-ax1", "0x4-ax0", "2x0x3-ax1", "2x0x3-ax01", "0x3-ax1-empty-kept",
                              "2x0x3-ax2-empty-kept"])
def test_reduce_sum_empty_returns_identity(run, shape, axis):
    axes = normalized(axis, len(shape))
    kept = tuple(e for k, e in enumerate(shape) if k not in axes)
    y = run_reduce(run, "sum", np.zeros(shape, np.float32), I.f32, I.f32, axis)
    assert y.shape == kept and bits_equal(y, np.zeros(kept, np.float32))  # +0.0, not -0.0
    yi = run_reduce(run, "sum", np.zeros(shape, np.uint8), I.u8, I.u64, axis)
    assert yi.shape == kept and np.array_equal(yi, np.zeros(kept, np.uint64))


# --- reduce.max ------------------------------------------------------------------------------------

def ieee_maximum(a: float, b: float) -> float:
    """IEEE 754-2019 maximum: NaN wins, -0 < +0."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return 0.0 if not (math.copysign(1, a) < 0 and math.copysign(1, b) < 0) else -0.0
    return a if a > b else b


def max_reference(x: np.ndarray, axes: tuple) -> np.ndarray:
    kept, flat = rows_of(x, axes)
    out = np.empty(kept, x.dtype)
    for pos in np.ndindex(*kept):
        acc = -math.inf
        for v in flat[pos]:
            acc = ieee_maximum(acc, float(v))
        out[pos] = acc
    return out


@pytest.mark.parametrize("dt", [I.f32, I.f64], ids=str)
def test_reduce_max_nan_propagates(run, dt):
    n = 19  # longer than a vector of partial accumulators, with a tail
    x = np.tile(np.arange(n, dtype=NP[dt]) - 5, (n + 2, 1))
    for r in range(n):
        x[r, r] = np.nan  # one NaN at every position, including the bulk and the tail
    x[n, :] = np.inf
    x[n, 4] = np.nan    # NaN beats +inf
    x[n + 1, :] = -np.inf
    y = run_reduce(run, "max", x, dt, dt, 1)
    want = max_reference(x, (1,))
    assert np.all(np.isnan(y[:n + 1])) and y[n + 1] == -np.inf
    assert np.array_equal(y, want, equal_nan=True)


def test_reduce_max_signed_zeros(run):
    rows = [[-0.0, -0.0, -0.0], [-0.0, 0.0, -0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, 0.0],
            [-1.0, -0.0, -np.inf], [-np.inf, -0.0, -1.0]]
    x = np.array(rows, np.float32)
    y = run_reduce(run, "max", x, I.f32, I.f32, 1)
    assert bits_equal(y, np.array([-0.0, 0.0, 0.0, 0.0, -0.0, -0.0], np.float32))
    long = np.full((2, 21), -0.0, np.float64)
    long[1, 17] = 0.0
    y = run_reduce(run, "max", long, I.f64, I.f64, -1)
    assert bits_equal(y, np.array([-0.0, 0.0]))


@pytest.mark.parametrize("dt, want", [(I.f32, -np.inf), (I.f64, -np.inf), (I.f16, -np.inf), (I.i8, -128),
                                      (I.i64, -(2 ** 63)), (I.u16, 0), (I.u8, 0)], ids=lambda v: str(v))
def test_reduce_max_empty_returns_lowest(run, dt, want):
    y = run_reduce(run, "max", np.zeros((3, 0), NP[dt]), dt, dt, 1)
    assert y.dtype == NP[dt]
    assert np.array_equal(y, np.full(3, want, NP[dt]))


@pytest.mark.parametrize("dt", [I.i8, I.i64, I.u32], ids=str)
def test_reduce_max_integers_exact(run, dt):
    info = np.iinfo(NP[dt])
    x = np.array([[info.min, info.min, info.min], [info.min, info.max, 3], [0, 1, info.max]], NP[dt])
    y = run_reduce(run, "max", x, dt, dt, 1)
    assert np.array_equal(y, np.array([info.min, info.max, info.max], NP[dt]))
    y0 = run_reduce(run, "max", x, dt, dt, -2)
    assert np.array_equal(y0, np.array([0, info.max, info.max], NP[dt]))


def test_reduce_max_explicit_acc_dtype_casts_first(run):
    x = np.array([[1.5, 2.75], [-0.5, -7.25]], np.float32)
    y = run_reduce(run, "max", x, I.f32, I.i32, 1, acc=I.i32)  # truncation: 1, 2 / 0, -7
    assert y.dtype == np.int32 and np.array_equal(y, [2, 0])


def test_reduce_max_of_bool_is_type_error():
    @intent.kernel
    def k(x: I.In[I.bool, ("N",)], y: I.Out[I.bool, ()]):
        y[()] = I.reduce.max(x[:], axis=0)

    with pytest.raises(TypeError) as e:
        k.trace()
    assert isinstance(e.value, TraceError) and "I.reduce.max" in str(e.value) and "bool" in str(e.value)


# --- reduce.any / all -------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["any", "all"])
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1)], ids=str)
def test_reduce_any_all_bool(run, which, axis):
    rng = np.random.default_rng(3)
    x = rng.random((5, 11)) < 0.5
    x[0, :] = True
    x[1, :] = False
    x[:, 0] = True
    x[:, 1] = False
    axes = normalized(axis, 2)
    y = run_reduce(run, which, x, I.bool, I.bool, axis)
    ref = getattr(np, which)(x, axis=axes)
    assert y.dtype == np.bool_ and np.array_equal(y, ref)


@pytest.mark.parametrize("which, want", [("any", False), ("all", True)])
def test_reduce_any_all_empty_returns_identity(run, which, want):
    y = run_reduce(run, which, np.zeros((4, 0), np.bool_), I.bool, I.bool, 1)
    assert np.array_equal(y, np.full(4, want))
    y = run_reduce(run, which, np.zeros((0,), np.bool_), I.bool, I.bool, 0)
    assert y.shape == () and bool(y) is want


@pytest.mark.parametrize("which", ["any", "all"])
def test_reduce_any_all_non_bool_is_trace_error(which):
    fn = getattr(I.reduce, which)

    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.bool, ()]):
        y[()] = fn(x[:], axis=0)

    with pytest.raises(TraceError) as e:
        k.trace()
    msg = str(e.value)
    assert isinstance(e.value, TypeError) and f"I.reduce.{which}" in msg and "bool" in msg and "i32" in msg


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


# --- generic reduce with user combines -----------------------------------------------------------

@intent.fn
def add_fn(a, b):
    return a + b


@intent.kernel
def _user_combines(x: I.In[I.i32, ("M", "N")], s: I.Out[I.i32, ("M",)], lo: I.Out[I.i32, ("N",)],
                   t: I.Out[I.i32, ()]):
    v = x[:, :]
    s[:] = I.reduce(v, axis=1, identity=I.zeros((x.shape[0],), I.i32), combine=add_fn)
    lo[:] = I.reduce(v, axis=0, identity=I.full((x.shape[1],), np.iinfo(np.int32).max, I.i32),
                     combine=lambda a, b: I.minimum(a, b))
    t[()] = I.reduce(v, axis=(0, 1), identity=I.cast(0, I.i32), combine=lambda a, b: a ^ b)


def test_reduce_generic_fn_helper_and_lambda_combines(run):
    rng = np.random.default_rng(6)
    x = rng.integers(-(2 ** 31), 2 ** 31, (4, 13), dtype=np.int64).astype(np.int32)
    s, lo, t = np.zeros(4, np.int32), np.zeros(13, np.int32), np.zeros((), np.int32)
    run(_user_combines, x, s, lo, t)
    for r in range(4):
        acc = 0
        for v in x[r]:
            acc = wrap_int(acc + int(v), np.int32)
        assert s[r] == acc
    for c in range(13):
        acc = 2 ** 31 - 1
        for v in x[:, c]:
            acc = min(acc, int(v))
        assert lo[c] == acc
    acc = 0
    for v in x.reshape(-1):
        acc ^= int(v)
    assert int(t) == acc


@intent.kernel
def _sum_count(x: I.In[I.f64, ("M", "N")], s: I.Out[I.f64, ("M",)], c: I.Out[I.i64, ("M",)]):
    v = x[:, :]
    m = x.shape[0]
    positive = v > 0.0
    total, count = I.reduce((I.select(positive, v, I.zeros((m, x.shape[1]), I.f64)), I.cast(positive, I.i64)), axis=1,
                            identity=(I.zeros((m,), I.f64), I.zeros((m,), I.i64)),
                            combine=lambda a, b: (a[0] + b[0], a[1] + b[1]))
    s[:] = total
    c[:] = count


def test_reduce_generic_tuple_accumulator(run):
    rng = np.random.default_rng(7)
    x = rng.integers(-50, 50, (5, 17)).astype(np.float64) / 4  # dyadic: every sum exact
    x[3, :] = -1.0
    s, c = np.full(5, 9.0), np.full(5, 9, np.int64)
    run(_sum_count, x, s, c)
    for r in range(5):
        total, count = 0.0, 0
        for v in x[r]:
            if v > 0:
                total, count = total + v, count + 1
        assert s[r] == total and c[r] == count


@intent.kernel
def _min_max_record(x: I.In[I.i16, ("M", "N")], span: I.Out[I.i16, ("N",)], hi: I.Out[I.i16, ("N",)]):
    v = x[:, :]
    n = x.shape[1]
    r = I.reduce(I.record(lo=v, hi=v), axis=0,
                 identity=I.record(lo=I.full((n,), 32767, I.i16), hi=I.full((n,), -32768, I.i16)),
                 combine=lambda a, b: I.record(lo=I.minimum(a.lo, b.lo), hi=I.maximum(a.hi, b.hi)))
    span[:] = r.hi - r.lo
    hi[:] = r.hi


def test_reduce_generic_record_accumulator(run):
    rng = np.random.default_rng(8)
    x = rng.integers(-1000, 1000, (11, 6)).astype(np.int16)
    span, hi = np.zeros(6, np.int16), np.zeros(6, np.int16)
    run(_min_max_record, x, span, hi)
    for c in range(6):
        lo_c, hi_c = 32767, -32768
        for v in x[:, c]:
            lo_c, hi_c = min(lo_c, int(v)), max(hi_c, int(v))
        assert hi[c] == hi_c and span[c] == hi_c - lo_c


@intent.kernel
def _sum_mod(x: I.In[I.i64, ("M", "N")], y: I.Out[I.i64, ()], rows: I.Out[I.i64, ("M",)], p: I.i64):
    v = x[:, :]
    y[()] = I.reduce(v, axis=(0, 1), identity=I.cast(0, I.i64), combine=lambda a, b, q: (a + b) % q,
                     combine_operands=(p,))
    rows[:] = I.reduce(v, axis=-1, identity=I.zeros((x.shape[0],), I.i64), combine=lambda a, b, q: (a + b) % q,
                       combine_operands=(p,))


@pytest.mark.parametrize("p", [7, 1_000_003])
def test_reduce_generic_combine_operands_runtime_scalar(run, p):
    rng = np.random.default_rng(9)
    x = rng.integers(0, p, (3, 10)).astype(np.int64)
    y, rows = np.zeros((), np.int64), np.zeros(3, np.int64)
    run(_sum_mod, x, y, rows, p)
    acc = 0
    for v in x.reshape(-1):
        acc = (acc + int(v)) % p
    assert int(y) == acc
    assert list(rows) == [sum(int(v) for v in x[r]) % p for r in range(3)]


@intent.kernel
def _saturating(x: I.In[I.u32, ("M", "N")], cap: I.In[I.u32, ("M",)], y: I.Out[I.u32, ("M",)]):
    caps = cap[:]
    # A tensor operand: min(a + b, cap) is associative and commutative on non-negative values.
    y[:] = I.reduce(x[:, :], axis=1, identity=I.zeros((x.shape[0],), I.u32),
                    combine=lambda a, b, c: I.minimum(a + b, c), combine_operands=(caps,))


def test_reduce_generic_combine_operands_tensor(run):
    rng = np.random.default_rng(10)
    x = rng.integers(0, 100, (4, 9)).astype(np.uint32)
    cap = np.array([0, 50, 400, 10 ** 6], np.uint32)
    y = np.zeros(4, np.uint32)
    run(_saturating, x, cap, y)
    assert list(y) == [min(sum(int(v) for v in x[r]), int(cap[r])) for r in range(4)]


def test_reduce_generic_empty_returns_identity(run):
    s, c = np.full(3, 9.0), np.full(3, 9, np.int64)
    run(_sum_count, np.zeros((3, 0)), s, c)
    assert bits_equal(s, np.zeros(3)) and list(c) == [0, 0, 0]
    y, rows = np.full((), 5, np.int64), np.full(2, 5, np.int64)
    run(_sum_mod, np.zeros((2, 0), np.int64), y, rows, 7)
    assert int(y) == 0 and list(rows) == [0, 0]


# --- generic reduce: errors (trace time, target independent) --------------------------------------

def _trace_error(body, **kw):
    """Trace a kernel that writes ``body(v, scale, x)`` to y (v = all of x); return the TraceError raised."""
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)], scale: I.f32):
        y[:] = body(x[:, :], scale, x)

    with pytest.raises(TraceError) as e:
        k.trace()
    return e.value


def _zeros_rows(v):
    return I.zeros((v.shape[0],), I.f32)


def test_reduce_combine_closing_over_runtime_value_is_trace_error():
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=_zeros_rows(v),
                                                    combine=lambda a, b: a + b * scale))
    msg = str(err)
    assert "scale" in msg and "operand" in msg, msg  # the fix is combine_operands=(scale,)


def test_reduce_combine_default_argument_capture_is_trace_error():
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=_zeros_rows(v),
                                                    combine=lambda a, b, w=scale: a + b * w))
    assert "combine_operands" in str(err) and "I.reduce" in str(err)


def test_reduce_combine_partial_capture_is_trace_error():
    err = _trace_error(lambda v, scale, x: I.reduce(
        v, axis=1, identity=_zeros_rows(v), combine=functools.partial(lambda w, a, b: a + b * w, scale)))
    assert "combine_operands" in str(err)


def test_reduce_combine_reading_view_is_trace_error():
    def body(v, scale, x):
        return I.reduce(v, axis=1, identity=_zeros_rows(v), combine=lambda a, b: a + b + x[:, 0])

    err = _trace_error(body)
    assert "pure" in str(err), str(err)


def test_reduce_combine_reading_view_through_default_is_trace_error():
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=_zeros_rows(v),
                                                    combine=lambda a, b, view=x: a + b + view[:, 0]))
    assert "pure" in str(err) and "I.reduce" in str(err)


def test_reduce_combine_view_as_operand_is_trace_error():
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=_zeros_rows(v),
                                                    combine=lambda a, b, view: a + b, combine_operands=(x,)))
    assert isinstance(err, TypeError) and "combine operand 0" in str(err)


@pytest.mark.parametrize("combine, culprit", [
    (lambda a, b: I.cast(a + b, I.f64), "f64"),
    (lambda a, b: (a, b), "(f32[M], f32[M])"),
    (lambda a, b: I.reduce.sum(a, axis=0), "became f32"),
    (lambda a, b: None, "returned nothing"),
], ids=["dtype", "tuple", "rank", "none"])
def test_reduce_combine_wrong_schema_is_trace_error(combine, culprit):
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=_zeros_rows(v), combine=combine))
    msg = str(err)
    assert isinstance(err, TypeError) and "I.reduce" in msg and culprit in msg, msg


@pytest.mark.parametrize("identity, culprit", [
    (lambda v: I.cast(0.0, I.f32), "became f32"),
    (lambda v: I.zeros((v.shape[0],), I.f64), "f64"),
    (lambda v: (_zeros_rows(v), _zeros_rows(v)), "(f32[M], f32[M])"),
    (lambda v: I.zeros((v.shape[1],), I.f32), "became f32[N]"),
], ids=["scalar", "dtype", "tuple", "extent"])
def test_reduce_identity_wrong_schema_is_trace_error(identity, culprit):
    err = _trace_error(lambda v, scale, x: I.reduce(v, axis=1, identity=identity(v), combine=lambda a, b: a + b))
    msg = str(err)
    assert isinstance(err, TypeError) and "identity" in msg and culprit in msg, msg


@pytest.mark.parametrize("number", [0, 0.0])
def test_reduce_identity_python_number_is_trace_error(number):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ()]):
        y[()] = I.reduce(x[:], axis=0, identity=number, combine=lambda a, b: a + b)

    with pytest.raises(TraceError) as e:
        k.trace()
    assert isinstance(e.value, TypeError) and "I.cast" in str(e.value) and repr(number) in str(e.value)


@pytest.mark.parametrize("which", ["generic", "sum", "max"])
@pytest.mark.parametrize("axis, culprit", [(2, "axis 2 is out of range for rank 2"),
                                           (-3, "axis -3 is out of range for rank 2"),
                                           ((1, -1), "axis 1 is listed twice"),
                                           ((0, 0), "axis 0 is listed twice"),
                                           ((), "non-empty"),
                                           (None, "got None"),
                                           (1.0, "got 1.0")], ids=str)
def test_reduce_bad_axis_is_trace_error(which, axis, culprit):
    def body(v, scale, x):
        if which == "generic":
            return I.reduce(v, axis=axis, identity=_zeros_rows(v), combine=lambda a, b: a + b)
        return getattr(I.reduce, which)(v, axis=axis)

    msg = str(_trace_error(body))
    assert culprit in msg, msg


def test_reduce_source_components_must_agree_on_reduced_extent():
    @intent.kernel
    def k(x: I.In[I.f32, ("M",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ()]):
        a, _ = I.reduce((x[:], z[:]), axis=0, identity=(I.cast(0.0, I.f32), I.cast(0.0, I.f32)),
                        combine=lambda p, q: (p[0] + q[0], p[1] + q[1]))
        y[()] = a

    with pytest.raises(TraceError) as e:
        k.trace()
    assert "reduced axis 0" in str(e.value)


# --- hypothesis: reduce.sum on random shapes, axes and dtypes --------------------------------------

HYP_DTYPES = [I.f32, I.f64, I.i32, I.u8]
ELEMENTS = {
    I.f32: st.floats(-1e4, 1e4, width=32),
    I.f64: st.floats(-1e12, 1e12),
    I.i32: st.integers(-(2 ** 31), 2 ** 31 - 1),
    I.u8: st.integers(0, 255),
}


@st.composite
def sum_cases(draw):
    dt = draw(st.sampled_from(HYP_DTYPES))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    negative = draw(st.booleans())
    spelled = tuple(a - rank if negative else a for a in axes)
    axis = spelled[0] if len(spelled) == 1 and draw(st.booleans()) else spelled
    x = draw(hnp.arrays(NP[dt], shape, elements=ELEMENTS[dt]))
    return dt, axis, x


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sum_cases())
def test_reduce_sum_random_shapes_axes_dtypes(run, case):
    dt, axis, x = case
    acc = T5_SUM_ACC[dt]
    axes = normalized(axis, x.ndim)
    y = run_reduce(run, "sum", x, dt, acc, axis)
    assert y.dtype == NP[acc]
    if acc.is_float:
        assert_sum_within(y, x, axes, acc)
    else:
        assert np.array_equal(y, int_sum_reference(x, axes, NP[acc]))
