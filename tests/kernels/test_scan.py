"""Scans (spec §8, numerics T5) on every executable target.

References are independent of the library: np.cumsum over exact Python integers / Fractions
(flipped for reverse, shifted for exclusive), the T5 bound for float prefixes, an IEEE-maximum
loop for cummax, and Python left folds for user combines (source order kept for reverse scans).
"""
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
from float_reference import gamma, wrap_int
from intent_trace.errors import TraceError
from sum_strategies import ELEMENTS, HYP_DTYPES

NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64, I.bool: np.bool_,
      I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.index: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64}
# T5 (written out independently of the library): cumsum uses reduce.sum's default accumulator.
T5_SUM_ACC = {I.f16: I.f32, I.bf16: I.f32, I.f32: I.f32, I.f64: I.f64, I.bool: I.i64,
              I.i8: I.i64, I.i16: I.i64, I.i32: I.i64, I.i64: I.i64,
              I.u8: I.u64, I.u16: I.u64, I.u32: I.u64, I.u64: I.u64}
UNIT_ROUNDOFF = {I.f32: Fraction(1, 2 ** 24), I.f64: Fraction(1, 2 ** 53)}
NAMES = ("A", "B", "C")
MODES = [(True, False), (False, False), (True, True), (False, True)]
MODE_IDS = ["incl-fwd", "excl-fwd", "incl-rev", "excl-rev"]


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    u = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u)))


def prefix(values: np.ndarray, axis: int, inclusive: bool, reverse: bool, zero) -> np.ndarray:
    """np.cumsum over an object array (exact Python ints or Fractions) with the scan's mode applied."""
    v = np.flip(values, axis) if reverse else values
    n = v.shape[axis]
    c = np.cumsum(v, axis=axis) if n else v.copy()
    if not inclusive and n:
        first = np.full_like(np.take(c, [0], axis=axis), zero)
        c = np.concatenate([first, np.take(c, range(n - 1), axis=axis)], axis=axis)
    return np.flip(c, axis) if reverse else c


def as_fractions(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape, object)
    for pos in np.ndindex(*x.shape):
        out[pos] = Fraction(float(x[pos]))
    return out


def as_ints(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape, object)
    for pos in np.ndindex(*x.shape):
        out[pos] = int(x[pos])
    return out


def check_float_cumsum(got, x, axis, inclusive, reverse, acc) -> None:
    """T5 for every prefix: |computed - exact| <= gamma_n * sum|t_i| (n = the scanned extent)."""
    assert got.shape == x.shape and got.dtype == NP[acc]
    terms = as_fractions(x)
    exact = prefix(terms, axis, inclusive, reverse, Fraction(0))
    mags = prefix(np.abs(terms), axis, inclusive, reverse, Fraction(0))
    g = gamma(max(x.shape[axis], 1), UNIT_ROUNDOFF[acc])
    for pos in np.ndindex(*x.shape):
        value = float(got[pos])
        assert math.isfinite(value), (pos, value)
        assert abs(Fraction(value) - exact[pos]) <= g * mags[pos], (pos, value, float(exact[pos]))


def int_cumsum_reference(x, axis, inclusive, reverse, acc) -> np.ndarray:
    ref = prefix(as_ints(x), axis, inclusive, reverse, 0)
    out = np.empty(x.shape, NP[acc])
    for pos in np.ndindex(*x.shape):
        out[pos] = wrap_int(int(ref[pos]), NP[acc])
    return out


def _all(rank: int) -> tuple:
    return (slice(None),) * rank


_KERNELS: dict = {}


def scan_kernel(which: str, src, out, rank: int, axis, inclusive=True, reverse=False, acc=None):
    """``y = I.<which>(x, axis=..., inclusive=..., reverse=...[, acc_dtype=acc])``; cached."""
    key = (which, src, out, rank, axis, inclusive, reverse, acc)
    if key not in _KERNELS:
        names = NAMES[:rank]
        fn = getattr(I, which)
        extra = {} if acc is None else {"acc_dtype": acc}

        @intent.kernel
        def k(x: I.In[src, names], y: I.Out[out, names]):
            y[_all(rank)] = fn(x[_all(rank)], axis=axis, inclusive=inclusive, reverse=reverse, **extra)

        _KERNELS[key] = k
    return _KERNELS[key]


