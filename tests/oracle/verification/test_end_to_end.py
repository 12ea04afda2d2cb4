"""``verify_backend("c-tilelang")`` unstubbed: both real stages over the full catalogue, once per session
(the tests share the result), plus faults planted through the tilelang-c executables in Stage Two.

The run keeps its compiled kernels in the ordinary cache root (a caller-given ``cache_dir``), so a
second test session skips the compilers.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from intent_trace import caches
from intent_trace.oracle import Outcome, classify_profile_plans, classify_profile_subjects, verify_backend
from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.catalogue import f64_authority
from intent_trace.oracle.verification.records import VerificationClass as VC, VerificationStage

from .planting import after, is_case, only, plan, planted
from .test_envelopes import F64_PLANS, MATMUL_F32, _f32_accumulation, the_case


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e") / "report.jsonl"
    report = verify_backend("c-tilelang", output=out, cache_dir=caches.default_root())
    return report, out


def test_verify_c_tilelang_end_to_end_passes(e2e):
    report, out = e2e
    failing = [(e.stage.value, e.case_id, e.reason) for e in report.evidence
               if e.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.BLOCKED)]
    assert report.passed, failing[:5]
    header = json.loads(out.read_text().splitlines()[0])
    assert header["passed"] and header["target_profile"]["profile_id"] == "c-tilelang"
    assert header["compile_cache"] == {"source": "argument", "kept": True, "root": caches.default_root()}
    assert report.target.counts()["passed"] > 200 and report.oracle.report.counts()["passed"] > 200


def test_stage_two_on_tilelang_c_covers_every_plan_class_and_subject(e2e):
    report, _ = e2e
    by_plan: dict = {}
    for e in report.target.evidence:
        assert e.stage is VerificationStage.TARGET and e.profile_id == "c-tilelang"
        by_plan.setdefault(e.plan.plan_id if e.plan is not None else e.subject.name, []).append(e)
    for c in classify_profile_plans("c-tilelang"):
        records = by_plan[c.plan.plan_id]
        if c.active:
            assert {e.verification_class for e in records} == set(c.classes)
            assert all(e.outcome is Outcome.PASSED and e.synchronized and e.receipt_id for e in records)
            if f64_authority(c.plan) is not None:
                assert all(e.reference_plan.accumulation_dtype == "f64" for e in records)
        else:
            assert [e.outcome for e in records] == [Outcome.DEFERRED, Outcome.PASSED]  # + Annex F values
    for s in classify_profile_subjects("c-tilelang"):
        (e,) = by_plan[s.subject.name]
        assert e.outcome is Outcome.PASSED and e.synchronized
    assert {r.target for r in report.target.receipts} == {"tilelang-c"}


def _stage_two(plan_id: str, oracle_result) -> list:
    """Stage Two evidence of one c-tilelang plan behind the f64 authority, on fresh runners."""
    c = next(c for c in classify_profile_plans("c-tilelang") if c.plan.plan_id == plan_id)
    cert_plan = f64_authority(c.plan) or c.plan
    assert any(cert.plan == cert_plan for cert in oracle_result.certificates)
    return stages._plan_evidence(VerificationStage.TARGET, "c-tilelang", c, stages._Runner("cpu-compiled", "cpu"),
                                 stages._Runner("c-tilelang", "tilelang-c"), cert_plan, None)


def test_a_sign_flip_of_one_tilelang_c_output_fails_stage_two(monkeypatch, oracle_result):
    case = the_case(MATMUL_F32, VC.WIDE_EXPONENT)

    def flip(args):
        if is_case(args, case):
            y = args[-1]
            flat = np.abs(np.asarray(y, np.float64)).reshape(-1)
            y.reshape(-1)[int(np.argmin(np.where(flat > 0, flat, np.inf)))] *= -1  # the smallest output
    with planted(monkeypatch, "tilelang-c", only(MATMUL_F32, after(flip))):
        evidence = _stage_two(MATMUL_F32, oracle_result)
    outcomes = {e.case_id.split("/", 1)[1]: e.outcome for e in evidence}
    assert outcomes.pop("wide-exponent/0") is Outcome.FAILED and set(outcomes.values()) == {Outcome.PASSED}


@pytest.mark.parametrize("plan_id", F64_PLANS)
def test_a_tilelang_c_float64_plan_that_accumulates_in_float32_fails_stage_two(monkeypatch, oracle_result, plan_id):
    with planted(monkeypatch, "tilelang-c", _f32_accumulation(plan_id)):
        evidence = _stage_two(plan_id, oracle_result)
    numerical = [e for e in evidence if e.verification_class in (VC.NUMERICAL, VC.WIDE_EXPONENT)]
    assert numerical and any(e.outcome is Outcome.FAILED for e in numerical)
    assert plan(plan_id)[1].accumulation_dtype == "f64"
