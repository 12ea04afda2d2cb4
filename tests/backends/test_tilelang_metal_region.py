"""The segmented fold on tilelang-metal (metal_region.py: cuda_region's tile program in Metal's spelling), run on the
Metal emulator against NumPy float64 references and hand-derived NaN bits.

- The program: the flash-attention examples (accurate, exp2-approximate, causal; f16 and f32) get a segmented fold on
  Metal, named first by the schedule with its tiles; its Metal source is parallel (threadgroups over rows and the
  batch, 128 threads each), multiplies on simdgroup matrices, reduces rows with simd_shuffle_xor butterflies, and calls
  the Metal target's own exp and exp2 (metal::precise::), no software routine; the tiles fit 32 KiB (counted from the
  source's threadgroup declarations). f32 at head size 128, which no four-simdgroup shape fits, is 8 x 16 tiles in two
  simdgroups (each product split between them), and that shape displaces no program a four-simdgroup shape fits.
- The numbers: every fold kernel (f16, bf16 and f32 operands; f32 at head sizes 16 and 128) at extents no tile divides
  (L, S = 1, 7, 20, 45, 65, 130; S below one block), batch > 1, causal with fully masked rows, NaN and infinite
  inputs (NaN outputs with x86's payloads, as the cpu oracle and the hand-derived bits say), an exact max (IEEE
  maximum: NaN wins, -0 < +0), a sum within T5's bound, a second output.
  Attention's bound is the example's (P rounded to f16 relative to each slice's max: 2^-9 max|v|).
- What the emulator catches: the barrier after a row reduction's result removed is a data race naming both threads.
"""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.schedule import region as schedule_region

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import (_attention_case, _check, _reference, check_exact_max,  # noqa: E402
                                                check_score_sum)
from backends.test_tilelang_cuda_region_nan import DEFAULT_F16, _oracle, _same_nans, check_planted_nans  # noqa: E402
from backends.test_tilelang_metal_grid import SOFTWARE, _check_parallel_program  # noqa: E402
from intent_trace.backends.tilelang import metal, metal_region, targets  # noqa: E402
from intent_trace.backends.tilelang.cuda_region import TooLarge, specialization  # noqa: E402
from intent_trace.backends.tilelang.cuda_region_tiles import Tiling  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.executable import ProgramKernel, launch_sizes  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel, EmulationError  # noqa: E402
from schedule.region_kernels import (FA, SHIFT, attention_causal_shifted_f16, attention_lse_f16,  # noqa: E402
                                     attention_single_f16, key_max_f16, score_sum_f16)

ATTENTION = (FA.attention_f16, FA.attention_f16_fast, FA.attention_f16_causal)


@intent.fn
def _summarize_bf16(k, v, q, scale):
    """``summarize_f16`` with bf16 operands: P rounded to bf16 before the PV product."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32) * scale
    m = I.reduce.max(s, axis=1)
    p = I.exp(s - FA.rows(m, s))
    return m, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.bf16), v, acc_dtype=I.f32)


@intent.kernel
def attention_bf16(q: I.In[I.bf16, ("B", "L", "D")], k: I.In[I.bf16, ("B", "S", "D")],
                   v: I.In[I.bf16, ("B", "S", "D")], out: I.Out[I.bf16, ("B", "L", "D")], scale: I.f32):
    for b in I.parallel(I.domain(0, q.shape[0])):
        queries = q[b, :, :]
        L, D = queries.shape
        identity = (I.full((L,), -math.inf, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
        m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :]), axis=0, summarize=_summarize_bf16,
                                  combine=FA.combine, identity=identity, operands=(queries, scale))
        out[b, :, :] = I.cast(acc / FA.rows(l, acc), I.bf16)


def _emulated(kernel, **sizes):
    """The kernel on the emulator, asserted to run the segmented fold at these extents."""
    exe = intent.compile(kernel, target="tilelang-metal", emulate=True)
    spec = exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents})
    assert spec is not None and spec.name.startswith("segmented_fold"), exe.schedule
    return exe


def _specs(kernel) -> dict:
    return {s.name: s for s in metal_region.specializations(kernel.trace(), targets.METAL)}


_SIZEOF = {"uchar": 1, "char": 1, "half": 2, "bfloat": 2, "short": 2, "ushort": 2, "float": 4, "int": 4, "uint": 4}


def _threadgroup_bytes(body: str) -> int:
    """The threadgroup memory a kernel's Metal source declares: every ``threadgroup T name[N]`` array, whatever
    TileLang's layout put in it (its tiles are pointers into one such buffer)."""
    arrays = re.findall(r"\bthreadgroup\s+(\w+)\s+\w+\[(\d+)\]", body)
    assert arrays, "no threadgroup array"
    return sum(_SIZEOF[t] * int(n) for t, n in arrays)


