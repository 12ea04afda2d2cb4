"""Segmented folds on tilelang-cuda (cuda_region: a region_fold as a tile program per block of rows, derived from its
helpers: ``T.gemm`` for contractions, ``T.reduce_*`` for row reductions, ``T.Parallel`` element code, the source in
``T.Pipelined`` blocks).

Two halves. The program text: the CUDA programs of the flash-attention examples and of other folds have the structure
the mapping promises (no one-thread program; tensor cores; the max reduced cheaply only where region_laws proves it
harmless), and TileLang lowers them for sm_90a (and the local nvcc assembles them). The numbers: every fold runs on
every executable target through the shared ``target`` fixture against NumPy float64 references, at extents no tile
divides (L and S below one block, L and S past several), NaN and infinity inputs, causal masks with fully masked
rows, batches. On tilelang-c the C target runs CUDA's mapping emulated (cuda_region_tiles.Emulated: the same tiles,
blocks, masks, combine order and exact/cheap reductions; products in ascending k); on a GPU machine
``INTENT_TRACE_TEST_TARGETS=tilelang-cuda`` runs the same tests on the real program.

Bounds: attention's is the example's (P rounded to f16 relative to each slice's max: 2^-9 max|v|); sums are within
T5's bound; an exact max must match IEEE 754-2019 maximum bit for bit (NaN wins, -0 < +0).
"""
import math
import re

import attrs
import numpy as np
import pytest

import intent_trace as intent

pytest.importorskip("tilelang")
from backends.cuda_ptx import assemble
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda_kernels, cuda_region, targets
from intent_trace.backends.tilelang import target as tl_target
from schedule.region_kernels import (FA, SHIFT, attention_causal_shifted_f16, attention_lse_f16, attention_single_f16,
                                     batched_attention, combine_unguarded, key_max_f16, outer_max_f32, score_sum_f16,
                                     score_sum_stated_f16)

#: the C target running CUDA's tile mappings (the segmented fold's among them), emulated
EMULATED = attrs.evolve(targets.C, specializations=cuda_kernels.emulated_specializations, host_workspaces=True)
FOLD_TARGETS = ("tilelang-c", "tilelang-cuda")
ATTENTION = (FA.attention_f16, FA.attention_f16_fast, FA.attention_f16_causal)
CAUSAL = (FA.attention_f16_causal, FA.attention_f16_causal_fast)


@pytest.fixture
def compiled(target, monkeypatch):
    """``compiled(kernel, **sizes)``: the kernel for this target (tilelang-c: CUDA's mapping emulated). On a target
    that runs segmented folds, the test fails unless these extents choose one (``fold=False``: unless they do not)."""
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel, fold=True, **sizes):
        exe = intent.compile(kernel, target=target)
        if target in FOLD_TARGETS:
            spec = exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents})
            assert (spec is not None and spec.name.startswith("segmented_fold")) == fold, (spec, exe.schedule)
        return exe

    return compiled


def _specs(kernel, target=targets.CUDA) -> dict:
    return {s.name: s for s in cuda_region.specializations(kernel.trace(), target)}


def _extents(kernel, **sizes) -> dict:
    return {k: sizes[ev.extent.name] for k, ev in enumerate(kernel.trace().extents)}


# --- the program ---------------------------------------------------------------------------------------------

def _fold_kernel(kernel) -> tuple:
    """(the d128 program, its fold's kernel, whether causal, the loop's block count as a pattern)."""
    specs = _specs(kernel)
    assert list(specs) == [f"segmented_fold_d{t.head}" for t in cuda_region.CONFIGS]
    program = specs["segmented_fold_d128"].program
    assert "T.Kernel(1, threads=1" not in program
    causal = kernel is FA.attention_f16_causal  # its finiteness pass comes first (test_tilelang_cuda_region_skip.py)
    launch = ("with T.Kernel(d0, T.ceildiv(d1, 128), threads=256) as (bz, rx):" if causal else
              "with T.Kernel(T.ceildiv(d1, 128), d0, threads=256, prelude=PRELUDE) as (bx, bz):")
    assert launch in program
    blocks = r"T\.max\(.*, W1\[bz, 0\] \+ 1\)" if causal else r"T\.ceildiv\(d3, 128\)"
    return program, program[program.index(launch):], causal, blocks  # the whole text, the fold's kernel


