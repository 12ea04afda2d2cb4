"""The fused epilogue's loop over the tile (cuda_matmul._tile_loop): the accumulators staged in shared memory, each
thread 8 adjacent columns of a row a pass in a rolled loop, what depends on the column alone computed before the loop
and what depends on the row alone once a row (cuda_epilogue.levels), the NaN recomputation behind one branch per 8
accumulators.

On the H100 (the lead's run)::

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/backends/test_tilelang_cuda_matmul_epilogue_loop.py

Three parts. The hoisting itself, on element code written by hand (the levels each binding lands at; string
literals left alone; anything but single bindings refused). The numbers, on every executable target through the
shared ``target`` fixture (tilelang-c runs the CUDA mapping emulated), against NumPy float64 within T5's bound: an
epilogue with a term at every level (a scalar, a per-column chain, a per-row term, a per-element residual) at
extents no tile divides and at whole tiles, and a lone NaN in each of the 8 lanes of a thread's columns (x86's
default NaN, which only the recomputation gives: the emulated product's NaNs are NVIDIA's canonical one). The
machine code, with the local nvcc for sm_90a: the fused program keeps the plain matmul's warpgroup MMAs, spills
nothing, reads and writes the staged tiles in 16-byte accesses in one rolled loop, and is a small program (the
unrolled epilogue it replaces was 476 KB of SASS, 0.33 ms slower than the plain matmul at 4096^3 on the H100).
"""
import re
import shutil
import struct
import subprocess

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_matmul_epilogue import (  # noqa: F401  (compiled: a fixture)
    U32, _check, _f16_bound, _product, _runs_epilogue, _spec, compiled)
from backends.tilelang_support import cuda_source
from example_modules import benchmark_module
from intent_trace.backends.tilelang import cuda_epilogue, cuda_matmul, targets

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(2417)


@intent.kernel
def mm_levels_bf16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], bias: I.In[I.bf16, ("N",)],
                   r: I.In[I.f32, ("M",)], res: I.In[I.f32, ("M", "N")], c: I.Out[I.bf16, ("M", "N")], s: I.f32):
    acc = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)
    column = I.exp(I.cast(bias[:], I.f32) * 0.5)  # the column alone: before the loop
    row = I.reshape(r[:] * 2.0, (a.shape[0], 1))  # the row alone: once a row
    c[:, :] = I.cast(I.maximum(acc * s + column + row, 0.0) + res[:, :], I.bf16)


# --- the hoisting ---------------------------------------------------------------------------------------------

def test_levels_place_each_binding_at_the_outermost_loop_it_can():
    body = ("k1 = T.float32(2)",  # nothing that varies: once
            "t1 = T.call_extern('float32', 'it_decode_f16', p2[en])",  # the column
            "t2 = T.call_extern('float32', 'it_mul_f32', t1, k1)",
            "f1 = T.Cast('int64', em)",  # the row, and a row term using a constant
            "t3 = T.call_extern('float32', 'it_add_f32', p3[f1], k1)",
            "t4 = p4[em, en]",  # row and column: per element
            "t5 = T.call_extern('float32', 'it_add_f32', fa[0], t2)",  # the accumulator
            "t6 = T.call_extern('float32', 'em', t3)")  # a helper's name is a literal, not the row
    got = cuda_epilogue.levels(body, {"en"}, {"ei", "em"}, {"fa"})
    assert got.constant == body[:1] and got.column == body[1:3] and got.row == (*body[3:5], body[7])
    assert got.element == body[5:7] and cuda_epilogue.names(body[7]) == {"t6", "T", "call_extern", "t3"}
    assert cuda_epilogue.levels(("t1 = fa[0]", "if t1 > 0:"), {"en"}, {"em"}, {"fa"}) is None  # not a binding


def test_renaming_leaves_string_literals_and_longer_names_alone():
    line = "t1 = T.call_extern('float32', 'en', p2[en], en_x, t12)"
    assert cuda_epilogue.renamed(line, {"en": "en_c3", "t1": "t1_c3"}) == \
        "t1_c3 = T.call_extern('float32', 'en', p2[en_c3], en_x, t12)"