# --- the program ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", (*ATTENTION, FA.attention), ids=lambda k: k.name)
def test_attention_is_a_parallel_tile_program_on_simdgroup_matrices(kernel):
    specs = _specs(kernel)
    assert list(specs) == [f"segmented_fold_d{h}" for h in (128, 64, 32, 16)]
    for name, spec in specs.items():
        program = spec.program
        # f32 at head 128: two simdgroups of 8 x 16 tiles (four-simdgroup tiles exceed 32 KiB), else four
        width = 64 if (kernel is FA.attention and name == "segmented_fold_d128") else 128
        assert "T.Kernel(T.ceildiv(d1, " in program if kernel is not FA.attention else "T.Kernel(T.ceildiv(d0, "
        assert program.count("T.gemm(") == 2 and "T.reduce_" not in program and "T.Pipelined" not in program
        _check_parallel_program(f"{kernel.name}.{name}", program, len(kernel.trace().extents))
        msl = metal.kernel_source(program)
        body = msl.split("[[kernel", 1)[1]
        operand = "simdgroup_float8x8" if kernel is FA.attention else "simdgroup_half8x8"
        for call in (f"{operand} A_local[", f"{operand} B_local[", "simdgroup_multiply_accumulate(",
                     "simdgroup_store(", "threadgroup_barrier(mem_flags::mem_threadgroup)"):
            assert call in body, (name, call)
        assert re.search(r"itm_shuffle_xor_float32\(", body)  # the row max and sum: simdgroup butterflies
        assert _threadgroup_bytes(body) <= 32 * 1024 and spec.part.param("threads") == width
        called = set(re.findall(r"\b(it\w*)\(", body))
        assert not called & set(SOFTWARE), called & set(SOFTWARE)
        if kernel is FA.attention_f16_fast:  # exp2 (approximate=True, flush_to_zero=True: fast::, metal.py)
            assert "metal::fast::exp2(" in msl and "precise::exp(" not in msl and "precise::exp2(" not in msl
        else:
            assert "metal::precise::exp(" in msl
        extents = {f"d{k}": 130 for k in range(len(kernel.trace().extents))}
        ((blocks, threads),) = launch_sizes(program, extents)
        block_m = spec.part.param("block_M")
        assert threads == width and blocks[0] == math.ceil(130 / block_m)
        assert len(blocks) == (1 if kernel is FA.attention else 2)  # the batch is the grid's second axis


def test_the_schedule_says_segmented_fold_with_its_tiles_on_metal():
    exe = intent.compile(FA.attention_f16_causal, target="tilelang-metal")
    part = exe.schedule.parts[0]
    assert part.mapping == "segmented_fold" and part.when == "L > 0, S > 0, B > 0, D == 128"
    assert (part.param("block_M"), part.param("block_N"), part.param("head"), part.param("threads")) == \
        (16, 16, 128, 128)  # 32 x 32 tiles of a 128 head exceed 32 KiB
    assert "simdgroup matrices" in part.param("pipelined")
    assert [p.param("block_M") for p in exe.schedule.parts[1:4]] == [32, 32, 32]
    assert {"exp", "ge", "select", "cast", "div"} <= set(part.fused)


