"""The fused epilogue's own helper bodies (cuda_epilogue_helpers): max/min as selects and one rounding for a written
f32 -> f16/bf16 cast. Both must give the shared C bodies' bits (the serial program's numerics): the select max/min
against the C body's early returns on every pair of a grid of f32 patterns (NaN payloads of both signs, quiet and
signalling, signed zeros, infinities, subnormals), compiled for the host with g++; the one-step NaN rounding
against the C bodies' cast then encode; and the epilogue programs take them (text) while the shared helpers keep
theirs. The kernels' numbers with them (NaN payloads, signed zeros, tails) are
tests/backends/test_tilelang_cuda_matmul_epilogue*.py on every executable target."""
import shutil
import subprocess

import numpy as np
import pytest

from intent_trace import I
from intent_trace.backends.tilelang import c, cuda, cuda_epilogue_helpers, cuda_kernels, targets
from intent_trace.backends.tilelang.c_blocks import SCALAR_BASE

pytest.importorskip("tilelang")
from example_modules import benchmark_module

zoo = benchmark_module("zoo_kernels")

#: f32 patterns: NaNs (quiet, signalling, payloads high and low, both signs), signed zeros, infinities, subnormals,
#: ordinary values and their negations
PATTERNS = np.array(sorted({s | x for s in (0, 0x80000000) for x in (
    0, 1, 0x7fffff, 0x800000, 0x3f800000, 0x40490fdb, 0x7f7fffff, 0x7f800000,
    0x7f800001, 0x7f801fff, 0x7f802000, 0x7fbfffff, 0x7fc00000, 0x7fc00001, 0x7fc12345, 0x7fffe000, 0x7fffffff)}),
    np.uint32)


def _host(tmp_path, blocks: list, reference: str, selected: str, pairs: bool) -> np.ndarray:
    """Rows (reference bits, selected bits) of two C expressions of ``a`` (and ``b`` when ``pairs``: every pair of
    patterns), compiled for the host after ``blocks``."""
    gxx = shutil.which("g++")
    assert gxx is not None, "the C target's tests need g++"
    base = [SCALAR_BASE[k].replace("$static", "static inline") for k in
            ("itb_bits32", "itb_f32", "itb_bits64", "itb_d2n", "itb_f16_from_double", "itb_bf16_from_double",
             "itb_f16_encode", "itb_bf16_encode", "itb_f16_decode", "itb_bf16_decode", "itb_df16", "itb_dbf16")]
    source = "\n".join([
        "#include <stdint.h>", "#include <string.h>", "#include <stdio.h>", *base, *blocks,
        "static uint32_t out(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }",
        "static uint32_t out(uint16_t x) { return x; }",
        "static float in(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }",
        "int main(void) { uint32_t u, v; while (scanf(\"%u %u\", &u, &v) == 2) { float a = in(u), b = in(v); (void)b;",
        f"  printf(\"%u %u\\n\", (unsigned)out({reference}), (unsigned)out({selected})); }}", "return 0; }"])
    (tmp_path / "h.cpp").write_text(source)
    subprocess.run([gxx, "-O1", "-ffp-contract=off", str(tmp_path / "h.cpp"), "-o", str(tmp_path / "h")], check=True)
    inputs = [(a, b) for a in PATTERNS for b in PATTERNS] if pairs else [(a, 0) for a in PATTERNS]
    out = subprocess.run([str(tmp_path / "h")], input="\n".join(f"{a} {b}" for a, b in inputs), capture_output=True,
                         text=True, check=True).stdout
    return np.array([[int(x) for x in line.split()] for line in out.splitlines()], np.uint32)


