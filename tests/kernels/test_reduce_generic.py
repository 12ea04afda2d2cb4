"""The generic I.reduce with user combines (spec §7) on every executable target, and the trace-time errors of
reductions (impure or capturing combines, identity and combine schemas, bad axes).

References are hand-written folds of the same combines (Python integers reduced modulo 2^bits).
"""

import functools

import numpy as np
import pytest

import intent_trace as intent
from conftest import bits_equal
from intent_trace import I
from intent_trace.errors import TraceError
from float_reference import wrap_int


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
