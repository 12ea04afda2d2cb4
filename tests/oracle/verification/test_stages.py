"""Requirements: Stage One records every attempt and certifies complete coverage; Stage Two runs only behind
a valid certificate; deferred domains stay explicit."""
from __future__ import annotations

import attrs
import pytest

from intent_trace import compiler
from intent_trace.oracle import (Evidence, OracleStageResult, Outcome, VerificationStage, classify_profile_plans,
                                 evidence_digest, gamma_bound, run_oracle_stage, run_target_stage)
from intent_trace.oracle.verification import stages

from .conftest import ERROR_CASE, FORGED_PLAN, TARGET_ERROR_CASE, WRONG_CASE


def _by_plan(evidence):
    out = {}
    for e in evidence:
        if e.plan is not None:
            out.setdefault(e.plan.plan_id, []).append(e)
    return out


def test_stage_one_attempts_every_class_of_every_active_plan(oracle_result):
    evidence = _by_plan(oracle_result.report.evidence)
    for c in classify_profile_plans("cpu-compiled"):
        records = evidence[c.plan.plan_id]
        if c.active:
            assert {e.verification_class for e in records} == set(c.classes)
        else:  # exactly one deferred record; the Annex F special values still run (test_deferred.py)
            assert [e.outcome for e in records if e.outcome is Outcome.DEFERRED] == [Outcome.DEFERRED]
            assert all(e.verification_class.value == "special-values" for e in records if e.outcome is not
                       Outcome.DEFERRED)
    counts = oracle_result.report.counts()
    assert counts["failed"] == counts["error"] == counts["blocked"] == 0


def test_certify_every_active_plan_of_one_kernel(oracle_result):
    evidence = _by_plan(oracle_result.report.evidence)
    certs = {c.plan: c for c in oracle_result.certificates if c.plan is not None}
    for c in classify_profile_plans("cpu-compiled"):
        if c.plan.operation != "matmul":
            continue
        cert = certs[c.plan]
        assert cert.operation == "matmul" and cert.kernel == c.kernel and cert.classes == c.classes
        assert cert.evidence_digest == evidence_digest(evidence[c.plan.plan_id])
    # every subject is certified as well
    assert {c.subject.name for c in oracle_result.certificates if c.subject is not None} == \
        {s.subject.name for s in stages.catalogue_for("cpu-compiled").subjects}


def test_fail_closed_on_one_required_witness(oracle_result, planted_oracle):
    evidence = {e.case_id: e for e in planted_oracle.report.evidence}
    wrong = evidence[WRONG_CASE]
    assert wrong.outcome is Outcome.FAILED and wrong.comparison.mismatches == 1
    error = evidence[ERROR_CASE]
    assert error.outcome is Outcome.ERROR and "planted recoverable error" in error.reason
    # complete error evidence: operation, kernel, variant, class, plan, hashes, shapes, seed, tolerance
    assert error.kernel.operation == "sub" and error.kernel.variant and error.plan.plan_id.startswith("sub(")
    assert error.verification_class.value == "special-values" and error.target_input_hashes
    assert error.shapes and error.policy.policy_id == "exact-bits-v1"
    certified = {c.plan.plan_id for c in planted_oracle.certificates if c.plan is not None}
    assert WRONG_CASE.split("/")[0] not in certified and ERROR_CASE.split("/")[0] not in certified
    # independent cases continued and kept their certificates
    assert len(planted_oracle.report.evidence) == len(oracle_result.report.evidence)
    assert len(planted_oracle.certificates) == len(oracle_result.certificates) - 4  # add, sub (i32 and f32), cumsum


def test_compare_two_independently_associated_sums(oracle_result):
    numerical = [e for e in oracle_result.report.evidence
                 if e.plan is not None and e.plan.operation == "reduce_sum" and e.verification_class is not None
                 and e.verification_class.value == "numerical-gamma"]
    assert numerical
    for e in numerical:
        assert e.policy.policy_id == "stage-one-two-path-gamma-v1"
        assert e.comparison.deviations.absolute is not None and e.comparison.deviations.ulps is not None
        k = e.contraction_length + (1 if e.plan.accumulation_dtype == "f64" else 0)
        assert e.policy.tolerance.absolute >= 2 * gamma_bound(2.0 ** -24, k, 0.0)
        assert e.comparison.deviations.absolute <= e.policy.tolerance.absolute


def test_report_a_vendor_transcendental_plan(oracle_result):
    exp = [e for e in oracle_result.report.evidence if e.plan is not None and e.plan.plan_id.startswith("exp(")]
    deferred = [e for e in exp if e.outcome is Outcome.DEFERRED]
    assert len(deferred) == 1 and "vendor-transcendental" in deferred[0].reason
    assert not any(c.plan is not None and c.plan.operation == "exp" for c in oracle_result.certificates)


def test_split_pow_by_executable_plan(oracle_result):
    pow_records = _by_plan(oracle_result.report.evidence)
    integer = pow_records["pow(lhs:i32,rhs:i32|compute:i32)->i32"]
    floating = pow_records["pow(lhs:f32,rhs:f32|compute:f32)->f32"]
    assert integer and all(e.outcome is Outcome.PASSED for e in integer)
    assert [e.outcome for e in floating if e.verification_class is None] == [Outcome.DEFERRED]
    certified = {c.plan.plan_id for c in oracle_result.certificates if c.plan is not None}
    assert "pow(lhs:i32,rhs:i32|compute:i32)->i32" in certified
    assert "pow(lhs:f32,rhs:f32|compute:f32)->f32" not in certified


