"""2:4 structured-sparsity metadata (numerics T7): PTX nibble packing.

Logical metadata (the language's form) holds, per kept value, its position 0..3 in its group of four;
two kept values per group, strictly increasing. The PTX encoding packs each group's two positions into one
nibble ``idx0 | idx1 << 2``, nibbles LSB-first into unsigned words: group ``j`` of a row is in bits
``4*(j % n) .. 4*(j % n) + 3`` of word ``j // n``, n = nibbles per word (2 for uint8, 4 for uint16, 8 for
uint32).

``pack_2to4_nibbles(metadata, dtype=np.uint8)``: integer ``[..., 2 * groups]`` -> ``dtype [..., groups / n]``.
``unpack_2to4_nibbles(packed)``: the inverse, int8 ``[..., 2 * groups]``.
Ill-formed metadata (a position outside 0..3, or not strictly increasing in its group) raises ValueError.
"""
from __future__ import annotations

import numpy as np


def _nibbles_per_word(dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype.kind != "u":
        raise ValueError(f"packed 2:4 metadata words must be unsigned integers, got {dtype}")
    return dtype.itemsize * 2


def pack_2to4_nibbles(metadata, dtype=np.uint8) -> np.ndarray:
    m = np.asarray(metadata)
    if m.dtype.kind not in "iu" or m.ndim < 1:
        raise ValueError(f"2:4 metadata must be an integer array with at least one axis, got {m.dtype} {m.shape}")
    if m.shape[-1] % 2:
        raise ValueError(f"2:4 metadata holds two positions per group; the last extent {m.shape[-1]} is odd")
    pairs = m.astype(np.int64).reshape(m.shape[:-1] + (m.shape[-1] // 2, 2))
    if ((pairs < 0) | (pairs > 3)).any():
        raise ValueError("2:4 metadata: a position is outside 0..3")
    if (pairs[..., 0] >= pairs[..., 1]).any():
        raise ValueError("2:4 metadata: the two positions of a group must be strictly increasing")
    n = _nibbles_per_word(dtype)
    groups = pairs.shape[-2]
    if groups % n:
        raise ValueError(f"2:4 metadata: {groups} groups per row do not fill whole {np.dtype(dtype)} words "
                         f"({n} nibbles each)")
    nib = (pairs[..., 0] | (pairs[..., 1] << 2)).astype(np.uint64)
    nib = nib.reshape(nib.shape[:-1] + (groups // n, n))
    shifts = (4 * np.arange(n)).astype(np.uint64)
    words = np.bitwise_or.reduce(nib << shifts, axis=-1)
    return words.astype(dtype)


def unpack_2to4_nibbles(packed) -> np.ndarray:
    p = np.asarray(packed)
    n = _nibbles_per_word(p.dtype)
    shifts = (4 * np.arange(n)).astype(np.uint64)
    nib = (p.astype(np.uint64)[..., None] >> shifts) & np.uint64(0xF)
    nib = nib.reshape(p.shape[:-1] + (p.shape[-1] * n,)) if p.ndim else nib
    out = np.stack([nib & 3, nib >> 2], axis=-1).astype(np.int8)
    return out.reshape(out.shape[:-2] + (out.shape[-2] * 2,))


__all__ = ["pack_2to4_nibbles", "unpack_2to4_nibbles"]
