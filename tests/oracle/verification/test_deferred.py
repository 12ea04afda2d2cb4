"""Deferred plans keep their accuracy deferral but still run on the candidate: T4's C99 Annex F special
values are exact obligations against an independent table, and the measured deviation is recorded as
information on the one deferred record. Faults are planted through the compiled executable."""
from __future__ import annotations

import math

import numpy as np
import pytest

from intent_trace.oracle import Outcome, classify_profile_plans
from intent_trace.oracle.verification import catalogue as C, stages
from intent_trace.oracle.verification.annex_f import POW, UNARY, annex_f_case
from intent_trace.oracle.verification.records import VerificationClass as VC, VerificationStage

from .planting import after, only, plan, planted

EXP = "exp(x:f32|compute:f32)->f32"
POW_F32 = "pow(lhs:f32,rhs:f32|compute:f32)->f32"


def deferred_evidence(plan_id, stage=VerificationStage.ORACLE):
    c = next(c for c in classify_profile_plans("cpu-compiled") if c.plan.plan_id == plan_id)
    assert not c.active
    return stages._deferred_evidence(stage, "cpu-compiled", c, stages._Runner("cpu-compiled", "generic"),
                                     stages._Runner("cpu-compiled", "cpu"))


def _constant_zero(args):
    args[-1][...] = 0.0


@pytest.mark.parametrize("plan_id", [EXP, POW_F32, "tanh(x:f32|compute:f32)->f32", "log(x:f32|compute:f32)->f32"])
def test_a_deferred_op_returning_a_constant_fails_its_special_values(monkeypatch, plan_id):
    with planted(monkeypatch, "cpu", only(plan_id, after(_constant_zero))):
        evidence = deferred_evidence(plan_id)
    deferred = [e for e in evidence if e.outcome is Outcome.DEFERRED]
    special = [e for e in evidence if e.verification_class is VC.SPECIAL_VALUES]
    assert len(deferred) == 1 and len(special) == 1
    assert special[0].outcome is Outcome.FAILED
    # the deviation is measured and recorded as information on the deferred record
    assert deferred[0].comparison is not None and deferred[0].comparison.mismatches > 0
    assert "information, not a gate" in deferred[0].reason


def test_an_unfaulted_deferred_plan_passes_its_special_values_and_records_its_deviation():
    evidence = deferred_evidence(EXP)
    deferred, special = evidence
    assert deferred.outcome is Outcome.DEFERRED and deferred.comparison.deviations.ulps is not None
    assert deferred.receipt_id and deferred.synchronized and deferred.target_input_hashes
    assert special.outcome is Outcome.PASSED and special.policy.policy_id == "exact-bits-nan-ness-v1"


def test_every_deferred_plan_of_every_profile_has_special_values():
    for profile in ("cpu-compiled", "c-tilelang", "cuda-tilelang", "metal-tilelang"):
        for c in classify_profile_plans(profile):
            if not c.active:
                assert annex_f_case(c.plan) is not None, c.plan.plan_id
    assert set(UNARY) == set(C.VENDOR_TRANSCENDENTALS)


def test_the_annex_f_table_agrees_with_an_independent_libm():
    """NumPy's and SciPy's float64 functions (the platform libm and cephes, in double) give every tabulated
    result: its binary32 rounding is the expected word, NaN-ness for NaN."""
    from scipy import special

    def lgamma(x):  # math.lgamma follows C99 at -inf (SciPy's gammaln gives -inf); C99's pole is +inf
        x = float(x)
        return math.inf if math.isfinite(x) and x <= 0 and x == math.floor(x) else math.lgamma(x)

    f = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log1p": np.log1p, "lgamma": lgamma,
         "sin": np.sin, "cos": np.cos, "asin": np.arcsin, "erf": special.erf, "erfc": special.erfc,
         "tanh": np.tanh, "expm1": np.expm1, "sigmoid": special.expit, "rsqrt": lambda x: 1.0 / np.sqrt(x),
         "i0": lambda x: special.i0(np.clip(x, -1e300, 1e300))}  # SciPy's i0(inf) is NaN: use the limit

    def same(got, want):
        return math.isnan(got) if math.isnan(want) else np.float32(got).tobytes() == np.float32(want).tobytes()
    with np.errstate(all="ignore"):
        for name, pairs in UNARY.items():
            for x, want in pairs:
                assert same(float(f[name](np.float64(x))), want), (name, x, want)
        for (x, y), want in POW:
            assert same(float(np.power(np.float64(x), np.float64(y))), want), (x, y, want)


def test_a_deferred_target_plan_runs_in_stage_two(monkeypatch):
    """Stage Two runs the target's deferred plans too (here the cpu profile as target, faulted)."""
    op, p = plan(EXP)
    with planted(monkeypatch, "cpu", only(EXP, after(_constant_zero))):
        c = next(c for c in classify_profile_plans("cpu-compiled") if c.plan == p)
        # the reference is the cpu oracle in Stage Two; a plain runner of the same target shows the fault on both,
        # so the reference here is generic (its special values are independent of the candidate's)
        evidence = stages._deferred_evidence(VerificationStage.TARGET, "cpu-compiled", c,
                                             stages._Runner("cpu-compiled", "generic"),
                                             stages._Runner("cpu-compiled", "cpu"))
    assert [e.outcome for e in evidence] == [Outcome.DEFERRED, Outcome.FAILED]