def test_f32_attention_at_head_128_splits_its_products_between_two_simdgroups():
    # no four-simdgroup shape fits 32 KiB with f32 tiles of 128 (T.gemm needs an 8 x 8 output block per simdgroup:
    # 16 x 16 at least, whose q, K, V and product tiles are 8 KiB each), so 8 rows x 16 keys in two simdgroups
    graph = FA.attention.trace()
    plan = schedule_region.recognise(graph)
    for block_m, block_n, threads in metal_region.SHAPES[:-1]:
        with pytest.raises(TooLarge):
            specialization(graph, targets.METAL, plan, Tiling(128, block_m, block_n, threads=threads),
                           metal_region.MetalSpelling)
    part = intent.compile(FA.attention, target="tilelang-metal").schedule.parts[0]
    assert part.mapping == "segmented_fold" and part.when == "L > 0, S > 0, D == 128"
    assert (part.param("block_M"), part.param("block_N"), part.param("head"), part.param("threads")) == \
        (8, 16, 128, 64)
    program = _specs(FA.attention)["segmented_fold_d128"].program
    assert "threads=64" in program and program.count("T.gemm(") == 2
    body = metal.kernel_source(program).split("[[kernel", 1)[1]
    assert "max_total_threads_per_threadgroup(64)" in body
    assert body.count("simdgroup_float8x8 C_simd") == 2  # each product's accumulators: simdgroup matrices
    assert _threadgroup_bytes(body) <= 32 * 1024
    # each product's output split between the simdgroups (1 x 2): every simdgroup stores its own 8 x 8 blocks
    stores = re.findall(r"simdgroup_store\(C_simd(?:_\d+)?\[\w+\], \(&\((\w+)\[([^;]*)\)\)", body)
    assert len({tile for tile, _ in stores}) == 2 and all("__simd_group_id" in at for _, at in stores), stores


@pytest.mark.parametrize("kernel", (*ATTENTION, attention_bf16, attention_lse_f16, key_max_f16, FA.attention),
                         ids=lambda k: k.name)
def test_the_two_simdgroup_shape_takes_only_what_four_simdgroups_cannot(kernel):
    # every program a four-simdgroup shape fits is the text it was before the 8 x 16 shape (f16 at every head)
    graph = kernel.trace()
    plan = schedule_region.recognise(graph)
    for name, spec in _specs(kernel).items():
        head = spec.part.param("head")
        before = None
        for block_m, block_n, threads in metal_region.SHAPES:
            if threads != metal_region.THREADS:
                continue
            try:
                before = specialization(graph, targets.METAL, plan, Tiling(head, block_m, block_n, threads=threads),
                                        metal_region.MetalSpelling).program
                break
            except TooLarge:
                continue
        if kernel is FA.attention and head == 128:
            assert before is None and spec.part.param("threads") == 64
        else:
            assert spec.program == before, name


def test_the_exact_max_reduces_ordered_keys_with_integer_shuffles():
    program = _specs(key_max_f16)["segmented_fold_d16"].program
    assert "itk_key_max" in program and "itk_unkey" in program and "itm_shuffle_xor_int32" in program
    assert "itr_fmax" not in program  # a NaN must win: never Metal's fmax, which drops it
    msl = metal.kernel_source(program)
    assert "simd_shuffle_xor" in msl and "[[kernel" in msl


def test_extents_metal_takes_that_cuda_s_tma_copies_refuse():
    # no TMA on Metal: an f32 output [B, L] of any L takes the tile program (CUDA needs L % 4 == 0)
    (spec,) = [s for s in _specs(score_sum_f16).values() if s.name == "segmented_fold_d16"]
    assert spec.aligned == () and spec.applies({0: 2, 1: 7, 2: 16, 3: 5})


# --- the numbers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("B, L, S, D", [(2, 7, 65, 16), (1, 130, 1, 16), (1, 1, 130, 32), (2, 65, 7, 32)],
                         ids=["tail-rows-and-keys", "one-key", "one-query", "keys-below-a-block"])
@pytest.mark.parametrize("kernel", ATTENTION, ids=lambda k: k.name)
def test_attention_matches_numpy(kernel, B, L, S, D):
    args, bound = _attention_case(B, L, S, D, seed=L + S)
    out = np.zeros((B, L, D), np.float16)
    _emulated(kernel, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args, causal=kernel is FA.attention_f16_causal), bound)
    want = FA.reference_f16(*args, causal=kernel is FA.attention_f16_causal)  # the example's own reference
    assert np.abs(out.astype(np.float64) - want).max() <= bound


def test_bf16_attention_on_bfloat_simdgroup_matrices():
    # P rounded to bf16 relative to each slice's max, the output rounded to bf16: within about 2^-7 max|v|
    B, L, S, D = 2, 33, 40, 16
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    scale = 0.25
    assert "simdgroup_bfloat8x8" in metal.kernel_source(_specs(attention_bf16)["segmented_fold_d16"].program)
    out = np.zeros((B, L, D), ml_dtypes.bfloat16)
    _emulated(attention_bf16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = np.einsum("bls,bsd->bld", p, v.astype(np.float64)) / p.sum(axis=2, keepdims=True)
    # (2^-8 for P, 2^-8 (1 + 2^-8) for the output's rounding, f32 sums far below the 1% margin)
    assert np.abs(out.astype(np.float64) - want).max() <= 1.01 * 2.0 ** -7 * np.abs(v.astype(np.float64)).max()


def test_f32_attention_matches_the_examples_reference():
    L, S, D = 65, 130, 16  # a tail of rows (32-row tiles) and of keys
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, D), (S, D), (S, D)))
    out = np.zeros((L, D), np.float32)
    _emulated(FA.attention, L=L, S=S, D=D)(q, k, v, out, 0.25)
    assert np.abs(out - FA.reference(q, k, v, 0.25)).max() < 1e-4  # the example's own check


