"""Host codecs for GGML k-quants (quantization.md Q1): byte sizes, scale packing, nibble layout,
round trips, and the q4_K decoder against gguf's reference dequantizer."""
import numpy as np

from intent_trace import formats
from intent_trace._format_kquants import dequantize, pack_scales, unpack_scales
from intent_trace.oracle.generic_quant import quantize_q4_k, quantize_q8_k

RNG = np.random.default_rng(5)


def _q4(x):
    return dict(zip(("d", "dmin", "scales", "mins", "q"), quantize_q4_k(x)))


def _q8(x):
    return dict(zip(("d", "qs", "bsums"), quantize_q8_k(x)))


def test_block_sizes_and_q8_layout():
    r = _q8(RNG.standard_normal(512).astype(np.float32))
    data = formats.to_ggml_bytes(r, "q8_k")
    assert len(data) == 2 * 292
    assert np.frombuffer(data[:4], "<f4")[0] == r["d"][0]
    assert np.array_equal(np.frombuffer(data[4:260], "i1"), r["qs"][0])
    assert np.array_equal(np.frombuffer(data[260:292], "<i2"), r["bsums"][0])
    assert len(formats.to_ggml_bytes(_q4(np.ones(768, np.float32)), "q4_k")) == 3 * 144


def test_q4_layout_nibbles_and_scales():
    rec = {"d": np.array([1.5], np.float16), "dmin": np.array([-0.25], np.float16),
           "scales": np.array([[1, 2, 3, 63, 17, 33, 48, 62]], np.uint8),
           "mins": np.array([[63, 0, 5, 7, 40, 1, 31, 16]], np.uint8),
           "q": (np.arange(256, dtype=np.uint8) % 16)[None]}
    data = formats.to_ggml_bytes(rec, "q4_k")
    assert np.frombuffer(data[0:2], "<f2")[0] == 1.5 and np.frombuffer(data[2:4], "<f2")[0] == -0.25
    b = np.frombuffer(data[4:16], np.uint8)
    for j in range(8):  # Q1's unpacking rule, read directly off the bytes
        if j < 4:
            sc, m = b[j] & 63, b[j + 4] & 63
        else:
            sc, m = (b[j + 4] & 0xF) | ((b[j - 4] >> 6) << 4), (b[j + 4] >> 4) | ((b[j] >> 6) << 4)
        assert (sc, m) == (rec["scales"][0, j], rec["mins"][0, j])
    qs = np.frombuffer(data[16:144], np.uint8)
    for g in range(4):
        for l in range(32):
            assert qs[32 * g + l] & 0xF == rec["q"][0, 64 * g + l]
            assert qs[32 * g + l] >> 4 == rec["q"][0, 64 * g + 32 + l]
    back = formats.from_ggml_bytes(data, "q4_k")
    for k, v in rec.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k


def test_round_trips():
    x = RNG.standard_normal((3, 512)).astype(np.float32)
    for fmt, rec in (("q8_k", _q8(x)), ("q4_k", _q4(x))):
        back = formats.from_ggml_bytes(formats.to_ggml_bytes(rec, fmt), fmt)
        for k, v in rec.items():
            assert np.array_equal(back[k], v.reshape((-1,) + v.shape[2:])), (fmt, k)
        assert formats.to_ggml_bytes(back, fmt) == formats.to_ggml_bytes(rec, fmt)
    sc = RNG.integers(0, 64, (10, 8)).astype(np.uint8)
    m = RNG.integers(0, 64, (10, 8)).astype(np.uint8)
    s2, m2 = unpack_scales(pack_scales(sc, m))
    assert np.array_equal(s2, sc) and np.array_equal(m2, m)


def test_q4_k_decoder_matches_gguf():
    import gguf
    from gguf import quants

    x = RNG.standard_normal(1024).astype(np.float32)
    rec = _q4(x)
    data = formats.to_ggml_bytes(rec, "q4_k")
    theirs = quants.dequantize(np.frombuffer(data, np.uint8), gguf.GGMLQuantizationType.Q4_K).reshape(-1)
    ours = dequantize(rec, "q4_k").reshape(-1)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6 * np.abs(ours).max())
    assert np.abs(ours - x).max() < 0.2 * np.abs(x).max()