@pytest.mark.parametrize("family", ["max", "min"])
def test_the_select_max_and_min_give_the_c_body_s_bits_on_every_pair(tmp_path, family):
    shared = c.helper_source(f"ref_{family}", family, (I.f32,), I.f32, (I.f32, I.f32), c.C_SPELLING)
    body = cuda_epilogue_helpers.minmax_body(family == "max")
    selects = f"static inline float sel_{family}(float a, float b) {{ {body} }}"
    got = _host(tmp_path, [shared.replace('extern "C" inline', "static inline"), selects], f"ref_{family}(a, b)",
                f"sel_{family}(a, b)", pairs=True)
    assert len(got) == len(PATTERNS) ** 2
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    # what the rules decide, from NumPy's side: the first NaN operand itself, and -0 < +0
    a = PATTERNS.view(np.float32)
    first = np.repeat(PATTERNS, len(PATTERNS))[np.isnan(np.repeat(a, len(a)))]
    assert np.array_equal(got[np.isnan(np.repeat(a, len(a))), 1], first)
    zero_pair = {(0, 0x80000000): 0 if family == "max" else 0x80000000,
                 (0x80000000, 0): 0 if family == "max" else 0x80000000}
    index = {int(p): k for k, p in enumerate(PATTERNS)}
    for (x, y), want in zero_pair.items():
        assert got[index[x] * len(PATTERNS) + index[y], 1] == want


@pytest.mark.parametrize("d", ["f16", "bf16"])
def test_one_rounding_of_a_nan_gives_the_c_bodies_cast_then_encode(tmp_path, d):
    nan = f"static inline uint16_t one_step(float a) {{ return {cuda_epilogue_helpers.NAN_CAST_ENCODE[d]}; }}"
    got = _host(tmp_path, [nan], f"itb_{d}_encode(itb_d{d}((double)a))", "one_step(a)", pairs=False)
    nans = np.isnan(PATTERNS.view(np.float32))
    np.testing.assert_array_equal(got[nans, 1], got[nans, 0])
    if d == "f16":  # NumPy: the f16 NaN of a quieted f32 NaN keeps its payload's top bits
        quiet = (PATTERNS[nans] | 0x400000).view(np.float32)
        np.testing.assert_array_equal(got[nans, 1], quiet.astype(np.float16).view(np.uint16))


def test_the_cuda_bodies_are_selects_and_the_hardware_s_one_rounding():
    target = cuda_epilogue_helpers.epilogue_target(targets.CUDA)
    for family in ("max", "min"):
        text = target.helper_source(f"it_{family}_f32", family, (I.f32,), I.f32, (I.f32, I.f32))
        assert text.startswith(f"__device__ __forceinline__ float it_{family}_f32(float a, float b) {{ float r = ")
        assert " if " not in text and text.count("return") == 1
        shared = targets.CUDA.helper_source(f"it_{family}_f32", family, (I.f32,), I.f32, (I.f32, I.f32))
        assert "if (a != a) return a;" in shared  # the shared table keeps its early returns
    for d, rounding in (("f16", "__half_as_ushort(__float2half_rn(a))"),
                        ("bf16", "__bfloat16_as_ushort(__float2bfloat16_rn(a))")):
        text = target.helper_source(f"it_cast_encode_f32_{d}", cuda_epilogue_helpers.CAST_ENCODE,
                                    (I.f32, getattr(I, d)), I.u16, (I.f32,))
        assert text.endswith(f"return a != a ? {cuda_epilogue_helpers.NAN_CAST_ENCODE[d]} : {rounding}; }}")
    # everything else is the shared table's
    assert target.helper_source("it_add_f32", "add", (I.f32,), I.f32, (I.f32, I.f32)) == cuda.helper_source(
        "it_add_f32", "add", (I.f32,), I.f32, (I.f32, I.f32))


def test_the_epilogue_program_rounds_once_and_takes_the_select_max():
    spec, _ = cuda_kernels.specializations(zoo.matmul_bias_relu_f16.trace(), targets.CUDA)  # 128 x 256, 128 x 128
    p = spec.program
    assert "'it_cast_encode_f32_f16', t4_c0)" in p and "'it_cast_f32_f16'" not in p
    prelude = p[p.index("PRELUDE = "):p.index("\n", p.index("PRELUDE = "))]
    assert "float it_max_f32(float a, float b) { float r = a > b ? a : b;" in prelude
    assert "uint16_t it_cast_encode_f32_f16(float a)" in prelude