def test_f32_attention_at_head_128_matches_the_examples_reference():
    L, S, D = 20, 45, 128  # tails of rows (8-row tiles) and of keys (16-key blocks)
    rng = np.random.default_rng(21)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, D), (S, D), (S, D)))
    exe = _emulated(FA.attention, L=L, S=S, D=D)
    out = np.zeros((L, D), np.float32)
    exe(q, k, v, out, 0.0625)
    assert np.abs(out - FA.reference(q, k, v, 0.0625)).max() < 1e-4  # the example's own check
    # NaNs: a signalling one in a query (its row quieted), one in the tail block of values (its column)
    q[11, 100] = np.array([0x7F800001], np.uint32).view(np.float32)[0]
    v[42, 77] = np.array([0xFFC00123], np.uint32).view(np.float32)[0]
    out = np.zeros((L, D), np.float32)
    exe(q, k, v, out, 0.0625)
    bits = out.view(np.uint32)
    assert (bits[11] == 0x7FC00001).all()
    others = np.arange(L) != 11
    assert (bits[others, 77] == 0xFFC00123).all()
    (oracle,) = _oracle(FA.attention, (q, k, v), [out], 0.0625)
    _same_nans(out, oracle)
    with np.errstate(invalid="ignore"):  # NumPy's cast of the signalling NaN
        want = FA.reference(q, k, v, 0.0625)
    assert np.abs(np.delete(out[others], 77, axis=1) - np.delete(want[others], 77, axis=1)).max() < 1e-4


def test_attention_without_a_batch_loop():
    args, bound = _attention_case(1, 40, 33, 16, seed=5)
    out = np.zeros((40, 16), np.float16)
    _emulated(attention_single_f16, L=40, S=33, D=16)(args[0][0], args[1][0], args[2][0], out, args[3])
    _check(out[None], _reference(*args), bound)


def test_fully_masked_rows_give_x86_s_default_nan():
    # rows i < SHIFT see no key: m = -inf, l = 0, acc = 0, so the output is 0/0 there: x86's default NaN, as the
    # oracle's; batch 1 has an infinite key element (inf - inf in the rows whose score it makes +inf, inf * 0 where
    # the query is 0 there)
    B, L, S, D = 2, 70, 40, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=3)
    k[1, 7, 2] = np.inf
    q[1, 60, 2] = 0
    out = np.zeros((B, L, D), np.float16)
    _emulated(attention_causal_shifted_f16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale, causal=True, shift=SHIFT)
    nan = np.isnan(out)
    assert nan[:, :SHIFT].all() and nan[1, 60].all() and not nan[0, SHIFT:].any()
    assert (out.view(np.uint16)[nan] == DEFAULT_F16).all()
    _check(out, want, bound)
    (oracle,) = _oracle(attention_causal_shifted_f16, (q, k, v), [out], scale)
    _same_nans(out, oracle)


@pytest.mark.parametrize("kernel", ATTENTION, ids=lambda k: k.name)
def test_planted_nans_give_the_oracle_s_payloads(kernel):
    check_planted_nans(_emulated, kernel, block=32, tail=8)  # Metal's key blocks are 32


def test_f32_attention_nans_keep_their_payloads():
    L, S, D = 40, 70, 16
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, D), (S, D), (S, D)))
    q[3, 5] = np.array([0x7F800001], np.uint32).view(np.float32)[0]  # signalling: quieted
    v[66, 2] = np.array([0xFFC00123], np.uint32).view(np.float32)[0]  # in the tail block of keys
    out = np.zeros((L, D), np.float32)
    _emulated(FA.attention, L=L, S=S, D=D)(q, k, v, out, 0.25)
    bits = out.view(np.uint32)
    assert (bits[3] == 0x7FC00001).all()
    others = np.arange(L) != 3
    assert (bits[others, 2] == 0xFFC00123).all()
    assert not np.isnan(np.delete(out[others], 2, axis=1)).any()
    (oracle,) = _oracle(FA.attention, (q, k, v), [out], 0.25)
    _same_nans(out, oracle)


