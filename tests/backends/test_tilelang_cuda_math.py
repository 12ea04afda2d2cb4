"""tilelang-cuda's T4 functions call CUDA's precise single-precision library (T10), checked on this machine (no GPU):
the helper text per function and dtype, that it lowers, and its NaN rule run as host C++ with the library answering
NaNs as an NVIDIA GPU does (canonical NaN): the result must be the oracle's (x86: a NaN operand quieted, the default
NaN 0xFFC00000 for an invalid argument) bit for bit. The documented bounds below are written out from the CUDA C
Programming Guide ("Mathematical Functions", single-precision table: maximum ulp error against the correctly rounded
result), independently of the library's own table, which must agree with them."""
import ctypes
import math
import re

import ml_dtypes
import numpy as np
import pytest
from backends.host_cxx import shared_library

import intent_trace as intent
from intent_trace import I
from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import cuda
from intent_trace.backends.tilelang.target import generate
from intent_trace.oracle import numerics as N
from intent_trace.oracle.verification import kernel_bounds

# function -> (CUDA's single-precision function, its documented maximum ulp error)
GUIDE = {"exp": ("expf", 2), "exp2": ("exp2f", 2), "log": ("logf", 1), "log1p": ("log1pf", 1),
         "sin": ("sinf", 2), "cos": ("cosf", 2), "asin": ("asinf", 2), "tanh": ("tanhf", 2), "erf": ("erff", 2),
         "erfc": ("erfcf", 4), "rsqrt": ("rsqrtf", 2), "expm1": ("expm1f", 1)}
KEPT_DOUBLE = ("lgamma", "i0", "sigmoid")  # no f32 function with a bound over the whole range (or none at all)
F32_HELD = (T.f32, T.f16, T.bf16)


def _source(family, d):
    return cuda.helper_source(f"it_{family}_{d.name}", family, (d,), d, (d,))


def test_exactly_the_guides_functions_are_mapped_and_the_verifier_charges_their_bounds():
    assert set(C.CUDA_F32_MATH) == set(GUIDE)
    assert {f: C.CUDA_F32_MATH[f] for f in GUIDE} == {f: fn for f, (fn, _) in GUIDE.items()}
    assert {f: kernel_bounds.VENDOR_ULPS["tilelang-cuda"][f] for f in GUIDE} == {f: u for f, (_, u) in GUIDE.items()}


@pytest.mark.parametrize("d", F32_HELD, ids=str)
@pytest.mark.parametrize("family", sorted(GUIDE))
def test_an_f32_held_function_calls_cudas_single_precision_function(family, d):
    text = _source(family, d)
    fn = GUIDE[family][0]
    assert text.startswith(f"__device__ __forceinline__ float it_{family}_{d.name}(float a) {{ float r = {fn}(a);")
    assert "double" not in text and "__" + fn not in text  # neither a double-precision call nor fast math
    assert "if (r != r) r = a != a ? itb_f32(itb_bits32(a) | 0x00400000u) : itb_f32(0xffc00000u);" in text
    assert text.endswith("return r; }" if d is T.f32 else f"return itb_r{d.name}(r); }}")  # rounded once


@pytest.mark.parametrize("family", sorted(GUIDE) + list(KEPT_DOUBLE))
def test_f64_the_unmapped_functions_and_flush_to_zero_keep_cs_double_bodies(family):
    def both(fam, d):
        return (cuda.helper_source(f"it_{fam}_{d.name}", fam, (d,), d, (d,)),
                C.helper_source(f"it_{fam}_{d.name}", fam, (d,), d, (d,), cuda.DEVICE))

    got, want = both(family, T.f64)
    assert got == want and "(double)" not in got
    if family in KEPT_DOUBLE:
        for d in F32_HELD:
            got, want = both(family, d)
            assert got == want and "(double)a" in got
    if family == "exp2":  # the flushing approximate form is the PTX instruction instead (below)
        got, want = both("exp2_ftz", T.f32)
        assert got != want and "exp2((double)itb_ftz32(a))" in want and "double" not in got
    if family in ("exp2", "tanh"):  # so is the approximate one (f32 only: T4, test_math_library.py)
        got, want = both(f"{family}_approx", T.f32)
        assert got != want and "double" not in got


_EX2_FTZ = 'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));'