@pytest.mark.parametrize("kernel", ATTENTION, ids=lambda k: k.name)
def test_attention_is_a_tile_program_derived_from_the_fold(kernel):
    text, program, causal, blocks = _fold_kernel(kernel)
    # the overlapped loop (cuda_region_overlap): one iteration more than blocks, K of block kb and V of block kb - 1
    # loaded, QK^T of kb then PV of kb - 1 issued without waits, the first waited for alone
    # (two stages of loads at least: a stage is released after the iteration's last wait); P's fragment zeroed once
    loop = re.search(rf"for kb in T\.Pipelined\(({blocks}) \+ 1, num_stages=2\):", program)
    assert loop and re.search(r"T\.copy\(p1\[bz, kb \* 128, 0\], s\w+\)", program)
    assert re.search(r"T\.copy\(p2\[bz, \(kb - 1\) \* 128, 0\], s\w+\)", program)
    assert "T.gemm(" not in program
    gemms = re.findall(r"T\.wgmma_gemm\((\w+), (\w+), (\w+)(.*)\)", program)
    assert len(gemms) == 2 and all("policy=T.GemmWarpPolicy.FullRow" in g[3] for g in gemms)
    assert "transpose_B=True, clear_accum=True" in gemms[0][3] and gemms[1][3] == ", clear_accum=False, " \
        "policy=T.GemmWarpPolicy.FullRow" and gemms[1][2].startswith("run")  # PV accumulated into the running leaf
    body = program[loop.end():]
    at = 0
    for step in (f"T.wgmma_gemm({gemms[0][0]}", "if kb > 0:", f"T.wgmma_gemm({gemms[1][0]}", "T.wait_wgmma(1)",
                 "else:", "T.wait_wgmma(0)", f"if kb < {loop.group(1)}:", "T.reduce_max(", "T.reduce_sum(",
                 "T.wait_wgmma(0)", "hold", f"{gemms[1][2]}[", f"{gemms[1][0]}[", "else:", "T.wait_wgmma(0)", "hold"):
        at = body.index(step, at) + 1  # in this order
    assert body.count("T.wait_wgmma(0)") == 3
    assert program.count("T.reduce_max(") == 1 and program.count("T.reduce_sum(") == 1
    assert "itk_key" not in program  # region_laws proved the cheap max harmless
    # the scores are scaled, exponentiated and masked in place in the first product's fragment, P times the combine's
    # per-row factor rounded into an f16 fragment (the second product's left operand), V used as loaded (zeros past S)
    qk = gemms[0][2]
    assert re.search(rf"T\.reduce_max\({qk}, ", program) and re.search(rf"T\.reduce_sum\({qk}, ", program)
    assert re.search(rf"{gemms[1][0]}\[\w+, \w+\] = T\.Cast\('float16', T\.call_extern\('float32', 'it_mul_f32', "
                     rf"{qk}\[\w+, \w+\], row\d+\[\w+\]\)\)", program)
    assert re.search(rf"{gemms[1][2]}\[(\w+), (\w+)\] = t\d+", program)  # the rescale, once a block
    assert re.search(rf"{gemms[1][0]}\[\w+, \w+\] = T\.Cast\('float16', T\.float32\(0\)\)\n\s+for kb in", program)
    assert gemms[1][1].startswith("s")  # the shared tile T.copy loaded
    exp = 'asm("ex2.approx.ftz.f32 %0, %1;"' if kernel is FA.attention_f16_fast else "expf(a)"
    assert exp in text and "__expf" not in text and "exp2f" not in text  # approximate and flushing: one MUFU.EX2
    # the last source block, and only it, masks the reductions' sources and P (causal: also the blocks not inside the
    # mask, test_tilelang_cuda_region_inside.py)
    inside = " and kb * 128 + 128 <= bx * 128 + 1" if causal else ""
    assert program.count(f"if (kb + 1) * 128 <= d3{inside}:") == 3 - bool(causal) and program.count("else:") == 5
    assert ("it_ge_index" in program) == (kernel is FA.attention_f16_causal)