@pytest.mark.parametrize("tiling,lanes", [
    ((128, 256, 256), (8, 32, 8, 16)),  # the configuration: a warp a row, 8 rows a pass, 16 passes
    ((256, 128, 256), (8, 16, 16, 16)),  # tools/matmul_sweep.py's other shapes
    ((128, 128, 256), (8, 16, 16, 8)),
    ((64, 512, 32), (16, 32, 1, 64)),  # more columns than 8 a thread covers: 16 a thread
    ((128, 256, 96), None)])  # threads that cover no whole row
def test_the_lanes_cover_a_tile_in_whole_rows(tiling, lanes):
    tm, tn, threads = tiling
    got = cuda_matmul.epilogue_lanes(cuda_matmul.MatmulTiling(tm, tn, threads=threads))
    assert (got and (got.vector, got.per_row, got.rows, got.passes)) == lanes
    if got is not None:  # every element of the tile once: rows of a pass times passes, columns of a row
        assert got.rows * got.passes == tm and got.per_row * got.vector == tn and got.rows * got.per_row == threads


def test_a_tiling_whose_staged_tiles_overflow_shared_memory_takes_no_fused_program():
    # 256 x 256: the f32 accumulators (264 KB padded) do not fit an sm_90 block's 227 KB; the plain matmul still tiles
    big = cuda_matmul.MatmulTiling(256, 256, 64, 2, 256, "FullRow", True)
    assert cuda_matmul.tensor_core(zoo.matmul_bias_relu_f16.trace(), targets.CUDA, big) is None
    assert cuda_matmul.tensor_core(zoo.matmul_f16.trace(), targets.CUDA, big) is not None


def test_each_level_lands_where_the_program_says():
    p = _spec(mm_levels_bf16).program
    loop, first = p.index("for ir in T.serial(16):"), p.index("fa[0] = a_l[0]")
    assert p.count("'it_exp_f32'") == 8 and p.rindex("'it_exp_f32'") < loop  # 8 columns, before the loop
    assert p.count("p2[") == 8 and p.rindex("p2[") < loop
    assert p.count("p3[") == 1 and loop < p.index("p3[") < first  # the row's term: once a pass
    assert p.count("p4[") == 8 and first < p.index("p4[")  # the residual: per element
    assert p.count("p6") == 8 + 1 and "'it_mul_f32', fa[0], p6)" in p  # the scalar: per element (and declared)


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(1, 8, 8), (128, 64, 256), (130, 40, 264), (257, 72, 520)])
def test_every_level_matches_numpy_within_the_bound(compiled, target, m, k, n):
    # one element, whole tiles, and tails past one tile in M, N and K; N = 8: a single thread's columns
    exe = compiled(mm_levels_bf16)
    bf = ml_dtypes.bfloat16
    a = (RNG.standard_normal((m, k)) * 0.5).astype(bf)
    b = (RNG.standard_normal((k, n)) * 0.5).astype(bf)
    bias = RNG.standard_normal(n).astype(bf)
    r = RNG.standard_normal(m).astype(np.float32)
    res = RNG.standard_normal((m, n)).astype(np.float32)
    c = np.full((m, n), bf(9.0))
    s = np.float32(-1.25)
    exe(a, b, bias, r, res, c, s)
    _runs_epilogue(exe, target, (m, k, n))
    p, err = _product(a, b)
    column = np.exp(bias.astype(np.float64) * 0.5)
    inner = p * float(s) + column + 2.0 * r.astype(np.float64)[:, None]
    want = np.maximum(inner, 0.0) + res
    # the product's bound scaled by |s|; a rounding for each op (exp within a few ulps, T4); then bf16's half ulp
    bound = 1.25 * err + 8 * U32 * (1.25 * np.abs(p) + column + 2 * np.abs(r)[:, None] + np.abs(inner) +
                                    np.abs(res) + np.abs(want))
    _check(c, want, _f16_bound(want, bound, ulp=2.0 ** -8, tiny=2.0 ** -134))


