"""tilelang-metal's k-quant super-blocks (metal_quant.py): Metal source for quantize and quantized_dot kernels, and
the Metal bodies run as host C++ (metal_host's shim) giving tilelang-c's blocks and generic's, bit for bit."""
import ctypes
import re
import shutil

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from metal_source import check_msl

pytest.importorskip("tilelang")
from backends.test_tilelang_c_effects import _dynamic_dot, _q4, _q8
from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import metal, metal_quant

TARGET = "tilelang-metal"
FORMATS = ("q8_k", "q4_k")
# per format: the helper's pointer operands (TIR storage dtypes: x, then the record's fields in order) and the
# record's fields as (name, NumPy dtype of the host buffer, elements per block)
POINTERS = {"q8_k": ("float32", "float32", "int8", "int16"),
            "q4_k": ("float32", "float32", "float32", "uint8", "uint8", "uint8")}
FIELDS = {"q8_k": (("d", np.float32, 1), ("qs", np.int8, 256), ("bsums", np.int16, 16)),
          "q4_k": (("d", np.float32, 1), ("dmin", np.float32, 1), ("scales", np.uint8, 8), ("mins", np.uint8, 8),
                   ("q", np.uint8, 256))}


def metal_source(kernel, **constexprs) -> str:
    return check_msl(intent.compile(kernel, target=TARGET, **constexprs).source)


# --- kernels ------------------------------------------------------------------------------------------------------

@intent.kernel
def _blocks_q8(x: I.In[I.f32, ("B", 256)], d: I.Out[I.f32, ("B", 1)], qs: I.Out[I.i8, ("B", 1, 256)],
               bsums: I.Out[I.i16, ("B", 1, 16)]):
    r = I.quantize(x[:, :], format=I.quant.q8_k)
    d[:, :] = r.d
    qs[:, :, :] = r.qs
    bsums[:, :, :] = r.bsums


@intent.kernel
def _blocks_q4(x: I.In[I.f32, ("B", 256)], d: I.Out[I.f16, ("B", 1)], dmin: I.Out[I.f16, ("B", 1)],
               scales: I.Out[I.u8, ("B", 1, 8)], mins: I.Out[I.u8, ("B", 1, 8)], q: I.Out[I.u8, ("B", 1, 256)]):
    r = I.quantize(x[:, :], format=I.quant.q4_k)
    d[:, :] = r.d
    dmin[:, :] = r.dmin
    scales[:, :, :] = r.scales
    mins[:, :, :] = r.mins
    q[:, :, :] = r.q


BLOCKS = {"q8_k": _blocks_q8, "q4_k": _blocks_q4}


def _dot(lf: str):
    @intent.kernel
    def dot(x: I.In[I.f32, (2, 1, 768)], y: I.In[I.f32, (3, 768)], o: I.Out[I.f32, (2, 3)]):
        a = I.quantize(x[:, :, :], format=getattr(I.quant, lf))
        b = I.quantize(y[:, :], format=I.quant.q8_k)
        o[:, :] = I.quantized_dot(a, b, lhs_format=getattr(I.quant, lf), rhs_format=I.quant.q8_k, acc_dtype=I.f32)

    return dot


# --- Metal source ---------------------------------------------------------------------------------------------------

def _assert_block_helpers(msl: str, fmt: str) -> None:
    n = len(POINTERS[fmt])
    template = ", ".join(f"typename Pp{k}" for k in range(n))
    assert f"template <{template}> static inline int it_quantize_{fmt}(" in msl  # pointers carry address spaces
    assert re.search(rf"\n\s*it_quantize_{fmt}\(\(&\(a\d+\[0\]\)\)", msl)  # called on the block's thread arrays
    assert f"static inline int itb_quantize_{fmt}(" in msl and "itb_nearest_int(" in msl and "itb_div32(" in msl
    code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", msl, flags=re.S)
    for c_only in ("fabsf", "sqrtf", "INT32_MIN", "int8_t", "uint8_t", "int16_t", "int32_t"):
        assert c_only not in code, c_only


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantize_kernels_lower_to_metal(fmt):
    _assert_block_helpers(metal_source({"q8_k": _q8, "q4_k": _q4}[fmt]), fmt)
    _assert_block_helpers(metal_source(BLOCKS[fmt]), fmt)  # a leading axis of dynamic extent


@pytest.mark.parametrize("lf", FORMATS)
def test_quantized_dot_kernels_lower_to_metal(lf):
    msl = metal_source(_dot(lf))
    for fmt in {lf, "q8_k"}:
        _assert_block_helpers(msl, fmt)
    assert " it_mul_f32(" in msl and " it_cast_i64_f32(" in msl


