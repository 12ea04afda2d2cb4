"""The segmented fold without the source blocks a coordinate mask empties (cuda_region_skip, schedule/region_skip):
a finiteness pass writes one flag per source block, each block of rows folds only the blocks its mask may keep
plus every flagged one.

The program text: two kernels (the pass over V only, then the fold over ``[lo, hi)``), the flags' workspace, the
schedule's ``skip``; no skip where the proof fails or on Metal. The numbers: every kernel runs on every executable
target through the shared ``target`` fixture (tilelang-c: CUDA's mapping emulated, the skip and the flags included)
against NumPy float64 references with the masks applied by hand, at lengths no tile divides, with L < S, L > S and
L = S; infinities and NaNs planted in V and K inside skipped blocks (the first and last block, their first and last
rows and columns) must give the serial program's NaN pattern (the flagged block is folded again), and a NaN's bits
the oracle's (cpu). Bounds: test_tilelang_cuda_region's (P rounded to f16 per slice: 2^-9 max|v|)."""
import re

import numpy as np
import pytest

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import _attention_case, _check, _specs, compiled  # noqa: F401
from backends.cuda_ptx import assemble
from backends.tilelang_support import cuda_source
from backends.test_tilelang_cuda_region_nan import NEG_NAN, Q_NAN, _nan, _oracle, _same_nans
from intent_trace.backends.tilelang import metal_region, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.storage import Workspace
from schedule import region_skip_kernels as K
from schedule.region_kernels import FA, SHIFT, attention_causal_shifted_f16

#: the mask of each kernel as (query i, key j) -> whether i sees j, written from its summarize by hand
MASKS = {
    FA.attention_f16_causal: lambda i, j: i >= j,
    attention_causal_shifted_f16: lambda i, j: i >= j + SHIFT,
    K.strict_causal_f16: lambda i, j: i > j,
    K.anti_causal_f16: lambda i, j: j >= i,
}


