"""Stage runs are the expensive part of these tests: each runs once per session and is shared.

``planted_oracle`` runs Stage One with three wrong CPU results and one recoverable error planted through
the non-public seam; ``stage_two`` runs Stage Two on cpu-compiled behind a doctored oracle result built
from it (``doctored``: a failed record relabelled passed, a failing case dropped, a loosened policy, a
record relabelled as another stage, each with its certificate recomputed from the doctored evidence; one
forged certificate digest; the float64 reduce_sum certificate removed) with one planted target error.
"""
from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.authority import certify
from intent_trace.oracle.verification.comparison import Tolerance, TolerancePolicy
from intent_trace.oracle.verification.evidence import OracleStageResult, Outcome
from intent_trace.oracle.verification.profiles import catalogue_for
from intent_trace.oracle.verification.records import VerificationStage

WRONG_CASE = "add(lhs:f32,rhs:f32|compute:f32)->f32/bit-exact/0"
ERROR_CASE = "sub(lhs:i32,rhs:i32|compute:i32)->i32/special-values/0"
FORGED_PLAN = "mul(lhs:f32,rhs:f32|compute:f32)->f32"
DROPPED_CASE = "cumsum(x:f32|f32->f64;f64->f32|compute:f64|scan-sum:f64)->f32/structural-exact/1"
LOOSENED_CASE = "sub(lhs:f32,rhs:f32|compute:f32)->f32/bit-exact/0"
RELABELLED_PLAN = "neg(x:f32|compute:f32)->f32"
PLANTED_WRONG = {WRONG_CASE: 1, DROPPED_CASE: 1, LOOSENED_CASE: 0x80000000}  # case -> bits flipped in element 0
TARGET_ERROR_CASE = "maximum(lhs:f32,rhs:f32|compute:f32)->f32/signed-zero/0"


@pytest.fixture(scope="session")
def oracle_result():
    return stages.run_oracle_stage("cpu-compiled")


def _plant(stage, wrong=(), error=None):
    wrong = dict.fromkeys(wrong, 1) if not isinstance(wrong, dict) else wrong

    def alteration(case, outputs):
        if case.case_id == error:
            raise RuntimeError("planted recoverable error")
        if case.case_id in wrong:
            first = outputs[0].copy()
            first.view(np.uint32)[0] ^= np.uint32(wrong[case.case_id])  # bits of one element
            return (first, *outputs[1:])
        return outputs
    return {stage: alteration}


@pytest.fixture(scope="session")
def planted_oracle():
    saved = dict(stages._result_alterations)
    stages._result_alterations.update(_plant(VerificationStage.ORACLE, PLANTED_WRONG, ERROR_CASE))
    try:
        return stages.run_oracle_stage("cpu-compiled")
    finally:
        stages._result_alterations.clear()
        stages._result_alterations.update(saved)


def doctored(planted):
    """The planted oracle result doctored as a forger would (module docstring), certificates recomputed."""
    evidence = []
    for e in planted.report.evidence:
        if e.case_id == DROPPED_CASE:
            continue
        if e.case_id == WRONG_CASE:
            e = attrs.evolve(e, outcome=Outcome.PASSED, reason="")
        if e.case_id == LOOSENED_CASE:
            loose = TolerancePolicy(e.policy.policy_id, Tolerance(math.inf, math.inf, 2**32 - 1), e.policy.description)
            e = attrs.evolve(e, outcome=Outcome.PASSED, reason="", policy=loose)
        if e.plan is not None and e.plan.plan_id == RELABELLED_PLAN and e.verification_class.value == "signed-zero":
            e = attrs.evolve(e, stage=VerificationStage.TARGET)
        evidence.append(e)
    report = attrs.evolve(planted.report, evidence=tuple(evidence))
    recomputed = tuple(certify("cpu-compiled", catalogue_for("cpu-compiled"), report.evidence))
    certs = []
    for c in recomputed:
        if c.plan is not None and c.plan.plan_id == FORGED_PLAN:
            c = attrs.evolve(c, evidence_digest="0" * 64)
        if c.plan is not None and c.plan.operation == "reduce_sum" and c.plan.accumulation_dtype == "f64":
            continue
        certs.append(c)
    return OracleStageResult(report, tuple(certs))


@pytest.fixture(scope="session")
def stage_two(planted_oracle):
    saved = dict(stages._result_alterations)
    stages._result_alterations.update(_plant(VerificationStage.TARGET, error=TARGET_ERROR_CASE))
    try:
        return stages.run_target_stage("cpu-compiled", doctored(planted_oracle))
    finally:
        stages._result_alterations.clear()
        stages._result_alterations.update(saved)
