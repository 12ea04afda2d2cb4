"""T3 conversions: float -> int (truncate, saturate, NaN -> 0), int -> float and float -> float (RNE once),
bool casts, and bitcast width rules.

References: Python integers, ``math.trunc`` and ``fractions.Fraction`` rounded once by
:func:`round_fraction` (written here), plus hand-computed edge values.
"""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from float_reference import FMT, max_finite, round_fraction

FLOATS = [I.f16, I.bf16, I.f32, I.f64]
SIGNED = [I.i8, I.i16, I.i32, I.i64, I.index]
UNSIGNED = [I.u8, I.u16, I.u32, I.u64]
INTS = SIGNED + UNSIGNED
NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64,
      I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.index: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64, I.bool: np.bool_}
WIDTH = {I.f16: 16, I.bf16: 16, I.f32: 32, I.f64: 64, I.i8: 8, I.i16: 16, I.i32: 32, I.i64: 64, I.index: 64,
         I.u8: 8, I.u16: 16, I.u32: 32, I.u64: 64}
UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def ids(dtypes):
    return [str(d) for d in dtypes]


def lo(dt) -> int:
    return -(1 << (WIDTH[dt] - 1)) if dt in SIGNED else 0


def hi(dt) -> int:
    return (1 << (WIDTH[dt] - 1)) - 1 if dt in SIGNED else (1 << WIDTH[dt]) - 1


def float_arr(values, dt) -> np.ndarray:
    """Exactly representable Python floats -> array of ``dt`` (checked)."""
    wide = np.array(values, dtype=np.float64)
    out = wide.astype(np.float32).astype(NP[dt]) if dt is I.bf16 else wide.astype(NP[dt])
    assert np.array_equal(out.astype(np.float64), wide, equal_nan=True), "test input not representable"
    return out


def int_arr(values, dt) -> np.ndarray:
    return np.array([int(v) for v in values], dtype=object).astype(NP[dt])


def bits_of(a: np.ndarray) -> list:
    a = np.ascontiguousarray(a).reshape(-1)
    return [int(v) for v in a.view(UINT[a.dtype.itemsize * 8])]


def from_bits(bits, dt) -> np.ndarray:
    return np.array([int(b) for b in bits], dtype=UINT[WIDTH[dt]]).view(NP[dt])


def ordered(x: float, dt) -> int:
    """Position of a float on the ordered integer line of ``dt`` (+0 and -0 both map to 0)."""
    b = bits_of(float_arr([x], dt))[0]
    sign = 1 << (WIDTH[dt] - 1)
    return -(b & (sign - 1)) if b & sign else b


def from_ordered(k: int, dt) -> float:
    sign = 1 << (WIDTH[dt] - 1)
    b = (-k) | sign if k < 0 else k
    return float(from_bits([b], dt)[0])


def representable_near(v: int, dt, spread: int = 2) -> list:
    """Floats of ``dt`` around the integer ``v``: its rounding and ``spread`` neighbours each side."""
    f = round_fraction(Fraction(v), dt)
    if math.isinf(f):
        f = math.copysign(max_finite(dt), f)
    k = ordered(f, dt)
    out = []
    for j in range(k - spread, k + spread + 1):
        x = from_ordered(j, dt)
        if math.isfinite(x):
            out.append(x)
    return out


def assert_floats(got: np.ndarray, want: list, inputs):
    got_f = [float(v) for v in got.reshape(-1)]
    bad = []
    for i, (g, w) in enumerate(zip(got_f, want)):
        ok = math.isnan(g) if math.isnan(w) else (g == w and math.copysign(1, g) == math.copysign(1, w))
        if not ok:
            bad.append((inputs[i], g, w))
    assert len(got_f) == len(want)
    assert not bad, f"{len(bad)} mismatches (input, got, want), first: {bad[:6]}"


_KERNELS: dict = {}