def test_quantize_and_dot_of_dynamic_extents_lower_to_metal():
    msl = metal_source(_dynamic_dot)
    _assert_block_helpers(msl, "q4_k")
    _assert_block_helpers(msl, "q8_k")
    assert re.search(r"\[\[kernel[^\]]*\]\] void \w+\(", msl)


def test_every_k_quant_family_tilelang_c_provides_has_a_metal_body():
    for fmt in FORMATS:
        family = f"quantize_{fmt}"
        assert family in metal_quant.FAMILIES
        assert C.extern_source(f"it_{family}", family, (), T.i32, POINTERS[fmt]) is not None
        assert metal.extern_source(f"it_{family}", family, (), T.i32, POINTERS[fmt]) is not None
    assert metal.extern_source("it_quantize_q5_k", "quantize_q5_k", (), T.i32, POINTERS["q4_k"]) is None


# --- the bodies as host C++, against tilelang-c's and generic --------------------------------------------------------

class _Block:
    """A k-quant block helper in metal_host's build: C and Metal definitions, a runner over consecutive blocks."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.name = f"it_quantize_{fmt}"
        self.c = C.extern_source(self.name, f"quantize_{fmt}", (), T.i32, POINTERS[fmt])
        self.metal = metal.extern_source(self.name, f"quantize_{fmt}", (), T.i32, POINTERS[fmt])

    def runner(self, ns: str, ctype) -> str:
        types = {"float32": "float", "int8": "int8_t", "int16": "int16_t", "uint8": "uint8_t"}
        sizes = (256,) + tuple(size for _, _, size in FIELDS[self.fmt])
        params = ", ".join(f"{types[t]}* p{k}" for k, t in enumerate(POINTERS[self.fmt]))
        args = ", ".join(f"p{k} + {size} * b" for k, size in enumerate(sizes))
        return (f'extern "C" void {ns}_{self.name}({params}, long n) '
                f"{{ for (long b = 0; b < n; ++b) {ns}::{self.name}({args}); }}")


@pytest.fixture(scope="module")
def host():
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler to run the Metal helper bodies on the host")
    from backends import metal_host

    helpers = [_Block(fmt) for fmt in FORMATS]
    return metal_host.build(helpers, "\n".join(_PARTS.format(ns=ns) for ns in ("cc", "mtl")))


# the blocks' parts on their own: nearest_int and make_qkx2_quants (whose scale and min are not outputs)
_PARTS = """extern "C" void {ns}_nearest_int(const float* x, int32_t* out, long n) {{
  for (long i = 0; i < n; ++i) out[i] = {ns}::itb_nearest_int(x[i]);
}}
extern "C" void {ns}_qkx2(const float* x, const float* w, float* scale, float* min, long n) {{
  for (long b = 0; b < n; ++b) {ns}::itb_qkx2(x + 32 * b, w + 32 * b, scale + b, min + b);
}}"""


def _host_blocks(lib, ns: str, fmt: str, x: np.ndarray) -> dict:
    x = np.ascontiguousarray(x, np.float32).reshape(-1, 256)
    n = len(x)
    out = {name: np.full((n, size), 7, dt) for name, dt, size in FIELDS[fmt]}
    arrays = (x, *out.values())
    getattr(lib, f"{ns}_it_quantize_{fmt}")(*(a.ctypes.data_as(ctypes.c_void_p) for a in arrays), ctypes.c_long(n))
    return out


def _generic_blocks(fmt: str, x: np.ndarray) -> dict:
    n = len(x)
    outs = {name: np.full((n, 1, size) if size > 1 else (n, 1), 7, dt) for name, dt, size in FIELDS[fmt]}
    if fmt == "q4_k":  # d and dmin are f16 in the record
        outs["d"], outs["dmin"] = (np.full((n, 1), 7, np.float16) for _ in range(2))
    intent.compile(BLOCKS[fmt], target="generic")(x, *outs.values())
    return {name: v.reshape(n, -1).astype(dt) for (name, dt, _), v in zip(FIELDS[fmt], outs.values())}


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def hand_blocks() -> np.ndarray:
    """Blocks that reach every branch: zeros, constants, one huge value, subnormals, ±inf, NaNs (payloads, signs,
    first and last place), exact ties of nearest_int (round half to even) for both formats, f16 range ends."""
    rng = np.random.default_rng(21)
    base = rng.standard_normal(256).astype(np.float32)
    blocks = [np.zeros(256), np.full(256, 3.0), np.full(256, -3.0), np.full(256, 1e-42), np.full(256, -2.5e38)]
    one = np.zeros(256)
    one[77] = 3e38
    blocks.append(one)
    huge = base.copy()
    huge[5] = -3.4028235e38
    blocks += [huge, np.where(np.arange(256) % 3 == 0, 1e-42, base), _f32(rng.integers(1, 0x800000, 256)),
               _f32(rng.integers(1, 0x800000, 256) | 0x80000000), base * np.float32(1e-38)]
    for pos, val in ((40, np.inf), (0, -np.inf), (255, np.inf)):
        b = base.copy()
        b[pos] = val
        blocks.append(b)
    both = base.copy()
    both[3], both[200] = np.inf, -np.inf
    blocks.append(both)
    for pos, nan in ((41, 0x7FC00000), (0, 0xFFC00123), (255, 0x7FA00001), (17, 0xFF800001)):
        b = base.copy()
        b[pos] = _f32([nan])[0]
        blocks.append(b)
    nan_inf = base.copy()
    nan_inf[9], nan_inf[10] = np.inf, _f32([0x7FC00042])[0]
    blocks.append(nan_inf)
    # q8_k ties: the largest magnitude is -127 (iscale = 1), every other value a half-integer
    halves = np.arange(-126.5, 127.0, 1.0)  # 254 of them
    ties = np.concatenate([[-127.0], halves, [0.5]])
    blocks += [ties, -ties, np.concatenate([[127.0], halves, [-0.5]])]
    # q4_k: sub-blocks of integers 0..15 (iscale exactly 1) and of half-integers; quarter-rounded values
    blocks += [np.tile(np.arange(16.0), 16), np.tile(np.arange(16.0) + 0.5, 16),
               np.round(base * 4) / 4, np.abs(base), -np.abs(base), np.tile([0.0, 15.0], 128)]
    for scale in (1e-30, 1e-8, 7e-5, 6e4, 1e8, 1e30):  # f16 underflow and overflow of d and dmin
        blocks.append(base * np.float32(scale))
    blocks += list(step_tie_blocks(rng, 64))
    with np.errstate(over="ignore"):  # float32 blocks keep their NaN payloads (a float64 round trip would not)
        return np.stack([b if b.dtype == np.float32 else np.asarray(b, np.float64).astype(np.float32)
                         for b in map(np.asarray, blocks)])


def step_tie_blocks(rng, n: int) -> np.ndarray:
    """Blocks whose every sub-block spans [0, 1] (so each step's iscale is its numerator -1 + 0.1 step + 15) and
    holds values at and next to the ties of nearest_int(iscale * x): a one-ulp change of any step's iscale (an
    operation reordered) changes the quants, and so, often, make_qkx2_quants' choice."""
    f = np.float32
    values = []
    for step in range(21):
        numerator = f(f(f(-1) + f(f(0.1) * f(step))) + f(15))
        for k in range(15):
            v = f(f(k + 0.5) / numerator)
            values += [v, np.nextafter(v, f(0)), np.nextafter(v, f(2))]
    x = rng.choice(np.array(values, np.float32), (n * 8, 32))
    x[:, 0], x[:, 1] = 0, 1
    return x.reshape(n, 256)


