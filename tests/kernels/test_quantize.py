"""I.quantize / I.quantized_dot (spec §11.1, quantization.md) on every executable target.

quantize is checked bit for bit against hand-derived blocks (constant, single non-zero, signs, ties
of nearest_int) and against a straightforward scalar reimplementation of ggml's reference algorithms
written here from quantization.md; quantized_dot against the float64 dot of the dequantized operands
within Q3's bound, with leading-axis broadcasting; and the TraceErrors of the surface.
"""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace._format_kquants import dequantize
from intent_trace.errors import TraceError

F = np.float32
RNG = np.random.default_rng(11)
FIELDS = {"q8_k": (("d", I.f32, np.float32, ()), ("qs", I.i8, np.int8, (256,)), ("bsums", I.i16, np.int16, (16,))),
          "q4_k": (("d", I.f16, np.float16, ()), ("dmin", I.f16, np.float16, ()), ("scales", I.u8, np.uint8, (8,)),
                   ("mins", I.u8, np.uint8, (8,)), ("q", I.u8, np.uint8, (256,)))}
_K: dict = {}


def quant_kernel(fmt: str, lead: tuple, k: int):
    key = (fmt, lead, k)
    if key not in _K:
        token = getattr(I.quant, fmt)
        nb = k // 256
        fields = FIELDS[fmt]
        colon = ", ".join([":"] * (len(lead) + 1))

        def body(x, outs):
            r = I.quantize(eval(f"x[{colon}]", {"x": x}), format=token)
            for (name, *_), o in zip(fields, outs):
                v = getattr(r, name)
                o[tuple(slice(None) for _ in range(v.type.rank))] = v

        if fmt == "q8_k":
            @intent.kernel
            def kern(x: I.In[I.f32, lead + (k,)], d: I.Out[I.f32, lead + (nb,)],
                     qs: I.Out[I.i8, lead + (nb, 256)], bsums: I.Out[I.i16, lead + (nb, 16)]):
                body(x, (d, qs, bsums))
        else:
            @intent.kernel
            def kern(x: I.In[I.f32, lead + (k,)], d: I.Out[I.f16, lead + (nb,)], dmin: I.Out[I.f16, lead + (nb,)],
                     scales: I.Out[I.u8, lead + (nb, 8)], mins: I.Out[I.u8, lead + (nb, 8)],
                     q: I.Out[I.u8, lead + (nb, 256)]):
                body(x, (d, dmin, scales, mins, q))
        _K[key] = kern
    return _K[key]