def test_exp2_approximate_flush_to_zero_is_the_ptx_instruction_with_x86_nans():
    """T10: ``I.exp2(x, approximate=True, flush_to_zero=True)`` is ``ex2.approx.ftz.f32`` (one MUFU.EX2), its NaN
    result decided as x86 gives it in the serial program's helper and left to the hardware in the tile programs'
    fast bodies (a row or output holding a NaN is recomputed by the serial helpers there)."""
    from intent_trace.backends.tilelang.cuda_region_tiles import fast_helpers

    text = _source("exp2_ftz", T.f32)
    assert _EX2_FTZ in text and "exp2f" not in text and "double" not in text
    assert "if (r != r) r = a != a ? itb_f32(itb_bits32(a) | 0x00400000u) : itb_f32(0xffc00000u);" in text
    fast = fast_helpers(cuda.helper_source)("it_exp2_ftz_f32", "exp2_ftz", (T.f32,), T.f32, (T.f32,))
    assert _EX2_FTZ in fast and "r != r" not in fast


# the approximate options' instructions (T10), by helper family
_PTX = {"exp2_approx": "ex2.approx.f32", "tanh_approx": "tanh.approx.f32"}


@pytest.mark.parametrize("family", sorted(_PTX))
def test_the_approximate_options_are_their_ptx_instructions_with_x86_nans(family):
    from intent_trace.backends.tilelang.cuda_region_tiles import fast_helpers

    text = _source(family, T.f32)
    assert f'asm("{_PTX[family]} %0, %1;" : "=f"(r) : "f"(a));' in text
    assert "exp2f" not in text and "tanhf" not in text and "double" not in text
    assert "if (r != r) r = a != a ? itb_f32(itb_bits32(a) | 0x00400000u) : itb_f32(0xffc00000u);" in text
    assert ("r = a == 0.0f ? a : r;" in text) == (family == "tanh_approx")  # tanh(-0) = -0 (T4)
    fast = fast_helpers(cuda.helper_source)(f"it_{family}_f32", family, (T.f32,), T.f32, (T.f32,))
    assert _PTX[family] in fast and "r != r" not in fast


def _div_source(family="div_approx", d=T.f32):
    return cuda.helper_source(f"it_{family}_{d.name}", family, (d,), d, (d, d))


def test_approximate_division_is_div_full_for_normal_quotients():
    text = _div_source()
    assert 'asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));' in text
    assert "m >= 0x1p-126f && m <= 0x1.fffffep127f ? r : a / b" in text  # any other quotient: IEEE's
    assert "uint32_t q = 0xffc00000u;" in text  # x86's NaN rule around it


# --- the NaN rule, run on the host -------------------------------------------------------------------------------

def _host(text: str) -> str:
    """Device text as host C++, each library call answering a NaN result as an NVIDIA GPU does (0x7FFFFFFF)."""
    text = text.replace("static __device__ __forceinline__", "static inline") \
               .replace("__device__ __forceinline__", "static inline")
    text = text.replace(f"float r; {_EX2_FTZ}", "float r = gpu_nan(gpu_ex2_ftz(a));")
    text = text.replace('float r; asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(a));', "float r = gpu_nan(exp2f(a));")
    text = text.replace('float r; asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(a));', "float r = gpu_tanh(a);")
    text = text.replace('float r; asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));',
                        "float r = gpu_div_full(a, b);")
    text = re.sub(r"float r = (\w+)\(a\);", r"float r = gpu_nan(\1(a));", text)
    return text.replace("? r : a / b;", "? r : gpu_nan(a / b);")  # the GPU's IEEE division: its canonical NaN


_SHIMS = """#include <math.h>
static inline float gpu_nan(float r) { float g; unsigned u = 0x7fffffffu; memcpy(&g, &u, 4); return r != r ? g : r; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }  /* the host has none: the shape of CUDA's */
/* ex2.approx.ftz.f32 as PTX describes it: a subnormal operand or result is a zero of its sign */
static inline float gpu_ex2_ftz(float x) { if (fabsf(x) < 0x1p-126f) x = 0.0f * x;
  float r = exp2f(x); return fabsf(r) < 0x1p-126f ? 0.0f * r : r; }
/* tanh.approx.f32 at its least helpful where T4 fixes the value: -0 answered +0, a NaN the canonical one */
static inline float gpu_tanh(float x) { return x == 0.0f ? 0.0f : gpu_nan(tanhf(x)); }
/* div.full.f32 at its least helpful outside normal quotients: subnormal operands and quotients flushed, zeros
   unsigned, the canonical NaN */
static inline float gpu_div_full(float a, float b) { if (fabsf(a) < 0x1p-126f) a = 0.0f; if (fabsf(b) < 0x1p-126f)
  b = 0.0f; float r = gpu_nan((float)((double)a / (double)b)); return fabsf(r) < 0x1p-126f ? 0.0f : r; }
"""