def _reference(q, k, v, scale, keep):
    """softmax(QK^T * scale) V in float64 with the mask, P rounded to f16 (l of the unrounded P); a row that sees no
    key is 0/0 = NaN, as the fold's identity gives; 0 * inf or NaN in V is NaN, as the serial program's products."""
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    seen = keep(np.arange(s.shape[1])[:, None], np.arange(s.shape[2])[None, :])
    s = np.where(seen, s, -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = s.max(axis=2, keepdims=True)
        p = np.where(seen, np.exp(s - np.where(np.isneginf(m), 0.0, m)), 0.0)
        acc = np.einsum("bls,bsd->bld", p.astype(np.float16).astype(np.float64), v.astype(np.float64))
        return acc / p.sum(axis=2, keepdims=True)


# --- the program ---------------------------------------------------------------------------------------------

def test_the_causal_program_skips_the_blocks_past_the_diagonal():
    spec = _specs(FA.attention_f16_causal)["segmented_fold_d128"]
    program = spec.program
    why = spec.workspaces[0].what
    assert spec.workspaces == (Workspace("W0", ("d0", "d3"), "int32", why), Workspace("W1", ("d0", "2"), "int32", why))
    assert "W0: T.Tensor((d0, d3,), 'int32'), W1: T.Tensor((d0, 2,), 'int32')" in program
    launches = re.findall(r"with T\.Kernel\((.*)\) as", program)
    assert launches == ["T.ceildiv(d3, 128), d0, threads=256, prelude=PRELUDE", "d0, threads=256",
                        "d0, T.ceildiv(d1, 128), threads=256"]
    flags, extremes, fold = re.split(r"\n    with T\.Kernel\(", program.split("\n    with T.Kernel(", 1)[1])
    # the fold's grid: the batch fastest, the blocks of rows from the last (the busiest first: longest first)
    assert fold.startswith("d0, T.ceildiv(d1, 128), threads=256) as (bz, rx):\n"
                           "        bx = T.ceildiv(d1, 128) - 1 - rx\n")
    # 1: the flags read V (p2) only -- K's values never reach a masked block's summary -- test every element and
    # store one flag per (block of keys, batch entry)
    assert re.findall(r"T\.copy\((p\d)\[", flags) == ["p2"]
    assert "'itr_nonfinite'" in flags and "W0[fz, fx] = T.Cast('int32'," in flags
    assert "T.reduce_max(" in flags and "T.gemm" not in flags
    # each thread tests its share of the tile into one value, then one reduction over the threads: no reduction per
    # row of the tile (a block barrier each: the pass was four times its loads)
    assert re.findall(r"T\.reduce_max\((lanes\d+), flag\d+, dim=(\d)", flags) == [(re.search(r"(lanes\d+) = ", flags)[1],
                                                                                   "0")]
    assert "T.alloc_fragment((256,), 'float32')" in flags and "for e" in flags and "T.unroll(64)" in flags
    # 2: per batch entry the last flagged block and the first
    assert re.search(r"if W0\[ex, (k\d+)\] != 0:\n\s+(last\d+)\[0\] = \1\n", extremes)
    assert "W1[ex, 0] = last" in extremes and "W1[ex, 1] = first" in extremes
    # 3: a block of rows [128 bx, 128 bx + 128) sees keys below 128 bx + 128: blocks [0, hi), hi past the last
    # flagged block; the bound is an expression (no local holds it through the loop); the loop is the overlapped one
    # (one iteration more: cuda_region_overlap)
    hi = "T.min(T.ceildiv(d3, 128), T.ceildiv(T.max(bx * 128 + 128, 0), 128))"
    assert f"for kb in T.Pipelined(T.max({hi}, W1[bz, 0] + 1) + 1, num_stages=2):" in fold
    assert f"if kb < T.max({hi}, W1[bz, 0] + 1):" in fold and "if kb > 0:" in fold
    assert fold.count("T.wgmma_gemm(") == 2 and "W0" not in fold


def test_a_lower_bound_keeps_the_grid_order():
    # the anti-causal fold's busiest blocks of rows are the first: the usual grid already starts them first
    fold = _specs(K.anti_causal_f16)["segmented_fold_d128"].program.split("\n    with T.Kernel(")[-1]
    assert fold.startswith("T.ceildiv(d1, 128), d0, threads=256) as (bx, bz):")
    hi = "T.min(T.ceildiv(d3, 128), T.ceildiv(T.max(bx * 128 + 128, 0), 128))"
    start = "T.min(T.min(T.max(bx * 128 + 0, 0) // 128, T.ceildiv(d3, 128)), W1[bz, 1])"
    assert f"for kb in T.Pipelined({start}, T.ceildiv(d3, 128) + 1, num_stages=2):" in fold, \
        re.findall(r"for kb in .*", fold)
    assert f"if kb > {start}:" in fold  # no product of the block before the first (overlapped: cuda_region_overlap)
    assert hi not in fold
    skip = tl_target.build(K.anti_causal_f16.trace(), target="tilelang-cuda").schedule.parts[0].param("skip")
    assert skip == "source blocks where the mask is false for every pair of source >= row, where v is finite (a " \
                   "flags pass first)"


def test_the_schedule_says_the_skip_and_its_condition():
    part = tl_target.build(FA.attention_f16_causal.trace(), target="tilelang-cuda").schedule.parts[0]
    skip = ("source blocks where the mask is false for every pair of source <= row, where v is finite (a flags pass "
            "first; the busiest blocks of rows first)")
    assert part.param("skip") == skip and f"skip={skip}" in part.describe()
    shifted = tl_target.build(attention_causal_shifted_f16.trace(), target="tilelang-cuda").schedule.parts[0]
    assert shifted.param("skip") == skip.replace("source <= row", "source <= row - 48")


@pytest.mark.parametrize("kernel", [FA.attention_f16, K.additive_causal_f16, K.unguarded_causal_f16,
                                    K.sentinel_causal_f16], ids=lambda k: k.name)
def test_no_skip_without_the_proof(kernel):
    # the fold computes every block, as before: one kernel, no workspace, the loop from 0 to the last block
    spec = next(iter(_specs(kernel).values()))
    assert spec.workspaces == () and "W0" not in spec.program and "W1" not in spec.program
    assert spec.part.param("skip") is None
    assert "for kb in T.Pipelined(T.ceildiv(d3, " in spec.program
    assert len(re.findall(r"with T\.Kernel\(", spec.program)) == 1


def test_a_skip_that_needs_nothing_finite_has_no_passes():
    spec = _specs(K.causal_score_max_f16)["segmented_fold_d128"]
    assert spec.workspaces == () and "W0" not in spec.program and "W1" not in spec.program
    assert re.findall(r"with T\.Kernel\((.*)\) as", spec.program) == ["d0, T.ceildiv(d1, 128), threads=256, "
                                                                      "prelude=PRELUDE"]
    hi = "T.min(T.ceildiv(d3, 128), T.ceildiv(T.max(bx * 128 + 128, 0), 128))"
    assert f"for kb in T.Pipelined({hi}, num_stages=1):" in spec.program


def test_metal_folds_every_block():
    # TileLang's Metal runtime launches one kernel: no finiteness pass, so no skip
    specs = metal_region.specializations(FA.attention_f16_causal.trace(), targets.METAL)
    assert specs and all(s.workspaces == () and "W0" not in s.program for s in specs)
    assert all(s.part.param("skip") is None for s in specs)


@pytest.mark.parametrize("kernel", [FA.attention_f16_causal, K.anti_causal_f16, attention_causal_shifted_f16],
                         ids=lambda k: k.name)
def test_the_three_kernels_lower_for_sm90a_without_spills(kernel, tmp_path):
    # TileLang lowers the flags, the extremes and the fold (the upper bound's range, and the lower bound's from a
    # start past 0) for sm_90a; the local nvcc assembles them with the fold's registers as without the skip (168, as
    # flash attention's template) and no spills (a local holding the range spilled 156 bytes in the combine)
    source = cuda_source(_specs(kernel)["segmented_fold_d128"].program)
    assert source.count("__global__ void __launch_bounds__") == 3 and "wgmma" in source
    built = assemble(source, tmp_path, ptx=False)
    if built is None:
        return
    assert [stores for stores, _ in built.spills.values()] == [0, 0, 0], built.spills
    assert max(built.registers.values()) <= 168


# --- the numbers ---------------------------------------------------------------------------------------------

# the last two one past and one short of whole blocks: blocks inside the mask, on it, past it, and tails
# (cuda_region_inside)
@pytest.mark.parametrize("B, L, S", [(2, 200, 400), (1, 300, 140), (1, 260, 260), (1, 257, 383), (2, 383, 257)],
                         ids=["L<S", "L>S", "L=S", "L<S-edges", "L>S-edges"])
@pytest.mark.parametrize("kernel", list(MASKS), ids=lambda k: k.name)
def test_masked_folds_match_numpy(compiled, kernel, B, L, S):
    D = 16
    args, bound = _attention_case(B, L, S, D, seed=L * 7 + S)
    out = np.zeros((B, L, D), np.float16)
    compiled(kernel, B=B, L=L, S=S, D=D)(*args[:3], out, args[3])
    _check(out, _reference(*args, keep=MASKS[kernel]), bound)


def test_non_finite_values_in_skipped_blocks(compiled):
    # L = 200 rows in two blocks (rows 0..127, 128..199), S = 400 keys in four (the last 16 long): row block 0 folds
    # key block 0 and skips 1..3, row block 1 folds 0..1 and skips 2..3; no row sees a key past 199
    B, L, S, D = 5, 200, 400, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=99)
    v[0, S - 1, D - 1] = np.inf  # the last block's last row and column: every row block falls back to all four
    v[1, 256, 0] = np.nan  # block 2's first row, first column: both row blocks fold up to block 2
    v[2, 255, 5] = -np.inf  # block 1's last row (seen by no row): skipped by row block 0 only
    v[3, 383, 7] = np.nan  # block 2's last row
    k[3, 390, 3] = np.inf  # K in a skipped block: its scores are masked, no output changes
    k[4, 130, 2] = np.nan  # K in block 1: rows 130.. see it (NaN), rows 0..129 do not; row block 0 skips block 1
    k[4, 399, 0] = np.nan
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16_causal, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale, keep=MASKS[FA.attention_f16_causal])
    # the serial program's NaNs: 0 * (inf or NaN) in every row for a V column (no row sees those keys), the rows
    # that see the NaN key, nothing from the masked infinite key
    assert np.isnan(want[0, :, D - 1]).all() and np.isnan(want[1, :, 0]).all() and np.isnan(want[2, :, 5]).all()
    assert np.isnan(want[3, :, 7]).all() and np.isnan(want[3]).sum() == L
    assert np.isnan(want[4, 130:]).all() and not np.isnan(want[4, :130]).any()
    _check(out, want, bound)


