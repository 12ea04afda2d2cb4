"""Every floating output element is judged by the envelope of its own terms (T5: gamma_K * sum |t_i| over the
terms that feed *it*), with the accumulator's own unit roundoff plus the final rounding to the output dtype.

Faults are planted through the cpu oracle's compiled executable (``planting``); the expected envelopes are
computed here by hand (``math.fsum`` over exact float64 terms), independently of ``bounds``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from intent_trace.oracle import Outcome, classify_profile_plans, gamma_bound
from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.authority import certificate_from
from intent_trace.oracle.verification.bounds import (OutputBound, envelope_ratio, fibre_sums, path_envelope,
                                                     prefix_sums, product_sums)
from intent_trace.oracle.verification.cases import operation_cases
from intent_trace.oracle.verification.records import VerificationClass as VC, VerificationStage

from .planting import after, is_case, only, plan, planted, stage_one

U32, U64 = 2.0 ** -24, 2.0 ** -53
MATMUL_F32 = "matmul(lhs:f32,rhs:f32|compute:f32|dot:f32)->f32"
CUMSUM_F32 = "cumsum(x:f32|compute:f32|scan-sum:f32)->f32"
F64_PLANS = ("reduce_sum(x:f32|f32->f64;f64->f32|compute:f64|sum:f64)->f32",
             "cumsum(x:f32|f32->f64;f64->f32|compute:f64|scan-sum:f64)->f32",
             "matmul(lhs:f32,rhs:f32|f32->f64;f64->f32|compute:f64|dot:f64)->f32")


def gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def the_case(plan_id: str, cls: VC):
    op, p = plan(plan_id)
    (case,) = operation_cases(op, p, (cls,))
    return case


def by_class(evidence, cls: VC) -> list:
    return [e for e in evidence if e.verification_class is cls]


# --- a sign flip of one matmul output that a case-wide bound hides -----------------------------------

def _matmul_hidden_flip():
    """(flat index, value) of the wide-exponent output whose sign flip exceeds its own two-path envelope by
    the most while staying under the case-wide envelope (the largest element's)."""
    case = the_case(MATMUL_F32, VC.WIDE_EXPONENT)
    (m, k), (_, n) = case.shapes
    a, b = (np.asarray(x, np.float64).reshape(s) for x, s in zip(case.inputs.oracle_values(), case.shapes))
    own = np.array([[2 * gamma(k, U32) * math.fsum(abs(a[i, t] * b[t, j]) for t in range(k)) for j in range(n)]
                    for i in range(m)]).reshape(-1)
    exact = np.array([[math.fsum(a[i, t] * b[t, j] for t in range(k)) for j in range(n)] for i in range(m)]).reshape(-1)
    case_wide = own.max()
    hidden = [i for i in range(m * n) if 2 * abs(exact[i]) > 1.01 * own[i] and 2 * abs(exact[i]) < case_wide]
    assert hidden, "the wide-exponent case has no output whose flip a case-wide bound would hide"
    i = max(hidden, key=lambda i: 2 * abs(exact[i]) / own[i])
    return i, exact[i], own[i], case_wide


def test_a_sign_flip_of_one_wide_output_fails_against_its_own_envelope(monkeypatch):
    i, value, own, case_wide = _matmul_hidden_flip()
    assert 2 * abs(value) / own > 10 and 2 * abs(value) < case_wide  # the fault a case-wide envelope passed
    case = the_case(MATMUL_F32, VC.WIDE_EXPONENT)

    def flip(args):
        if is_case(args, case):
            args[-1].reshape(-1)[i] *= -1
    with planted(monkeypatch, "cpu", only(MATMUL_F32, after(flip))):
        evidence = stage_one(MATMUL_F32)
    (wide,) = by_class(evidence, VC.WIDE_EXPONENT)
    assert wide.outcome is Outcome.FAILED
    assert wide.comparison.envelope.index == i  # (other elements differ by association, within their own)
    assert wide.comparison.envelope.ratio > 10 and wide.comparison.envelope.bound < 2 * abs(value)
    assert "its own envelope" in wide.reason
    assert all(e.outcome is Outcome.PASSED for e in evidence if e is not wide)


# --- one perturbed prefix of a scan -----------------------------------------------------------------

def _prefix_envelope(case, r: int, j: int) -> float:
    x = np.asarray(case.inputs.oracle_values()[0], np.float64).reshape(case.shapes[0])
    return 2 * gamma(j + 1, U32) * math.fsum(abs(v) for v in x[r, :j + 1])


@pytest.mark.parametrize("r, j", [(0, 0), (7, 0), (15, 1), (3, 40), (11, 200), (15, 256)])
def test_one_perturbed_prefix_fails_and_a_small_one_passes(monkeypatch, r, j):
    case = the_case(CUMSUM_F32, VC.NUMERICAL)
    own = _prefix_envelope(case, r, j)
    for scale, outcome in ((3.0, Outcome.FAILED), (0.25, Outcome.PASSED)):
        delta = 1e-3 if (j == 0 and scale > 1) else scale * own  # the first prefix off by 1e-3 passed once

        def perturb(args):
            if is_case(args, case):
                y = args[-1]
                y[r, j] = np.float32(np.float64(y[r, j]) + delta)
        with planted(monkeypatch, "cpu", only(CUMSUM_F32, after(perturb))):
            (e,) = by_class(stage_one(CUMSUM_F32), VC.NUMERICAL)
        assert e.outcome is outcome, (scale, e.reason)
        if outcome is Outcome.FAILED:
            assert e.comparison.envelope.index == r * case.shapes[0][1] + j and e.comparison.envelope.ratio > 1


# --- float64-accumulator plans must accumulate in float64 ----------------------------------------------

def _f32_accumulation(plan_id: str):
    """A fault that replaces a float64-accumulator plan's result by a sequential binary32 accumulation."""
    @np.errstate(all="ignore")  # the special-value cases overflow and hold NaNs
    def rewrite(args):
        if plan_id.startswith("matmul"):
            a, b, y = args
            products = (a[:, :, None] * b[None, :, :]).astype(np.float32)
            y[...] = np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]
        elif plan_id.startswith("cumsum"):
            x, y = args
            y[...] = np.cumsum(x, axis=1, dtype=np.float32)
        else:
            x, y = args
            y[...] = np.cumsum(x, axis=1, dtype=np.float32)[:, -1] if x.shape[1] else 0
    return only(plan_id, after(rewrite))


