"""tilelang-cuda's program text, checked on any machine (no GPU needed): which graphs get a parallel
mapping or a tiled specialisation, and that the flags forbid contraction and fast math; and the batched f16
attention example on the CPU targets, against NumPy (the numerics its tiled program must share: the segmented fold's
own tests are test_tilelang_cuda_region.py)."""
from __future__ import annotations

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from backends.tilelang_support import chain4, widening_lookup
from intent_trace.backends.tilelang import cuda, cuda_kernels, targets
from intent_trace.backends.tilelang.target import generate


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


@intent.kernel
def scale2d(x: I.In[I.f16, ("M", "N")], out: I.Out[I.f32, ("M", "N")], s: I.f32):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m, n] = I.cast(x[m, n], I.f32) * s


@intent.kernel
def rowsum(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M",)]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m] = I.reduce.sum(x[m, n], axis=1)


@intent.kernel
def in_place(x: I.InOut[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    x[d] = x[d] * 2.0


@intent.kernel
def partial(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(1, x.shape[0])
    out[d] = x[d]


def test_flat_nest_maps_a_pointwise_write_onto_a_grid():
    # rank 1, 4-byte views: 16-byte groups (cuda_groups), the same 1024 elements a block
    assert cuda_kernels.flat_nest(chain4.trace()) == cuda_kernels.FlatNest(
        ("d0",), vector=cuda_kernels.VECTOR // cuda_kernels.GROUP, group=cuda_kernels.GROUP)
    assert cuda_kernels.flat_nest(scale2d.trace()).shape == ("d0", "d1")
    program = generate(chain4.trace(), "tilelang-cuda")
    assert "T.max(T.ceildiv(d0, 1024), 1), threads=128" in program and "T.get_thread_binding()" in program
    assert "T.serial(d0)" not in program


def test_flat_nest_takes_a_reduction_in_the_element_code_one_element_per_thread():
    nest = cuda_kernels.flat_nest(rowsum.trace())
    assert nest.shape == ("d0",) and nest.vector == 1 and not nest.unroll
    chain = cuda_kernels.flat_nest(chain4.trace())
    assert chain.vector * chain.group == cuda_kernels.VECTOR


embedding = widening_lookup  # an embedding lookup that stays a flat nest (a plain one is a row gather: cuda_gather)


def test_flat_nest_unrolls_a_gather_as_a_pointwise_write():
    # an embedding lookup is constant work per element (graph.traits.CONSTANT_WORK): its reads in flight together
    nest = cuda_kernels.flat_nest(embedding.trace())
    assert nest.shape == ("d2", "d1") and nest.vector == cuda_kernels.VECTOR and nest.unroll
    assert "T.unroll(8)" in generate(embedding.trace(), "tilelang-cuda")


def test_a_flat_element_s_coordinates_are_divided_once():
    # TVM substitutes a plain binding into each use, and the CUDA compiler did not merge the copies: the embedding's
    # quotient was computed six times per element. Its coordinates are locals (emitter.variable), one division each.
    from backends.tilelang_support import cuda_source

    source = cuda_source(generate(embedding.trace(), "tilelang-cuda"))
    assert source.count("/ ((uint)d1)") == 1 and source.count("% d1") == 1  # the 32-bit and the 64-bit path


def test_a_cuda_f16_decode_selects_its_nan_case_without_a_branch():
    # a row's loads are each decoded as they arrive: a call of the software body on a NaN made every load wait for
    # the previous one's branch; the NaN case is its bits widened, selected
    for d in (I.f16, I.bf16):
        text = cuda.helper_source(f"it_decode_{d.name}", "decode", (d,), d, (I.u16,))
        body = text[text.index(f"it_decode_{d.name}(uint16_t a)"):]
        assert "_soft(" not in body and " ? itb_f32(" in body


def test_narrow_signed_negations_are_computed_in_32_bits_on_cuda():
    # ptxas compared the PTX neg.s16 of -32768 as +32768 (an H100); the negating ops of i8/i16 are computed in 32 bits
    # and truncated after a prmt, which LLVM cannot narrow back (tests/kernels/test_integer_rules.py runs every value)
    for d, selector in ((I.i8, "0x8880"), (I.i16, "0x9910")):
        t = cuda.c.C_TYPE[d.name]
        for family, arity, wide in (("neg", 1, "-(int)a"), ("sub", 2, "(int)a - (int)b"), ("mul", 2, "(int)a * (int)b"),
                                    ("abs", 1, "-(int)a")):
            text = cuda.helper_source(f"it_{family}_{d.name}", family, (d,), d, (d,) * arity)
            assert f"({t})__byte_perm({wide}, 0, {selector})" in text and "uint32_t" not in text, text
    for d in (I.u8, I.u16, I.i32, I.i64):  # wrapping in uint32_t/uint64_t as C computes them
        text = cuda.helper_source(f"it_neg_{d.name}", "neg", (d,), d, (d,))
        assert "__byte_perm" not in text and "0 - (uint" in text, text


@intent.kernel
def negation_compared_i16(x: I.In[I.i16, ("N",)], zero: I.In[I.i16, ("N",)], out: I.Out[I.i16, ("N",)]):
    d = I.domain(0, x.shape[0])
    out[d] = I.select(-x[d] < zero[d], zero[d], I.abs(x[d]) - I.abs(zero[d]) * x[d])


def test_narrow_signed_negations_assemble_without_a_16_bit_negation():
    # the instruction ptxas mishandled must not reach the PTX from neg, abs, sub or mul (local nvcc; no GPU)
    from backends.tilelang_support import assembled, cuda_source

    report = assembled(cuda_source(generate(negation_compared_i16.trace(), "tilelang-cuda")))
    if report is None:  # no nvcc here: the helper text test above stands
        return
    ptx = "\n".join(report.ptx.values())
    assert "prmt.b32" in ptx and "neg.s32" in ptx and "neg.s16" not in ptx


def test_flat_nest_leaves_other_graphs_to_the_general_program():
    for k in (in_place, partial):
        assert cuda_kernels.flat_nest(k.trace()) is None, k.name
        assert "T.Kernel(1, threads=1" in generate(k.trace(), "tilelang-cuda")


def test_unsigned_64_bit_scalars_travel_as_signed_words_on_cuda():
    # TVM's CUDA launcher packs no uint64 scalar argument (seen on an H200): the bits travel as int64
    assert cuda.scalar_storage(I.u64) == "int64" and cuda.scalar_storage(I.u32) == "int32"
    assert cuda.scalar_storage(I.i64) is None


def test_tilelang_c_keeps_its_serial_program():
    assert "with T.Kernel(1" in generate(chain4.trace(), "tilelang-c")


def test_cuda_flags_forbid_contraction_and_fast_math():
    flags = cuda.PASS_CONFIGS["tl.device_compile_flags"]
    assert "--fmad=false" in flags and cuda.PASS_CONFIGS["tl.enable_fast_math"] is False
    assert not any("fast" in f for f in flags)


def test_while_loops_are_assembled_at_ptxas_o1_and_nothing_else_is():
    # ptxas -O2+ miscompiled this while loop on an H200 (sm_90a): from start = 5 the kernel stored 0
    @intent.kernel
    def countdown(y: I.Out[I.i32, (1,)], start: I.i32):
        y[0] = I.while_(lambda c: c < 0, lambda c: c - 1, start)

    flags = cuda.pass_configs(generate(countdown.trace(), "tilelang-cuda"))["tl.device_compile_flags"]
    assert flags[-2:] == ["-Xptxas", "-O1"] and "--fmad=false" in flags
    assert cuda.pass_configs(generate(chain4.trace(), "tilelang-cuda")) is cuda.PASS_CONFIGS


def test_whole_view_slices_count_as_full_domains():
    @intent.kernel
    def mm(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    @intent.kernel
    def mm32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    @intent.kernel
    def scale_all(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        y[:, :] = x[:, :] * 2.0

    @intent.kernel
    def first_row(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
        y[:] = x[0, :]  # a point entry: not a whole axis

    assert [s.name for s in cuda_kernels.specializations(mm.trace(), targets.CUDA)] == ["matmul", "matmul"]
    assert all("T.gemm" not in s.program for s in cuda_kernels.specializations(mm32.trace(), targets.CUDA))  # never TF32
    assert cuda_kernels.flat_nest(scale_all.trace()).shape == ("d0", "d1")
    assert "T.get_thread_binding()" in generate(scale_all.trace(), "tilelang-cuda")
    assert cuda_kernels.flat_nest(first_row.trace()) is None


def test_a_planned_nest_the_program_does_not_have_keeps_the_serial_program(monkeypatch):
    # the launch would be a grid whose every thread runs the whole nest: the pre-pass keeps the serial launch
    monkeypatch.setitem(targets.TARGETS, "tilelang-cuda",
                        attrs.evolve(targets.CUDA, flat_nest=lambda g: cuda_kernels.FlatNest(("d9",))))
    program = generate(chain4.trace(), "tilelang-cuda")
    assert "T.get_thread_binding()" not in program and "threads=1" in program


def test_matmul_tensor_cores_only_for_half_precision_operands():
    @intent.kernel
    def mm16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)

    specs32 = cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)  # f32 operands on tensor cores: TF32
    # the 128x256 program where its grid fills the GPU, 128x128 below it: each with 16-byte and element accesses
    assert len(specs32) == 4 and not any("T.gemm" in s.program for s in specs32)
    wide, spec = cuda_kernels.specializations(mm16.trace(), targets.CUDA)  # 128 x 256 tiles on big grids only
    assert "T.gemm(A_s, B_s, C_f," in spec.program and "'bfloat16'" in spec.program
    # any M; N and K in whole 16-byte rows (the tile copies mask the tails)
    assert spec.applies({0: 256, 1: 128, 2: 512}) and spec.applies({0: 100, 1: 136, 2: 520})
    assert not spec.applies({0: 256, 1: 130, 2: 512}) and not spec.applies({0: 256, 1: 128, 2: 4})
    assert not spec.applies({0: 0, 1: 128, 2: 512})
    # an f32 tile of 128 x 256 (128 KiB) does not fit in shared memory beside three stages of operands: it leaves
    # from registers; one of 128 x 128 beside four stages does
    assert "C_s" not in wide.program and "T.copy(C_f, C[" in wide.program
    assert "C_s = T.alloc_shared((128, 128), 'float32')" in spec.program


def test_batched_half_matmul_gets_the_tensor_core_program_over_a_grid_of_batch_entries():
    @intent.kernel
    def bmm(a: I.In[I.f16, ("B", "M", "K")], b: I.In[I.f16, ("B", "K", "N")], c: I.Out[I.f16, ("B", "M", "N")]):
        c[:, :, :] = I.cast(I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32),
                            I.f16)

    @intent.kernel
    def bmm32(a: I.In[I.f32, ("B", "M", "K")], b: I.In[I.f32, ("B", "K", "N")], c: I.Out[I.f32, ("B", "M", "N")]):
        c[:, :, :] = I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32)

    @intent.kernel
    def bmm_t(a: I.In[I.f16, ("B", "K", "M")], b: I.In[I.f16, ("B", "K", "N")], c: I.Out[I.f16, ("B", "M", "N")]):
        c[:, :, :] = I.cast(I.contract(a[:, :, :], b[:, :, :], reduce=((1, 1),), batch=((0, 0),), acc_dtype=I.f32),
                            I.f16)  # A transposed: not this program (yet)

    spec, small = cuda_kernels.specializations(bmm.trace(), targets.CUDA)
    assert spec.name == small.name == "batched_matmul" and "as (bx, by, bz)" in spec.program
    assert spec.grid == ((1, 128), (3, 256), (0, 1))  # a block a tile of a batch entry: the entries count as blocks
    assert "T.copy(A[bz, by * 128, ko * 64], A_s)" in spec.program and "C[bz, by * 128, bx * 256]" in spec.program
    extents = {0: 3 * 64, 1: 100, 2: 72, 3: 264}  # B, M, K, N (and 128 blocks of 128 x 256)
    assert spec.applies(extents) and not spec.applies({**extents, 0: 0}) and not spec.applies({**extents, 2: 70})
    assert not spec.applies({0: 2**12, 1: 2**10, 2: 2**10, 3: 8})  # 2**32 elements of A: int32 tile indices
    assert not spec.applies({**extents, 0: 3}) and small.applies({**extents, 0: 3})
    assert cuda_kernels.specializations(bmm32.trace(), targets.CUDA) == []  # no TF32, and the f32 program is not batched
    assert cuda_kernels.specializations(bmm_t.trace(), targets.CUDA) == []


def test_f32_matmul_gets_the_cuda_core_program_and_keeps_its_nan_check():
    from backends.tilelang_support import cuda_source

    wide_vector, wide, vector, spec = cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)
    assert vector.applies({0: 256, 1: 16, 2: 128}) and not vector.applies({0: 256, 1: 16, 2: 129})
    # any extents: the tile loads read past M, N and K (zeros or clamped), only elements inside C are stored
    assert "T.gemm" not in spec.program and spec.applies({0: 256, 1: 16, 2: 128}) and spec.applies(
        {0: 255, 1: 12, 2: 129}) and not spec.applies({0: 256, 1: 0, 2: 128})
    # the 128x256 tiles only where their grid has at least WIDE_BLOCKS blocks (2048^3: 128)
    big = {0: 2048, 1: 2048, 2: 2048}
    assert wide_vector.applies(big) and wide.applies({0: 2047, 1: 2047, 2: 2047})
    assert not wide_vector.applies({0: 256, 1: 16, 2: 128}) and not wide.applies({0: 255, 1: 12, 2: 129})
    for program in (spec.program, wide.program):
        source = cuda_source(program)
        assert "itc_is_nan(acc[" in source and "it_add_f32(s[0], it_mul_f32(" in source  # not simplified away
        assert "fmaf(a[" in source  # one fused multiply-add a product (T10)
        assert "wgmma" not in source and "mma" not in source.replace("#pragma", "")


def test_matmul_specialisation_stages_a_half_precision_tile_in_shared_memory():
    from backends.tilelang_support import cuda_source

    @intent.kernel
    def mm(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
        m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.cast(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32), I.f16)

    spec, small = cuda_kernels.specializations(mm.trace(), targets.CUDA)
    assert "C_s = T.alloc_shared((128, 256), 'float16')" in spec.program
    assert "C_s = T.alloc_shared((128, 128), 'float16')" in small.program
    assert "T.copy(C_f, C_s)" in spec.program and "policy=T.GemmWarpPolicy.FullRow" in spec.program
    source = cuda_source(spec.program)
    assert "tma_store" in source and "wgmma" in source  # the tile leaves in whole rows; warpgroup MMAs


# --- flash attention (examples/flash_attention.py) -------------------------------------------------------------

def _example(name: str):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_cuda_lowering_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FA = _example("flash_attention")


@pytest.mark.parametrize("name", ["attention_f16", "attention_f16_fast"])
def test_attention_f16_matches_numpy_with_p_rounded_to_f16(run, name):
    # Reference: one slice (the global row max), P rounded to f16 before PV, l the sum of the unrounded P. A target
    # may segment the keys anyhow, rounding each p = exp(s - m_slice) to f16 relative to its slice's max: each term of
    # PV then differs from the reference's by at most 2^-11 + 2^-11 relative (both roundings), so the quotient by at
    # most 2^-10 max|v|; rounding the output to f16 adds 2^-11 |out| <= 2^-11 max|v|. The f32 contracts, sums and
    # exp (<= 2 ulp) add ~1e-5 relative. Bound: 2^-9 max|v|.
    import math

    import numpy as np

    rng = np.random.default_rng(7)
    B, L, S, D = 2, 16, 40, 8
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    scale = 1.0 / math.sqrt(D)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
    want /= p.sum(axis=2, keepdims=True)
    out = np.zeros((B, L, D), np.float16)
    run(getattr(FA, name), q, k, v, out, scale)
    assert np.abs(out.astype(np.float64) - want).max() <= 2.0**-9 * np.abs(v).max()


# --- the recognisers' decisions on near misses (graph/patterns.py expresses them) -----------------------------

@intent.kernel
def matmul_two_writes(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")],
                      d: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)
    d[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


@intent.kernel
def matmul_plus_one(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32) + 1.0


@intent.kernel
def matmul_dead_cast(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    t = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)
    I.cast(t, I.f16)  # computed, never written: not the matmul the program is for
    c[m, n] = t


@intent.kernel
def matmul_transposed(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("N", "K")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[0])
    c[m, n] = I.matmul(a[m, k], b[n, k], transpose_rhs=True, acc_dtype=I.f32)


@intent.kernel
def matmul_partial_rows(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(1, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


@intent.kernel
def matmul_in_place(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.InOut[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


def test_a_pointwise_consumer_of_the_matmul_is_its_fused_epilogue():
    spec, small = cuda_kernels.specializations(matmul_plus_one.trace(), targets.CUDA)  # cuda_epilogue: before the store
    assert spec.name == small.name == "matmul_epilogue" and "T.Parallel(128, 256)" in spec.program
    assert "T.Parallel(128, 128)" in small.program


@pytest.mark.parametrize("kernel", [matmul_two_writes, matmul_dead_cast, matmul_transposed,
                                    matmul_partial_rows, matmul_in_place], ids=lambda k: k.name)
def test_matmul_near_misses_get_no_specialisation(kernel):
    assert cuda_kernels.specializations(kernel.trace(), targets.CUDA) == []

