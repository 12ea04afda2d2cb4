"""tilelang-cuda's f16/bf16 encode selects its NaN case instead of branching to the C body (cuda._hardware_conversion):
a gather's elements, each stored as it arrives, were issued one after another behind that branch. The selected
expression must give the C body's bits (the serial program's numerics) for every f32 NaN: checked on the host with
g++ over NaN payloads of both signs, and for f16 against NumPy's own conversion too."""
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


def _host_encode(tmp_path, d) -> np.ndarray:
    """The C body's encode and the CUDA helper's NaN select, both compiled for the host, on every pattern."""
    gxx = shutil.which("g++")
    assert gxx is not None, "the C target's tests need g++"
    blocks = [SCALAR_BASE[k].replace("$static", "static inline") for k in
              ("itb_bits32", "itb_f32", "itb_bits64", "itb_d2n", f"itb_{d}_from_double", f"itb_{d}_encode")]
    source = "\n".join(["#include <stdint.h>", "#include <string.h>", "#include <stdio.h>", *blocks,
                        f"static uint16_t select_nan(float a) {{ return {cuda._NAN_ENCODE[d]}; }}",
                        "int main(void) { uint32_t u; while (scanf(\"%u\", &u) == 1) { float a; memcpy(&a, &u, 4);",
                        f"  printf(\"%u %u\\n\", (unsigned)itb_{d}_encode(a), (unsigned)select_nan(a)); }}",
                        "return 0; }"])
    (tmp_path / "enc.c").write_text(source)
    subprocess.run([gxx, "-x", "c++", "-O1", str(tmp_path / "enc.c"), "-o", str(tmp_path / "enc")], check=True)
    out = subprocess.run([str(tmp_path / "enc")], input="\n".join(map(str, NANS)), capture_output=True, text=True,
                         check=True).stdout
    return np.array([[int(x) for x in line.split()] for line in out.splitlines()], np.uint16)


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
