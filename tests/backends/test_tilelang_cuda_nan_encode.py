"""tilelang-cuda's f16/bf16 encode and f32 -> f16/bf16 cast select their NaN case instead of branching to the C body
(cuda._hardware_conversion): a gather's elements, each stored as it arrives, were issued one after another behind
that branch, and a row's write pass had a branch region per element. The selected expression must give the C body's
bits (the serial program's numerics) for every f32 NaN: checked on the host with g++ over NaN payloads of both signs
(quiet and signalling), and for the f16 encode against NumPy's own conversion too. The float helpers' x86 NaN rules
are selects too (no early return): checked on the same host against the branching form they replaced."""
import shutil
import subprocess

import numpy as np
import pytest

from intent_trace import I
from intent_trace.backends.tilelang import cuda
from intent_trace.backends.tilelang.c_blocks import SCALAR_BASE

pytest.importorskip("tilelang")

#: NaN bit patterns: quiet and signalling, payloads only in the low bits (no f16 payload survives), both signs
NANS = np.array(sorted({s | 0x7f800000 | m for s in (0, 0x80000000)
                        for m in (1, 0x1fff, 0x2000, 0x3fffff, 0x400000, 0x400001, 0x7fffff, 0x12345, 0x7fe000,
                                  0x1000, 0x600000, 0x0fe000)}), np.uint32)


def _host_run(tmp_path, blocks: list, reference: str, selected: str, dtype) -> np.ndarray:
    """``reference(a)`` and ``selected(a)`` (C expressions of the float ``a``; their result's bits printed) compiled
    for the host after ``blocks`` (C definitions), on every pattern: rows of (reference, selected)."""
    gxx = shutil.which("g++")
    assert gxx is not None, "the C target's tests need g++"
    source = "\n".join(["#include <stdint.h>", "#include <string.h>", "#include <stdio.h>", *blocks,
                        "static uint32_t out(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }",
                        "static uint32_t out(uint16_t x) { return x; }",
                        "int main(void) { uint32_t u; while (scanf(\"%u\", &u) == 1) { float a; memcpy(&a, &u, 4);",
                        f"  printf(\"%u %u\\n\", (unsigned)out({reference}), (unsigned)out({selected})); }}",
                        "return 0; }"])
    (tmp_path / "enc.c").write_text(source)
    subprocess.run([gxx, "-x", "c++", "-O1", str(tmp_path / "enc.c"), "-o", str(tmp_path / "enc")], check=True)
    out = subprocess.run([str(tmp_path / "enc")], input="\n".join(map(str, NANS)), capture_output=True, text=True,
                         check=True).stdout
    return np.array([[int(x) for x in line.split()] for line in out.splitlines()], dtype)


def _base(*names) -> list:
    return [SCALAR_BASE[k].replace("$static", "static inline") for k in
            ("itb_bits32", "itb_f32", "itb_bits64", "itb_d2n", *names)]


def _host_encode(tmp_path, d) -> np.ndarray:
    """The C body's encode and the CUDA helper's NaN select, both compiled for the host, on every pattern."""
    blocks = [*_base(f"itb_{d}_from_double", f"itb_{d}_encode"),
              f"static uint16_t select_nan(float a) {{ return {cuda._NAN_ENCODE[d]}; }}"]
    return _host_run(tmp_path, blocks, f"itb_{d}_encode(a)", "select_nan(a)", np.uint16)


@pytest.mark.parametrize("d", ["f16", "bf16"])
def test_the_selected_nan_encode_gives_the_c_body_s_bits(tmp_path, d):
    got = _host_encode(tmp_path, d)
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    if d == "f16":  # NumPy narrows a NaN the same way (the top ten payload bits; 0x7c01 if none survive)
        np.testing.assert_array_equal(got[:, 1], NANS.view(np.float32).astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("d", [I.f16, I.bf16])
def test_a_cuda_encode_selects_its_nan_case_without_a_branch(d):
    text = cuda.helper_source(f"it_encode_{d.name}", "encode", (d,), d, (I.f32,))
    body = text[text.index(f"it_encode_{d.name}(float a)"):]
    assert "_soft" not in text and "a != a ? (uint16_t)(" in body


@pytest.mark.parametrize("d", ["f16", "bf16"])
def test_the_selected_nan_cast_gives_the_c_body_s_bits(tmp_path, d):
    # the C body rounds through double (x86 quiets a signalling NaN there): f16 keeps the top ten payload bits
    decode = "itb_f16_decode" if d == "f16" else "itb_bf16_decode"
    blocks = [*_base(f"itb_{d}_from_double", decode, f"itb_d{d}"),
              f"static float select_nan(float a) {{ return {cuda._NAN_CAST[d]}; }}"]
    got = _host_run(tmp_path, blocks, f"itb_d{d}((double)a)", "select_nan(a)", np.uint32)
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    assert np.isnan(got[:, 1].view(np.float32)).all()


@pytest.mark.parametrize("d", [I.f16, I.bf16])
def test_a_cuda_cast_to_half_precision_selects_its_nan_case_without_a_branch(d):
    text = cuda.helper_source(f"it_cast_f32_{d.name}", "cast", (I.f32, d), d, (I.f32,))
    assert "_soft" not in text and "if" not in text.replace("#include", "")
    assert f"return a != a ? {cuda._NAN_CAST[d.name]} : " in text


def test_the_x86_nan_rules_are_selects_with_the_branching_form_s_results(tmp_path):
    """it_mul_f32 (any binary f32 helper) against the early-return form it replaced, on NaN x NaN, NaN x number
    and an invalid product (0 * inf: x86's default NaN)."""
    text = cuda.helper_source("it_mul_f32", "mul", (I.f32,), I.f32, (I.f32, I.f32))
    assert "if" not in text and "return r == r ? r : " in text
    branching = ("static float branching(float a, float b) { float r = a * b; if (r == r) return r; "
                 "if (a != a) return itb_f32(itb_bits32(a) | 0x00400000u); "
                 "if (b != b) return itb_f32(itb_bits32(b) | 0x00400000u); return itb_f32(0xffc00000u); }")
    helper = text.replace("__device__ __forceinline__", "static inline")
    others = {"1": "a", "2": "itb_f32(0x7fc12345u)", "3": "0.0f", "4": "itb_f32(0x7f800000u)", "5": "2.5f"}
    for b in others.values():
        got = _host_run(tmp_path, [*_base(), helper, branching], f"branching(a, {b})", f"it_mul_f32(a, {b})",
                        np.uint32)
        np.testing.assert_array_equal(got[:, 1], got[:, 0])
        swapped = _host_run(tmp_path, [*_base(), helper, branching], f"branching({b}, a)", f"it_mul_f32({b}, a)",
                            np.uint32)
        np.testing.assert_array_equal(swapped[:, 1], swapped[:, 0])
    got = _host_run(tmp_path, [*_base(), helper, branching], "branching(0.0f, itb_f32(0x7f800000u))",
                    "it_mul_f32(0.0f, itb_f32(0x7f800000u))", np.uint32)
    assert (got[:, 1] == 0xFFC00000).all() and (got[:, 0] == 0xFFC00000).all()
