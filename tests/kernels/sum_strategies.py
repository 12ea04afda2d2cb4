"""Hypothesis elements for the random sum tests (reduce.sum, cumsum): the dtypes drawn and bounded values of
each, small enough that exact sums stay far from overflow."""
from hypothesis import strategies as st

from intent_trace import I

HYP_DTYPES = [I.f32, I.f64, I.i32, I.u8]
ELEMENTS = {
    I.f32: st.floats(-1e4, 1e4, width=32),
    I.f64: st.floats(-1e12, 1e12),
    I.i32: st.integers(-(2 ** 31), 2 ** 31 - 1),
    I.u8: st.integers(0, 255),
}
