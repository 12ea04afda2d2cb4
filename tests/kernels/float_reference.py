"""Exact references for the numerics tests: float formats as (precision, emin, emax), rounding of an exact
rational once, to nearest-even (Fraction arithmetic, independent of NumPy and of the library), T5's gamma_n and
integer wrap-around modulo 2^bits."""
from __future__ import annotations

import math
from fractions import Fraction

from intent_trace import I

FMT = {I.f16: (11, -14, 15), I.bf16: (8, -126, 127), I.f32: (24, -126, 127), I.f64: (53, -1022, 1023)}


def pow2(k: int) -> Fraction:
    return Fraction(2) ** k


def round_fraction(q: Fraction, dt) -> float:
    """The exact rational ``q`` rounded once, to nearest-even, into format ``dt`` (as a Python float);
    overflow gives inf."""
    p, emin, emax = FMT[dt]
    if q == 0:
        return 0.0
    neg = q < 0
    q = -q if neg else q
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if pow2(e) > q:
        e -= 1
    elif pow2(e + 1) <= q:
        e += 1
    quantum = max(e, emin) - (p - 1)
    r = round(q / pow2(quantum)) * pow2(quantum)  # Fraction.__round__ rounds half to even
    f = math.inf if r >= pow2(emax + 1) else float(r)
    return -f if neg else f


def max_finite(dt) -> float:
    p, _, emax = FMT[dt]
    return float((2 - pow2(1 - p)) * pow2(emax))


def gamma(n: int, u: Fraction) -> Fraction:
    """T5's gamma_n = n u / (1 - n u)."""
    return n * u / (1 - n * u)


def wrap_int(v: int, np_dtype) -> int:
    """Python int ``v`` modulo 2^bits, as the (signed or unsigned) value of ``np_dtype``."""
    import numpy as np

    info = np.iinfo(np_dtype)
    v &= (1 << info.bits) - 1
    if info.min < 0 and v >= 1 << (info.bits - 1):
        v -= 1 << info.bits
    return v
