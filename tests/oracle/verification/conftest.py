"""Stage runs are the expensive part of these tests: each runs once per session and is shared.

``planted_oracle`` runs Stage One with one wrong CPU result and one recoverable error planted through
the non-public seam; ``stage_two`` runs Stage Two on cpu-compiled behind a doctored oracle result
(one forged certificate, the float64 reduce_sum certificate removed) with one planted target error.
"""
from __future__ import annotations

import attrs
import numpy as np
import pytest

from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.records import VerificationStage

WRONG_CASE = "add(lhs:f32,rhs:f32|compute:f32)->f32/bit-exact/0"
ERROR_CASE = "sub(lhs:i32,rhs:i32|compute:i32)->i32/special-values/0"
FORGED_PLAN = "mul(lhs:f32,rhs:f32|compute:f32)->f32"
TARGET_ERROR_CASE = "maximum(lhs:f32,rhs:f32|compute:f32)->f32/signed-zero/0"


@pytest.fixture(scope="session")
def oracle_result():
    return stages.run_oracle_stage("cpu-compiled")


def _plant(stage, wrong=None, error=None):
    def alteration(case, outputs):
        if case.case_id == error:
            raise RuntimeError("planted recoverable error")
        if case.case_id == wrong:
            first = outputs[0].copy()
            first.view(np.uint32)[0] ^= 1  # one bit of one element
            return (first, *outputs[1:])
        return outputs
    return {stage: alteration}


@pytest.fixture(scope="session")
def planted_oracle():
    saved = dict(stages._result_alterations)
    stages._result_alterations.update(_plant(VerificationStage.ORACLE, WRONG_CASE, ERROR_CASE))
    try:
        return stages.run_oracle_stage("cpu-compiled")
    finally:
        stages._result_alterations.clear()
        stages._result_alterations.update(saved)


def doctored(oracle_result):
    """The oracle result with the mul/f32 certificate forged and the f64 reduce_sum certificate removed."""
    certs = []
    for c in oracle_result.certificates:
        if c.plan is not None and c.plan.plan_id == FORGED_PLAN:
            c = attrs.evolve(c, evidence_digest="0" * 64)
        if c.plan is not None and c.plan.operation == "reduce_sum" and c.plan.accumulation_dtype == "f64":
            continue
        certs.append(c)
    return attrs.evolve(oracle_result, certificates=tuple(certs))


@pytest.fixture(scope="session")
def stage_two(oracle_result):
    saved = dict(stages._result_alterations)
    stages._result_alterations.update(_plant(VerificationStage.TARGET, error=TARGET_ERROR_CASE))
    try:
        return stages.run_target_stage("cpu-compiled", doctored(oracle_result))
    finally:
        stages._result_alterations.clear()
        stages._result_alterations.update(saved)
