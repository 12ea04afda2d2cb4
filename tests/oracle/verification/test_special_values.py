"""Floating reductions, scans and matmuls carry special-value obligations: NaN (payload exact where one
NaN encoding feeds a result, NaN-ness only where the association may pick between payloads), signed
infinities, overflow and subnormals. Faults are planted through the cpu oracle's compiled executable."""
from __future__ import annotations

import numpy as np
import pytest

from intent_trace.oracle import Outcome, classify_profile_plans
from intent_trace.oracle.verification.cases import special_sum_rows
from intent_trace.oracle.verification.records import VerificationClass as VC

from .planting import after, only, planted, stage_one

ACCUMULATING = ("reduce_sum(x:f32|compute:f32|sum:f32)->f32",
                "reduce_sum(x:f32|f32->f64;f64->f32|compute:f64|sum:f64)->f32",
                "cumsum(x:f32|compute:f32|scan-sum:f32)->f32",
                "cumsum(x:f32|f32->f64;f64->f32|compute:f64|scan-sum:f64)->f32",
                "matmul(lhs:f32,rhs:f32|compute:f32|dot:f32)->f32",
                "matmul(lhs:f32,rhs:f32|f32->f64;f64->f32|compute:f64|dot:f64)->f32")


def _words(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def _sums(rows: np.ndarray, order) -> np.ndarray:
    """Row sums of binary32 words accumulated in binary32 in the given term order (sequentially)."""
    x = rows.view(np.float32)[:, order]
    acc = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        acc = (acc + x[:, j]).astype(np.float32)
    return acc


def test_every_class_list_of_a_floating_accumulation_holds_special_values():
    for c in classify_profile_plans("cpu-compiled"):
        if c.plan.plan_id in ACCUMULATING:
            assert VC.SPECIAL_VALUES in c.classes


def test_the_special_fibres_have_one_result_in_every_association():
    """The exact fibres give bit-identical sums in several orders (sequential, reversed, pairwise, rotated),
    at binary32 and with a float64 accumulator; the multi-NaN fibres agree in NaN-ness only."""
    exact, multi = special_sum_rows()
    with np.errstate(all="ignore"):
        orders = [list(range(8)), list(range(7, -1, -1)), [0, 4, 1, 5, 2, 6, 3, 7], [3, 4, 5, 6, 7, 0, 1, 2]]
        results = [_words(_sums(exact, o)) for o in orders]
        pairwise = exact.view(np.float32)
        for _ in range(3):
            pairwise = (pairwise[:, 0::2] + pairwise[:, 1::2]).astype(np.float32)
        results.append(_words(pairwise[:, 0]))
        results.append(_words(exact.view(np.float32).astype(np.float64).sum(axis=1).astype(np.float32)))
        for r in results[1:]:
            assert np.array_equal(r, results[0])
        nan = (results[0] & 0x7FFFFFFF) > 0x7F800000
        assert nan.sum() >= 11 and ((results[0] & 0x7FFFFFFF) == 0x7F800000).sum() >= 9  # NaNs and infinities
        assert (((results[0] & 0x7FFFFFFF) < 0x00800000) & ((results[0] & 0x7FFFFFFF) > 0)).sum() >= 3  # subnormal
        assert 0xFFC00000 in results[0]  # inf - inf: the default NaN
        multi_results = [_sums(multi, o) for o in orders]
        assert all(np.isnan(r).all() for r in multi_results)


def _replace_non_finite(args):
    y = args[-1]
    y[~np.isfinite(y)] = 0


def _flush_subnormals(args):
    y = args[-1]
    w = y.view(np.uint32)
    y[((w & 0x7FFFFFFF) < 0x00800000)] = 0


def _canonical_nan(args):
    y = args[-1]
    y[np.isnan(y)] = np.uint32(0x7FFFFFFF).view(np.float32)


@pytest.mark.parametrize("plan_id", ACCUMULATING)
@pytest.mark.parametrize("fault", [_replace_non_finite, _flush_subnormals, _canonical_nan])
def test_a_target_that_rewrites_special_results_fails(monkeypatch, plan_id, fault):
    with planted(monkeypatch, "cpu", only(plan_id, after(fault))):
        evidence = stage_one(plan_id)
    special = {e.case_id.rsplit("/", 1)[1]: e for e in evidence if e.verification_class is VC.SPECIAL_VALUES}
    assert special["0"].outcome is Outcome.FAILED, special["0"].reason
    if fault is _canonical_nan:  # NaN-ness is all the multi-NaN fibres require
        assert special["1"].outcome is Outcome.PASSED and special["1"].policy.policy_id == "exact-bits-nan-ness-v1"
    elif fault is _replace_non_finite:
        assert special["1"].outcome is Outcome.FAILED


def test_an_unfaulted_oracle_passes_its_special_values(oracle_result):
    special = [e for e in oracle_result.report.evidence if e.plan is not None and e.plan.plan_id in ACCUMULATING
               and e.verification_class is VC.SPECIAL_VALUES]
    assert len(special) == 2 * len(ACCUMULATING) and all(e.outcome is Outcome.PASSED for e in special)