@pytest.mark.parametrize("plan_id", F64_PLANS)
def test_a_float64_accumulator_plan_that_accumulates_in_float32_is_not_certified(monkeypatch, plan_id):
    with planted(monkeypatch, "cpu", _f32_accumulation(plan_id)):
        evidence = stage_one(plan_id)
    numerical = by_class(evidence, VC.NUMERICAL) + by_class(evidence, VC.WIDE_EXPONENT)
    assert numerical and any(e.outcome is Outcome.FAILED for e in numerical)
    for e in numerical:  # the envelope is float64's: u = 2**-53 plus one rounding to binary32
        assert "u=1.1102230246251565e-16" in e.policy.description
    assert certificate_from("cpu-compiled", (evidence[0].kernel, evidence[0].plan),
                                    tuple(sorted({e.verification_class for e in evidence}, key=list(VC).index)),
                                    evidence) is None


def test_a_float64_plan_envelope_is_float64_accumulation_plus_one_rounding():
    case = the_case(F64_PLANS[0], VC.NUMERICAL)
    (r, k), = case.shapes
    x = np.asarray(case.inputs.oracle_values()[0], np.float64).reshape(r, k)
    (env,) = stages.case_envelopes(case, plan(F64_PLANS[0])[1])
    for row in range(r):
        s = math.fsum(abs(v) for v in x[row])
        exact = abs(math.fsum(x[row]))
        one_path = gamma(k, U64) * s + U32 * (exact + gamma(k, U64) * s)
        assert 2 * one_path <= env[row] <= 2 * (one_path + U32 * gamma(k, U64) * s) * (1 + 1e-12) + 1e-300
        assert env[row] < 2 * gamma(k, U32) * s / 100  # far tighter than a binary32 accumulator's


