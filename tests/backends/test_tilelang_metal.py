"""tilelang-metal: Metal source for every kind of kernel on any OS, f64 rejected, no execution without a Mac, and
the float-only helper numerics checked on this machine as host C++ against tilelang-c's and NumPy/ml_dtypes."""
import re
import shutil
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I, compiler
from intent_trace.errors import LoweringError
from metal_source import check_msl

pytest.importorskip("tilelang")
from backends.test_tilelang_c import MATH_UNARY, binary_kernel, unary_kernel
from intent_trace import types as T
from intent_trace.backends.tilelang import metal
from intent_trace.backends.tilelang.target import build, require_runtime

TARGET = "tilelang-metal"
SUPPORTED = (I.f32, I.f16, I.bf16, I.i8, I.i16, I.i32, I.i64, I.u8, I.u16, I.u32, I.u64)


def metal_source(kernel, **constexprs) -> str:
    """The Metal part of ``.source`` (after the TileLang program), checked for what every kernel must satisfy."""
    return check_msl(intent.compile(kernel, target=TARGET, **constexprs).source)


# --- source for a spread of kernels ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", SUPPORTED, ids=str)
def test_pointwise_binary_and_compare_kernels_lower_to_metal(dt):
    k, names = binary_kernel(dt)
    msl = metal_source(k)
    for name in ("add", "sub", "mul", "eq", "lt", "ge", "max", "min"):
        assert f" it_{name}_{dt.name}(" in msl


@pytest.mark.parametrize("dt", [I.f32, I.f16, I.bf16], ids=str)
def test_unary_math_kernels_lower_to_metal(dt):
    msl = metal_source(unary_kernel(dt))
    for name in MATH_UNARY + ("floor", "sqrt", "neg", "abs"):
        assert f" it_{name}_{dt.name}(" in msl
    assert "itb_df_bits" in msl and "metal::fma" in msl  # erf, erfc, lgamma, i0: double-float, rounded once


# T4's functions Metal has, each its metal::precise:: call (T10); log1p and sigmoid are compositions of them.
NATIVE = {"exp": "exp", "exp2": "exp2", "log": "log", "sin": "sin", "cos": "cos", "asin": "asin", "tanh": "tanh",
          "rsqrt": "rsqrt", "log1p": "log", "sigmoid": "exp"}
SOFTWARE = ("itb_exp_core", "itb_expm1_core", "itb_log_core", "itb_div32", "itb_df_bits", "itb_pow_df",
            "itb_sin_poly")


def _definition(msl: str, name: str) -> str:
    """The helper ``name``'s definition and the internal helpers it names, recursively."""
    defs = {m.group(1): m.group(0) for m in re.finditer(r"^static inline [\w ]+? (\w+)\(.*?^(?=static|template|constant|"
                                                        r"struct|#|kernel|\[\[)", msl, re.M | re.S)}
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in defs:
            continue
        seen.add(n)
        todo += re.findall(r"\b(itb_\w+)\(", defs[n].split("{", 1)[1])
    return "\n".join(defs[n] for n in seen)


@pytest.mark.parametrize("dt", [I.f32, I.f16, I.bf16], ids=str)
@pytest.mark.parametrize("name", sorted(NATIVE))
def test_math_functions_metal_has_are_its_precise_calls_and_no_software_routine(name, dt):
    msl = metal_source(unary_kernel(dt))
    body = _definition(msl, f"it_{name}_{dt.name}")
    assert f"metal::precise::{NATIVE[name]}(" in body, body
    assert not any(f"{r}(" in body for r in SOFTWARE), body
    assert "metal::fast::" not in body


def test_division_and_pow_are_the_hardware_s_and_the_library_s():
    k, _ = binary_kernel(I.f32)
    msl = metal_source(k)
    div = _definition(msl, "it_div_f32")
    assert "a / b" in div and "itb_div32" not in div and "itb_rne" not in div, div
    ftz = msl_of_ops(lambda a, b: I.fdiv(a, b, approximate=True, flush_to_zero=True))
    assert "x / y" in _definition(ftz, "it_div_ftz_f32")
    powk = msl_of_ops(lambda a, b: a ** b)
    assert "metal::precise::pow(" in _definition(powk, "it_pow_f32")


