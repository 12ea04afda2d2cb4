"""Shared by test_contract.py and test_contract_accumulators.py: the exact references for contractions and the
T5 checks against them, and the random operands.

Each output is computed here with explicit loops over exact terms (``fractions.Fraction`` products of the
operands converted to the accumulator, Python integers for integer accumulators); floating results are held
to T5's bound |computed - exact| <= gamma_n * sum|t_i| with gamma_n = n*u / (1 - n*u), and integer results
must equal the exact sum reduced modulo 2^bits.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np

from float_reference import gamma, wrap_int
from intent_trace import I

NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64, I.i8: np.int8,
      I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.u8: np.uint8, I.u16: np.uint16}
UNIT_ROUNDOFF = {I.f16: Fraction(1, 2 ** 11), I.bf16: Fraction(1, 2 ** 8), I.f32: Fraction(1, 2 ** 24),
                 I.f64: Fraction(1, 2 ** 53)}


# --- references ----------------------------------------------------------------------------------------------

def exact_contract(lhs: np.ndarray, rhs: np.ndarray, reduce: tuple, batch: tuple, exact=Fraction):
    """(exact sums, sums of |terms|, n) per output, by explicit loops.

    Result axes: lhs axes not reduced, in lhs order (batch axes represented by their lhs axis), then rhs
    axes neither reduced nor batched, in rhs order (spec §10.2), written out here independently.
    """
    reduce = tuple((a % lhs.ndim, b % rhs.ndim) for a, b in reduce)
    batch = tuple((a % lhs.ndim, b % rhs.ndim) for a, b in batch)
    lhs_kept = [k for k in range(lhs.ndim) if k not in {a for a, _ in reduce}]
    rhs_kept = [k for k in range(rhs.ndim) if k not in {b for _, b in reduce} | {b for _, b in batch}]
    shape = tuple(lhs.shape[k] for k in lhs_kept) + tuple(rhs.shape[k] for k in rhs_kept)
    red_shape = [lhs.shape[a] for a, _ in reduce]
    n = math.prod(red_shape)
    sums = np.empty(shape, dtype=object)
    mags = np.empty(shape, dtype=object)
    for pos in np.ndindex(*shape):
        li, ri = [None] * lhs.ndim, [None] * rhs.ndim
        for k, p in zip(lhs_kept, pos):
            li[k] = p
        for k, p in zip(rhs_kept, pos[len(lhs_kept):]):
            ri[k] = p
        for a, b in batch:
            ri[b] = li[a]
        total, mag = exact(0), exact(0)
        for red in itertools.product(*(range(e) for e in red_shape)):
            for (a, b), r in zip(reduce, red):
                li[a] = ri[b] = r
            t = exact(lhs[tuple(li)].item()) * exact(rhs[tuple(ri)].item())
            total += t
            mag += abs(t)
        sums[pos], mags[pos] = total, mag
    return sums, mags, n


def assert_within_gamma(got: np.ndarray, lhs, rhs, reduce, batch, acc) -> None:
    """T5 for float accumulators (the operands given here already hold acc-exact values)."""
    sums, mags, n = exact_contract(lhs.astype(np.float64), rhs.astype(np.float64), reduce, batch)
    got = np.asarray(got)
    assert got.shape == sums.shape
    assert got.dtype == np.dtype(NP[acc])
    bound = gamma(n, UNIT_ROUNDOFF[acc])
    for pos in np.ndindex(*sums.shape):
        value = float(got[pos])
        assert math.isfinite(value), (pos, value)
        err = abs(Fraction(value) - sums[pos])
        assert err <= bound * mags[pos], (pos, value, float(sums[pos]), float(err), float(bound * mags[pos]))


def assert_exact_mod(got: np.ndarray, lhs, rhs, reduce, batch, acc) -> None:
    sums, _, _ = exact_contract(lhs, rhs, reduce, batch, exact=int)
    got = np.asarray(got)
    assert got.shape == sums.shape and got.dtype == np.dtype(NP[acc])
    want = np.array([wrap_int(int(v), NP[acc]) for v in sums.reshape(-1)], dtype=NP[acc]).reshape(sums.shape)
    assert np.array_equal(got, want)


def floats(rng, shape, dtype=np.float32) -> np.ndarray:
    """Mixed signs and magnitudes (cancellation included), exactly representable in ``dtype``."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    return x.astype(np.float32).astype(dtype)


MATMUL = (((1, 0),), ())  # the reduce/batch pairs of a plain [M, K] x [K, N] product
