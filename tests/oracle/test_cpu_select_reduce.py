"""Float max/min reductions as integer reductions of order keys on the cpu target (oracle/numba/select_reduce.py).

A row max or min without NaNs is the maximum of a total order (-0 < +0), the same in every association, and the
cpu target computes it as an integer max of order keys (vectorised); a row with a NaN (or a NaN identity) runs
the combine again in source order, which returns the first NaN, its payload unchanged: the cpu result is the
generic interpreter's bit for bit. Every dtype, rows of every
length around the 8 partial accumulators, signed zeros, infinities, subnormals, NaN payloads of both signs; the
reference is Python's ``max``/``min`` over (value, sign of zero) pairs, independent of the bit trick. On every
target, and once above the parallel threshold.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

DTYPES = {"f32": (I.f32, np.float32, np.uint32), "f64": (I.f64, np.float64, np.uint64),
          "f16": (I.f16, np.float16, np.uint16), "bf16": (I.bf16, ml_dtypes.bfloat16, np.uint16)}
NAN_BITS = {"f32": [0x7FC12345, 0xFFA00001, 0x7F800001], "f64": [0x7FF8000000012345, 0xFFF4000000000001],
            "f16": [0x7E01, 0xFD02], "bf16": [0x7FC1, 0xFF81]}


def _kernel(dt, nan_identity: bool):
    @intent.kernel
    def row_extremes(x: I.In[dt, ("M", "N")], hi: I.Out[dt, ("M",)], lo: I.Out[dt, ("M",)]):
        hi[:] = I.reduce.max(-(-x[:, :]), axis=1)  # a fused element expression; negation keeps every bit
        start = math.nan if nan_identity else math.inf
        lo[:] = I.reduce(x[:, :], axis=1, identity=I.full((x.shape[0],), start, dt), combine=I.minimum)

    return row_extremes


KERNELS = {(name, nan): _kernel(DTYPES[name][0], nan) for name in DTYPES for nan in (False, True)}


def _rows(name, m, n, rng):
    """Rows of ordinary values, each row given some specials: signed zeros only, a -0/+0 mix, infinities,
    subnormals, one NaN, two NaNs of different payloads."""
    _, np_t, bits_t = DTYPES[name]
    x = (rng.standard_normal((m, n)) * 8).astype(np_t)
    tiny = np.array([1], bits_t).view(np_t)[0]  # the smallest subnormal
    nans = np.array(NAN_BITS[name], bits_t).view(np_t)
    for r in range(m):
        kind = r % 8
        if kind == 0:
            x[r] = np_t(-0.0)
        elif kind == 1:
            x[r] = np.where(rng.random(n) < 0.5, np_t(0.0), np_t(-0.0))
        elif kind == 2:
            x[r, rng.integers(n)] = np_t(np.inf)
            x[r, rng.integers(n)] = np_t(-np.inf)
        elif kind == 3:
            x[r] = np.where(rng.random(n) < 0.5, tiny, -tiny)
        elif kind == 4:
            x[r, rng.integers(n)] = nans[0]
        elif kind == 5:
            x[r, rng.integers(n)] = nans[1]
            x[r, rng.integers(n)] = nans[-1]
        elif kind == 6:
            x[r] = np_t(-np.inf)
    return x


def _is_nan(v) -> bool:
    return math.isnan(float(v))


def _extreme(values, pick, start):
    """IEEE 754-2019 maximum/minimum of a row without NaNs: by value, +0 above -0."""
    return pick([start, *values], key=lambda v: (float(v), math.copysign(1.0, float(v)) > 0))


def _bits(v, bits_t) -> int:
    return int(np.array(v).view(bits_t))


def _check_row(got, row, start, pick, bits_t):
    nans = [v for v in (start, *row) if _is_nan(v)]
    if nans:  # one of the NaNs met (the identity's or the row's), its payload unchanged
        assert _bits(got, bits_t) in {_bits(v, bits_t) for v in nans}, (row, got)
    else:
        want = _extreme(list(row), pick, start)
        assert _bits(got, bits_t) == _bits(want, bits_t), (row, got, want)


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("n", [1, 7, 8, 9, 33, 300])
def test_row_max_and_min_match_the_total_order(run, name, n):
    _, np_t, bits_t = DTYPES[name]
    x = _rows(name, 16, n, np.random.default_rng(n))
    for nan_identity in (False, True):
        hi, lo = np.full(16, np_t(7), np_t), np.full(16, np_t(7), np_t)
        run(KERNELS[name, nan_identity], x, hi, lo)
        start = np_t(np.nan) if nan_identity else np_t(np.inf)
        for r in range(16):
            _check_row(hi[r], x[r], np_t(-np.inf), max, bits_t)
            _check_row(lo[r], x[r], start, min, bits_t)


def test_one_nan_in_a_row_is_returned_with_its_payload_on_cpu():
    """The NaN branch gives the NaN itself (sign, payload), never a canonical NaN, wherever it stands."""
    for n in (1, 9, 40):
        x = np.arange(n * n, dtype=np.float32).reshape(n, n)
        payload = np.uint32(0xFFC0BEEF)
        for r in range(n):
            x[r, r] = payload.view(np.float32)
        hi, lo = np.zeros(n, np.float32), np.zeros(n, np.float32)
        intent.compile(KERNELS["f32", False], target="cpu")(x, hi, lo)
        assert (hi.view(np.uint32) == payload).all() and (lo.view(np.uint32) == payload).all()


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_cpu_matches_generic_bit_for_bit(name):
    """The keyed loop, and the NaN rows' fold in source order, give generic's bits (the first NaN met)."""
    _, np_t, bits_t = DTYPES[name]
    x = _rows(name, 24, 19, np.random.default_rng(5))
    for nan_identity in (False, True):
        got = {}
        for target in ("generic", "cpu"):
            hi, lo = np.zeros(24, np_t), np.zeros(24, np_t)
            intent.compile(KERNELS[name, nan_identity], target=target)(x, hi, lo)
            got[target] = (hi.view(bits_t), lo.view(bits_t))
        assert all(np.array_equal(a, b) for a, b in zip(got["cpu"], got["generic"])), (name, nan_identity)


def test_the_keyed_loop_is_generated_with_a_sequential_loop_for_nans():
    source = intent.compile(KERNELS["f32", False], target="cpu", checks=False).source
    serial = source.split("def kernel(", 1)[1].split("\n@njit", 1)[0]  # the serial build's function
    assert serial.count("R.order_key32(") >= 4 and serial.count("R.fmax(") == 1 and serial.count("R.fmin(") == 1
    source64 = intent.compile(KERNELS["f64", False], target="cpu", checks=False).source
    assert "R.order_key64(" in source64


def test_row_max_and_min_above_the_parallel_threshold():
    m, n = 70, 1000  # 70,000 elements: the parallel build
    assert m * n >= cpu_target.PARALLEL_THRESHOLD
    x = _rows("f32", m, n, np.random.default_rng(7))
    hi, lo = np.zeros(m, np.float32), np.zeros(m, np.float32)
    exe = intent.compile(KERNELS["f32", False], target="cpu")
    exe(x, hi, lo)
    assert exe.module.kernel_parallel.signatures
    for r in range(m):
        _check_row(hi[r], x[r], np.float32(-np.inf), max, np.uint32)
        _check_row(lo[r], x[r], np.float32(np.inf), min, np.uint32)
