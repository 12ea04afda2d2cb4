"""MX formats (numerics T6): host quantizer and decoder.

``mx_quantize(values, format, group_size=32)`` splits the last axis of ``values`` into groups of
``group_size`` consecutive elements and returns ``(codes, scales)``: ``codes`` u8 ``[..., G, C]`` with
C = group_size (e4m3, one code per byte) or group_size / 2 (e2m1, two codes per byte, the lower logical
index in bits 3..0), ``scales`` u8 ``[..., G]`` e8m0 codes. Per group (T6): NaN or +-inf anywhere gives
scale 0xFF (codes 0); otherwise e = clamp(floor(log2(max|v|)) - emax, -127, 127) with emax 2 (e2m1) / 8
(e4m3), e = -127 for an all-zero group, and codes = RNE(v * 2^-e) saturated to +-max.

``mx_decode(codes, scales, format, group_size=32)`` is the inverse interpretation: values
``[..., G * group_size]`` = 2^(s - 127) * decode(code), a NaN scale (0xFF) making its whole group NaN.
Every element decoding goes through ``ml_dtypes`` (float4_e2m1fn, float8_e4m3fn, float8_e8m0fnu).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

_ML = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn}
_EMAX = {"e2m1": 2, "e4m3": 8}
_MAX = {"e2m1": 6.0, "e4m3": 448.0}
_PER_BYTE = {"e2m1": 2, "e4m3": 1}


def format_name(fmt) -> str:
    """'e2m1' or 'e4m3' from an intent dtype (I.e2m1, I.e4m3) or its name."""
    name = getattr(fmt, "name", fmt)
    if name not in _ML:
        raise ValueError(f"MX element format must be e2m1 or e4m3 (I.e2m1 / I.e4m3), got {fmt!r}")
    return name


def _check_group(name: str, group_size) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if group_size % _PER_BYTE[name]:
        raise ValueError(f"group_size {group_size} must be even for e2m1 (two codes per byte)")
    return int(group_size)


def carrier_extent(fmt, group_size: int) -> int:
    """C: carrier bytes per scale group."""
    name = format_name(fmt)
    return group_size // _PER_BYTE[name]


def code_table(fmt) -> np.ndarray:
    """float64 value of every element code (16 for e2m1, 256 for e4m3), decoded by ml_dtypes."""
    name = format_name(fmt)
    n = 16 if name == "e2m1" else 256
    return np.arange(n, dtype=np.uint8).view(_ML[name]).astype(np.float64)


def scale_table() -> np.ndarray:
    """float64 value of every e8m0 code (0xFF: NaN), decoded by ml_dtypes."""
    return np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def unpack_codes(codes: np.ndarray, fmt, axis: int = -1) -> np.ndarray:
    """u8 carrier -> u8 element codes along ``axis`` (e2m1: low nibble first, so the axis doubles)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if format_name(fmt) == "e4m3":
        return codes
    codes = np.moveaxis(codes, axis, -1)
    out = np.stack([codes & 0x0F, codes >> 4], axis=-1).reshape(codes.shape[:-1] + (2 * codes.shape[-1],))
    return np.moveaxis(out, -1, axis)


def decode_elements(codes: np.ndarray, fmt, axis: int = -1) -> np.ndarray:
    """u8 carrier -> float64 element values (unscaled) along ``axis``."""
    name = format_name(fmt)
    return unpack_codes(codes, name, axis).view(_ML[name]).astype(np.float64)


def decode_scales(scales: np.ndarray) -> np.ndarray:
    return np.asarray(scales, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def mx_quantize(values, format, group_size: int = 32):  # noqa: A002
    name = format_name(format)
    group_size = _check_group(name, group_size)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:
        raise ValueError("mx_quantize: values must have at least one axis (the grouped axis is the last)")
    k = v.shape[-1]
    if k % group_size:
        raise ValueError(f"mx_quantize: the last axis has extent {k}, not a multiple of group_size {group_size}")
    g = v.reshape(v.shape[:-1] + (k // group_size, group_size))
    special = ~np.isfinite(g).all(axis=-1)
    amax = np.where(np.isfinite(g), np.abs(g), 0.0).max(axis=-1, initial=0.0)
    _, ex = np.frexp(amax)  # amax = f * 2^ex, f in [0.5, 1): floor(log2(amax)) = ex - 1
    e = np.clip(ex.astype(np.int64) - 1 - _EMAX[name], -127, 127)
    e = np.where(amax == 0, -127, e)
    scaled = np.ldexp(np.where(special[..., None], 0.0, g), -e[..., None])
    scaled = np.clip(scaled, -_MAX[name], _MAX[name])
    elem = scaled.astype(_ML[name]).view(np.uint8)  # ml_dtypes rounds to nearest even
    if name == "e2m1":
        elem = elem & 0x0F
        elem = (elem[..., 0::2] | (elem[..., 1::2] << 4)).astype(np.uint8)
    scales = np.where(special, 0xFF, e + 127).astype(np.uint8)
    return np.ascontiguousarray(elem, dtype=np.uint8), scales


def mx_decode(codes, scales, format, group_size: int = 32, dtype=np.float64):  # noqa: A002
    name = format_name(format)
    group_size = _check_group(name, group_size)
    codes = np.asarray(codes)
    scales = np.asarray(scales)
    if codes.dtype != np.uint8 or scales.dtype != np.uint8:
        raise ValueError(f"mx_decode: codes and scales must be uint8 arrays, got {codes.dtype} and {scales.dtype}")
    c = carrier_extent(name, group_size)
    if codes.ndim < 1 or codes.shape[-1] != c or codes.shape[:-1] != scales.shape:
        raise ValueError(f"mx_decode: codes must be [..., G, {c}] and scales [..., G] for {name} with group_size "
                         f"{group_size}; got {codes.shape} and {scales.shape}")
    values = decode_elements(codes, name) * decode_scales(scales)[..., None]
    out = values.reshape(values.shape[:-2] + (values.shape[-2] * group_size,))
    return out.astype(dtype)


__all__ = ["mx_quantize", "mx_decode"]