def run_scan(run, which, x, src, out, axis, inclusive=True, reverse=False, acc=None):
    y = np.full(x.shape, 7, NP[out])
    run(scan_kernel(which, src, out, x.ndim, axis, inclusive, reverse, acc), x, y)
    return y


# --- cumsum -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
def test_cumsum_1d_int_exact(run, inclusive, reverse):
    x = np.array([5, -3, 2 ** 31 - 1, 2 ** 31 - 1, -(2 ** 31), 7, 0, 11, -1, 9, 4], np.int32)
    y = run_scan(run, "cumsum", x, I.i32, I.i64, 0, inclusive, reverse)
    assert y.dtype == np.int64
    assert np.array_equal(y, int_cumsum_reference(x, 0, inclusive, reverse, I.i64))


def test_cumsum_1d_int_modes_by_hand(run):
    x = np.array([1, 2, 3, 4], np.int32)
    assert list(run_scan(run, "cumsum", x, I.i32, I.i64, 0, True, False)) == [1, 3, 6, 10]
    assert list(run_scan(run, "cumsum", x, I.i32, I.i64, 0, False, False)) == [0, 1, 3, 6]
    assert list(run_scan(run, "cumsum", x, I.i32, I.i64, 0, True, True)) == [10, 9, 7, 4]
    assert list(run_scan(run, "cumsum", x, I.i32, I.i64, 0, False, True)) == [9, 7, 4, 0]


@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("axis", [0, 1, -1, -2], ids=str)
def test_cumsum_2d_float_within_bound(run, axis, inclusive, reverse):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((5, 9)) * np.exp2(rng.integers(-8, 8, (5, 9)))).astype(np.float32)
    y = run_scan(run, "cumsum", x, I.f32, I.f32, axis, inclusive, reverse)
    check_float_cumsum(y, x, axis % 2, inclusive, reverse, I.f32)


@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("axis", [0, 1, -1], ids=str)
def test_cumsum_2d_uint_exact(run, axis, inclusive, reverse):
    rng = np.random.default_rng(12)
    x = rng.integers(0, 256, (4, 7)).astype(np.uint8)
    y = run_scan(run, "cumsum", x, I.u8, I.u64, axis, inclusive, reverse)
    assert y.dtype == np.uint64
    assert np.array_equal(y, int_cumsum_reference(x, axis % 2, inclusive, reverse, I.u64))


def test_cumsum_rank3_middle_axis(run):
    x = np.arange(2 * 5 * 3, dtype=np.int64).reshape(2, 5, 3) - 11
    y = run_scan(run, "cumsum", x, I.i64, I.i64, -2, True, True)
    assert np.array_equal(y, np.flip(np.cumsum(np.flip(x, 1), axis=1), 1))


CUMSUM_DEFAULTS = [
    (I.f16, np.full(40, 2000.0), 80000.0),             # beyond f16's max: accumulated in f32
    (I.bf16, np.array([256.0, 1, 1, 1, 1]), 260.0),   # 256 + 1 rounds away in bf16
    (I.bool, np.array([True] * 300), 300),
    (I.i8, np.full(10, 100), 1000),
    (I.u8, np.full(10, 200), 2000),
    (I.i32, np.full(3, 2 ** 31 - 1), 3 * (2 ** 31 - 1)),
]


@pytest.mark.parametrize("src, values, last", CUMSUM_DEFAULTS, ids=[str(c[0]) for c in CUMSUM_DEFAULTS])
def test_cumsum_default_accumulator(run, src, values, last):
    acc = T5_SUM_ACC[src]
    x = np.asarray(values).astype(NP[src])
    y = run_scan(run, "cumsum", x, src, acc, 0)
    assert y.dtype == NP[acc]
    if acc.is_float:
        check_float_cumsum(y, x, 0, True, False, acc)
        assert float(y[-1]) == last
    else:
        assert np.array_equal(y, int_cumsum_reference(x, 0, True, False, acc)) and int(y[-1]) == last


@pytest.mark.parametrize("src, wrong", [(I.i32, I.i32), (I.u8, I.u8), (I.f16, I.f16), (I.f32, I.f64)], ids=str)
def test_cumsum_wrong_out_dtype_is_type_error_at_call(run, src, wrong):
    k = scan_kernel("cumsum", src, wrong, 1, 0)
    with pytest.raises(TypeError) as e:
        run(k, np.zeros(3, NP[src]), np.zeros(3, NP[wrong]))
    assert isinstance(e.value, TraceError)
    assert f"{T5_SUM_ACC[src]} values into y ({wrong})" in str(e.value), str(e.value)