def test_non_finite_values_before_the_diagonal(compiled):
    # the anti-causal mask (query i sees keys i..): row block 1 (rows 128..255) skips key block 0, row block 2 (rows
    # 256..299) skips blocks 0 and 1; a NaN there must pull the first folded block back (the serial program's
    # 0 * NaN makes the column NaN in every row)
    B, L, S, D = 3, 300, 300, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=31)
    v[0, 5, 3] = np.nan  # block 0
    v[1, 130, 7] = np.nan  # block 1
    v[2, 0, 0] = np.nan  # block 0's first row and column
    v[2, 127, D - 1] = np.nan  # block 0's last row, the last column
    out = np.zeros((B, L, D), np.float16)
    compiled(K.anti_causal_f16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale, keep=MASKS[K.anti_causal_f16])
    assert np.isnan(want[0, :, 3]).all() and np.isnan(want[1, :, 7]).all() and np.isnan(want[2, :, 0]).all()
    assert np.isnan(want[2, :, D - 1]).all() and np.isnan(want).sum() == 4 * L
    _check(out, want, bound)


def test_a_masked_max_ignores_what_skipped_blocks_hold(compiled):
    # out[b, i] = max over j <= i of q[b, i] . k[b, j], exact (small integers: every score is exact in f32, and the
    # max reaches the output, so it is IEEE maximum on ordered keys). L = 152 < S = 400 (an f32 output's rows need
    # whole 16-byte units): keys 152.. are masked for every row; infinities and NaNs there change nothing (no flags:
    # the blocks past the diagonal are never read)
    B, L, S, D = 2, 152, 400, 16
    rng = np.random.default_rng(4)
    q, k = (rng.integers(-2, 3, size=s).astype(np.float16) for s in ((B, L, D), (B, S, D)))
    k[0, 300, 3], k[1, S - 1, 0], k[1, 200, 5], k[0, L, D - 1] = np.inf, np.nan, -np.inf, np.nan
    out = np.zeros((B, L), np.float32)
    compiled(K.causal_score_max_f16, B=B, L=L, S=S, D=D)(q, k, out)
    with np.errstate(invalid="ignore"):
        s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64))
    keep = np.arange(L)[:, None] >= np.arange(S)[None, :]
    want = np.where(keep, s, -np.inf).max(axis=2)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(out, want.astype(np.float32))