def cast_kernel(src, dst):
    if (src, dst) not in _KERNELS:
        @intent.kernel
        def k(a: I.In[src, ("N",)], out: I.Out[dst, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = I.cast(a[d], dst)

        _KERNELS[(src, dst)] = k
    return _KERNELS[(src, dst)]


def run_cast(run, src, dst, a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.shape, dtype=NP[dst])
    run(cast_kernel(src, dst), a, out)
    return out


# --- float -> int ---------------------------------------------------------------------------------

def ref_float_to_int(x: float, dt) -> int:
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi(dt) if x > 0 else lo(dt)
    return min(max(math.trunc(x), lo(dt)), hi(dt))


def float_to_int_inputs(fdt, idt, seed: int) -> list:
    vals = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 0.99609375, -0.99609375, 1.0, -1.0,
            1.5, -1.5, 2.5, -2.5, 2.0**-24, -(2.0**-24), 100.5, -100.5, max_finite(fdt), -max_finite(fdt)]
    for bound in (lo(idt) - 1, lo(idt), hi(idt), hi(idt) + 1, 2 * hi(idt) + 2, -2 * hi(idt) - 2):
        vals += representable_near(bound, fdt)
    rng = np.random.default_rng(seed)
    span = float(1 << WIDTH[idt])
    vals += [round_fraction(Fraction(float(v)), fdt) for v in rng.uniform(-2 * span, 2 * span, 24)]
    vals += [round_fraction(Fraction(float(v)), fdt) for v in rng.uniform(-300, 300, 16)]
    return vals


@pytest.mark.parametrize("idt", INTS, ids=ids(INTS))
@pytest.mark.parametrize("fdt", FLOATS, ids=ids(FLOATS))
def test_float_to_int_truncates_saturates_and_maps_nan_to_zero(run, fdt, idt):
    vals = float_to_int_inputs(fdt, idt, seed=WIDTH[idt] + FMT[fdt][0])
    got = run_cast(run, fdt, idt, float_arr(vals, fdt))
    want = [ref_float_to_int(v, idt) for v in vals]
    bad = [(v, int(g), w) for v, g, w in zip(vals, got, want) if int(g) != w]
    assert not bad, f"(input, got, want): {bad[:6]}"


@pytest.mark.parametrize("fdt,idt,x,want", [
    (I.f64, I.i64, 2.0**63, 2**63 - 1), (I.f64, I.i64, -(2.0**63), -2**63),
    (I.f64, I.i64, 2.0**63 - 1024, 2**63 - 1024), (I.f64, I.i64, -(2.0**63) - 2048, -2**63),
    (I.f32, I.i64, 2.0**63 - 2**39, 2**63 - 2**39), (I.f32, I.i64, 2.0**63, 2**63 - 1),
    (I.f64, I.u64, 2.0**64, 2**64 - 1), (I.f64, I.u64, 2.0**64 - 2048, 2**64 - 2048), (I.f64, I.u64, -0.9, 0),
    (I.f64, I.u64, -1.0, 0), (I.f64, I.u64, 2.0**63, 2**63), (I.f32, I.u64, 2.0**64 - 2**40, 2**64 - 2**40),
    (I.f64, I.index, 2.0**63, 2**63 - 1), (I.f64, I.index, -1e300, -2**63),
    (I.f32, I.i32, 2147483520.0, 2147483520), (I.f32, I.i32, 2.0**31, 2**31 - 1), (I.f32, I.i32, -(2.0**31), -2**31),
    (I.f32, I.u32, 4294967040.0, 4294967040), (I.f32, I.u32, 2.0**32, 2**32 - 1),
    (I.f16, I.i8, 127.5, 127), (I.f16, I.i8, 128.0, 127), (I.f16, I.i8, -128.875, -128), (I.f16, I.i8, -129.0, -128),
    (I.f16, I.i16, 65504.0, 32767), (I.f16, I.u16, 65504.0, 65504), (I.f16, I.u8, -0.5, 0),
    (I.bf16, I.i32, 2.0**31, 2**31 - 1), (I.bf16, I.u8, 255.0, 255), (I.bf16, I.u8, 256.0, 255),
    (I.f64, I.i32, math.nan, 0), (I.f32, I.u64, -math.nan, 0), (I.bf16, I.i64, math.inf, 2**63 - 1),
], ids=lambda v: str(v))
def test_float_to_int_hand_edges(run, fdt, idt, x, want):
    got = run_cast(run, fdt, idt, float_arr([x, x], fdt))
    assert [int(v) for v in got] == [want, want]


# --- int -> float ---------------------------------------------------------------------------------

def int_to_float_inputs(idt, seed: int) -> list:
    vals = {lo(idt), lo(idt) + 1, hi(idt), hi(idt) - 1, 0, 1, 2, 3}
    for k in range(1, WIDTH[idt]):
        for d in (-3, -1, 0, 1, 3):
            for v in ((1 << k) + d, -(1 << k) + d):
                vals.add(v)
        # just above a halfway point of the 24- and 8-bit significands
        vals.add((1 << k) + (1 << max(0, k - 24)) + 1)
        vals.add((1 << k) + (1 << max(0, k - 8)) + 1)
        vals.add(-((1 << k) + (1 << max(0, k - 24)) + 1))
    rng = np.random.default_rng(seed)
    vals.update(int.from_bytes(rng.bytes(WIDTH[idt] // 8), "little") for _ in range(40))
    # keep the values of this dtype: unsigned are taken modulo 2^bits, signed wrapped
    out = set()
    for v in vals:
        v &= (1 << WIDTH[idt]) - 1
        if idt in SIGNED and v >= 1 << (WIDTH[idt] - 1):
            v -= 1 << WIDTH[idt]
        out.add(v)
    return sorted(out)


@pytest.mark.parametrize("fdt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("idt", INTS, ids=ids(INTS))
def test_int_to_float_rounds_to_nearest_even_once(run, idt, fdt):
    vals = int_to_float_inputs(idt, seed=WIDTH[idt])
    got = run_cast(run, idt, fdt, int_arr(vals, idt))
    assert_floats(got, [round_fraction(Fraction(v), fdt) for v in vals], vals)


@pytest.mark.parametrize("idt,fdt,v,want", [
    # exactly representable in float64 would already round: a naive int -> f64 -> f32 gives the even 2^60
    (I.i64, I.f32, 2**60 + 2**36 + 1, 2.0**60 + 2**37), (I.i64, I.f32, -(2**60 + 2**36 + 1), -(2.0**60 + 2**37)),
    (I.u64, I.f32, 2**63 + 2**39 + 1, 2.0**63 + 2**40), (I.u64, I.f32, 2**64 - 1, 2.0**64),
    (I.i64, I.bf16, 2**62 + 2**54 + 1, 2.0**62 + 2**55), (I.u64, I.bf16, 2**63 + 2**55 + 1, 2.0**63 + 2**56),
    # through float32 would round first: int -> f32 -> bf16 gives the even 2^30
    (I.i32, I.bf16, 2**30 + 2**22 + 1, 2.0**30 + 2**23), (I.u32, I.bf16, 2**31 + 2**23 + 1, 2.0**31 + 2**24),
    (I.i64, I.f64, 2**53 + 1, 2.0**53), (I.i64, I.f64, 2**53 + 3, 2.0**53 + 4), (I.i64, I.f64, 2**63 - 1, 2.0**63),
    (I.i32, I.f32, 2**24 + 1, 2.0**24), (I.i32, I.f32, 2**24 + 3, 2.0**24 + 4),
    (I.i32, I.f16, 2**15 + 2**4 + 1, 32800.0),
    (I.i32, I.f16, 65519, 65504.0), (I.i32, I.f16, 65520, math.inf), (I.i32, I.f16, -65520, -math.inf),
    (I.u64, I.f16, 2**64 - 1, math.inf), (I.i64, I.bf16, 2**63 - 1, 2.0**63), (I.i8, I.bf16, -128, -128.0),
    (I.i16, I.bf16, 257, 256.0), (I.i16, I.bf16, 259, 260.0),
], ids=lambda v: str(v))
def test_int_to_float_hand_cases(run, idt, fdt, v, want):
    got = run_cast(run, idt, fdt, int_arr([v], idt))
    assert_floats(got, [want], [v])


# --- float -> float -------------------------------------------------------------------------------

def float_inputs(dt, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    width = WIDTH[dt]
    m = FMT[dt][0] - 1
    ew = width - 1 - m
    raw = [int(v) for v in rng.integers(0, 2**width, n, dtype=np.uint64)]
    # exponents near the other formats' limits: f16 range, bf16/f32 subnormal edges, overflow edges
    targeted = []
    bias = (1 << (ew - 1)) - 1
    for e in (-150, -149, -134, -133, -127, -126, -125, -25, -24, -15, -14, 0, 15, 16, 127, 128):
        field = e + bias
        if 0 < field < (1 << ew) - 1:
            for _ in range(3):
                targeted.append((int(rng.integers(0, 2)) << (width - 1)) | (field << m)
                                | int(rng.integers(0, 2**m, dtype=np.uint64)))
    vals = [float(v) for v in from_bits(raw + targeted, dt)]
    return vals + [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, max_finite(dt), -max_finite(dt)]


def ref_float_to_float(x: float, dst) -> float:
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    return round_fraction(Fraction(x), dst)


FLOAT_PAIRS = [(s, d) for s in FLOATS for d in FLOATS if s is not d]


@pytest.mark.parametrize("src,dst", FLOAT_PAIRS, ids=[f"{s}-{d}" for s, d in FLOAT_PAIRS])
def test_float_to_float_rounds_to_nearest_even_once(run, src, dst):
    vals = float_inputs(src, 96, seed=WIDTH[src] + FMT[dst][0])
    got = run_cast(run, src, dst, float_arr(vals, src))
    assert_floats(got, [ref_float_to_float(v, dst) for v in vals], vals)


@pytest.mark.parametrize("src,dst,x,want", [
    (I.f64, I.bf16, 1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-7),  # f64 -> f32 -> bf16 would give 1.0
    (I.f32, I.bf16, 1 + 2.0**-8 + 2.0**-23, 1 + 2.0**-7), (I.f32, I.bf16, 1 + 2.0**-8, 1.0),
    (I.f32, I.bf16, 1 + 3 * 2.0**-8, 1 + 2.0**-6), (I.f64, I.f16, 1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-10),
    (I.f64, I.f16, 65520.0, math.inf), (I.f64, I.f16, -65520.0, -math.inf), (I.f32, I.f16, 65519.99609375, 65504.0),
    (I.f64, I.f32, 1e300, math.inf), (I.f64, I.f32, -1e300, -math.inf), (I.f64, I.bf16, 3.4e38, math.inf),
    (I.f64, I.f32, 2.0**-150, 0.0), (I.f64, I.f32, -(2.0**-150), -0.0), (I.f64, I.f32, 3 * 2.0**-150, 2.0**-148),
    (I.f64, I.f32, 2.0**-150 + 2.0**-200, 2.0**-149), (I.f32, I.f16, 2.0**-25, 0.0),
    (I.f32, I.f16, 3 * 2.0**-26, 2.0**-24), (I.bf16, I.f16, 2.0**-20, 2.0**-20), (I.bf16, I.f16, 2.0**-30, 0.0),
    (I.bf16, I.f16, 98304.0, math.inf), (I.f16, I.bf16, 1 + 2.0**-10, 1.0),
    (I.f16, I.bf16, 1 + 2.0**-8 + 2.0**-10, 1 + 2.0**-7),
    (I.f16, I.bf16, 2.0**-24, 2.0**-24), (I.f64, I.f32, -0.0, -0.0), (I.f64, I.bf16, -0.0, -0.0),
    (I.f32, I.f64, 2.0**-149, 2.0**-149), (I.bf16, I.f32, -(2.0**-133), -(2.0**-133)),
], ids=lambda v: str(v))
def test_float_to_float_hand_cases(run, src, dst, x, want):
    got = run_cast(run, src, dst, float_arr([x], src))
    assert_floats(got, [want], [x])


@pytest.mark.parametrize("src,dst", FLOAT_PAIRS, ids=[f"{s}-{d}" for s, d in FLOAT_PAIRS])
def test_float_to_float_keeps_nan_and_infinity_signs(run, src, dst):
    got = run_cast(run, src, dst, float_arr([math.nan, math.inf, -math.inf, -0.0, 0.0], src))
    g = [float(v) for v in got]
    assert math.isnan(g[0])
    assert g[1:3] == [math.inf, -math.inf]
    assert [math.copysign(1, v) for v in g[3:]] == [-1, 1] and g[3:] == [0.0, 0.0]


# --- bool -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dst", INTS + FLOATS, ids=ids(INTS + FLOATS))
def test_bool_to_number_gives_zero_or_one(run, dst):
    got = run_cast(run, I.bool, dst, np.array([False, True, True, False]))
    assert [float(v) for v in got] == [0.0, 1.0, 1.0, 0.0]
    assert not any(math.copysign(1, float(v)) < 0 for v in got)


@pytest.mark.parametrize("src", INTS, ids=ids(INTS))
def test_int_to_bool_is_nonzero(run, src):
    vals = sorted({0, 1, 2, 255 % (hi(src) + 1), hi(src), lo(src), 1 << (WIDTH[src] - 1) if src in UNSIGNED else -1})
    got = run_cast(run, src, I.bool, int_arr(vals, src))
    assert got.dtype == np.bool_
    assert got.tolist() == [v != 0 for v in vals]


@pytest.mark.parametrize("src", FLOATS, ids=ids(FLOATS))
def test_float_to_bool_is_nonzero(run, src):
    p, emin, _ = FMT[src]
    tiny = 2.0 ** (emin - p + 1)
    vals = [0.0, -0.0, tiny, -tiny, 0.5, -2.0, math.inf, -math.inf, math.nan]
    got = run_cast(run, src, I.bool, float_arr(vals, src))
    assert got.tolist() == [False, False, True, True, True, True, True, True, True]  # C: NaN != 0


# --- Python numbers through I.cast -------------------------------------------------------------------

def const_kernel(value, dt):
    @intent.kernel
    def k(a: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] * I.cast(value, dt)

    return k


@pytest.mark.parametrize("value,dt,want", [
    (2**63 + 2**39 + 1, I.f32, 2.0**63 + 2**40), (-(2**63) - 2**39 - 1, I.f32, -(2.0**63 + 2**40)),
    (2**64 + 2**56 + 1, I.bf16, 2.0**64 + 2**57), (2**60 + 2**36 + 1, I.f32, 2.0**60 + 2**37),
    (2**30 + 2**22 + 1, I.bf16, 2.0**30 + 2**23), (1 + 2.0**-8 + 2.0**-30, I.bf16, 1 + 2.0**-7),
    (0.1, I.f32, float(np.float32(0.1))), (2**53 + 1, I.f64, 2.0**53),
], ids=lambda v: str(v))
def test_cast_of_python_number_rounds_once(run, value, dt, want):
    out = np.zeros(1, dtype=NP[dt])
    run(const_kernel(value, dt), float_arr([1.0], dt), out)
    assert_floats(out, [want], [value])


# --- bitcast ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [(I.f32, I.i16), (I.f16, I.u32), (I.i64, I.f32), (I.u8, I.f16), (I.bf16, I.f32),
                                     (I.f64, I.i32), (I.i32, I.f64), (I.u16, I.u32)], ids=lambda v: str(v))
def test_bitcast_needs_equal_width(src, dst):
    @intent.kernel
    def k(a: I.In[src, ("N",)], out: I.Out[dst, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = I.bitcast(a[d], dst)

    with pytest.raises(intent.TraceError):
        intent.trace(k)


_BITCAST: dict = {}


@pytest.mark.parametrize("src,dst", [(I.i32, I.f32), (I.u16, I.bf16), (I.i16, I.f16), (I.u64, I.f64), (I.i8, I.u8),
                                     (I.u32, I.i32)], ids=lambda v: str(v))
def test_bitcast_int_to_float_keeps_every_bit(run, src, dst):
    if (src, dst) not in _BITCAST:
        @intent.kernel
        def k(a: I.In[src, ("N",)], out: I.Out[dst, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = I.bitcast(a[d], dst)

        _BITCAST[(src, dst)] = k
    w = WIDTH[src]
    top = 1 << (w - 1)
    rng = np.random.default_rng(w)
    # all-ones exponents (NaN payloads, signalling ones included), zeros, random patterns
    raw = [0, top, 1, top | 1, (1 << w) - 1, top - 1] + [int(v) for v in rng.integers(0, 2**w, 16, dtype=np.uint64)]
    if dst in FMT:
        m = FMT[dst][0] - 1
        exp_all = ((1 << (w - 1 - m)) - 1) << m
        raw += [exp_all | 1, exp_all | (1 << (m - 1)) | 3, top | exp_all | 2]
    a = np.array(raw, dtype=UINT[max(w, 16)] if w >= 16 else np.uint8).view(NP[src])
    out = np.zeros(len(raw), dtype=NP[dst])
    run(_BITCAST[(src, dst)], a, out)
    if w >= 16:
        assert bits_of(out) == raw
    else:
        assert [int(v) for v in out.view(np.uint8)] == raw