def test_flush_to_zero_math_is_metal_s_fast_library():
    msl = msl_of_ops(lambda a, b: I.exp2(a, approximate=True, flush_to_zero=True))
    body = _definition(msl, "it_exp2_ftz_f32")
    assert "metal::fast::exp2(" in body and "itb_ftz32" in body and "precise::" not in body


def msl_of_ops(fn):
    @intent.kernel
    def k(a: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = fn(a[d], b[d])

    return metal_source(k)


def test_casts_bitcasts_fma_and_constants_lower_to_metal():
    dtypes = (I.bool, *SUPPORTED)

    @intent.kernel
    def casts(src_vals: I.In[I.f32, ("N",)], ints: I.In[I.i64, ("N",)], halves: I.In[I.f16, ("N",)],
              out_f: I.Out[I.f32, (4, "N")], out_i: I.Out[I.i64, (len(dtypes), "N")],
              bits16: I.Out[I.i16, ("N",)], bits32: I.Out[I.u32, ("N",)], fused: I.Out[I.bf16, ("N",)],
              big: I.Out[I.i64, ("N",)]):
        d = I.domain(0, src_vals.shape[0])
        for j, dst in enumerate(dtypes):  # f32 -> everything -> i64, and i64 -> everything -> i64
            out_i[j, d] = I.cast(I.cast(src_vals[d], dst), I.i64) + I.cast(I.cast(ints[d], dst), I.i64)
        out_f[0, d] = I.cast(I.cast(src_vals[d], I.f16), I.f32) + I.cast(I.cast(ints[d], I.bf16), I.f32)
        out_f[1, d] = I.cast(halves[d], I.f32) * 0.1 + 1e-45
        out_f[2, d] = I.fma(src_vals[d], src_vals[d], -1.0)
        out_f[3, d] = I.bitcast(I.bitcast(src_vals[d], I.i32) ^ 1, I.f32)
        bits16[d] = I.bitcast(halves[d], I.i16)
        bits32[d] = I.bitcast(src_vals[d], I.u32) + 1
        big[d] = ints[d] ^ 0x7FFFFFFFFFFFFFF0
        fused[d] = I.fma(I.cast(halves[d], I.bf16), I.cast(halves[d], I.bf16), I.cast(src_vals[d], I.bf16))

    msl = metal_source(casts)
    for helper in ("it_cast_f32_f16", "it_cast_i64_bf16", "it_cast_f32_u64", "it_cast_i64_f32", "it_fma_f32",
                   "it_fma_bf16", "it_bitcast_f16_i16", "it_bits_i64"):
        assert f" {helper}(" in msl
    assert "as_type<" in msl and "itb_rne(" in msl and "itb_fma_bits(" in msl


def test_reductions_scans_contractions_and_control_flow_lower_to_metal():
    @intent.kernel
    def structured(x: I.In[I.f32, ("M", "N")], h: I.In[I.f16, ("N", "P")], sums: I.Out[I.f32, ("M",)],
                   maxes: I.Out[I.f32, ("N",)], where: I.Out[I.index, ("M",)], isum: I.Out[I.i64, ("M",)],
                   prefix: I.Out[I.f32, (8,)], product: I.Out[I.f32, ("M", "P")], steps: I.Out[I.i32, (2,)],
                   limit: I.f32, start: I.i32):
        rows, cols, outs = I.domain(0, x.shape[0]), I.domain(0, x.shape[1]), I.domain(0, h.shape[1])
        sums[rows] = I.reduce.sum(x[rows, cols], axis=1)
        maxes[cols] = I.reduce.max(x[rows, cols], axis=0)
        where[rows] = I.arg_reduce.max(x[rows, cols], axis=1)[1]
        isum[rows] = I.reduce.sum(I.cast(x[rows, cols], I.i32), axis=1)
        eight = I.domain(0, 8)
        prefix[eight] = I.cumsum(I.full((8,), 0.5, I.f32) * limit, axis=0)
        product[rows, outs] = I.matmul(x[rows, cols], I.cast(h[cols, outs], I.f32), acc_dtype=I.f32)

        def body(i, carry):
            total, count = carry
            I.break_(when=total > limit, carry=(total, count))
            I.continue_(when=x[0, i] < 0.0, carry=(total, count + 1))
            return total + x[0, i], count

        total, skipped = I.loop(cols, (I.cast(0.0, I.f32), I.cast(0, I.i32)), body)
        n, acc = I.while_(lambda c: c[0] < 20, lambda c: (c[0] + 1, I.select(c[1] % 2 == 0, c[1] // 2, c[1] * 3 + 1)),
                          (start, I.cast(7, I.i32)))
        steps[0] = I.if_(total > 0.0, lambda: skipped + n, lambda: acc)
        steps[1] = acc

    msl = metal_source(structured)
    assert msl.count("for (") >= 6 and "while (" in msl and "break;" in msl
    for helper in ("it_max_f32", "it_add_i64", "it_cast_f16_f32", "it_floordiv_i32", "it_select_i32"):
        assert f"{helper}(" in msl


def test_atomics_and_run_time_checks_leave_the_kernel_through_the_prelude_macro():
    @intent.kernel
    def counting(values: I.In[I.i32, ("N",)], counts: I.InOut[I.u32, ("B",)], best: I.InOut[I.f32, (1,)],
                 x: I.In[I.f32, ("N",)], picked: I.Out[I.f32, ("N",)]):
        d = I.domain(0, values.shape[0])
        for i in I.parallel(d):
            I.atomic.add(counts[values[i]], I.cast(1, I.u32), order="relaxed")
            I.atomic.max(best[0], x[i], order="acq_rel")
        picked[d] = x[I.cast(values[d], I.index)]

    msl = metal_source(counting)
    assert "#define itm_return() return" in msl and "itm_return();" in msl
    assert "template <typename Pp> static inline uint it_atomic_add_relaxed_u32(Pp p, uint a)" in msl
    assert "T.ret" not in intent.compile(counting, target=TARGET).program


def test_generated_source_never_contains_user_names():
    @intent.kernel
    def sneaky_kernel_name(os_system_rm_rf: I.In[I.f32, ("EXTENT_NAME_XYZ",)],
                           user_output_qq: I.Out[I.f16, ("EXTENT_NAME_XYZ",)], secret_scalar_q: I.f32):
        d = I.domain(0, os_system_rm_rf.shape[0])
        user_output_qq[d] = I.cast(I.exp(os_system_rm_rf[d]) + secret_scalar_q, I.f16)

    source = intent.compile(sneaky_kernel_name, target=TARGET).source
    for word in ("sneaky_kernel_name", "os_system_rm_rf", "user_output_qq", "EXTENT_NAME_XYZ", "secret_scalar_q"):
        assert word not in source


# --- what Metal cannot do: f64 and running without a Mac ----------------------------------------------------------

def test_f64_kernels_raise_lowering_error_naming_f64_and_the_target():
    @intent.kernel
    def f64_view(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 2.0

    @intent.kernel
    def f64_inside(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.cast(I.cast(x[d], I.f64) + 1.0, I.f32)

    @intent.kernel
    def f64_sum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        y[0] = I.cast(I.reduce.sum(x[I.domain(0, x.shape[0])], axis=0, acc_dtype=I.f64), I.f32)

    for kernel in (f64_view, f64_inside, f64_sum):
        with pytest.raises(LoweringError, match=r"tilelang-metal.*f64|f64.*tilelang-metal"):
            intent.compile(kernel, target=TARGET)
    assert not metal.supports(T.f64) and all(metal.supports(d) for d in SUPPORTED)


def test_every_family_tilelang_c_renders_has_a_metal_body():
    from intent_trace.backends.tilelang import c

    assert set(metal.RENDER) == set(c.RENDER)


def test_calling_without_a_metal_runtime_raises_runtime_error():
    if metal.platform.system() == "Darwin":
        pytest.skip("this machine may have a Metal runtime")
    exe = intent.compile(_scale, target=TARGET)
    x, y = np.ones(3, np.float32), np.zeros(3, np.float32)
    with pytest.raises(RuntimeError, match="Metal runtime.*macOS"):
        exe(x, y, 2.0)
    assert (y == 0).all()
    with pytest.raises(RuntimeError, match="Metal runtime"):
        require_runtime(TARGET)
    with pytest.raises(RuntimeError, match="Metal runtime"):
        metal.require_runtime()
    assert TARGET in intent.targets() and "Metal runtime" in compiler.unavailable_reason(TARGET)
    assert build(_scale.trace(), target=TARGET).source == exe.source  # the source needs no runtime


@intent.kernel
def _scale(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], s: I.f32):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * s


# --- numerics of the float-only helpers, as host C++ ------------------------------------------------------------

@pytest.fixture(scope="module")
def host():
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler to run the Metal helper bodies on the host")
    from backends import metal_host

    return metal_host


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def adversarial_f32(rng) -> np.ndarray:
    """±0, ±inf, NaN payloads (quiet and signaling, both signs), subnormals, the integer limits, and every f16 and
    bf16 rounding tie with its neighbours one f32 ulp away (normal and subnormal), plus random bit patterns."""
    special = _f32([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC00123, 0xFFF00001, 0x7F800001,
                    0xFF812345, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000])
    limits = np.array([2.0**k for k in (7, 8, 15, 16, 31, 32, 63, 64)], np.float32)
    limits = np.concatenate([limits, -limits, np.nextafter(limits, 0), -np.nextafter(limits, 0)])
    h = np.arange(0, 0x7C00, 7, dtype=np.uint32)  # f16 values k and their midpoints k + 1/2 ulp
    mid16 = (np.uint16(h).view(np.float16).astype(np.float32).view(np.uint32) + (1 << 12)).astype(np.uint32)
    b = np.arange(0, 0x7F80, 3, dtype=np.uint32) << 16  # bf16 values and their midpoints
    sub16 = ((np.arange(1024, dtype=np.float32) + 0.5) * np.float32(2.0**-24)).view(np.uint32)  # subnormal ties
    ties = np.concatenate([mid16, sub16, b | (1 << 15), np.arange(1, 1 << 16, 97, dtype=np.uint32)])
    ties = np.concatenate([ties, ties - 1, ties + 1, ties | 0x80000000]).astype(np.uint64)
    rand = rng.integers(0, 2**32, 200_000, dtype=np.uint64)
    return np.concatenate([special, limits, _f32(ties), _f32(rand), rng.normal(0, 30, 50_000).astype(np.float32)])


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.dtype.itemsize}")


def test_f32_to_f16_bf16_rounding_matches_numpy_ml_dtypes_and_tilelang_c(host):
    x = adversarial_f32(np.random.default_rng(0))
    helpers = [host.Helper(f, (d,), r, a) for f, d, r, a in (
        ("encode", T.f16, T.u16, (T.f16,)), ("encode", T.bf16, T.u16, (T.bf16,)), ("decode", T.f16, T.f16, (T.u16,)),
        ("decode", T.bf16, T.bf16, (T.u16,)))] + [host.Helper("cast", (T.f32, d), d, (T.f32,)) for d in (T.f16, T.bf16)]
    lib = host.build(helpers)
    enc16, encb, dec16, decb, r16, rb = helpers
    finite = ~np.isnan(x)
    c16, m16 = host.run(lib, enc16, x)
    assert (_bits(c16) == _bits(m16)).all()
    with np.errstate(over="ignore"):
        assert (m16[finite] == _bits(x[finite].astype(np.float16))).all()  # NumPy: RNE, overflow to inf
    cb, mb = host.run(lib, encb, x)
    assert (_bits(cb) == _bits(mb)).all()
    assert (mb[finite] == _bits(x[finite].astype(ml_dtypes.bfloat16))).all()
    for helper in (r16, rb):  # the rounding casts: RNE, and a NaN comes back quiet with its payload's top bits
        c, m = host.run(lib, helper, x)
        assert (_bits(c) == _bits(m)).all(), helper.name
    every = np.arange(65536, dtype=np.uint16)  # decoding is exact for every f16 and bf16 bit pattern
    for helper, ref in ((dec16, every.view(np.float16)), (decb, every.view(ml_dtypes.bfloat16))):
        c, m = host.run(lib, helper, every)
        assert (_bits(c) == _bits(m)).all() and (_bits(m) == _bits(ref.astype(np.float32))).all()


def test_integer_to_float_conversions_round_once(host):
    rng = np.random.default_rng(1)
    ints = np.concatenate([rng.integers(-2**63, 2**63 - 1, 100_000, dtype=np.int64, endpoint=True),
                           np.array([-2**63, 2**63 - 1, 2**24 + 1, 2**53 + 1, 65519, 65520, -(2**55) - 1, 0, -1],
                                    np.int64)])
    ints = np.concatenate([ints, (ints >> rng.integers(0, 63, len(ints))).astype(np.int64)])
    for dst, (man, width) in ((T.f32, (23, 8)), (T.f16, (10, 5)), (T.bf16, (7, 8))):
        helpers = [host.Helper("cast", (src, dst), dst, (src,)) for src in (T.i64, T.u64, T.i32)]
        lib = host.build(helpers)
        for helper in helpers:
            src = ints.astype(helper.args[0].np)
            c, m = host.run(lib, helper, src)
            assert (_bits(c) == _bits(m)).all(), helper.name
            sample = src[:2000]
            expect = np.array([_round_int(int(v), man, width) for v in sample], np.float64).astype(np.float32)
            assert (_bits(m[:2000]) == _bits(expect)).all(), helper.name


def _round_int(v: int, man: int, width: int) -> float:
    """v rounded to nearest even in the binary format (exact reference; inf on overflow)."""
    if v == 0:
        return 0.0
    mag, shift = abs(v), max(abs(v).bit_length() - (man + 1), 0)
    q, r = divmod(mag, 1 << shift)
    if shift and (2 * r > (1 << shift) or (2 * r == (1 << shift) and q & 1)):
        q += 1
    value = Fraction(q << shift)
    return float("inf") * np.sign(v) if value >= 2 ** (1 << (width - 1)) else float(value) * np.sign(v)


def test_float_to_integer_casts_saturate_truncate_and_send_nan_to_zero(host):
    x = adversarial_f32(np.random.default_rng(2))
    x = np.concatenate([x, np.array([-128.5, 127.9, -129.0, 255.9, 4294967295.5, -0.9, 1.5e19, -9.3e18], np.float32)])
    dsts = (T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64, T.bool_)
    helpers = [host.Helper("cast", (src, d), d, (src,)) for src in (T.f32, T.f16, T.bf16) for d in dsts]
    lib = host.build(helpers)
    for helper in helpers:
        with np.errstate(over="ignore", invalid="ignore"):
            src = x if helper.args[0] is T.f32 else x.astype(helper.args[0].np).astype(np.float32)
        c, m = host.run(lib, helper, src)
        assert (_bits(c) == _bits(m)).all(), helper.name
        d = helper.ret
        if d.is_bool:
            assert (m == (src != 0)).all()
            continue
        lo, hi = int(np.iinfo(d.np).min), int(np.iinfo(d.np).max)
        expect = [0 if v != v else lo if v == -np.inf else hi if v == np.inf else max(min(int(v), hi), lo)
                  for v in src[:5000].tolist()]  # int(float) truncates exactly
        assert [int(v) for v in m[:5000]] == expect, helper.name


def test_arithmetic_sqrt_floor_fma_and_integer_rules_match_tilelang_c_bit_for_bit(host):
    rng = np.random.default_rng(3)
    x = adversarial_f32(rng)
    y = rng.permutation(x)
    z = rng.permutation(x)
    helpers = [host.Helper(f, (d,), d, (d, d)) for d in (T.f32, T.f16, T.bf16)
               for f in ("add", "sub", "mul", "div", "max", "min", "pow")]
    helpers += [host.Helper("div_ftz", (T.f32,), T.f32, (T.f32, T.f32))]
    helpers += [host.Helper(f, (d,), d, (d,)) for d in (T.f32, T.f16, T.bf16) for f in ("sqrt", "floor", "neg", "abs")]
    helpers += [host.Helper("fma", (d,), d, (d, d, d)) for d in (T.f32, T.f16, T.bf16)]
    ints = (T.i8, T.i16, T.i32, T.i64, T.u8, T.u16, T.u32, T.u64)
    helpers += [host.Helper(f, (d,), d, (d, d)) for d in ints
                for f in ("add", "sub", "mul", "floordiv", "mod", "pow", "shl", "shr", "max", "min")]
    lib = host.build(helpers)
    for helper in helpers:
        d = helper.dtypes[0]
        if d.is_int:
            e = np.array([0, 1, -1, 2, 3, 7, d.bits - 1, d.bits, d.bits + 1, -(2 ** (d.bits - 1)),
                          2 ** (d.bits - 1) - 1, 2**d.bits - 1], dtype=object)
            e = np.array([int(v) for v in e if np.iinfo(d.np).min <= v <= np.iinfo(d.np).max], dtype=d.np)
            a, b = np.repeat(e, len(e)), np.tile(e, len(e))
            r = rng.integers(0, 2**64, (2, 20_000), dtype=np.uint64).astype(d.np)
            operands = (np.concatenate([a, r[0]]), np.concatenate([b, r[1] % (d.bits + 3) if d.kind == "uint"
                                                                    else r[1]]))
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                narrow = [v if d is T.f32 else v.astype(d.np).astype(np.float32) for v in (x, y, z)]
            operands = tuple(narrow[:len(helper.args)])
        c, m = host.run(lib, helper, *operands)
        nans = sum(np.isnan(o.astype(np.float32)) for o in operands) if d.is_float else 0
        ok = (_bits(c) == _bits(m)) | (np.asarray(nans) >= 2)  # two NaN operands: IEEE lets either payload win
        if d.is_float and helper.family == "pow":  # precise::pow (the host's powf here): C99's specials exact
            special = (operands[1] == 0) | (operands[0] == 1) | (nans > 0) | ~np.isfinite(c) | (c == 0)
            ok = np.where(special, ok, host.ulps(c, m) <= (2 if d is T.f32 else 1))
        assert ok.all(), (helper.name, [o[~ok][:3] for o in operands], c[~ok][:3], m[~ok][:3])


@pytest.mark.parametrize("dt", [T.f16, T.bf16], ids=str)
def test_narrow_math_functions_round_once_like_tilelang_c_on_every_value(host, dt):
    """Every f16/bf16 value: the double-float functions (and sqrt, floor) give tilelang-c's bits; the precise::
    ones (the host's libm here) an f32 result within the library's bound, rounded once: within 1 ulp of the format
    (a result next to a rounding tie may round either way), NaN exactly where tilelang-c has NaN, specials exact."""
    families = list(MATH_UNARY) + ["sqrt", "floor"]
    helpers = [host.Helper(f, (dt,), dt, (dt,)) for f in families]
    lib = host.build(helpers)
    every = np.arange(65536, dtype=np.uint16).view(dt.np).astype(np.float32)

    def ordered(v):  # the format's bits as an ordered integer (f32-held narrow values convert exactly)
        u = _bits(v.astype(dt.np)).astype(np.int64)
        return np.where(u >> 15, -(u & 0x7FFF), u)

    for helper in helpers:
        c, m = host.run(lib, helper, every)
        if helper.family not in NATIVE:
            assert (_bits(c) == _bits(m)).all(), (helper.name, every[_bits(c) != _bits(m)][:5])
            continue
        nan = np.isnan(c)
        assert (nan == np.isnan(m)).all(), helper.name
        exact = ~np.isfinite(m) | (m == 0) | ~np.isfinite(every) | (every == 0)
        assert (_bits(c[exact & ~nan]) == _bits(m[exact & ~nan])).all(), helper.name
        far = ~nan & (np.abs(ordered(c) - ordered(m)) > 1)
        assert not far.any(), (helper.name, every[far][:5], c[far][:5], m[far][:5])


def test_f32_math_functions_are_within_one_ulp_of_tilelang_c(host):
    """The double-float functions within 1 ulp of tilelang-c (nearly always its bits); the precise:: ones (the
    host's libm here, Apple's on a Mac) within the vendor bound the verifier charges them."""
    from intent_trace.oracle.verification.kernel_bounds import VENDOR_ULPS

    rng = np.random.default_rng(4)
    x = np.concatenate([adversarial_f32(rng), np.linspace(-30, 30, 60_001, dtype=np.float32),
                        np.linspace(-1e-3, 1e-3, 20_001, dtype=np.float32),
                        -np.arange(0.5, 40, 0.00137, dtype=np.float32),
                        np.array([1e8, 3e9, 1.5e30, 3.4e38, 105414.34, 88.72, 89.0, -103.97, -150.0, 127.99, 10.05],
                                 np.float32),
                        np.float32(1) + np.arange(-500, 500, dtype=np.float32) * np.float32(2**-24),  # lgamma's zeros
                        np.float32(2) + np.arange(-500, 500, dtype=np.float32) * np.float32(2**-23)])
    helpers = [host.Helper(f, (T.f32,), T.f32, (T.f32,)) for f in MATH_UNARY]
    helpers += [host.Helper(f + "_ftz", (T.f32,), T.f32, (T.f32,)) for f in ("exp2", "tanh", "exp", "log")]
    lib = host.build(helpers)
    for helper in helpers:
        c, m = host.run(lib, helper, x)
        d = host.ulps(c, m)
        fn = helper.family.removesuffix("_ftz")
        assert (np.isnan(c) == np.isnan(m)).all(), helper.name
        bound = VENDOR_ULPS["tilelang-metal"][fn] if fn in NATIVE else 1
        if helper.family.endswith("_ftz"):  # flushed results: compare where neither side is subnormal
            d = np.where(np.abs(c) < 2.0 ** -126, 0, d)
        assert d.max() <= bound, (helper.name, x[d > bound][:5], c[d > bound][:5], m[d > bound][:5])
        if fn not in NATIVE:
            assert (d == 0).mean() > 0.9999, helper.name  # rounded once from a double-float: nearly always c's bits


# --- the examples ------------------------------------------------------------------------------------------------

def _example_kernels():
    import importlib.util
    import pathlib

    from intent_trace.kernel import Kernel

    for path in sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_metal_example_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        constexprs = getattr(module, "CONSTEXPRS", {})  # the values an example's main() passes, per kernel
        for name, value in vars(module).items():
            if isinstance(value, Kernel):
                yield f"{path.stem}.{name}", (value, constexprs.get(name, {}))


EXAMPLE_KERNELS = dict(_example_kernels())


@pytest.mark.parametrize("name", sorted(EXAMPLE_KERNELS))
def test_every_example_kernel_lowers_to_metal(name):
    kernel, constexprs = EXAMPLE_KERNELS[name]
    if any(p.type.dtype.name == "f64" for p in kernel.trace(**constexprs).params):
        pytest.fail(f"{name} uses f64, which Metal lacks: the examples should run on every target")
    msl = metal_source(kernel, **constexprs)
    assert re.search(r"\[\[kernel[^\]]*\]\] void \w+\(", msl)


def test_tilelang_s_metal_source_is_kept_per_program_text_and_tilelang_version(tmp_path, monkeypatch):
    """The suite's Metal-source check, the emulator and ``.source`` lower one program in several processes:
    TileLang's output is kept on disk per program text (its sha256) and TileLang version, and read back."""
    import hashlib

    import tilelang

    from intent_trace.backends.tilelang import metal_lower

    monkeypatch.setenv("INTENT_TRACE_CACHE_DIR", str(tmp_path))
    program = intent.compile(unary_kernel(I.f32), target=TARGET).program
    first = metal_lower._tilelang_metal(program)
    path = tmp_path / f"metal-source-{tilelang.__version__}" / f"{hashlib.sha256(program.encode()).hexdigest()}.metal"
    assert path.read_text() == first and "[[kernel" in first
    path.write_text(first + "// read back\n")
    assert metal_lower._tilelang_metal(program) == first + "// read back\n"  # not lowered again
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # nothing else (no temporary file) left there
