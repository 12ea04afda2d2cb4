"""Numbers and extents too large for their type, and allocations too large for the machine: each is a
TypeError/ValueError naming the parameter, or a TraceError naming the user's line, or (at run time) a
ValueError naming the extent and the size, raised before anything is written; never a bare
OverflowError or MemoryError."""
import inspect
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace.floatbits import largest_finite

FILE = os.path.basename(__file__)
FLOATS = (I.f16, I.bf16, I.f32, I.f64)
INTS = (I.i8, I.i16, I.i32, I.i64, I.u8, I.u16, I.u32, I.u64, I.index)
_SCALAR_KERNELS: dict = {}


def _scale_kernel(dt):
    if dt not in _SCALAR_KERNELS:
        @intent.kernel
        def scale(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)], s: dt):
            d = I.domain(0, x.shape[0])
            y[d] = x[d] * s

        _SCALAR_KERNELS[dt] = scale
    return _SCALAR_KERNELS[dt]


def _largest(dt) -> float:
    return largest_finite(dt.np)


def _marked_line(fn, marker: str = "# <-") -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if marker in text)


# --- runtime scalars -------------------------------------------------------------------------------

def _too_large(dt) -> list:
    """Finite numbers whose rounding to ``dt`` overflows, as ints and floats, both signs."""
    values = [10**400, -10**400, 2**1024]
    if dt is not I.f64:
        values += [int(_largest(dt)) * 2, -float(_largest(dt)) * 2, 1e300]
    return values


@pytest.mark.parametrize("dt,value", [(dt, v) for dt in FLOATS for v in _too_large(dt)],
                         ids=lambda v: str(v)[:12])
def test_float_scalar_too_large_for_its_dtype_is_a_value_error_naming_it(run, dt, value):
    x = np.ones(3, dt.np)
    y = np.full(3, 7, dt.np)
    with pytest.raises(ValueError, match=rf"scalar s\b.*{dt}") as e:
        run(_scale_kernel(dt), x, y, value)
    assert not isinstance(e.value, OverflowError) and len(str(e.value)) < 400
    assert np.all(y.astype(np.float64) == 7)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_scalar_largest_finite_binds_as_an_int_and_a_float(run, dt):
    x = np.ones(2, dt.np)
    for value in (int(_largest(dt)), _largest(dt), -_largest(dt)):
        y = np.zeros(2, dt.np)
        run(_scale_kernel(dt), x, y, value)
        assert np.all(y.astype(np.float64) == float(value))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_scalar_infinity_and_nan_are_values_of_the_dtype(run, dt):
    x = np.ones(2, dt.np)
    y = np.zeros(2, dt.np)
    run(_scale_kernel(dt), x, y, -math.inf)
    assert np.all(np.isneginf(y.astype(np.float64)))
    run(_scale_kernel(dt), x, y, math.nan)
    assert np.all(np.isnan(y.astype(np.float64)))


@pytest.mark.parametrize("dt", INTS, ids=str)
@pytest.mark.parametrize("value", [10**400, -10**400, 2**64, -2**63 - 1], ids=["1e400", "-1e400", "2^64", "-2^63-1"])
def test_int_scalar_out_of_range_is_a_short_value_error_naming_it(run, dt, value):
    x = np.ones(2, dt.np)
    y = np.zeros(2, dt.np)
    with pytest.raises(ValueError, match=rf"scalar s\b.*{dt}") as e:
        run(_scale_kernel(dt), x, y, value)
    assert len(str(e.value)) < 400


@given(st.sampled_from(FLOATS + INTS), st.integers(min_value=-10**500, max_value=10**500) | st.floats())
def test_scalar_binding_raises_only_type_or_value_errors(dt, value):
    """Every Python number for every scalar dtype binds or is refused with a ValueError (never OverflowError)."""
    from intent_trace.arguments import _scalar

    try:
        bound = _scalar("s", dt, value)
    except (TypeError, ValueError) as e:
        assert not isinstance(e, (OverflowError, ArithmeticError)), e
        assert "scalar s" in str(e)
        return
    assert bound.dtype == dt.np


# --- literals and static extents while tracing -----------------------------------------------------

def _literal(dt, value):
    def k(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + value  # <-
    return k


@pytest.mark.parametrize("dt", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("value", [10**400, -10**400, 2**1024], ids=["1e400", "-1e400", "2^1024"])
def test_literal_too_large_is_a_trace_error_naming_the_line(dt, value):
    fn = _literal(dt, value)
    with pytest.raises(intent.TraceError, match=rf"{FILE}:{_marked_line(fn)}\b") as e:
        intent.kernel(fn).trace()
    assert isinstance(e.value, ValueError) and len(e.value.bare_message) < 300


def _domain_end(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, 2**63)  # <-
    y[d] = x[d]


def _domain_begin(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(-2**63 - 1, 3)  # <-
    y[d] = x[d]


def _domain_step(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, 3, 2**64)  # <-
    y[d] = x[d]


def _domain_members(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(-2**62 * 2, 2**63 - 1)  # <-  (every bound fits, the member count does not)
    y[d] = x[d]


def _subregion_end(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d[0:2**64]] = x[d[0:2**64]]  # <-


def _full_extent(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    t = I.full((2**63,), 1.0, I.f32)  # <-
    y[I.domain(0, x.shape[0])] = x[I.domain(0, x.shape[0])] + t[0]


def _slice_bound(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    t = x[d]
    y[d] = t[0:2**64]  # <-


def _view_point(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] + x[2**64]  # <-


def _full_count(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    t = I.full((2**62, 2**62), 1.0, I.f32)  # <-  (every extent fits, the element count does not)
    y[I.domain(0, x.shape[0])] = x[I.domain(0, x.shape[0])] + t[0, 0]


def _buffer_count(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    b = I.buffer((2**62, 4), I.f32, init=0.0)  # <-
    y[I.domain(0, 1)] = b[I.domain(0, 1), I.domain(0, 1)][:, 0]


def _histogram_bins(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    d = I.domain(0, x.shape[0])
    h = I.histogram(x[d], bins=2**63, count_dtype=I.i32)  # <-
    y[d] = h[d]


@pytest.mark.parametrize("fn", [_domain_end, _domain_begin, _domain_step, _domain_members, _subregion_end,
                                _full_extent, _slice_bound, _view_point, _full_count, _buffer_count, _histogram_bins],
                         ids=lambda f: f.__name__)
def test_index_literal_that_does_not_fit_index_is_a_trace_error_naming_the_line(fn):
    with pytest.raises(intent.TraceError, match=rf"{FILE}:{_marked_line(fn)}\b.*index") as e:
        intent.kernel(fn).trace()
    assert isinstance(e.value, ValueError)


def test_static_view_extent_that_does_not_fit_index_is_a_value_error():
    with pytest.raises(ValueError, match="2\\*\\*63|9223372036854775808"):
        I.In[I.f32, (2**63,)]
    with pytest.raises(ValueError, match="elements.*index"):
        I.Out[I.f32, (2**62, "N", 2**62)]
