"""GGML k-quant byte layouts (quantization.md Q1).

``to_ggml_bytes(record, format)`` packs a record of logical fields (a dict of NumPy arrays, leading
shape [..., B]) into ggml's little-endian blocks, in C order over the leading axes and blocks;
``from_ggml_bytes(data, format)`` unpacks bytes into such a dict with leading shape [B]
(reshape the arrays for other leading shapes).

- block_q8_K (292 bytes): f32 d; i8 qs[256]; i16 bsums[16].
- block_q4_K (144 bytes): f16 d; f16 dmin; u8 scales[12]; u8 qs[128]. For j < 4: scales[j] holds sc_j
  (6 bits) and its top 2 bits the top bits of sc_{j+4}; scales[j+4] holds m_j and the top bits of m_{j+4};
  scales[j+8] holds the low nibbles of sc_{j+4} (low) and m_{j+4} (high). qs[32g + l] holds element
  64g + l in its low nibble and 64g + 32 + l in its high nibble.
"""
from __future__ import annotations

import numpy as np

_Q8 = np.dtype([("d", "<f4"), ("qs", "i1", (256,)), ("bsums", "<i2", (16,))])
_Q4 = np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", (12,)), ("qs", "u1", (128,))])
BLOCK_BYTES = {"q8_k": 292, "q4_k": 144}
assert _Q8.itemsize == 292 and _Q4.itemsize == 144


def _name(fmt) -> str:
    name = getattr(fmt, "name", fmt)
    if name not in BLOCK_BYTES:
        raise ValueError(f"unknown k-quant format {fmt!r}; expected 'q4_k' or 'q8_k'")
    return name


def pack_scales(scales: np.ndarray, mins: np.ndarray) -> np.ndarray:
    """[..., 8] 6-bit scales and mins -> [..., 12] ggml bytes."""
    sc, m = scales.astype(np.uint8) & 63, mins.astype(np.uint8) & 63
    out = np.zeros(sc.shape[:-1] + (12,), np.uint8)
    out[..., 0:4] = sc[..., 0:4] | ((sc[..., 4:8] >> 4) << 6)
    out[..., 4:8] = m[..., 0:4] | ((m[..., 4:8] >> 4) << 6)
    out[..., 8:12] = (sc[..., 4:8] & 0xF) | ((m[..., 4:8] & 0xF) << 4)
    return out


def unpack_scales(b: np.ndarray) -> tuple:
    """[..., 12] ggml bytes -> ([..., 8] scales, [..., 8] mins), per Q1."""
    b = b.astype(np.uint8)
    sc = np.empty(b.shape[:-1] + (8,), np.uint8)
    m = np.empty_like(sc)
    sc[..., 0:4] = b[..., 0:4] & 63
    m[..., 0:4] = b[..., 4:8] & 63
    sc[..., 4:8] = (b[..., 8:12] & 0xF) | ((b[..., 0:4] >> 6) << 4)
    m[..., 4:8] = (b[..., 8:12] >> 4) | ((b[..., 4:8] >> 6) << 4)
    return sc, m


def to_ggml_bytes(record, format) -> bytes:  # noqa: A002
    name = _name(format)
    r = {k: np.asarray(v) for k, v in dict(record).items()}
    if name == "q8_k":
        d = r["d"].reshape(-1)
        blocks = np.zeros(d.shape[0], _Q8)
        blocks["d"] = d.astype(np.float32)
        blocks["qs"] = r["qs"].reshape(-1, 256).astype(np.int8)
        blocks["bsums"] = r["bsums"].reshape(-1, 16).astype(np.int16)
        return blocks.tobytes()
    d = r["d"].reshape(-1)
    blocks = np.zeros(d.shape[0], _Q4)
    blocks["d"] = d.astype(np.float16)
    blocks["dmin"] = r["dmin"].reshape(-1).astype(np.float16)
    blocks["scales"] = pack_scales(r["scales"].reshape(-1, 8), r["mins"].reshape(-1, 8))
    q = r["q"].reshape(-1, 4, 2, 32).astype(np.uint8) & 0xF
    blocks["qs"] = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)
    return blocks.tobytes()


def from_ggml_bytes(data, format) -> dict:  # noqa: A002
    name = _name(format)
    data = bytes(data)
    size = BLOCK_BYTES[name]
    if len(data) % size:
        raise ValueError(f"{name}: {len(data)} bytes is not a whole number of {size}-byte blocks")
    if name == "q8_k":
        blocks = np.frombuffer(data, _Q8)
        return {"d": blocks["d"].astype(np.float32), "qs": blocks["qs"].astype(np.int8).copy(),
                "bsums": blocks["bsums"].astype(np.int16)}
    blocks = np.frombuffer(data, _Q4)
    sc, m = unpack_scales(blocks["scales"])
    qs = blocks["qs"].reshape(-1, 4, 32)
    q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 256).astype(np.uint8)
    return {"d": blocks["d"].astype(np.float16), "dmin": blocks["dmin"].astype(np.float16), "scales": sc,
            "mins": m, "q": q}


def dequantize(record, format) -> np.ndarray:  # noqa: A002
    """Q1 values (float32, [..., B * 256]) of a record."""
    name = _name(format)
    r = {k: np.asarray(v) for k, v in dict(record).items()}
    if name == "q8_k":
        v = r["d"].astype(np.float32)[..., None] * r["qs"].astype(np.float32)
    else:
        j = np.arange(256) // 32
        sc = r["scales"][..., j].astype(np.float32)
        mn = r["mins"][..., j].astype(np.float32)
        v = (r["d"].astype(np.float32)[..., None] * sc) * r["q"].astype(np.float32) - \
            r["dmin"].astype(np.float32)[..., None] * mn
    return v.reshape(v.shape[:-2] + (-1,)).astype(np.float32)


__all__ = ["to_ggml_bytes", "from_ggml_bytes"]
