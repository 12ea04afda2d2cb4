"""The masked-block proof (schedule/region_skip.py): which segmented folds may skip the source blocks where a
comparison of the row and source coordinates is all false, which side of the diagonal those are, what must be
finite there, and why near misses are refused. No GPU: the proof is target-neutral (the graph's ops, never names).

The expected bounds are derived by hand from each kernel's mask: ``query_pos >= key_pos`` lets a block of rows
[r0, r0 + M) see keys j < r0 + M (upper, shift 0); ``key_pos + 48 <= query_pos`` keys j < r0 + M - 48; ``query > key``
keys j < r0 + M - 1; ``key >= query`` keys j >= r0 (lower, shift 0)."""
import pytest

from intent_trace.schedule import region as R
from intent_trace.schedule import region_skip
from schedule import region_skip_kernels as K
from schedule.region_kernels import FA, attention_causal_shifted_f16, attention_single_f16, key_max_f16


def _prove(kernel):
    g = kernel.trace()
    plan = R.recognise(g)
    assert isinstance(plan, R.SegmentedFold), plan
    return plan, region_skip.prove(g, plan)


@pytest.mark.parametrize("kernel, side, shift, text", [
    (FA.attention_f16_causal, "upper", 0, "source <= row"),
    (FA.attention_f16_causal_fast, "upper", 0, "source <= row"),  # exp2(-inf - m) known: 2^-inf = +0, flushed or not
    (K.causal_single_f16, "upper", 0, "source <= row"),
    (attention_causal_shifted_f16, "upper", -48, "source <= row - 48"),
    (K.strict_causal_f16, "upper", -1, "source < row"),
    (K.anti_causal_f16, "lower", 0, "source >= row"),
    (K.causal_and_data_f16, "upper", 0, "source <= row"),  # false & (data) is false whatever the data
], ids=["causal", "causal-fast", "no-batch", "shifted", "strict", "anti-causal", "and-data"])
def test_a_coordinate_mask_whose_empty_blocks_are_the_identity(kernel, side, shift, text):
    plan, skip = _prove(kernel)
    assert isinstance(skip, region_skip.MaskedSkip), skip
    (bound,) = skip.bounds
    assert (bound.side, bound.shift, bound.text) == (side, shift, text)
    # P V's right operand is V (source component 1): 0 * inf is NaN, so V must be finite in a skipped block; K (0)
    # only makes the scores a select discards, and the positions (2) are integers
    assert skip.finite == (1,)
    assert plan.sources[1].param is not None
    assert skip.describe(["k", "v", "key_pos"]) == f"false for every pair of {text}, where v is finite"


def test_a_masked_max_needs_nothing_finite():
    # select(false, s, -inf) is -inf whatever K holds, and max(-inf, -inf) = -inf: no operand need be finite
    plan, skip = _prove(K.causal_score_max_f16)
    assert isinstance(skip, region_skip.MaskedSkip) and skip.finite == ()
    assert [(b.side, b.shift) for b in skip.bounds] == [("upper", 0)]
    assert skip.describe(["k", "key_pos"]) == "false for every pair of source <= row"


@pytest.mark.parametrize("kernel, why", [
    (FA.attention_f16, "compares no row coordinate with a source coordinate"),
    (attention_single_f16, "compares no row coordinate with a source coordinate"),
    (key_max_f16, "compares no row coordinate with a source coordinate"),
    (K.data_mask_f16, "compares no row coordinate with a source coordinate"),
    # s + (-inf) is NaN where s = +inf: the masked block's max depends on K
    (K.additive_causal_f16, "summary leaf 0 depends on values a masked block does not fix (first: a contraction at"),
    # exp(-inf - -inf) = NaN: the row sum of a masked block is NaN, not the identity's 0
    (K.unguarded_causal_f16, "summary leaf 1 is nan, not the identity's 0.0"),
    # a finite sentinel: the masked block's max is -1e30, not the identity's -inf
    (K.sentinel_causal_f16, "summary leaf 0 is -1.0000000150474662e+30, not the identity's -inf"),
], ids=["no-mask", "no-mask-single", "no-contraction", "data-mask", "additive", "unguarded-p", "finite-sentinel"])
def test_the_proof_refuses_what_it_cannot_show(kernel, why):
    _, skip = _prove(kernel)
    assert isinstance(skip, str) and why in skip, skip


def test_a_refusal_names_the_comparison_and_the_users_line():
    _, skip = _prove(K.additive_causal_f16)
    assert skip.startswith("with the comparison at ") and "region_skip_kernels.py" in skip and "(in _additive)" in skip


def test_constant_folding_follows_ieee_and_t4_specials():
    # the partial evaluator's exact folds: IEEE 754-2019 maximum/minimum order the zeros and propagate NaN; T4's
    # special values only (exp(-inf) = 0, exp(0) = 1); nothing else of a math function is folded
    import math

    import numpy as np

    from intent_trace import types as T
    from intent_trace.graph import ops

    f32 = T.f32
    one = region_skip._pointwise
    z, nz = np.float32(0.0), np.float32(-0.0)
    assert math.copysign(1.0, one(ops.maximum, [nz, z], f32)) == 1.0
    assert math.copysign(1.0, one(ops.minimum, [z, nz], f32)) == -1.0
    assert math.isnan(one(ops.maximum, [np.float32(np.nan), np.float32(-np.inf)], f32))
    assert one(ops.exp, [np.float32(-np.inf)], f32) == 0.0 and one(ops.exp, [nz], f32) == 1.0
    assert math.isnan(one(ops.exp, [np.float32(np.nan)], f32))
    with pytest.raises(region_skip._Unknown):
        one(ops.exp, [np.float32(1.0)], f32)
    assert math.isnan(one(ops.sub, [np.float32(-np.inf), np.float32(-np.inf)], f32))