def random_blocks() -> np.ndarray:
    rng = np.random.default_rng(22)
    normal = rng.standard_normal((600, 256)) * 10.0 ** rng.integers(-30, 30, (600, 1))
    uniform = rng.uniform(-1, 1, (200, 256)) + rng.uniform(-2, 2, (200, 1))  # offsets: minima above 0
    skewed = np.abs(rng.standard_normal((100, 256))) ** 3 * rng.choice([-1, 1], (100, 1))
    sparse = rng.standard_normal((100, 256)) * (rng.random((100, 256)) < 0.05)
    raw = _f32(rng.integers(0, 2**32, (100, 256), dtype=np.uint64))  # any bit pattern: NaNs, infinities
    with np.errstate(over="ignore"):
        finite = np.concatenate([normal, uniform, skewed, sparse]).astype(np.float32)
    return np.concatenate([finite, raw])


def _assert_same_blocks(fmt: str, got: dict, expect: dict, x: np.ndarray, what: str) -> None:
    for name, dt, _ in FIELDS[fmt]:
        a, b = got[name], expect[name]
        same = (a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")).all(axis=1)
        assert same.all(), (what, fmt, name, np.flatnonzero(~same)[:5], a[~same][:2], b[~same][:2],
                            x[np.flatnonzero(~same)[:1]])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["hand", "random"])