def test_the_flash_attention_spelling_folds_the_scale_once():
    program = _specs(FA.attention_f16_fast)["segmented_fold_d64"].program
    factor = re.search(r"(v\d+) = T\.call_extern\('float32', 'it_mul_f32', p4, (K\d+)\)", program)
    assert factor is not None and program.count("'it_mul_f32', p4,") == 1  # scale * log2(e), before any loop
    assert f"'it_mul_f32', acc" in program and f", {factor.group(1)})" in program


def test_a_max_that_reaches_an_output_is_reduced_on_ordered_keys():
    program = _specs(key_max_f16)["segmented_fold_d128"].program
    assert "itk_key_max" in program and "itk_unkey" in program and "T.reduce_max(key" in program
    assert "float32'), dim=1" not in program
    lse = _specs(attention_lse_f16)["segmented_fold_d128"].program
    assert "itk_key_max" in lse and len(re.findall(r"T\.copy\(o\d+, p\d+\[", lse)) == 2  # two outputs, two tiles


def test_the_specialisation_applies_at_any_rows_and_source_length_of_its_head_size():
    specs = _specs(FA.attention_f16_causal)
    d128, d16 = specs["segmented_fold_d128"], specs["segmented_fold_d16"]
    assert d128.applies(_extents(FA.attention_f16, B=2, L=100, S=70, D=128))
    assert d16.applies(_extents(FA.attention_f16, B=1, L=1, S=1, D=16))
    assert not d128.applies(_extents(FA.attention_f16, B=2, L=100, S=70, D=96))
    for sizes in (dict(B=2, L=100, S=0, D=128), dict(B=0, L=100, S=70, D=128), dict(B=2, L=0, S=70, D=128),
                  dict(B=2**16, L=2**16, S=256, D=128)):  # empty axes, and 2**31 elements: the general program
        assert not any(s.applies(_extents(FA.attention_f16, **sizes)) for s in specs.values()), sizes


def test_the_schedule_says_segmented_fold_with_its_tiles_and_when():
    exe = tl_target.build(FA.attention_f16_causal.trace(), target="tilelang-cuda")
    part = exe.schedule.parts[0]
    assert part.mapping == "segmented_fold" and part.when == "L > 0, S > 0, B > 0, D == 128"
    assert (part.param("block_M"), part.param("block_N"), part.param("head"), part.param("threads"),
            part.param("stages")) == (128, 128, 128, 256, 1)
    assert part.param("grid") == "ceildiv(L, block_M) x B" and "T.gemm" in part.param("pipelined")
    assert {"exp", "ge", "select", "cast", "div"} <= set(part.fused)
    assert part.describe().startswith("segmented_fold (grid=ceildiv(L, block_M) x B, source=S, block_M=128")
    key_max = tl_target.build(key_max_f16.trace(), target="tilelang-cuda").schedule.parts[0]
    assert "reaches no summary row" in key_max.param("exact_max")


def test_f32_products_run_on_cuda_cores_with_fma():
    specs = _specs(FA.attention)
    program = specs["segmented_fold_d128"].program
    assert "T.gemm" not in program and program.count("'fmaf'") == 2  # never TF32 (T5); FMA inside a product (T10)
    assert "with T.Kernel(T.ceildiv(d0, 64), threads=256, prelude=PRELUDE) as bx:" in program  # 64-row tiles
    assert "T.Pipelined(T.ceildiv(d2, 64), num_stages=1)" in program
    assert "CUDA cores" in specs["segmented_fold_d128"].part.param("pipelined")