def test_cumsum_explicit_acc_dtype_f64(run):
    x = np.array([1e8, 1.0, -1e8, 1.0, 0.5], np.float32)  # exact in f32; f32 prefixes would lose the 1
    y = run_scan(run, "cumsum", x, I.f32, I.f64, 0, acc=I.f64)
    assert y.dtype == np.float64
    assert list(y) == [1e8, 1e8 + 1, 1.0, 2.0, 2.5]
    check_float_cumsum(y, x, 0, True, False, I.f64)


def test_cumsum_explicit_integer_acc_dtype_wraps(run):
    x = np.array([2 ** 31 - 1, 1, 1, -5], np.int32)
    y = run_scan(run, "cumsum", x, I.i32, I.i32, 0, acc=I.i32)
    assert y.dtype == np.int32
    assert np.array_equal(y, int_cumsum_reference(x, 0, True, False, I.i32))
    assert y[1] == -(2 ** 31)


def test_cumsum_float_to_int_acc_casts_first(run):
    x = np.array([1.9, 1.9, -0.5, -2.9], np.float64)  # truncated: 1, 1, 0, -2
    y = run_scan(run, "cumsum", x, I.f64, I.i16, 0, acc=I.i16)
    assert list(y) == [1, 2, 2, 0]


@pytest.mark.parametrize("shape, axis", [((0,), 0), ((3, 0), 1), ((0, 4), 0), ((3, 0), 0), ((0, 4), 1),
                                         ((2, 0, 3), 1), ((2, 0, 3), -1)],
                         ids=["n0", "3x0-ax1", "0x4-ax0", "3x0-ax0-empty-kept", "0x4-ax1-empty-kept",
                              "2x0x3-ax1", "2x0x3-ax2-empty-kept"])
@pytest.mark.parametrize("inclusive, reverse", [(True, False), (False, True)], ids=["incl-fwd", "excl-rev"])
def test_cumsum_empty_returns_empty(run, shape, axis, inclusive, reverse):
    x = np.zeros(shape, np.float32)
    y = run_scan(run, "cumsum", x, I.f32, I.f32, axis, inclusive, reverse)
    assert y.shape == shape and y.dtype == np.float32


# --- cummax -------------------------------------------------------------------------------------------