def _library():
    helpers = [(f"it_{f}_{d.name}", _source(f, d)) for f in GUIDE for d in F32_HELD]
    helpers += [(f"it_{f}_f32", _source(f, T.f32)) for f in ("exp2_ftz", *_PTX)]
    defs = [_host(text) for _, text in helpers] + [_host(_div_source())]
    prelude = _host(C.prelude([], cuda.DEVICE)) + "\n" + _SHIMS + "\n".join(
        _host(cuda.DEVICE.render(C.BASE[n])) for n in C.base_helpers(defs, C.BASE))
    runners = [f'extern "C" void run_{name}(const float* a, float* out, long k) '
               f'{{ for (long i = 0; i < k; ++i) out[i] = {name}(a[i]); }}' for name, _ in helpers]
    runners.append('extern "C" void run_it_div_approx_f32(const float* a, const float* b, float* out, long k) '
                   '{ for (long i = 0; i < k; ++i) out[i] = it_div_approx_f32(a[i], b[i]); }')
    return shared_library("\n".join([prelude, *defs, *runners, ""]), "cuda_math")


def _run(lib, name, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty_like(x)
    ptr = ctypes.POINTER(ctypes.c_float)
    getattr(lib, f"run_{name}")(x.ctypes.data_as(ptr), out.ctypes.data_as(ptr), ctypes.c_long(x.size))
    return out


_NAN_INPUTS = np.array([0x7FC00005, 0x7F800003, 0xFFC10000, 0xFF800001], np.uint32).view(np.float32)
_INVALID = {"log": [-1.0, -np.inf, -2.0**-20], "log1p": [-2.0, -np.inf], "sin": [np.inf, -np.inf],
            "cos": [np.inf, -np.inf], "asin": [1.5, -np.inf], "rsqrt": [-1.0, -np.inf]}
_ORDINARY = np.array([0.0, -0.0, 0.5, -0.75, 1.0, 3.0, -3.0, 10.0, 2.0**-30, -(2.0**-130), 1e30, np.inf, -np.inf],
                     np.float32)


@pytest.mark.parametrize("family", sorted(GUIDE))
def test_cuda_math_gives_the_oracles_nans_where_the_gpu_gives_its_canonical_nan(family):
    lib = _library()
    x = np.concatenate([_NAN_INPUTS, np.array(_INVALID.get(family, []), np.float32), _ORDINARY])
    got = _run(lib, f"it_{family}_f32", x)
    want = N.unary_math(family, x)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    # NaN operands come back quiet with their payload, invalid arguments give x86's default NaN (x86's libm; the
    # generic oracle's NumPy tanh alone returns its canonical quiet NaN for every NaN: T4 asks only for a NaN there)
    assert list(got[:4].view(np.uint32)) == [0x7FC00005, 0x7FC00003, 0xFFC10000, 0xFFC00001]
    if family in _INVALID:
        assert set(got[4:4 + len(_INVALID[family])].view(np.uint32)) == {0xFFC00000}
    # every other value passes through the selection unchanged (here the host's f32 libm, within the bound)
    fine = ~nan
    a, b = got[fine].view(np.int32).astype(np.int64), want[fine].view(np.int32).astype(np.int64)
    a, b = np.where(a < 0, -(a & 0x7FFFFFFF), a), np.where(b < 0, -(b & 0x7FFFFFFF), b)
    assert np.abs(a - b).max() <= GUIDE[family][1], (x[fine], got[fine], want[fine])


def test_exp2_flush_to_zero_gives_the_oracles_nans_and_flushes():
    lib = _library()
    x = np.concatenate([_NAN_INPUTS, np.array([-130.0, -149.0, 1e-40, -1e-40, -126.0, 3.0, -np.inf, np.inf],
                                              np.float32)])
    got = _run(lib, "it_exp2_ftz_f32", x)
    assert list(got[:4].view(np.uint32)) == [0x7FC00005, 0x7FC00003, 0xFFC10000, 0xFFC00001]
    assert list(got[4:]) == [0.0, 0.0, 1.0, 1.0, 2.0**-126, 8.0, 0.0, np.inf] and not np.signbit(got[4:]).any()


def test_approximate_tanh_and_exp2_give_the_oracles_nans_and_tanhs_signed_zero():
    lib = _library()
    got = _run(lib, "it_tanh_approx_f32", np.concatenate([_NAN_INPUTS, np.float32([0.0, -0.0, 0.5, -np.inf])]))
    assert list(got[:4].view(np.uint32)) == [0x7FC00005, 0x7FC00003, 0xFFC10000, 0xFFC00001]
    assert list(got[4:].view(np.uint32)) == list(np.float32([0.0, -0.0, np.tanh(0.5), -1.0]).view(np.uint32))
    got = _run(lib, "it_exp2_approx_f32", np.concatenate([_NAN_INPUTS, np.float32([-np.inf, 3.0, -149.0])]))
    assert list(got[:4].view(np.uint32)) == [0x7FC00005, 0x7FC00003, 0xFFC10000, 0xFFC00001]
    assert list(got[4:]) == [0.0, 8.0, 2.0**-149]


def test_approximate_division_outside_normal_quotients_is_ieees_with_x86_nans():
    lib = _library()
    nan_a, nan_b = _NAN_INPUTS[1], _NAN_INPUTS[2]  # a signalling and a quiet NaN, payloads kept
    a = np.float32([1.0, -1.0, 0.0, -0.0, 2.0**-140, 2.0**-140, 3.0, 1.0, np.inf, 2.0**120, nan_a, 1.0, nan_a, 6.0,
                    -7.5])
    b = np.float32([0.0, 0.0, 0.0, 5.0, 1.0, 2.0**-20, 1.5 * 2.0**127, 2.0**-140, np.inf, 2.0**-20, 1.0, nan_b,
                    nan_b, 3.0, 2.5])
    out = np.empty_like(a)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run_it_div_approx_f32(a.ctypes.data_as(ptr), b.ctypes.data_as(ptr), out.ctypes.data_as(ptr),
                              ctypes.c_long(a.size))
    with np.errstate(all="ignore"):
        want = a / b  # x86: IEEE quotients and NaNs
    assert list(out.view(np.uint32)) == list(want.view(np.uint32)), (out, want)
    assert list(out[[2, 8, 10, 11, 12]].view(np.uint32)) == [0xFFC00000, 0xFFC00000, 0x7FC00003, 0xFFC10000,
                                                            0x7FC00003]


@pytest.mark.parametrize("d", [T.f16, T.bf16], ids=str)
@pytest.mark.parametrize("family", ["exp", "log", "tanh"])
def test_a_narrow_cuda_function_rounds_the_f32_result_once(family, d):
    lib = _library()
    np_d = np.float16 if d is T.f16 else ml_dtypes.bfloat16
    x = np.array([0.5, -0.75, 1.0, 3.0, 2.5, 0.1, -1.0, np.nan], np_d)
    got = _run(lib, f"it_{family}_{d.name}", x.astype(np.float32))
    with np.errstate(all="ignore"):
        ref = {"exp": np.exp, "log": np.log, "tanh": np.tanh}[family](x.astype(np.float64))
    for g, r in zip(got, ref):
        if math.isnan(r):
            assert math.isnan(g)
            continue
        assert float(np.asarray(g, np.float32).astype(np_d)) == float(g)  # a value of the narrow format
        lo, hi = sorted((float(np.asarray(r).astype(np_d)), float(g)))
        step = float(ml_dtypes.finfo(np_d).eps) * max(abs(r), float(ml_dtypes.finfo(np_d).tiny))
        assert hi - lo <= 2 * step  # within one ulp of the format (f32's error is far below it)


# --- the program text lowers ---------------------------------------------------------------------------------------

@intent.kernel
def gelu_like(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.bf16, ("N",)]):
    d = I.domain(0, x.shape[0])
    v = x[d]
    y[d] = I.exp(v) + I.erf(v) * I.tanh(v) - I.log1p(I.rsqrt(v))
    z[d] = I.cast(I.exp(v), I.bf16)