@pytest.mark.parametrize("kernel, spec", [(FA.attention_f16, "segmented_fold_d128"),
                                          (FA.attention_f16_fma, "segmented_fold_d128"),
                                          (FA.attention_f16_causal, "segmented_fold_d64"),
                                          (FA.attention_f16_causal, "segmented_fold_d128"),
                                          (FA.attention_f16_causal_fast, "segmented_fold_d128"),
                                          (key_max_f16, "segmented_fold_d32"), (outer_max_f32, "segmented_fold_d128"),
                                          (FA.attention, "segmented_fold_d128")],
                         ids=["attention", "fma", "causal", "causal-d128", "causal-fast-d128", "exact-max",
                              "no-contraction", "f32-products"])
def test_the_programs_lower_for_sm90a(kernel, spec, tmp_path):
    source = cuda_source(_specs(kernel)[spec].program)
    assert ("wgmma" in source) == (kernel not in (outer_max_f32, FA.attention))  # f16 products on tensor cores
    assert "__expf" not in source
    if kernel in (FA.attention_f16_fma, FA.attention_f16_causal_fast):  # approximate, flushing: the PTX alone
        assert 'asm("ex2.approx.ftz.f32 %0, %1;"' in source and "exp2f(" not in source
    built = assemble(source, tmp_path, ptx=False)
    if built is not None:  # assembled by the local nvcc too (TileLang's headers, Hopper)
        # the running summary and the tiles stay in registers (a substring test of "0 bytes spill stores" also
        # matched "1720 bytes spill stores": the f32 program, its operand tiles in shared memory and a 64 x 64 f32
        # accumulator per product, spills on main too -- 1720 bytes, 1744 with the NaN rows' recomputation)
        spilled = max(stores for stores, _ in built.spills.values())
        assert spilled <= (2048 if kernel is FA.attention else 0), spilled
        assert max(built.registers.values()) <= 168  # as flash attention's template


# --- the numbers ---------------------------------------------------------------------------------------------

