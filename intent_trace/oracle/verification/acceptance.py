"""How one case's results are judged: output comparison, per-element envelopes and the case's policy.

Kept apart from the stages that run cases because Stage Two re-derives a Stage One record's policy and
outcome from these same functions (``authority``), without running anything.
"""
from __future__ import annotations

import attrs
import numpy as np

from .bounds import envelope_ratio, inflate, path_envelope
from .cases import Case
from .comparison import (Comparison, Deviations, ElementEnvelope, TolerancePolicy, compare_exact, compare_float32,
                         element_envelope_policy, exact_policy, nan_ness_policy)
from .records import VerificationStage


def _merge(comparisons, envelope=None):
    if len(comparisons) == 1:
        return attrs.evolve(comparisons[0], envelope=envelope)
    devs = [c.deviations for c in comparisons]

    def worst(field):
        values = [getattr(d, field) for d in devs]
        return None if any(v is None for v in values) else max(values)

    return Comparison(Deviations(worst("absolute"), worst("relative"), worst("ulps")),
                      sum(c.mismatches for c in comparisons), sum(c.signed_zero_mismatches for c in comparisons),
                      sum(c.nan_payload_mismatches for c in comparisons), envelope)


def compare_outputs(expected: tuple, actual: tuple, dtypes: tuple, envelopes: tuple | None = None):
    """Compare every output; with ``envelopes`` (per output, a per-element float64 array or None) also record
    the worst element's deviation relative to its own envelope (flat index over the outputs in order)."""
    comparisons = []
    for e, a, d in zip(expected, actual, dtypes):
        if d == "f32":
            comparisons.append(compare_float32(e, a))
        else:
            comparisons.append(compare_exact(_words(e), _words(a)))
    envelope = None
    if envelopes is not None:
        worst, offset = (0.0, None, None), 0
        for e, a, env in zip(expected, actual, envelopes):
            if env is not None:
                ratio, i = envelope_ratio(e, a, env)
                if i is not None and (worst[1] is None or ratio > worst[0]):
                    worst = (ratio, offset + i, float(np.asarray(env).reshape(-1)[i]))
            offset += np.asarray(e).size
        envelope = ElementEnvelope(*worst)
    return _merge(comparisons, envelope)


def _words(a: np.ndarray) -> list:
    """Integer results as the integers they are (signed stays signed, so -1 against 0 deviates by 1, not by
    2**32 - 1); Booleans as 0/1. Exact comparison of these values is the same as of their words."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.uint32).tolist()
    return a.astype(np.int64 if a.dtype.kind == "i" else np.uint64).tolist()


def case_envelopes(case: Case, reference_plan) -> tuple | None:
    """Per output, each element's envelope: the candidate's accumulation path (the case's own bound) plus
    the reference's path (the same terms accumulated in ``reference_plan``'s accumulator and rounded to
    its output). Stage One's two paths share one plan (twice one path); Stage Two's reference is the
    float64 authority, so nearly all of the envelope is the target's own."""
    if case.bounds is None:
        return None
    out = []
    for b in case.bounds:
        if b is None:
            out.append(None)
            continue
        ref = attrs.evolve(b, accumulation_dtype=reference_plan.accumulation_dtype or b.accumulation_dtype,
                           output_dtype=reference_plan.output_dtype)
        out.append(inflate(path_envelope(b) + path_envelope(ref), 1))
    return tuple(out)


_POLICY_IDS = {VerificationStage.ORACLE: "stage-one-two-path-gamma-v1",
               VerificationStage.TARGET: "stage-two-float32-gamma-v1"}


def case_policy(case: Case, plan, stage: VerificationStage, reference_plan=None) -> TolerancePolicy:
    """The versioned acceptance rule of one case: exact bits, or every element within its own envelope.
    A function of the case, the plan pair and the stage only, so Stage Two can recompute it from the
    deterministic case generator and check what a Stage One record claims."""
    if case.verification_class.exact or case.bounds is None:
        return nan_ness_policy() if case.nan_payloads_free else exact_policy()
    reference_plan = reference_plan or plan
    envelopes = case_envelopes(case, reference_plan)
    b = next(b for b in case.bounds if b is not None)
    description = (f"|reference - candidate| <= E_i for every element i, E_i = gamma-K path envelope of the "
                   f"candidate (u={b.unit_roundoff!r}, rounded to {b.output_dtype}) + that of the reference "
                   f"({reference_plan.accumulation_dtype} accumulator, rounded to {reference_plan.output_dtype}), "
                   f"K_i and S_i = sum |exact terms| of element i (max K={b.max_terms}, "
                   f"max S={b.max_sum_absolute_terms!r}); zero signs and NaN payloads must match")
    return element_envelope_policy(_POLICY_IDS[stage], envelopes, description)