# --- the bounds module against hand computation ------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.floats(0, 1e30), st.sampled_from(["f32", "f64"]))
def test_path_envelope_is_never_below_the_analytic_gamma_bound(k, s, acc):
    u = U32 if acc == "f32" else U64
    (env,) = path_envelope(OutputBound.of(k, [s], acc, acc))
    assert env >= gamma_bound(u, k, s)
    assert env <= gamma_bound(u, k, s) * (1 + 1e-12) + k * 2.0 ** -149 + 2.0 ** -1060  # tight, up to underflow


def test_bounds_of_a_scan_a_reduction_and_a_contraction_match_hand_sums():
    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, (3, 9)).astype(np.float32)
    scan, red = prefix_sums(x, "f32", "f32"), fibre_sums(x, "f32", "f32")
    for r in range(3):
        for j in range(9):
            s = math.fsum(abs(float(v)) for v in x[r, :j + 1])
            assert scan.terms[r * 9 + j] == j + 1 and s <= scan.sum_absolute_terms[r * 9 + j] <= s * (1 + 1e-14)
        assert red.terms[r] == 9 and red.sum_absolute_terms[r] >= math.fsum(abs(float(v)) for v in x[r])
    a, b = rng.uniform(-2, 2, (2, 5)).astype(np.float32), rng.uniform(-2, 2, (5, 3)).astype(np.float32)
    dot = product_sums(a, b, "f32", "f32")
    for i in range(2):
        for j in range(3):
            s = math.fsum(abs(float(a[i, t]) * float(b[t, j])) for t in range(5))
            assert dot.terms[i * 3 + j] == 5 and s <= dot.sum_absolute_terms[i * 3 + j] <= s * (1 + 1e-14)


def test_envelope_ratio_covers_no_non_finite_difference():
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    env = np.array([1.0, 1.0, 1.0, 0.0, 2.0])
    ratio, i = envelope_ratio(np.array([1, nan, inf, 5, 4], np.float32), np.array([1, nan, inf, 5, 5], np.float32), env)
    assert (ratio, i) == (0.5, 4)
    assert envelope_ratio(np.array([1, 2], np.float32), np.array([np.nan, 2], np.float32), np.ones(2))[0] == math.inf
    assert envelope_ratio(np.array([1, 2], np.float32), np.array([1, -inf], np.float32), np.ones(2))[0] == math.inf
    assert envelope_ratio(np.array([1, 2], np.float32), np.array([1, 3], np.float32), np.array([1.0, 0.0]))[0] == math.inf
    assert envelope_ratio(np.array([0.0], np.float32), np.array([-0.0], np.float32), np.zeros(1))[0] == 0.0


def test_output_bound_rejects_inconsistent_data():
    with pytest.raises(ValueError):
        OutputBound([1, 2], [1.0], "f32", "f32")
    with pytest.raises(ValueError):
        OutputBound([1], [-1.0], "f32", "f32")
    with pytest.raises(ValueError):
        OutputBound([1], [math.inf], "f32", "f32")
    with pytest.raises(ValueError):
        OutputBound([1], [1.0], "i32", "f32")
    b = OutputBound.of(3, [1.0, 2.0], "f64", "f32")
    assert b.unit_roundoff == U64 and b.output_unit_roundoff == U32 and b == OutputBound([3, 3], [1.0, 2.0], "f64", "f32")
    with pytest.raises(ValueError):
        b.terms[0] = 7  # read-only: a case's bounds cannot change after it is built
    assert Fraction(path_envelope(b)[0]) >= Fraction(gamma_bound(U64, 3, 1.0)) + Fraction(U32) * Fraction(1.0)