def _attention_case(B, L, S, D, seed):
    """Inputs, the float64 reference with P rounded to f16 (l of the unrounded P) and the example's bound."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    return (q, k, v, 1.0 / math.sqrt(D)), 2.0 ** -9 * float(np.abs(v).max() if v.size else 1.0)


def _reference(q, k, v, scale, causal=False, shift=0):
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        keep = np.arange(s.shape[1])[:, None] >= np.arange(s.shape[2])[None, :] + shift
        s = np.where(keep, s, -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = s.max(axis=2, keepdims=True)
        p = np.where(np.isneginf(s), 0.0, np.exp(s - np.where(np.isneginf(m), 0.0, m)))
        acc = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
        return acc / p.sum(axis=2, keepdims=True)


def _check(out, want, bound):
    out = out.astype(np.float64)
    assert np.array_equal(np.isnan(out), np.isnan(want)), (np.isnan(out).sum(), np.isnan(want).sum())
    finite = ~np.isnan(want)
    assert np.abs(out[finite] - want[finite]).max(initial=0.0) <= bound


@pytest.mark.parametrize("B, L, S, D", [(2, 16, 40, 16), (1, 300, 600, 16), (1, 128, 256, 32)],
                         ids=["below-one-block", "tails", "whole-blocks"])
@pytest.mark.parametrize("kernel", ATTENTION + CAUSAL[1:], ids=lambda k: k.name)
def test_attention_matches_numpy(compiled, kernel, B, L, S, D):
    args, bound = _attention_case(B, L, S, D, seed=L + S)
    out = np.zeros((B, L, D), np.float16)
    compiled(kernel, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args, causal=kernel in CAUSAL), bound)


def test_fully_masked_rows_give_the_empty_summary(compiled):
    # rows i < SHIFT see no key: m = -inf, l = 0, acc = 0, so the output is 0/0 = NaN there, as the oracle's
    B, L, S, D = 2, 200, 150, 16
    args, bound = _attention_case(B, L, S, D, seed=3)
    out = np.zeros((B, L, D), np.float16)
    compiled(attention_causal_shifted_f16, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    want = _reference(*args, causal=True, shift=SHIFT)
    assert np.isnan(want[:, :SHIFT]).all() and not np.isnan(want[:, SHIFT:]).any()
    _check(out, want, bound)


def test_f32_attention_matches_the_examples_reference(compiled):
    L, S, D = 70, 150, 16  # 64-row tiles: a tail of rows and of keys
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, D), (S, D), (S, D)))
    out = np.zeros((L, D), np.float32)
    compiled(FA.attention, L=L, S=S, D=D)(q, k, v, out, 0.25)
    assert np.abs(out - FA.reference(q, k, v, 0.25)).max() < 1e-4  # the example's own check


def test_attention_without_a_batch_loop(compiled):
    args, bound = _attention_case(1, 130, 129, 16, seed=5)
    out = np.zeros((130, 16), np.float16)
    compiled(attention_single_f16, L=130, S=129, D=16)(args[0][0], args[1][0], args[2][0], out, args[3])
    _check(out[None], _reference(*args), bound)


def test_nan_and_infinite_inputs(compiled):
    # a NaN query makes its row NaN; an infinite key score (an inf in k) makes the rows that see it NaN (inf - inf);
    # a NaN in v makes every output column it reaches NaN; the other rows stay within the bound
    B, L, S, D = 2, 140, 150, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=11)
    q[0, 3, 5] = np.nan
    k[1, 7, 2] = np.inf
    v[0, 140, 4] = np.nan
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale)
    assert np.isnan(want[0, 3]).all() and np.isnan(want[0, :, 4]).all() and np.isnan(want[1]).any()
    _check(out, want, bound)


def test_an_empty_source_gives_the_identity_through_the_general_program(compiled):
    B, L, S, D = 1, 5, 0, 16
    q = np.ones((B, L, D), np.float16)
    k = v = np.zeros((B, S, D), np.float16)
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16, fold=False, B=B, L=L, S=S, D=D)(q, k, v, out, 0.25)
    assert np.isnan(out).all()  # acc / l = 0 / 0 of the identity (m = -inf, l = 0, acc = 0)


def check_score_sum(compiled, B: int, L: int, S: int, D: int) -> None:
    """A fold summing every score q . k of a row: within T5's bound for its S * D terms of NumPy's float64 sum.
    ``compiled(kernel, **extents)`` gives the executable (tilelang-metal's test calls this too)."""
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((B, L, D)).astype(np.float16), rng.standard_normal((B, S, D)).astype(np.float16)
    out = np.zeros((B, L), np.float32)
    compiled(score_sum_f16, B=B, L=L, S=S, D=D)(q, k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), k.astype(np.float64))
    want, mass = terms.sum(axis=(2, 3)), np.abs(terms).sum(axis=(2, 3))
    n = S * D
    assert (np.abs(out - want) <= n * 2.0 ** -24 / (1 - n * 2.0 ** -24) * mass).all()


def test_a_sum_fold_is_within_t5s_bound(compiled):
    check_score_sum(compiled, B=2, L=148, S=300, D=16)  # rows: a tail no block_M divides; out's rows: 16-byte units