def ieee_maximum(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return -0.0 if math.copysign(1, a) < 0 and math.copysign(1, b) < 0 else 0.0
    return a if a > b else b


def cummax_reference(x: np.ndarray, axis: int, inclusive: bool, reverse: bool) -> np.ndarray:
    moved = np.moveaxis(x, axis, -1)
    out = np.empty_like(moved)
    n = moved.shape[-1]
    is_float = np.issubdtype(x.dtype, np.floating)
    lowest = -math.inf if is_float else int(np.iinfo(x.dtype).min)
    for pos in np.ndindex(*moved.shape[:-1]):
        acc = lowest
        for k in (range(n - 1, -1, -1) if reverse else range(n)):
            v = float(moved[pos + (k,)]) if is_float else int(moved[pos + (k,)])
            if not inclusive:
                out[pos + (k,)] = acc
            acc = ieee_maximum(acc, v) if is_float else max(acc, v)
            if inclusive:
                out[pos + (k,)] = acc
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("axis", [0, 1, -1], ids=str)
def test_cummax_nan_propagates(run, axis, inclusive, reverse):
    x = np.array([[1, 3, np.nan, 2, 5, -0.0, 0.0],
                  [-np.inf, -1, -0.0, -0.0, 0.0, -0.0, 4],
                  [np.nan, 0, 0, 0, 0, 0, np.nan],
                  [2, 1, 0, -1, -2, -3, -4],
                  [0.0, -0.0, 1, np.inf, np.nan, 1, 1]], np.float64)
    y = run_scan(run, "cummax", x, I.f64, I.f64, axis, inclusive, reverse)
    want = cummax_reference(x, axis % 2, inclusive, reverse)
    assert y.dtype == np.float64
    assert bits_equal(np.where(np.isnan(y), np.nan, y), np.where(np.isnan(want), np.nan, want)), (y, want)


def test_cummax_nan_by_hand(run):
    x = np.array([1.0, np.nan, 5.0, 2.0], np.float32)
    y = run_scan(run, "cummax", x, I.f32, I.f32, 0)
    assert y[0] == 1.0 and np.all(np.isnan(y[1:]))
    y = run_scan(run, "cummax", x, I.f32, I.f32, 0, False, False)
    assert y[0] == -np.inf and y[1] == 1.0 and np.all(np.isnan(y[2:]))
    y = run_scan(run, "cummax", x, I.f32, I.f32, 0, True, True)
    assert np.all(np.isnan(y[:2])) and list(y[2:]) == [5.0, 2.0]


@pytest.mark.parametrize("dt", [I.i8, I.u16, I.i64], ids=str)
@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
def test_cummax_integers_keep_dtype(run, dt, inclusive, reverse):
    info = np.iinfo(NP[dt])
    x = np.array([[3, info.min, 7, 7, info.max, 0], [info.min] * 6], NP[dt])
    y = run_scan(run, "cummax", x, dt, dt, 1, inclusive, reverse)
    assert y.dtype == NP[dt]
    assert np.array_equal(y, cummax_reference(x, 1, inclusive, reverse))


def test_cummax_empty_returns_empty(run):
    y = run_scan(run, "cummax", np.zeros((3, 0), np.float32), I.f32, I.f32, 1)
    assert y.shape == (3, 0)


# --- generic scan: a non-commutative combine ---------------------------------------------------------

def affine(p, q):
    """Composition of affine maps: first p = (m1, c1), then q = (m2, c2)."""
    return p[0] * q[0], p[1] * q[0] + q[1]


def affine_reference(m, c, inclusive: bool, reverse: bool):
    """Python left folds in source order: out[k] folds x[0..k] (forward) or x[k..n-1] (reverse)."""
    n = len(m)
    out = []
    for k in range(n):
        if reverse:
            span = range(k, n) if inclusive else range(k + 1, n)
        else:
            span = range(0, k + 1) if inclusive else range(0, k)
        acc = (1.0, 0.0)
        for i in span:
            acc = affine(acc, (float(m[i]), float(c[i])))
        out.append(acc)
    return np.array([a for a, _ in out]), np.array([b for _, b in out])


_AFFINE: dict = {}


def affine_kernel(inclusive: bool, reverse: bool):
    key = (inclusive, reverse)
    if key not in _AFFINE:
        @intent.kernel
        def k(m: I.In[I.f64, ("N",)], c: I.In[I.f64, ("N",)], om: I.Out[I.f64, ("N",)], oc: I.Out[I.f64, ("N",)]):
            pm, pc = I.scan((m[:], c[:]), axis=0, identity=(I.cast(1.0, I.f64), I.cast(0.0, I.f64)),
                            combine=affine, inclusive=inclusive, reverse=reverse)
            om[:] = pm
            oc[:] = pc

        _AFFINE[key] = k
    return _AFFINE[key]


@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
def test_scan_non_commutative_affine_composition(run, inclusive, reverse):
    # Dyadic values: every product and sum is exact in f64 under any association, so the only way
    # to differ from the left fold is to combine in the wrong order.
    m = np.array([2.0, -0.5, 1.0, 0.5, -2.0, 2.0, -1.0, 0.5, 2.0, -0.5, 1.0], np.float64)
    c = np.array([1.0, 3.0, -2.0, 0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 1.0, 2.0], np.float64)
    om, oc = np.zeros_like(m), np.zeros_like(c)
    run(affine_kernel(inclusive, reverse), m, c, om, oc)
    wm, wc = affine_reference(m, c, inclusive, reverse)
    assert np.array_equal(om, wm) and np.array_equal(oc, wc), (om, wm, oc, wc)


def test_scan_non_commutative_reverse_keeps_source_order(run):
    # Two maps: x -> 2x + 1 then x -> 3x. In source order the composition is 6x + 3 (not 6x + 1).
    m, c = np.array([2.0, 3.0]), np.array([1.0, 0.0])
    om, oc = np.zeros(2), np.zeros(2)
    run(affine_kernel(True, True), m, c, om, oc)
    assert list(om) == [6.0, 3.0] and list(oc) == [3.0, 0.0]
    run(affine_kernel(True, False), m, c, om, oc)
    assert list(om) == [2.0, 6.0] and list(oc) == [1.0, 3.0]


@intent.fn
def affine_fn(p, q):
    return p[0] * q[0], p[1] * q[0] + q[1]


@intent.kernel
def _affine_rows(m: I.In[I.f64, ("M", "N")], c: I.In[I.f64, ("M", "N")], om: I.Out[I.f64, ("M", "N")],
                 oc: I.Out[I.f64, ("M", "N")]):
    rows = m.shape[0]
    pm, pc = I.scan((m[:, :], c[:, :]), axis=-1, identity=(I.full((rows,), 1.0, I.f64), I.zeros((rows,), I.f64)),
                    combine=affine_fn, reverse=True)
    om[:, :] = pm
    oc[:, :] = pc


def test_scan_non_commutative_tensor_accumulator(run):
    rng = np.random.default_rng(13)
    m = rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], (3, 9))
    c = rng.integers(-3, 4, (3, 9)).astype(np.float64)
    om, oc = np.zeros_like(m), np.zeros_like(c)
    run(_affine_rows, m, c, om, oc)
    for r in range(3):
        wm, wc = affine_reference(m[r], c[r], True, True)
        assert np.array_equal(om[r], wm) and np.array_equal(oc[r], wc)


