"""Blocks inside a coordinate mask (cuda_region_inside): a whole block of the source where the row/source comparison is
true for every pair is written with the comparison taken as true (no per-element test); the others as before.

The program text: each tile a comparison feeds is written in two branches, the first under the block condition and
without the comparison's helper, the second with it; the condition, evaluated in Python over blocks of rows and of the
source, holds exactly where the mask (written by hand per kernel, as in test_tilelang_cuda_region_skip) is true for
every pair. The numbers: every target through the shared fixture (tilelang-c runs CUDA's mapping, both branches)
against NumPy float64 with the mask applied by hand; NaNs and infinities planted in Q, K and V in blocks inside the
mask, on the diagonal and in skipped blocks, at tails no tile divides; a NaN payload seen through a block inside the
mask keeps the oracle's (cpu) bits. Every mask at lengths one past and one short of whole blocks:
test_tilelang_cuda_region_skip.test_masked_folds_match_numpy."""
import re

import numpy as np
import pytest

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import _attention_case, _check, _specs, compiled  # noqa: F401
from backends.test_tilelang_cuda_region_nan import NEG_NAN, Q_NAN, _nan, _oracle, _same_nans
from backends.test_tilelang_cuda_region_skip import MASKS, _reference
from intent_trace.backends.tilelang import metal_region, targets
from schedule import region_skip_kernels as K
from schedule.region_kernels import FA, attention_causal_shifted_f16

#: each kernel's condition that block (bx, kb) of 128 x 128 lies inside its mask, from its comparison by hand
INSIDE = {
    FA.attention_f16_causal: "kb * 128 + 128 <= bx * 128 + 1",  # j <= i for j <= 128 kb + 127, i >= 128 bx
    attention_causal_shifted_f16: "kb * 128 + 128 <= bx * 128 + -47",  # j <= i - 48
    K.strict_causal_f16: "kb * 128 + 128 <= bx * 128 + 0",  # j < i
    K.anti_causal_f16: "kb * 128 >= bx * 128 + 127",  # j >= i for j >= 128 kb, i <= 128 bx + 127
}
_COMPARISON = re.compile(r"'it_(ge|gt|le|lt)_index'")


def _branches(fold: str, condition: str) -> list:
    """(the branch under ``condition``, its else branch) for each tile written in two branches."""
    out = []
    lines = fold.splitlines()
    for n, line in enumerate(lines):
        if line.strip().startswith("if ") and line.rstrip().endswith(f" and {condition}:"):
            indent = len(line) - len(line.lstrip())
            end = next(m for m in range(n + 1, len(lines)) if len(lines[m]) - len(lines[m].lstrip()) <= indent)
            assert lines[end].strip() == "else:", lines[end]
            stop = next(m for m in range(end + 1, len(lines)) if len(lines[m]) - len(lines[m].lstrip()) <= indent)
            out.append(("\n".join(lines[n + 1:end]), "\n".join(lines[end + 1:stop])))
    return out


@pytest.mark.parametrize("kernel", list(INSIDE), ids=lambda k: k.name)
def test_blocks_inside_the_mask_drop_the_comparison(kernel):
    fold = _specs(kernel)["segmented_fold_d128"].program.split("\n    with T.Kernel(")[-1]
    branches = _branches(fold, INSIDE[kernel])
    # the scores' select and P's select (each before a reduction over the block): P's f16 tile reads P's tile
    assert len(branches) == 2, fold
    for inside, rest in branches:
        assert not _COMPARISON.search(inside) and "T.bool(True)" in inside and "T.if_then_else" not in inside
        assert _COMPARISON.search(rest) and "T.if_then_else(kb * 128 + " in rest  # the tail masked there
    assert len(_COMPARISON.findall(fold)) == 2


@pytest.mark.parametrize("kernel", list(INSIDE), ids=lambda k: k.name)
def test_the_condition_is_exactly_the_blocks_the_mask_keeps_whole(kernel):
    # the program's condition, evaluated in Python, against the hand-written mask over every pair of the block
    program = _specs(kernel)["segmented_fold_d128"].program
    (condition,) = set(re.findall(r"if \(kb \+ 1\) \* 128 <= d3 and (.*):", program))
    keep = MASKS[kernel]
    rows, keys = np.arange(128)[:, None], np.arange(128)[None, :]
    for bx in range(5):
        for kb in range(5):
            whole = bool(keep(bx * 128 + rows, kb * 128 + keys).all())
            assert eval(condition, {"bx": bx, "kb": kb}) == whole, (bx, kb)  # noqa: S307  (the program's text)


def test_a_fold_without_a_coordinate_mask_has_one_branch_per_tile():
    program = _specs(FA.attention_f16)["segmented_fold_d128"].program
    assert "T.bool(True)" not in program and " and kb * 128" not in program


def test_metal_takes_the_blocks_inside_too():
    # no skip on Metal (one kernel), but the comparison is still known inside the mask
    specs = metal_region.specializations(FA.attention_f16_causal.trace(), targets.METAL)
    assert specs and all("T.bool(True)" in s.program and s.part.param("skip") is None for s in specs)


def test_non_finite_values_inside_on_and_past_the_diagonal(compiled):
    # L = S = 300: row blocks 0..127, 128..255, 256..299; key block 0 is inside the mask for row blocks 1 and 2, on
    # the diagonal for row block 0; key block 2 (the tail, 44 keys) is on the diagonal for row block 2 only
    B, L, S, D = 5, 300, 300, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=17)
    q[0, 200, 3] = np.nan  # a row of row block 1: NaN scores inside (key block 0) and on the diagonal
    k[1, 10, 2] = np.inf  # key 10: inside for rows 128.., on the diagonal for rows 10..127 (+-inf scores)
    v[2, 140, 5] = np.nan  # key 140: inside for row block 2, on the diagonal for row block 1, skipped by block 0
    v[3, 299, 0] = np.nan  # the tail block's last key: row 299 only sees it; row blocks 0 and 1 fold it (flagged)
    q[3, 0, 0] = -np.inf  # row 0 sees key 0 only
    k[4, 127, 1] = -np.inf  # key block 0's last key: on the diagonal's corner for row 127, inside for rows 128..
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16_causal, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    want = _reference(q, k, v, scale, keep=MASKS[FA.attention_f16_causal])
    assert np.isnan(want[0, 200]).all() and np.isnan(want[3, :, 0]).all()
    assert np.isnan(want[2, :, 5]).all()  # 0 * NaN in the rows before key 140
    assert np.isnan(want[1]).any() and not np.isnan(want[1]).all() and not np.isnan(want[4]).all()
    _check(out, want, bound)


def test_a_nan_seen_inside_the_mask_keeps_its_payload(compiled):
    # key 20's V holds two payloads: rows 20..127 see it on the diagonal, rows 128.. inside the mask; the recomputed
    # rows carry the oracle's bits
    B, L, S, D = 1, 260, 260, 16
    (q, k, v, scale), _ = _attention_case(B, L, S, D, seed=23)
    v[0, 20, 3], v[0, 20, 9] = _nan(Q_NAN), _nan(NEG_NAN)
    out = np.zeros((B, L, D), np.float16)
    compiled(FA.attention_f16_causal, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    (want,) = _oracle(FA.attention_f16_causal, (q, k, v), (out,), scale)
    assert np.isnan(want[0, :, 3]).all() and np.isnan(want[0, :, 9]).all()  # 0 * NaN in the rows before key 20
    _same_nans(out, want)
    assert out[0, 200, 3].view(np.uint16) == Q_NAN and out[0, 200, 9].view(np.uint16) == NEG_NAN
