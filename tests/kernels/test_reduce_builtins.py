"""The builtin reductions I.reduce.sum / max / any / all (spec §7, numerics T5) on every executable target.

References are independent of the library: exact sums with ``fractions.Fraction`` / ``math.fsum``
and the T5 bound |computed - exact| <= gamma_n * sum|t_i|, Python integers reduced modulo 2^bits,
an IEEE maximum written out here (NaN wins, -0 < +0), NumPy's any/all on bools.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import intent_trace as intent
from conftest import bits_equal
from float_reference import gamma, wrap_int
from intent_trace import I
from intent_trace.errors import TraceError
from reduce_support import NAMES, NP, _all
from sum_strategies import ELEMENTS, HYP_DTYPES


# T5, written out independently of the library: the default accumulator of reduce.sum.
T5_SUM_ACC = {I.f16: I.f32, I.bf16: I.f32, I.f32: I.f32, I.f64: I.f64, I.bool: I.i64,
              I.i8: I.i64, I.i16: I.i64, I.i32: I.i64, I.i64: I.i64,
              I.u8: I.u64, I.u16: I.u64, I.u32: I.u64, I.u64: I.u64}
UNIT_ROUNDOFF = {I.f32: Fraction(1, 2 ** 24), I.f64: Fraction(1, 2 ** 53)}


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


# --- hypothesis: reduce.sum on random shapes, axes and dtypes --------------------------------------



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