def test_the_cuda_program_with_vendor_math_lowers_and_calls_the_f32_functions():
    from backends.tilelang_support import cuda_source

    program = generate(gelu_like.trace(), "tilelang-cuda")
    source = cuda_source(program)
    for fn in ("expf(a)", "erff(a)", "tanhf(a)", "log1pf(a)", "rsqrtf(a)"):
        assert fn in source, fn
    assert not re.search(r"\b(exp|erf|tanh|log1p|itb_rsqrt)\(", source) and "__expf" not in source  # no double call


@intent.kernel
def approximate_ops(x: I.In[I.f32, ("N",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.fdiv(x[d], z[d], approximate=True) + I.tanh(x[d], approximate=True) + I.exp2(z[d], approximate=True)


def test_the_approximate_options_lower_and_assemble_to_their_instructions():
    from backends.tilelang_support import assembled, cuda_source

    source = cuda_source(generate(approximate_ops.trace(), "tilelang-cuda"))
    for instruction in ("div.full.f32", "tanh.approx.f32", "ex2.approx.f32"):
        assert instruction in source, instruction
    assert "tanhf(" not in source and "exp2f(" not in source
    report = assembled(source)
    if report is None:  # no nvcc here: the text check above stands
        return
    ptx = "\n".join(report.ptx.values())
    for instruction in ("div.full.f32", "tanh.approx.f32", "ex2.approx.f32"):
        assert instruction in ptx, instruction