def test_a_fold_behind_its_prologue(compiled):
    # the keys' batch and head extents are stated equal to the queries' (made on the host before any launch): the
    # fold still gets its tile program, and a call whose sides differ raises the statement's error, out unchanged
    B, L, S, D = 2, 132, 200, 16
    rng = np.random.default_rng(12)
    q, k = rng.standard_normal((B, L, D)).astype(np.float16), rng.standard_normal((B, S, D)).astype(np.float16)
    out = np.zeros((B, L), np.float32)
    exe = compiled(score_sum_stated_f16, B=B, L=L, S=S, D=D, C=B, E=D)
    exe(q, k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), k.astype(np.float64))
    n = S * D
    bound = n * 2.0 ** -24 / (1 - n * 2.0 ** -24) * np.abs(terms).sum(axis=(2, 3))
    assert (np.abs(out - terms.sum(axis=(2, 3))) <= bound).all()
    out[:] = 7
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: E \(.*\) is 8, but D \(.*\) is 16"):
        exe(q, k[:, :, :8].copy(), out)
    assert (out == 7).all()


@pytest.mark.parametrize("L", [150, 149])
def test_rows_of_no_whole_16_byte_units_take_the_general_program(compiled, L):
    # out is [B, L] f32: a row stride of 4 * L bytes, which a TMA descriptor refuses unless a multiple of 16 (the
    # H100 run failed with "globalStrides ... must be a multiple of 16 bytes" before the rule existed)
    B, S, D = 2, 70, 16
    spec = _specs(score_sum_f16)["segmented_fold_d16"]
    assert spec.aligned and not spec.applies(_extents(score_sum_f16, B=B, L=L, S=S, D=D))
    assert spec.applies(_extents(score_sum_f16, B=B, L=L + 4 - L % 4, S=S, D=D))
    rng = np.random.default_rng(L)
    q, k = rng.standard_normal((B, L, D)).astype(np.float16), rng.standard_normal((B, S, D)).astype(np.float16)
    out = np.zeros((B, L), np.float32)
    compiled(score_sum_f16, fold=False, B=B, L=L, S=S, D=D)(q, k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), k.astype(np.float64))
    n = S * D
    bound = n * 2.0 ** -24 / (1 - n * 2.0 ** -24) * np.abs(terms).sum(axis=(2, 3))
    assert (np.abs(out - terms.sum(axis=(2, 3))) <= bound).all()


def test_an_input_off_a_16_byte_boundary_is_read_from_an_aligned_copy(compiled, target):
    # a torch slice x[1:] is contiguous but starts 2 bytes into its storage: a TMA descriptor refuses its address
    torch = pytest.importorskip("torch")
    B, L, S, D = 1, 64, 40, 16
    rng = np.random.default_rng(5)
    q = rng.standard_normal((B, L, D)).astype(np.float16)
    flat = rng.standard_normal(B * S * D + 1).astype(np.float16)
    device = "cuda" if target == "tilelang-cuda" else "cpu"
    k = torch.from_numpy(flat).to(device)[1:].reshape(B, S, D)
    assert k.is_contiguous() and k.data_ptr() % 16 != 0
    out = torch.zeros((B, L), dtype=torch.float32, device=device)
    compiled(score_sum_f16, B=B, L=L, S=S, D=D)(torch.from_numpy(q).to(device), k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), flat[1:].reshape(B, S, D).astype(np.float64))
    n = S * D
    bound = n * 2.0 ** -24 / (1 - n * 2.0 ** -24) * np.abs(terms).sum(axis=(2, 3))
    assert (np.abs(out.cpu().numpy() - terms.sum(axis=(2, 3))) <= bound).all()