def test_a_lone_nan_in_each_lane_of_a_thread_s_columns_keeps_x86_s_payload(compiled, target):
    # rows 0-7: inf * 0 at column 8 + r (the first tile's second group of 8, lane r); rows 8-15: at 256 + r - 8 (the
    # tail tile, lane r - 8). Each such element is x86's default NaN (0xFFC00000, as f16 0xFE00), the only NaN among
    # its 8 accumulators; the rest of its row is +-inf (ReLU: inf or 0); rows 16-19 are finite.
    m, k, n = 20, 16, 264
    exe = compiled(zoo.matmul_bias_relu_f16)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = (RNG.uniform(0.5, 1.5, (k, n)) * RNG.choice([-1, 1], (k, n))).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float16)
    nan = np.zeros((m, n), bool)
    for row in range(16):
        col = 8 + row if row < 8 else 256 + row - 8
        a[row, row], b[row, col] = np.inf, 0.0
        nan[row, col] = True
    c = np.zeros((m, n), np.float16)
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (m, k, n))
    assert np.array_equal(np.isnan(c), nan) and (c.view(np.uint16)[nan] == 0xFE00).all()
    with np.errstate(invalid="ignore"):
        sign = np.sign(b[np.arange(16), :].astype(np.float64))  # row r's inf times column j's B[r, j]
    assert np.array_equal(c[:16][~nan[:16]], np.where(sign > 0, np.inf, 0.0)[~nan[:16]])
    p, err = _product(a[16:], b)
    want = np.maximum(p + bias, 0.0)
    _check(c[16:], want, _f16_bound(want, err + U32 * np.abs(p + bias)))


# --- the machine code -----------------------------------------------------------------------------------------

def _assembled(program: str, path) -> tuple:
    """(PTX text, ptxas' report, the kernel's SASS bytes) of a tilelang-cuda program on sm_90a, the local nvcc."""
    nvcc, ptxas = shutil.which("nvcc"), shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if nvcc is None:
        pytest.fail("nvcc is not on PATH")
    import tilelang

    root = tilelang.__path__[0]
    path.write_text(cuda_source(program))
    r = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-ptx", "--fmad=false", "-w", f"-I{root}/src",
                        f"-I{root}/3rdparty/cutlass/include", str(path), "-o", f"{path}.ptx"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([ptxas, "-arch=sm_90a", "-v", f"{path}.ptx", "-o", f"{path}.cubin"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return (path.parent / f"{path.name}.ptx").read_text(), r.stderr, _text_bytes((path.parent / f"{path.name}.cubin"))


def _text_bytes(cubin) -> int:
    """The size of the cubin's code (its ``.text.*`` sections: one per kernel), from the ELF64 section headers."""
    data = cubin.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    size, count, names = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + k * size) for k in range(count)]
    table = sections[names][4]
    name = lambda at: data[table + at:data.index(b"\0", table + at)]  # noqa: E731
    return sum(s[5] for s in sections if name(s[0]).startswith(b".text"))


def test_the_epilogue_program_keeps_the_matmul_s_mmas_and_is_a_small_rolled_loop(tmp_path):
    fused_ptx, fused, fused_text = _assembled(_spec(zoo.matmul_bias_relu_f16).program, tmp_path / "fused.cu")
    plain_ptx, plain, _ = _assembled(_spec(zoo.matmul_f16).program, tmp_path / "plain.cu")
    mmas = fused_ptx.count("wgmma.mma_async")
    assert mmas == plain_ptx.count("wgmma.mma_async") and mmas > 0  # the main loop's warpgroup MMAs, unchanged
    for report in (fused, plain):
        assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", report), report
    registers = [int(re.search(r"Used (\d+) registers", x)[1]) for x in (fused, plain)]
    assert registers[0] <= registers[1], registers
    # one rolled loop: two 16-byte reads of the staged accumulators and one 16-byte write of the results (unrolled
    # over the tile there would be 16 of each); the code is under 96 KiB, the unrolled epilogue's was 476 KB
    assert fused_ptx.count("ld.shared.v4.f32") == 2 and fused_ptx.count("st.shared.v4.u32") == 1
    assert fused_text < 96 * 1024, fused_text