def test_metal_block_bodies_match_tilelang_c_and_generic_bit_for_bit(host, fmt, kind):
    x = hand_blocks() if kind == "hand" else random_blocks()
    mtl = _host_blocks(host, "mtl", fmt, x)
    _assert_same_blocks(fmt, mtl, _host_blocks(host, "cc", fmt, x), x, "tilelang-c")
    _assert_same_blocks(fmt, mtl, _generic_blocks(fmt, x), x, "generic")


def test_hand_blocks_reach_the_special_cases(host):
    """The hand blocks exercise what they are meant to: NaN payloads in q8_k's quants, zero blocks, saturated
    scales."""
    x = hand_blocks()
    q8 = _host_blocks(host, "mtl", "q8_k", x)
    d = q8["d"][:, 0]
    assert not np.isnan(d).any()  # ggml's amax scan skips NaNs: d is never NaN
    nan = np.isnan(x)
    quants = {int(v) for v in q8["qs"][nan]}
    assert {0, 1, 66, 127} <= quants  # ggml's nearest_int reads the payload bits (0x..00, 0x..01, 0x..42, capped)
    assert (d == 0).any() and (q8["qs"][0] == 0).all()
    q4 = _host_blocks(host, "mtl", "q4_k", x)
    assert np.isinf(q4["d"]).any() and (q4["d"] == 0).any() and (q4["scales"] == 63).any()


def test_nearest_int_rounds_half_to_even_and_sends_nan_and_out_of_range_to_int32_min(host):
    from intent_trace.oracle.generic_quant import nearest_int

    rng = np.random.default_rng(23)
    halves = np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)
    x = np.concatenate([halves, np.nextafter(halves, 0), np.nextafter(halves, 1000), _f32([0x7FC00000, 0xFFA00001,
                        0x7F800000, 0xFF800000, 0x80000000, 1, 0x80000001]),
                        np.float32([2.0**22, 2.0**22 + 1, 2.0**23, 3e9, -3e9, 2.0**31, -2.0**31, -12582912.5, 1e38]),
                        _f32(rng.integers(0, 2**32, 100_000, dtype=np.uint64)),
                        rng.standard_normal(100_000).astype(np.float32) * 100])
    out = {}
    for ns in ("cc", "mtl"):
        out[ns] = np.zeros(len(x), np.int32)
        getattr(host, f"{ns}_nearest_int")(x.ctypes.data_as(ctypes.c_void_p), out[ns].ctypes.data_as(ctypes.c_void_p),
                                            ctypes.c_long(len(x)))
    assert (out["mtl"] == out["cc"]).all() and (out["mtl"] == nearest_int(x)).all()
    assert (out["mtl"][:600] % 2 == 0).all()  # the ties go to even
    assert (out["mtl"][np.isnan(x)] == np.iinfo(np.int32).min).all()


def test_qkx2_scale_and_min_match_tilelang_c_and_generic_bit_for_bit(host):
    from intent_trace.oracle.generic_quant import make_qkx2_quants

    x = np.concatenate([hand_blocks(), random_blocks()]).reshape(-1, 32)
    rng = np.random.default_rng(24)
    with np.errstate(all="ignore"):  # weights shaped as q4_k's (rms + |x|), random positive ones, all ones
        av = np.sqrt(np.add.reduce(x * x, axis=1, dtype=np.float32) / np.float32(32))
        weights = ((np.abs(x) + av[:, None]).astype(np.float32),
                   rng.random(x.shape).astype(np.float32) + np.float32(0.1), np.ones_like(x))
    for w in weights:
        w = np.ascontiguousarray(w)
        got = {}
        for ns in ("cc", "mtl"):
            scale, mn = np.zeros(len(x), np.float32), np.zeros(len(x), np.float32)
            getattr(host, f"{ns}_qkx2")(*(a.ctypes.data_as(ctypes.c_void_p) for a in (x, w, scale, mn)),
                                        ctypes.c_long(len(x)))
            got[ns] = np.stack([scale, mn], axis=1)
        ref_scale, ref_min, _ = make_qkx2_quants(x, w)
        ref = np.stack([ref_scale, ref_min], axis=1)
        for expect in (got["cc"], ref):
            same = (got["mtl"].view(np.uint32) == expect.view(np.uint32)).all(axis=1)
            assert same.all(), (np.flatnonzero(~same)[:5], got["mtl"][~same][:3], expect[~same][:3])