def test_a_nan_in_a_skipped_block_keeps_its_payload(compiled, target):
    # the fallback folds the flagged block, the row holding the NaN is recomputed by the serial program: the bits
    # are the oracle's (0 * NaN keeps the NaN operand's payload, quieted)
    B, L, S, D = 2, 140, 300, 16
    (q, k, v, scale), _ = _attention_case(B, L, S, D, seed=5)
    v[0, 290, 3], v[1, S - 1, D - 1] = _nan(Q_NAN), _nan(NEG_NAN)
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16_causal, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    (want,) = _oracle(FA.attention_f16_causal, (q, k, v), (out,), scale)
    assert np.isnan(want[0, :, 3]).all() and np.isnan(want[1, :, D - 1]).all()
    _same_nans(out, want)
    assert out[0, 0, 3].view(np.uint16) == Q_NAN and out[1, 0, D - 1].view(np.uint16) == NEG_NAN


def test_without_a_batch_loop(compiled):
    L, S, D = 150, 300, 16
    (q, k, v, scale), bound = _attention_case(1, L, S, D, seed=8)
    v[0, 200, 1] = np.inf  # a skipped block of both row blocks
    out = np.zeros((L, D), np.float16)
    compiled(K.causal_single_f16, L=L, S=S, D=D)(q[0], k[0], v[0], out, scale)
    want = _reference(q, k, v, scale, keep=MASKS[FA.attention_f16_causal])
    assert np.isnan(want[0, :, 1]).all()
    _check(out[None], want, bound)


def test_rows_that_see_no_key_give_the_identity(compiled):
    # the shifted mask's rows below SHIFT see no key and the anti-causal mask's rows past S see none: a block of rows
    # whose range [lo, hi) is empty folds nothing (the identity: 0/0 = NaN), as the serial program's
    for kernel, (L, S) in ((attention_causal_shifted_f16, (200, 40)), (K.anti_causal_f16, (300, 130))):
        (q, k, v, scale), bound = _attention_case(1, L, S, 16, seed=L)
        out = np.zeros((1, L, 16), np.float16)
        compiled(kernel, B=1, L=L, S=S, D=16)(q, k, v, out, scale)
        want = _reference(q, k, v, scale, keep=MASKS[kernel])
        assert np.isnan(want).any() and not np.isnan(want).all()
        _check(out, want, bound)
