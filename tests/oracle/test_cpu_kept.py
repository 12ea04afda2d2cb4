"""runtime.kept: a constant read through an invariant load, so vector loops keep it in a register (issue 19).

exp_f32 reads its constants through kept; these check that the value read is exactly the constant (every bit,
the sign of zero, a subnormal, an infinity, a NaN's payload), reference: NumPy's bits of the same constant, and
that a loop using it under a condition computes what NumPy computes (the load must not stop the select).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from intent_trace.oracle.numba.runtime import kept

_NEG_ZERO = np.float32(-0.0)
_SUBNORMAL = np.array([3], np.uint32).view(np.float32)[0]
_INF = np.float32(np.inf)
_NAN_PAYLOAD = np.array([0x7FC01234], np.uint32).view(np.float32)[0]
_THIRD64 = np.float64(1.0) / np.float64(3.0)
_I = np.int32(-7)


@njit
def _read_all():
    return (kept(_NEG_ZERO), kept(_SUBNORMAL), kept(_INF), kept(_NAN_PAYLOAD), kept(_THIRD64), kept(_I))


def test_kept_reads_every_bit_of_the_constant():
    got = _read_all()
    want = (_NEG_ZERO, _SUBNORMAL, _INF, _NAN_PAYLOAD, _THIRD64, _I)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert np.asarray(g, w.dtype).tobytes() == w.tobytes(), (g, w)


@njit
def _scaled_where_positive(x, y):
    for i in range(x.size):
        v = x[i]
        y[i] = v * kept(np.float32(3.0)) + kept(np.float32(0.5)) if v > 0 else v


def test_kept_under_a_condition_in_a_loop():
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    y = np.empty_like(x)
    _scaled_where_positive(x, y)
    ref = np.where(x > 0, x * np.float32(3.0) + np.float32(0.5), x)
    assert np.array_equal(y.view(np.uint32), ref.view(np.uint32))