_AFFINE_OPERAND: dict = {}


def affine_operand_kernel(inclusive: bool, reverse: bool):
    """Affine rows scanned with a tensor combine operand (a row of ones): a general, folded combine."""
    key = (inclusive, reverse)
    if key not in _AFFINE_OPERAND:
        @intent.kernel
        def k(m: I.In[I.f64, ("M", "N")], c: I.In[I.f64, ("M", "N")], one: I.In[I.f64, ("M",)],
              om: I.Out[I.f64, ("M", "N")], oc: I.Out[I.f64, ("M", "N")]):
            rows = m.shape[0]
            pm, pc = I.scan((m[:, :], c[:, :]), axis=1,
                            identity=(I.full((rows,), 1.0, I.f64), I.zeros((rows,), I.f64)),
                            combine=lambda p, q, u: (p[0] * q[0] * u, p[1] * q[0] + q[1] * u),
                            combine_operands=(one[:],), inclusive=inclusive, reverse=reverse)
            om[:, :] = pm
            oc[:, :] = pc

        _AFFINE_OPERAND[key] = k
    return _AFFINE_OPERAND[key]


@pytest.mark.parametrize("inclusive, reverse", MODES, ids=MODE_IDS)
def test_scan_non_commutative_with_tensor_operand(run, inclusive, reverse):
    rng = np.random.default_rng(14)
    m = rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], (4, 7))
    c = rng.integers(-3, 4, (4, 7)).astype(np.float64)
    om, oc = np.zeros_like(m), np.zeros_like(c)
    run(affine_operand_kernel(inclusive, reverse), m, c, np.ones(4), om, oc)
    for r in range(4):
        wm, wc = affine_reference(m[r], c[r], inclusive, reverse)
        assert np.array_equal(om[r], wm) and np.array_equal(oc[r], wc), (r, om[r], wm, oc[r], wc)


@intent.kernel
def _running_mean_parts(x: I.In[I.i32, ("N",)], s: I.Out[I.i64, ("N",)], n: I.Out[I.i32, ("N",)],
                        t: I.Out[I.i64, ("N",)], p: I.i64):
    v = x[:]
    total, count = I.scan((I.cast(v, I.i64), I.full((x.shape[0],), 1, I.i32)), axis=0,
                          identity=(I.cast(0, I.i64), I.cast(0, I.i32)),
                          combine=lambda a, b: (a[0] + b[0], a[1] + b[1]), inclusive=False)
    s[:] = total
    n[:] = count
    t[:] = I.scan(I.cast(v, I.i64), axis=0, identity=I.cast(0, I.i64), combine=lambda a, b, q: (a + b) % q,
                  combine_operands=(p,))


def test_scan_tuple_source_and_combine_operands(run):
    x = np.array([4, -1, 7, 2, 9, -3], np.int32)
    s, n, t = np.zeros(6, np.int64), np.zeros(6, np.int32), np.zeros(6, np.int64)
    run(_running_mean_parts, x, s, n, t, 5)
    acc, want_s = 0, []
    for v in x:
        want_s.append(acc)
        acc += int(v)
    assert list(s) == want_s and list(n) == [0, 1, 2, 3, 4, 5]
    acc, want_t = 0, []
    for v in x:
        total = acc + int(v)
        acc = abs(total) % 5 * (1 if total >= 0 else -1)  # T2: the remainder has the dividend's sign
        want_t.append(acc)
    assert list(t) == want_t