def _ieee_max(x: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum along the last axis, by hand: any NaN wins, -0 < +0, an empty row gives -inf."""
    out = np.full(x.shape[:-1], -np.inf, np.float32)
    for idx in np.ndindex(*x.shape[:-1]):
        best = np.float32(-np.inf)
        for value in x[idx]:
            if np.isnan(value):
                best = value
                break
            if value > best or (value == best == 0 and math.copysign(1, best) < 0):
                best = value
        out[idx] = best
    return out


def check_exact_max(compiled, L: int, S: int, zero_at: int, nan_at: int) -> None:
    """out[i] = max_j a[i] * b[j]: products that are NaN, infinities and zeros of both signs; the max is the output
    (region_laws refuses the cheap reduction), so every bit must be IEEE maximum's. ``b[zero_at]`` is +0 (rows whose
    max is a zero of either sign: +0 times a row's +a is +0, -0 for a negative a), ``a[nan_at]`` a NaN; pick them in
    a tail block. ``compiled(kernel, **extents)`` gives the executable (tilelang-metal's test calls this too)."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal(L).astype(np.float32)
    b = -np.abs(rng.standard_normal(S)).astype(np.float32)
    a[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.0]
    b[zero_at] = 0.0
    a[nan_at] = np.nan
    out = np.zeros(L, np.float32)
    compiled(outer_max_f32, L=L, S=S)(a, b, out)
    with np.errstate(invalid="ignore"):  # 0 * inf
        want = _ieee_max((a[:, None] * b[None, :]).astype(np.float32))
    assert np.array_equal(np.isnan(out), np.isnan(want))
    same = ~np.isnan(want)
    assert (out[same].view(np.uint32) == want[same].view(np.uint32)).all()  # zero signs included
    assert math.copysign(1, out[0]) > 0 and math.copysign(1, out[6]) > 0 and np.isnan(out[2])


def test_an_exact_max_keeps_nans_and_zero_signs(compiled):
    check_exact_max(compiled, L=200, S=300, zero_at=131, nan_at=150)


def test_the_exact_max_of_a_fold_with_contractions(compiled):
    B, L, S, D = 2, 132, 260, 16
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((B, L, D)).astype(np.float16), rng.standard_normal((B, S, D)).astype(np.float16)
    k[1, 200, 3] = np.nan  # every row of batch 1 sees it: their maxima are NaN
    out = np.zeros((B, L), np.float32)
    compiled(key_max_f16, B=B, L=L, S=S, D=D)(q, k, out)
    terms = np.einsum("bld,bsd->blsd", q.astype(np.float64), k.astype(np.float64))
    scores, mass = terms.sum(axis=3), np.abs(terms).sum(axis=3)
    assert np.isnan(out[1]).all()
    # each score is within T5's bound of its exact value, so the max is within the bound of the largest
    bound = D * 2.0 ** -24 / (1 - D * 2.0 ** -24) * mass[0].max(axis=1)
    assert (np.abs(out[0] - scores[0].max(axis=1)) <= bound).all()


def test_a_second_output_of_the_summary(compiled):
    B, L, S, D = 1, 140, 270, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=8)
    out, lse = np.zeros((B, L, D), np.float16), np.zeros((B, L), np.float32)
    compiled(attention_lse_f16, B=B, L=L, S=S, D=D)(q, k, v, out, lse, scale)
    _check(out, _reference(q, k, v, scale), bound)
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    want = np.log(np.exp(s - s.max(axis=2, keepdims=True)).sum(axis=2)) + s.max(axis=2)
    assert np.abs(lse - want).max() <= 1e-5 * (1 + np.abs(want).max())


SPELLINGS = {"combine-unguarded-and-reordered": batched_attention(FA.summarize_f16, combine_unguarded),
             "approximate-division": batched_attention(FA.summarize_f16, FA.combine, approximate_division=True)}


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_other_spellings_of_the_fold_get_the_program_the_helpers_say(compiled, name):
    # no expression template: a combine written another way round without the empty guard, or an approximate final
    # division (T4: within its bound; exact here), are programs of their own, with the same numbers
    kernel = SPELLINGS[name]
    assert [s.name for s in cuda_region.specializations(kernel.trace(), targets.CUDA)][:1] == ["segmented_fold_d128"]
    B, L, S, D = 2, 140, 200, 16
    args, bound = _attention_case(B, L, S, D, seed=21)
    out = np.zeros((B, L, D), np.float16)
    compiled(kernel, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args), bound)