def test_decode_one_payload_for_both_executions_in_evidence(oracle_result):
    for e in oracle_result.report.evidence:
        assert e.target_input_hashes == e.oracle_input_hashes
    e = next(e for e in oracle_result.report.evidence if e.outcome is Outcome.PASSED)
    with pytest.raises(ValueError, match="input-bit hashes differ"):
        attrs.evolve(e, oracle_input_hashes=("0" * 64,) * len(e.target_input_hashes))


def test_keep_jit_specialization_out_of_classification(oracle_result):
    """One logical matmul variant runs at several shapes: one classification, distinct receipts."""
    plan_id = "matmul(lhs:f32,rhs:f32|compute:f32|dot:f32)->f32"
    receipts = [r for r in oracle_result.report.receipts if r.plan_id == plan_id]
    assert len({r.specialization for r in receipts}) == len(receipts) > 1
    assert len({r.receipt_id for r in receipts}) == len(receipts)
    assert len({r.kernel_id for r in receipts}) == 1
    assert sum(c.plan.plan_id == plan_id for c in classify_profile_plans("cpu-compiled")) == 1


def test_stage_one_requires_an_oracle_profile():
    with pytest.raises(ValueError, match="not registered for the oracle stage"):
        run_oracle_stage("metal-tilelang")
    with pytest.raises(TypeError):
        run_oracle_stage(7)


def test_stage_one_evidence_is_deterministic(oracle_result):
    plan = next(c for c in classify_profile_plans("cpu-compiled") if c.plan.plan_id == FORGED_PLAN)
    runner = stages._Runner("cpu-compiled", "cpu"), stages._Runner("cpu-compiled", "generic")
    again = stages._plan_evidence(VerificationStage.ORACLE, "cpu-compiled", plan, runner[1], runner[0], None, None)
    first = _by_plan(oracle_result.report.evidence)[FORGED_PLAN]
    assert evidence_digest(again) == evidence_digest(first)


# --- Stage Two --------------------------------------------------------------------------------------

def test_forged_certificate_blocks_stage_two(stage_two):
    forged = _by_plan(stage_two.evidence)[FORGED_PLAN]
    assert forged and all(e.outcome is Outcome.BLOCKED for e in forged)
    assert "no valid cpu-compiled certificate" in forged[0].reason


def test_block_a_target_without_float64_oracle_scope(stage_two):
    sums = [e for e in stage_two.evidence if e.plan is not None and e.plan.operation == "reduce_sum"
            and e.plan.operand_dtypes == ("f32",)]
    assert sums and all(e.outcome is Outcome.BLOCKED for e in sums)
    assert {e.reference_plan.accumulation_dtype for e in sums} == {"f64"}
    # the integer plan needs no float64 authority and ran
    ints = [e for e in stage_two.evidence if e.plan is not None and e.plan.plan_id.startswith("reduce_sum(x:i32")]
    assert ints and all(e.outcome is Outcome.PASSED for e in ints)


def test_run_an_authorized_hierarchical_contraction(stage_two):
    hier = [e for e in stage_two.evidence if e.subject is not None and e.subject.layout == "hierarchical"]
    assert len(hier) == 1
    e = hier[0]
    assert e.outcome is Outcome.PASSED and e.synchronized and e.receipt_id
    assert e.shapes == ((2, 3, 4), (2, 4, 5)) and e.output_shapes == ((2, 3, 5),)
    assert e.target_input_hashes and e.comparison.mismatches == 0
    matmul = [e for e in stage_two.evidence if e.plan is not None and e.plan.operation == "matmul"
              and e.verification_class.value == "numerical-gamma"]
    for m in matmul:
        assert m.outcome is Outcome.PASSED and m.contraction_length and m.synchronized
        assert m.policy.policy_id == "stage-two-float32-gamma-v1" and m.comparison.deviations.ulps is not None


def test_continue_after_a_target_error(stage_two):
    evidence = {e.case_id: e for e in stage_two.evidence}
    error = evidence[TARGET_ERROR_CASE]
    assert error.outcome is Outcome.ERROR and "planted recoverable error" in error.reason
    assert error.shapes and error.target_input_hashes and error.policy is not None
    passed = [e for e in stage_two.evidence if e.outcome is Outcome.PASSED]
    assert len(passed) > 150
    deferred = [e for e in stage_two.evidence if e.outcome is Outcome.DEFERRED]
    assert deferred and all("oracle" in e.reason or "vendor" in e.reason or "pow" in e.reason for e in deferred)


def test_stage_two_rejects_invalid_roles_and_results(oracle_result):
    with pytest.raises(TypeError, match="OracleStageResult"):
        run_target_stage("cpu-compiled", oracle_result.report)
    foreign = attrs.evolve(oracle_result, report=attrs.evolve(oracle_result.report, profile_id="metal-tilelang"))
    with pytest.raises(ValueError, match="must come from the cpu-compiled"):
        run_target_stage("cpu-compiled", foreign)
    with pytest.raises(ValueError):
        run_target_stage("no-such-profile", oracle_result)


def test_stage_two_requires_the_target_runtime(oracle_result, monkeypatch):
    ran = []
    monkeypatch.setattr(compiler, "targets", lambda: ("generic",))
    monkeypatch.setattr(stages, "_plan_evidence", lambda *a, **k: ran.append(a) or [])
    with pytest.raises(RuntimeError, match="needs the 'cpu' target"):
        run_target_stage("cpu-compiled", oracle_result)
    assert not ran
    with pytest.raises(RuntimeError, match="tilelang-metal|Metal"):
        run_target_stage("metal-tilelang", oracle_result)


def test_oracle_stage_result_is_immutable(oracle_result):
    assert isinstance(oracle_result, OracleStageResult)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        oracle_result.certificates = ()
    assert isinstance(oracle_result.report.evidence, tuple) and isinstance(oracle_result.report.evidence[0], Evidence)
