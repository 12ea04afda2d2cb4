"""Host format helpers (numerics T6, T7): MX quantize/decode and 2:4 PTX nibble packing; sparse schemas.

Decoding is checked against ml_dtypes directly for every e2m1, e4m3 and e8m0 code; encoding against the T6
rules written out here (NaN/inf -> 0xFF, all-zero group e = -127, clamping, RNE, saturation).
"""
from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

from intent_trace import I, formats as F


def ml(codes, dtype) -> np.ndarray:
    return np.asarray(codes, np.uint8).view(dtype).astype(np.float64)


def same(a, b) -> bool:
    return np.array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64), equal_nan=True)


# --- decode: every code, as ml_dtypes decodes it --------------------------------------------------------------

def test_every_e4m3_code_decodes_as_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8).reshape(256, 1, 1)  # one code per group (group_size 1)
    scales = np.full((256, 1), 127, np.uint8)  # 2^0
    got = F.mx_decode(codes, scales, I.e4m3, group_size=1)
    assert got.shape == (256, 1)
    assert same(got[:, 0], ml(np.arange(256), ml_dtypes.float8_e4m3fn))
    assert np.isnan(got[0x7F, 0]) and np.isnan(got[0xFF, 0]) and got[0x7E, 0] == 448.0


def test_every_e2m1_code_decodes_as_ml_dtypes_low_nibble_first():
    lo, hi = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    carrier = (lo | (hi << 4)).astype(np.uint8).reshape(256, 1, 1)  # two codes per byte, group_size 2
    got = F.mx_decode(carrier, np.full((256, 1), 127, np.uint8), I.e2m1, group_size=2)
    assert got.shape == (256, 2)
    assert same(got[:, 0], ml(lo.reshape(-1), ml_dtypes.float4_e2m1fn))
    assert same(got[:, 1], ml(hi.reshape(-1), ml_dtypes.float4_e2m1fn))
    assert sorted(set(np.abs(got[:, 0]))) == [0, .5, 1, 1.5, 2, 3, 4, 6]
    # byte 0x21: element 0 is code 1 (0.5), element 1 is code 2 (1.0)
    assert list(F.mx_decode(np.array([[[0x21]]], np.uint8), np.array([[127]], np.uint8), "e2m1", 2)[0]) == [.5, 1]


def test_every_e8m0_scale_decodes_as_ml_dtypes_nan_scale_makes_the_group_nan():
    codes = np.full((256, 1, 4), 0x38, np.uint8)  # e4m3 1.0
    codes[:, 0, 3] = 0  # a zero element: NaN scale still gives NaN
    scales = np.arange(256, dtype=np.uint8).reshape(256, 1)
    got = F.mx_decode(codes, scales, I.e4m3, group_size=4)
    want = ml(np.arange(256), ml_dtypes.float8_e8m0fnu)
    assert same(got[:, 0], want) and same(got[:, 1], want)
    assert got[0, 0] == 2.0 ** -127 and got[254, 0] == 2.0 ** 127
    assert np.isnan(got[255]).all() and (got[:255, 3] == 0).all()