def test_an_exact_max_keeps_nans_and_zero_signs():
    check_exact_max(_emulated, L=40, S=70, zero_at=66, nan_at=35)  # 66: in the tail block of keys


def test_the_exact_max_of_a_fold_with_contractions():
    B, L, S, D = 2, 33, 45, 16
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((B, L, D)).astype(np.float16), rng.standard_normal((B, S, D)).astype(np.float16)
    k[1, 40, 3] = np.nan  # every row of batch 1 sees it: their maxima are NaN, x86's payload
    out = np.zeros((B, L), np.float32)
    _emulated(key_max_f16, B=B, L=L, S=S, D=D)(q, k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), k.astype(np.float64))
    scores, mass = terms.sum(axis=3), np.abs(terms).sum(axis=3)
    assert np.isnan(out[1]).all()
    bound = D * 2.0 ** -24 / (1 - D * 2.0 ** -24) * mass[0].max(axis=1)
    assert (np.abs(out[0] - scores[0].max(axis=1)) <= bound).all()
    (oracle,) = _oracle(key_max_f16, (q, k), [out])
    _same_nans(out, oracle)


def test_a_sum_fold_is_within_t5s_bound_at_any_row_count():
    # L = 7: no whole 16-byte rows of the f32 output (CUDA's TMA would refuse), a tail of keys
    check_score_sum(_emulated, B=2, L=7, S=75, D=16)


def test_a_second_output_of_the_summary():
    B, L, S, D = 1, 40, 70, 32
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=8)
    out, lse = np.zeros((B, L, D), np.float16), np.zeros((B, L), np.float32)
    _emulated(attention_lse_f16, B=B, L=L, S=S, D=D)(q, k, v, out, lse, scale)
    _check(out, _reference(q, k, v, scale), bound)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    want = np.log(np.exp(s - s.max(axis=2, keepdims=True)).sum(axis=2)) + s.max(axis=2)
    assert np.abs(lse - want).max() <= 1e-5 * (1 + np.abs(want).max())


# --- what the emulator catches -------------------------------------------------------------------------------

def test_the_barrier_after_a_row_reduction_removed_is_a_race():
    """metal_region's reduction writes each row's result from the row's first lane and then waits at a barrier;
    without it another thread reads the row's max before it is written, or overwrites the scores it still reads."""
    B, L, S, D = 1, 40, 40, 16
    exe = _emulated(FA.attention_f16, B=B, L=L, S=S, D=D)
    spec = exe.specialization_for({ev.extent: n for ev, n in zip(exe.graph.extents, (B, L, D, S))})
    kernel = ProgramKernel(spec.program)
    lines = kernel.source.split("\n")
    first = next(i for i, line in enumerate(lines) if "itm_shuffle_xor_float32(" in line)
    write = next(i for i in range(first, len(lines)) if re.search(r"\bred\d+\[", lines[i]))
    barrier = next(i for i in range(write, len(lines)) if "threadgroup_barrier(" in lines[i])
    assert barrier <= write + 3
    lines[barrier] = ""
    kernel.kernels[0] = EmulatedKernel("\n".join(lines))
    (q, k, v, scale), _ = _attention_case(B, L, S, D, seed=1)
    with pytest.raises(EmulationError) as e:
        kernel(q, k, v, np.zeros((B, L, D), np.float16), scale)
    race = re.search(r"data race on threadgroup array (\w+)\[\d+\]: (read|write) by thread \((\d+),0,0\) of "
                     r"threadgroup \((\d+),(\d+),0\) at line (\d+) and (read|write) by thread \((\d+),0,0\) of "
                     r"threadgroup \((\d+),(\d+),0\) at line (\d+)", str(e.value))
    assert race is not None, str(e.value)
    assert race[3] != race[8] and (race[4], race[5]) == (race[9], race[10])
    sides = sorted((int(race[6]) - 1, int(race[11]) - 1))
    assert sides[0] < barrier < sides[1]  # the reduction (its reads or its result) and what follows the barrier
    assert "racc" in lines[sides[0]] or re.search(r"\bred\d+\[", lines[sides[0]])
