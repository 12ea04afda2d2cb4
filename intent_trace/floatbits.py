"""Correctly rounded host conversions into narrow float formats.

ml_dtypes converts float64 -> bfloat16 through float32, rounding twice (1 + 2^-8 + 2^-30 becomes
1.0 instead of 1 + 2^-7). Rounding to float32 *to odd* first makes the second RNE rounding
exact (float32 keeps at least p + 2 bits of every narrower format), so every conversion here
rounds once, as the numerics chapter (T3) requires.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

_NARROW = ("f16", "bf16", "e4m3", "e2m1", "e8m0")


def f64_to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32, rounding toward zero and setting the last bit when inexact."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
        # Step back toward zero where RNE rounded away from zero (only finite y; inf came from overflow).
        away = np.isfinite(y) & (np.abs(y.astype(np.float64)) > np.abs(x))
        y = np.where(away, np.nextafter(y, np.float32(0)), y)
        # Overflowed to inf: truncation gives the largest finite value with the odd bit set already.
        over = np.isinf(y) & np.isfinite(x)
        y = np.where(over, np.copysign(np.float32(np.finfo(np.float32).max), y), y)
        inexact = np.isfinite(x) & (y.astype(np.float64) != x)
    bits = y.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def round_f64(x, target: np.dtype) -> np.ndarray:
    """Round float64 values to ``target`` (a NumPy/ml_dtypes float dtype) once, RNE."""
    target = np.dtype(target)
    x = np.asarray(x, dtype=np.float64)
    if target == np.float64:
        return x.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        if target in (np.dtype(np.float32), np.dtype(np.float16)):
            return x.astype(target)  # NumPy converts double -> float/half directly, RNE
        return f64_to_f32_round_to_odd(x).astype(target)


def int_to_f64_round_to_odd(v: int) -> float:
    """A Python int -> float64, exact below 2^53 and rounded to odd above (for one later rounding)."""
    mag = abs(v)
    if mag < 2**53:
        return float(v)
    if mag.bit_length() > 1024:
        return math.inf if v > 0 else -math.inf  # (math.copysign(inf, v) would convert v to float: OverflowError)
    shift = mag.bit_length() - 53
    q = (mag >> shift) | int(mag & ((1 << shift) - 1) != 0)
    return math.ldexp(float(q), shift) * (1 if v >= 0 else -1)


def round_int(x, target: np.dtype) -> np.ndarray:
    """Integers -> float ``target``, RNE once (int64 -> float64 alone may already round)."""
    target = np.dtype(target)
    x = np.asarray(x)
    if target == np.dtype(np.float64) or \
            (target in (np.dtype(np.float32), np.dtype(np.float16)) and x.dtype != np.uint64):
        return x.astype(target)  # C conversions, correctly rounded
    wide = x.astype(np.float64)
    big = np.abs(wide) >= 2.0**53
    if not np.any(big):
        return round_f64(wide, target)
    flat = x.reshape(-1)
    out = wide.reshape(-1).copy()
    for k in np.flatnonzero(big.reshape(-1)):
        out[k] = int_to_f64_round_to_odd(int(flat[k]))
    return round_f64(out.reshape(x.shape), target)


def round_python_int(v: int, target: np.dtype) -> np.ndarray:
    """A Python int of any size -> float ``target``, RNE once."""
    target = np.dtype(target)
    if target == np.dtype(np.float64):
        try:
            return np.asarray(float(v))  # Python's int -> float is correctly rounded
        except OverflowError:  # past the largest float64: RNE overflows to inf
            return np.asarray(math.inf if v > 0 else -math.inf)
    return round_f64(np.float64(int_to_f64_round_to_odd(v)), target)


def round_number(value, target: np.dtype) -> tuple:
    """A Python or NumPy real number -> float ``target``, RNE once: ``(stored, overflowed)``.

    ``stored`` is a 0-d array of ``target``; ``overflowed`` says a finite ``value`` (ints of any size
    are finite) became ±inf, which literals and runtime scalars refuse: the number the user wrote
    is not a value of the type.
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        stored = round_python_int(int(value), target)
        return stored, bool(np.isinf(stored))
    stored = round_f64(np.float64(value), target)
    return stored, bool(np.isinf(stored)) and math.isfinite(float(value))


def largest_finite(target: np.dtype) -> float:
    """The largest finite value of a float dtype, bfloat16 included (``np.finfo`` knows ml_dtypes' types only
    with some NumPy/ml_dtypes pairs; ``ml_dtypes.finfo`` knows every float dtype)."""
    return float(ml_dtypes.finfo(target).max)


def number_text(value) -> str:
    """A number for a message: integers of more than 24 digits are abbreviated (10**400 is 401 digits)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        text = str(int(value))
        digits = len(text.lstrip("-"))
        if digits > 24:
            return f"{text[:8]}...{text[-4:]} ({digits} digits)"
        return text
    return repr(value)