# --- scan errors ------------------------------------------------------------------------------------

def _trace_error(body):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        y[:, :] = body(x[:, :])

    with pytest.raises(TraceError) as e:
        k.trace()
    return e.value


def _rows(v):
    return I.zeros((v.shape[0],), I.f32)


@pytest.mark.parametrize("which", ["scan", "cumsum", "cummax"])
@pytest.mark.parametrize("axis, culprit", [((0, 1), "axis must be one int, got (0, 1)"),
                                           (2, "axis 2 is out of range for rank 2"),
                                           (-3, "axis -3 is out of range for rank 2"),
                                           (None, "got None"),
                                           (True, "got True")], ids=str)
def test_scan_axis_must_be_one_int(which, axis, culprit):
    def body(v):
        if which == "scan":
            return I.scan(v, axis=axis, identity=_rows(v), combine=lambda a, b: a + b)
        return getattr(I, which)(v, axis=axis)

    err = _trace_error(body)
    assert f"I.{which}" in str(err) and culprit in str(err), str(err)


@pytest.mark.parametrize("which", ["scan", "cumsum", "cummax"])
@pytest.mark.parametrize("flag, value", [("inclusive", 1), ("inclusive", None), ("reverse", "yes"),
                                         ("reverse", np.bool_(True))], ids=str)
def test_scan_flags_must_be_bool(which, flag, value):
    def body(v):
        if which == "scan":
            return I.scan(v, axis=1, identity=_rows(v), combine=lambda a, b: a + b, **{flag: value})
        return getattr(I, which)(v, axis=1, **{flag: value})

    err = _trace_error(body)
    msg = str(err)
    assert isinstance(err, TypeError) and f"{flag} must be a constexpr bool" in msg and repr(value) in msg, msg


def test_scan_combine_wrong_schema_is_trace_error():
    err = _trace_error(lambda v: I.scan(v, axis=1, identity=_rows(v), combine=lambda a, b: I.cast(a + b, I.f64)))
    assert isinstance(err, TypeError) and "I.scan helper" in str(err) and "f64" in str(err)


def test_scan_identity_python_number_is_trace_error():
    err = _trace_error(lambda v: I.scan(v, axis=1, identity=0.0, combine=lambda a, b: a + b))
    assert isinstance(err, TypeError) and "I.cast" in str(err)


def test_scan_identity_wrong_schema_is_trace_error():
    err = _trace_error(lambda v: I.scan(v, axis=1, identity=I.cast(0.0, I.f32), combine=lambda a, b: a + b))
    assert isinstance(err, TypeError) and "identity" in str(err) and "f32[M]" in str(err)


def test_scan_combine_closing_over_runtime_value_is_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], w: I.f32):
        y[:] = I.scan(x[:], axis=0, identity=I.cast(0.0, I.f32), combine=lambda a, b: a + b * w)

    with pytest.raises(TraceError) as e:
        k.trace()
    assert "`w`" in str(e.value) and "operand" in str(e.value), str(e.value)


def test_cummax_of_bool_is_type_error():
    @intent.kernel
    def k(x: I.In[I.bool, ("N",)], y: I.Out[I.bool, ("N",)]):
        y[:] = I.cummax(x[:], axis=0)

    with pytest.raises(TraceError) as e:
        k.trace()
    assert isinstance(e.value, TypeError) and "I.cummax" in str(e.value) and "bool" in str(e.value)


# --- hypothesis: cumsum on random shapes, axes, modes and dtypes --------------------------------------



@st.composite
def cumsum_cases(draw):
    dt = draw(st.sampled_from(HYP_DTYPES))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    inclusive, reverse = draw(st.booleans()), draw(st.booleans())
    x = draw(hnp.arrays(NP[dt], shape, elements=ELEMENTS[dt]))
    return dt, axis, inclusive, reverse, x


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cumsum_cases())
def test_cumsum_random_shapes_axes_modes_dtypes(run, case):
    dt, axis, inclusive, reverse, x = case
    acc = T5_SUM_ACC[dt]
    y = run_scan(run, "cumsum", x, dt, acc, axis, inclusive, reverse)
    a = axis % x.ndim
    if acc.is_float:
        check_float_cumsum(y, x, a, inclusive, reverse, acc)
    else:
        assert y.dtype == NP[acc] and np.array_equal(y, int_cumsum_reference(x, a, inclusive, reverse, acc))
