"""The segmented-fold recogniser (schedule/region.py) and its proof that a tile max may ignore NaNs and zero signs
(schedule/region_laws.py): which region folds are row-blocked tile programs, why near misses are not, and when the
cheap max is harmless. No GPU: the recogniser is target-neutral."""
import pytest

from intent_trace.graph import ops
from intent_trace.schedule import region as R
from intent_trace.schedule.rows import Rejected
from schedule.region_kernels import (FA, attention_lse_f16, attention_single_f16, column_totals, computed_source,
                                     key_max_f16, scan_in_summary, score_sum_f16)


def _names(graph, indices) -> tuple:
    return tuple(graph.extents[k].extent.name for k in indices)


@pytest.mark.parametrize("kernel", [FA.attention_f16, FA.attention_f16_fast, FA.attention_f16_causal],
                         ids=lambda k: k.name)
def test_the_flash_attention_examples_are_segmented_folds(kernel):
    g = kernel.trace()
    plan = R.recognise(g)
    assert isinstance(plan, R.SegmentedFold), plan
    assert _names(g, (plan.rows, plan.source, plan.batch)) == ("L", "S", "B") and _names(g, plan.free) == ("D",)
    assert plan.combines == ("max", "sum") and plan.contractions_count == 2
    assert [len(n.outputs[0].type.shape) for n in plan.contractions] == [2, 2]
    assert [r.axis for r in plan.reductions] == [R.SLICE, R.SLICE]
    assert [r.identity for r in plan.reductions] == [float("-inf"), 0.0]
    assert plan.tolerant and plan.why_exact == ""  # a NaN score makes its row's outputs NaN anyway (region_laws)
    assert {"exp" if kernel is not FA.attention_f16_fast else "exp2", "div", "cast", "select"} <= set(plan.fused)
    assert plan.fold.op is ops.region_fold and plan.writes[0].op is ops.write
    part = plan.part(g, block_M=128)
    assert part.mapping == "segmented_fold" and part.param("grid") == "ceildiv(L, block_M) x B"
    assert part.param("source") == "S" and part.param("block_M") == 128 and "§9.1" in part.reason


def test_the_causal_mask_is_an_operand_of_pointwise_ops():
    g = FA.attention_f16_causal.trace()
    plan = R.recognise(g)
    sources = [s.layout for s in plan.sources]
    assert sources == [(R.SLICE, g.extents[2].extent), (R.SLICE, g.extents[2].extent), (R.SLICE,)]
    assert [s.param for s in plan.sources] == [1, 2, None]  # k, v, then the key positions (indices)
    kinds = [type(x).__name__ if not isinstance(x, R.Source) else x.layout for x in plan.operands]
    assert kinds[0] == (R.ROW, g.extents[2].extent) and kinds[2] == (R.ROW,)  # queries, scale, query positions
    assert "ge" in plan.fused and any(n.op is ops.indices for n in plan.before)


def test_a_fold_at_the_top_level_has_no_batch():
    g = attention_single_f16.trace()
    plan = R.recognise(g)
    assert isinstance(plan, R.SegmentedFold) and plan.batch is None and plan.loop is None
    assert plan.part(g).param("grid") == "ceildiv(L, block_M)"


def test_a_sum_only_fold_needs_no_proof():
    plan = R.recognise(score_sum_f16.trace())
    assert plan.combines == ("sum",) and plan.tolerant


def test_a_max_that_is_the_output_is_reduced_exactly():
    # the fold's summary is the row max itself: a NaN score reaches the output only through the max
    plan = R.recognise(key_max_f16.trace())
    assert isinstance(plan, R.SegmentedFold) and not plan.tolerant
    assert "NaN operand" in plan.why_exact and "reaches no summary row" in plan.why_exact
    assert plan.part(key_max_f16.trace()).param("exact_max") == plan.why_exact


def test_a_max_whose_zero_sign_reaches_an_output_is_reduced_exactly():
    # lse = m + log(l): a NaN reaches it through log(l), but m's zero sign would reach it through the add
    plan = R.recognise(attention_lse_f16.trace())
    assert not plan.tolerant and "zero sign" in plan.why_exact
    assert len(plan.writes) == 2


def test_f32_products_are_tile_products_too():
    # the f32 example (no batch loop): its contractions are f32 (a target multiplies them on CUDA cores, never TF32)
    g = FA.attention.trace()
    plan = R.recognise(g)
    assert isinstance(plan, R.SegmentedFold) and plan.batch is None and plan.tolerant
    assert [n.inputs[0].type.dtype.name for n in plan.contractions] == ["f32", "f32"]


@pytest.mark.parametrize("kernel, why", [
    (scan_in_summary, "op scan"),
    (computed_source, "not a read of a view or the indices of its axis"),
    (column_totals, "rows first"),
], ids=["scan-in-summary", "computed-source", "rows-are-the-source"])
def test_near_misses_say_why(kernel, why):
    found = R.recognise(kernel.trace())
    assert isinstance(found, Rejected) and why in found.reason, found


def test_graphs_without_one_fold_are_not_segmented_folds():
    from schedule.row_kernels import softmax_rows

    assert R.recognise(softmax_rows.trace()) == Rejected("no region_fold")