# --- quantize: the T6 encoding rules -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt, mx, emax", [(I.e2m1, 6.0, 2), (I.e4m3, 448.0, 8)])
def test_mx_quantize_round_trips_representable_groups(fmt, mx, emax):
    rng = np.random.default_rng(7)
    ml_t = ml_dtypes.float4_e2m1fn if fmt is I.e2m1 else ml_dtypes.float8_e4m3fn
    table = ml(np.arange(16 if fmt is I.e2m1 else 256), ml_t)
    table = table[np.isfinite(table)]
    g, gs = 6, 32
    e = rng.integers(-100, 100, g)
    elems = rng.choice(table, (g, gs))
    elems[:, 5] = mx * np.where(rng.random(g) < .5, -1, 1)  # the group max fixes the exponent
    values = elems * np.exp2(e)[:, None]
    codes, scales = F.mx_quantize(values.reshape(1, -1), fmt)
    assert codes.dtype == np.uint8 and scales.dtype == np.uint8
    assert codes.shape == (1, g, gs if fmt is I.e4m3 else gs // 2) and scales.shape == (1, g)
    assert list(scales[0]) == list(e + 127)  # floor(log2(mx * 2^e)) - emax == e
    assert np.floor(np.log2(mx)) - emax == 0
    assert same(F.mx_decode(codes, scales, fmt), values.reshape(1, -1))


def test_mx_quantize_special_zero_clamp_rne_and_saturation():
    gs = 4
    v = np.array([
        [1.0, np.nan, 2.0, 0.0],      # NaN -> scale 0xFF
        [1.0, -np.inf, 2.0, 0.0],     # inf -> scale 0xFF
        [0.0, -0.0, 0.0, 0.0],        # all zero -> e = -127
        [6.0, 2.5, 3.5, -0.25],       # e = 0: 2.5 -> 2 and 3.5 -> 4 (RNE), -0.25 -> -0 (tie to even 0)
        [7.9, 1.0, 0.0, 0.0],         # e = floor(log2 7.9) - 2 = 0: 7.9 saturates to 6
        [2.0 ** 200, 1.0, 0.0, 0.0],  # e clamps to 127: 2^73 saturates to 6
        [2.0 ** -140, 0.0, 0.0, 0.0],  # e clamps to -127: 2^-13 rounds to 0
    ])
    codes, scales = F.mx_quantize(v.reshape(-1), I.e2m1, group_size=gs)
    assert list(scales) == [0xFF, 0xFF, 0, 127, 127, 254, 0]
    got = F.mx_decode(codes, scales, I.e2m1, group_size=gs).reshape(-1, gs)
    assert np.isnan(got[:2]).all()
    assert (got[2] == 0).all()
    assert list(got[3]) == [6.0, 2.0, 4.0, 0.0] and np.signbit(got[3, 3])
    assert list(got[4]) == [6.0, 1.0, 0.0, 0.0]
    assert list(got[5]) == [6.0 * 2.0 ** 127, 0.0, 0.0, 0.0]
    assert list(got[6]) == [0.0] * 4
    # e4m3: 449 with max 449 -> e = 0, saturates to 448 (never NaN)
    codes, scales = F.mx_quantize(np.array([449.0, 1.0, 0.0, 0.0]), I.e4m3, group_size=4)
    assert list(scales) == [127] and codes[0, 0] == 0x7E


def test_mx_helpers_reject_bad_shapes_and_formats():
    with pytest.raises(ValueError, match="multiple of group_size"):
        F.mx_quantize(np.zeros(33), I.e4m3)
    with pytest.raises(ValueError, match="e2m1 or e4m3"):
        F.mx_quantize(np.zeros(32), I.e8m0)
    with pytest.raises(ValueError, match=r"\[\.\.\., G, 16\]"):
        F.mx_decode(np.zeros((1, 32), np.uint8), np.zeros(1, np.uint8), I.e2m1)


# --- 2:4 nibbles --------------------------------------------------------------------------------------------

def test_pack_2to4_nibbles_hand_checked_example():
    meta = np.array([[0, 1, 2, 3, 1, 3, 0, 2]])
    # groups (0,1) -> 0b0100 = 4, (2,3) -> 0b1110 = 0xE, (1,3) -> 0b1101 = 0xD, (0,2) -> 0b1000 = 8; LSB-first
    packed = F.pack_2to4_nibbles(meta)
    assert packed.dtype == np.uint8 and packed.tolist() == [[0xE4, 0x8D]]
    assert F.pack_2to4_nibbles(meta, dtype=np.uint16).tolist() == [[0x8DE4]]
    assert F.pack_2to4_nibbles(np.tile(meta, 2), dtype=np.uint32).tolist() == [[0x8DE48DE4]]
    assert F.unpack_2to4_nibbles(packed).tolist() == meta.tolist()


def test_pack_unpack_2to4_round_trip_over_every_valid_group():
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    rng = np.random.default_rng(3)
    meta = np.array([pairs[i] for i in rng.integers(0, 6, 3 * 16)]).reshape(3, 32)
    for dtype in (np.uint8, np.uint16, np.uint32):
        packed = F.pack_2to4_nibbles(meta, dtype=dtype)
        assert packed.dtype == dtype and packed.shape == (3, 16 // (2 * np.dtype(dtype).itemsize))
        assert np.array_equal(F.unpack_2to4_nibbles(packed), meta)


@pytest.mark.parametrize("bad", [[0, 4], [-1, 2], [2, 2], [3, 1]])
def test_pack_2to4_nibbles_rejects_ill_formed_metadata(bad):
    with pytest.raises(ValueError):
        F.pack_2to4_nibbles(np.array([bad + [0, 1]]))


# --- sparse schemas -----------------------------------------------------------------------------------------

def test_sparse_schemas_are_closed_immutable_hashable_values():
    a, b = I.sparse.two_of_four(), I.sparse.one_of_two()
    assert (a.group_size, a.kept, b.group_size, b.kept) == (4, 2, 2, 1)
    assert a == I.sparse.two_of_four() and hash(a) == hash(I.sparse.two_of_four()) and a != b
    assert {a: 1}[I.sparse.two_of_four()] == 1
    assert repr(a) == "I.sparse.two_of_four()" and repr(b) == "I.sparse.one_of_two()"
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.group = 8
    with pytest.raises(AttributeError):
        I.sparse.four_of_eight