def quantize(run, x: np.ndarray, fmt: str) -> dict:
    lead, k = x.shape[:-1], x.shape[-1]
    outs = {n: np.full(lead + (k // 256,) + tail, 7, npt) for n, _, npt, tail in FIELDS[fmt]}
    run(quant_kernel(fmt, lead, k), x.astype(F), *outs.values())
    return outs


# --- an independent scalar reimplementation (quantization.md Q2, ggml's reference order) -------------

def near(f) -> int:
    f = F(f)
    return int(F(F(f + F(12582912.0)) - F(12582912.0)))


def ggml_nearest_int(fval) -> int:
    """ggml-quants.c's nearest_int: add 1.5 * 2^23 in f32 and read the low mantissa bits (any input, NaN too)."""
    val = F(F(fval) + F(12582912.0))
    i = int(np.array([val], F).view(np.int32)[0])
    return (i & 0x007FFFFF) - 0x00400000


def ref_q8(block):
    """ggml-quants.c's quantize_row_q8_K_ref for one block, statement by statement (the x86 float32 products of
    NumPy scalars keep a NaN operand's payload, as the C code's do). ggml leaves bsums unwritten for a zero block;
    quantization.md Q1 makes them the sums of qs, i.e. 0."""
    mx, amax = F(0), F(0)
    for v in block:
        ax = F(abs(v))
        if ax > amax:  # false for a NaN
            amax, mx = ax, v
    if not amax:
        return F(0), np.zeros(256, np.int8), np.zeros(16, np.int16)
    with np.errstate(all="ignore"):
        iscale = F(F(-127) / mx)
        qs = [min(127, ggml_nearest_int(F(iscale * v))) for v in block]
        qs = np.array([(q + 128) % 256 - 128 for q in qs], np.int8)  # (int8_t) of MIN(127, v)
        d = F(F(1) / iscale)
    return d, qs, np.array([sum(int(q) for q in qs[16 * j:16 * j + 16]) for j in range(16)], np.int16)


def ref_qkx2(x, w):
    mn = mx = x[0]
    sw = w[0]
    sx = F(sw * x[0])
    for i in range(1, 32):
        mn = x[i] if x[i] < mn else mn
        mx = x[i] if x[i] > mx else mx
        sw = F(sw + w[i])
        sx = F(sx + F(w[i] * x[i]))
    if mn > 0:
        mn = F(0)
    if mx == mn:
        return F(0), F(-mn)
    iscale = F(F(15) / F(mx - mn))
    scale = F(F(1) / iscale)
    best = F(0)
    for i in range(32):
        lv = F(max(0, min(15, near(iscale * F(x[i] - mn)))))
        diff = F(F(F(scale * lv) + mn) - x[i])
        best = F(best + F(w[i] * F(diff * diff)))
    for step in range(21):
        iscale = F(F(F(F(-1) + F(F(0.1) * F(step))) + F(15)) / F(mx - mn))
        laux = [F(max(0, min(15, near(iscale * F(x[i] - mn))))) for i in range(32)]
        sl = sl2 = sxl = F(0)
        for i in range(32):
            wl = F(w[i] * laux[i])
            sl, sl2, sxl = F(sl + wl), F(sl2 + F(wl * laux[i])), F(sxl + F(wl * x[i]))
        dd = F(F(sw * sl2) - F(sl * sl))
        if dd > 0:
            ts = F(F(F(sw * sxl) - F(sx * sl)) / dd)
            tm = F(F(F(sl2 * sx) - F(sl * sxl)) / dd)
            if tm > 0:
                tm, ts = F(0), F(sxl / sl2)
            mad = F(0)
            for i in range(32):
                diff = F(F(F(ts * laux[i]) + tm) - x[i])
                mad = F(mad + F(w[i] * F(diff * diff)))
            if mad < best:
                best, scale, mn = mad, ts, tm
    return scale, F(-mn)


def ref_q4(block):
    scs, mis = [], []
    for j in range(8):
        x = block[32 * j:32 * j + 32]
        s2 = F(0)
        for v in x:
            s2 = F(s2 + F(v * v))
        av = F(np.sqrt(F(s2 / F(32))))
        w = [F(av + abs(v)) for v in x]
        s, m = ref_qkx2(x, w)
        scs.append(s)
        mis.append(m)
    ms, mm = F(0), F(0)
    for s, m in zip(scs, mis):
        ms = s if s > ms else ms
        mm = m if m > mm else mm
    inv_s = F(F(63) / ms) if ms > 0 else F(0)
    inv_m = F(F(63) / mm) if mm > 0 else F(0)
    ls = [min(63, near(inv_s * s)) & 63 for s in scs]  # ggml: (uint8_t)MIN(63, ...), low 6 bits kept
    lm = [min(63, near(inv_m * m)) & 63 for m in mis]
    d, dmin = np.float16(ms / F(63)), np.float16(mm / F(63))
    q = np.zeros(256, np.uint8)
    for j in range(8):
        dd = F(F(d) * F(ls[j]))
        if dd == 0:
            continue
        dm = F(F(dmin) * F(lm[j]))
        for i in range(32):
            q[32 * j + i] = max(0, min(15, near(F(F(block[32 * j + i] + dm) / dd))))
    return d, dmin, np.array(ls, np.uint8), np.array(lm, np.uint8), q


def reference(x, fmt):
    fn = ref_q8 if fmt == "q8_k" else ref_q4
    names = [n for n, *_ in FIELDS[fmt]]
    blocks = x.reshape(-1, 256)
    parts = [fn(b) for b in blocks]
    nb = x.shape[-1] // 256
    return {n: np.stack([np.asarray(p[i]) for p in parts]).reshape(x.shape[:-1] + (nb,) + np.asarray(parts[0][i]).shape)
            for i, n in enumerate(names)}


def assert_record(got: dict, want: dict):
    for n, w in want.items():
        g = got[n]
        assert g.dtype == w.dtype, n
        np.testing.assert_array_equal(g.view(f"u{g.dtype.itemsize}"), w.view(f"u{w.dtype.itemsize}"), err_msg=n)


# --- quantize ---------------------------------------------------------------------------------------

def test_q8_k_hand_blocks(run):
    x = np.zeros((4, 256), F)
    x[1, :] = 2.0  # constant: amax = 2 (first occurrence), iscale = -63.5, qs = nearest(-127) = -127
    x[2, 5] = -3.0  # single non-zero, negative: iscale = 127/3, qs[5] = nearest(-127) = -127
    x[3, :4] = [1.0, -1.0, 0.5, 0.0]  # amax = 1 (first), iscale = -127: 0.5 -> -63.5 -> -64 (ties to even)
    r = quantize(run, x, "q8_k")
    assert r["d"][0, 0] == 0 and not r["qs"][0].any() and not r["bsums"][0].any()
    assert r["d"][1, 0] == F(1) / F(-63.5) and (r["qs"][1] == -127).all() and (r["bsums"][1] == -127 * 16).all()
    assert r["d"][2, 0] == F(1) / F(F(-127) / F(-3)) and r["d"][2, 0] > 0
    assert r["qs"][2, 0, 5] == -127 and np.count_nonzero(r["qs"][2]) == 1 and r["bsums"][2, 0, 0] == -127
    assert list(r["qs"][3, 0, :4]) == [-127, 127, -64, 0] and r["bsums"][3, 0, 0] == -64
    assert r["d"][3, 0] == F(1) / F(-127)


def _f32(bits: int) -> F:
    return np.array([bits], np.uint32).view(F)[0]


def nan_blocks() -> np.ndarray:
    """Blocks with NaNs at several positions (first, last, before and after the largest |x|, at the would-be
    maximum), NaN payloads (default, negative, signalling, small and large payloads), an all-NaN block, NaNs
    with zeros only, and NaNs beside an infinity; plus the issue's probe block."""
    rows = []

    def block(*edits, base=None):
        b = RNG.standard_normal(256).astype(F) if base is None else np.full(256, base, F)
        for at, v in edits:
            b[at] = v
        rows.append(b)

    nan, dflt = F(np.nan), _f32(0xFFC00000)
    for at in (0, 1, 17, 128, 255):
        block((at, nan), (200, F(9.0)))  # the maximum after or before the NaN
    block((0, nan), (1, F(-9.0)), (2, nan), (254, nan), (255, _f32(0x7FC01234)))  # several; payload above 127
    block((10, _f32(0x7FC00005)), (11, _f32(0xFF800055)), (12, dflt), (13, _f32(0x7F80007F)), (3, F(-50.0)))
    block(base=np.nan)  # every element NaN: amax stays 0, the zero block
    block((5, nan), (6, _f32(0x7FC0002A)), base=0.0)  # NaNs and zeros only
    block((7, np.inf), (8, _f32(0x7FC00031)), (9, -np.inf))  # amax = inf: iscale = -0, d = -inf
    block((0, nan), (64, F(-3.0)), (65, F(3.0)))  # ties of |x|: the first, negative, wins (d > 0)
    probe = np.linspace(-1.0, 1.0, 256, dtype=F)  # the probe: d = 1/127, qs[0] = -127 beside a NaN
    probe[128] = np.nan
    rows.append(probe)
    return np.stack(rows)


def test_q8_k_nan_is_skipped_by_the_amax_scan_as_in_ggml(run):
    # ggml's `fabsf(x[j]) > amax` is false for a NaN: the maximum is the first largest non-NaN |x|, and a NaN
    # element's quant is ggml's nearest_int of the NaN product (its low payload bits, at most 127)
    x = nan_blocks()
    want = reference(x, "q8_k")
    got = quantize(run, x, "q8_k")
    assert_record(got, want)
    probe = len(x) - 1
    assert got["d"][probe, 0] == F(1) / F(127) and got["qs"][probe, 0, 0] == -127 and got["qs"][probe, 0, 128] == 0
    assert got["d"][7, 0] == 0 and not got["qs"][7:9].any()  # all NaN; NaNs and zeros
    assert got["d"][9, 0] == -np.inf and got["qs"][9, 0, 8] == 0x31 and got["qs"][5, 0, 255] == 127
    assert list(got["qs"][6, 0, 10:14]) == [5, 0x55, 0, 0x7F]


def test_q8_k_ties_round_half_to_even(run):
    x = np.zeros((1, 256), F)
    x[0, 0] = -127.0  # amax = -127: iscale = 1, qs = nearest(x)
    x[0, 1:7] = [2.5, 3.5, -2.5, -0.5, 0.5, 1.5]
    r = quantize(run, x, "q8_k")
    assert list(r["qs"][0, 0, :7]) == [-127, 2, 4, -2, 0, 0, 2]
    assert r["d"][0, 0] == 1.0


def test_q4_k_hand_blocks(run):
    x = np.zeros((3, 256), F)
    x[1, :] = 1.0  # positive constant: min forced to 0, every sub-block scale 1/15 exactly representable
    x[2, 7] = 3.0  # one non-zero in sub-block 0, others flat zero
    r = quantize(run, x, "q4_k")
    assert r["d"][0, 0] == 0 and r["dmin"][0, 0] == 0 and not r["q"][0].any() and not r["scales"][0].any()
    assert (r["scales"][1] == 63).all() and (r["mins"][1] == 0).all() and r["dmin"][1, 0] == 0
    assert r["d"][1, 0] == np.float16(F(F(1) / F(F(15) / F(1))) / F(63)) and (r["q"][1] == 15).all()
    assert r["scales"][2, 0, 0] == 63 and (r["scales"][2, 0, 1:] == 0).all() and (r["mins"][2] == 0).all()
    assert r["q"][2, 0, 7] == 15 and np.count_nonzero(r["q"][2]) == 1
    v = dequantize(r, "q4_k")
    assert abs(v[2, 7] - 3.0) < 0.01 and np.count_nonzero(v[2]) == 1


@pytest.mark.parametrize("fmt", ["q8_k", "q4_k"])
def test_quantize_matches_scalar_reference(run, fmt):
    x = RNG.standard_normal((2, 512)).astype(F)
    x[1, 256:] = np.abs(x[1, 256:]) + 0.5  # an all-positive block (min forced to 0)
    x[0, 100] = 40.0  # an outlier
    assert_record(quantize(run, x, fmt), reference(x, fmt))


def test_quantize_rank3_leading_axes(run):
    x = (RNG.standard_normal((2, 1, 256)) * 1e-3).astype(F)
    for fmt in ("q8_k", "q4_k"):
        got = quantize(run, x, fmt)
        assert_record(got, reference(x, fmt))
        assert got[FIELDS[fmt][0][0]].shape == (2, 1, 1)


# --- quantized_dot ------------------------------------------------------------------------------------

_D: dict = {}


def dot_kernel(lf: str, la: tuple, lb: tuple, out: tuple, k: int):
    key = (lf, la, lb, out, k)
    if key not in _D:
        def sl(rank):
            return tuple(slice(None) for _ in range(rank))

        @intent.kernel
        def kern(x: I.In[I.f32, la + (k,)], y: I.In[I.f32, lb + (k,)], o: I.Out[I.f32, out or (1,)]):
            a = I.quantize(x[sl(len(la) + 1)], format=getattr(I.quant, lf))
            b = I.quantize(y[sl(len(lb) + 1)], format=I.quant.q8_k)
            r = I.quantized_dot(a, b, lhs_format=getattr(I.quant, lf), rhs_format=I.quant.q8_k, acc_dtype=I.f32)
            if out:
                o[sl(len(out))] = r
            else:
                o[0] = r

        _D[key] = kern
    return _D[key]


@pytest.mark.parametrize("lf", ["q4_k", "q8_k"])
@pytest.mark.parametrize("la,lb,out", [((), (), ()), ((3,), (), (3,)), ((2, 1), (3,), (2, 3)), ((1,), (4,), (4,))])
def test_quantized_dot_within_bound(run, lf, la, lb, out):
    k = 512
    x = RNG.standard_normal(la + (k,)).astype(F)
    y = RNG.standard_normal(lb + (k,)).astype(F)
    o = np.full(out or (1,), np.nan, F)
    run(dot_kernel(lf, la, lb, out, k), x, y, o)
    # the exact real dot of the dequantized operands (generic quantize is bit-exact on every target)
    xa = dequantize(quantize(run, x, lf), lf).astype(np.float64)
    ya = dequantize(quantize(run, y, "q8_k"), "q8_k").astype(np.float64)
    xa, ya = np.broadcast_arrays(xa.reshape(la + (k,)), ya.reshape(lb + (k,)))
    exact = (xa * ya).sum(-1).reshape(out or (1,))
    mag = np.abs(xa * ya).sum(-1).reshape(out or (1,))
    u = 2.0 ** -24
    d = k // 256 + 8  # f32 roundings on a term's path: scale products, conversions, block accumulation
    gamma = d * u / (1 - d * u)
    assert np.all(np.abs(o - exact) <= gamma * mag + 1e-30), (o, exact)
    # the quantized dot tracks the float dot
    ref = (np.broadcast_arrays(x.reshape(la + (k,)).astype(np.float64), y.reshape(lb + (k,)))[0] *
           np.broadcast_arrays(x.reshape(la + (k,)), y.reshape(lb + (k,)).astype(np.float64))[1]).sum(-1)
    assert np.all(np.abs(o - ref.reshape(out or (1,))) < 0.2 * np.sqrt(k) * 3)


# --- surface errors -------------------------------------------------------------------------------

def _trace(fn, shape=(512,)):
    @intent.kernel
    def kern(x: I.In[I.f32, shape], o: I.Out[I.f32, (1,)]):
        fn(x, o)

    return intent.compile(kern, target="generic")


def test_k_not_multiple_of_256():
    with pytest.raises(TraceError, match="multiple of 256"):
        _trace(lambda x, o: I.quantize(x[:], format=I.quant.q8_k), shape=(300,))


def test_unsupported_pair_and_acc_dtype():
    def pair(x, o):
        a = I.quantize(x[:], format=I.quant.q8_k)
        b = I.quantize(x[:], format=I.quant.q4_k)
        I.quantized_dot(a, b, lhs_format=I.quant.q8_k, rhs_format=I.quant.q4_k, acc_dtype=I.f32)

    with pytest.raises(TraceError, match="not supported"):
        _trace(pair)

    def acc(x, o):
        a = I.quantize(x[:], format=I.quant.q8_k)
        I.quantized_dot(a, a, lhs_format=I.quant.q8_k, rhs_format=I.quant.q8_k, acc_dtype=I.f16)

    with pytest.raises(TraceError, match="acc_dtype"):
        _trace(acc)

    def mismatch(x, o):
        a = I.quantize(x[:], format=I.quant.q8_k)
        I.quantized_dot(a, a, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)

    with pytest.raises(TraceError, match="fields"):
        _trace(mismatch)


def test_format_tokens():
    assert repr(I.quant.q4_k) == "I.quant.q4_k" and repr(I.quant.q8_k) == "I.quant.q8_k"
    assert I.quant.q4_k != I.quant.q8_k and hash(I.quant.q4_k) == hash(I.quant.q4_k)
    with pytest.raises(AttributeError):
        I.quant.q4_k.name = "x"
