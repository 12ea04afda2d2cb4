"""Stage Two re-derives authority from Stage One evidence it can check: doctored results grant nothing.

``stage_two`` (conftest) runs behind an oracle result doctored as a forger would, each certificate
recomputed from the doctored evidence, so only the evidence checks can catch the forgery.
"""
from __future__ import annotations

import attrs

from intent_trace.oracle import Outcome
from intent_trace.oracle.verification.authority import reconstruct_authority

from .conftest import DROPPED_CASE, LOOSENED_CASE, RELABELLED_PLAN, WRONG_CASE, doctored


def _plan_records(report, plan_id):
    return [e for e in report.evidence if e.plan is not None and e.plan.plan_id == plan_id]


def _blocked(stage_two, plan_id, why):
    records = _plan_records(stage_two, plan_id)
    assert records and all(e.outcome is Outcome.BLOCKED for e in records), plan_id
    assert all(why in e.reason for e in records), (plan_id, records[0].reason)


def test_a_failed_record_relabelled_passed_blocks_its_plan(stage_two):
    _blocked(stage_two, WRONG_CASE.split("/")[0], "recorded comparison fails its policy")


def test_a_dropped_failing_case_blocks_its_plan(stage_two):
    _blocked(stage_two, DROPPED_CASE.split("/")[0], f"lacks 1 required case(s), e.g. {DROPPED_CASE}")


def test_a_loosened_policy_blocks_its_plan(stage_two):
    _blocked(stage_two, LOOSENED_CASE.split("/")[0], "its policy does not follow from the case generator")


def test_evidence_relabelled_as_another_stage_blocks_its_plan(stage_two):
    _blocked(stage_two, RELABELLED_PLAN, "its stage does not follow from the case generator")


def test_the_doctored_certificates_all_rebuild_from_their_evidence(planted_oracle):
    """The forgeries are complete: a digest-only check (the old one) would accept every one of them."""
    from intent_trace.oracle.verification.authority import certificate_from

    forged = doctored(planted_oracle)
    plans = {WRONG_CASE.split("/")[0], DROPPED_CASE.split("/")[0], LOOSENED_CASE.split("/")[0], RELABELLED_PLAN}
    certs = {c.plan.plan_id: c for c in forged.certificates if c.plan is not None}
    assert plans <= set(certs)
    for plan_id in plans:
        records = _plan_records(forged.report, plan_id)
        assert certificate_from("cpu-compiled", certs[plan_id].obligation, certs[plan_id].classes, records) == \
            certs[plan_id]
    authority = reconstruct_authority(forged)
    assert not plans & {k.plan_id for k in authority.certificates if hasattr(k, "plan_id")}


def test_a_genuine_result_grants_every_certificate(oracle_result):
    authority = reconstruct_authority(oracle_result)
    assert len(authority.certificates) == len(oracle_result.certificates) and not authority.problems


def test_a_duplicated_record_or_an_extra_case_grants_nothing(oracle_result):
    plan_id = "neg(x:f32|compute:f32)->f32"
    records = _plan_records(oracle_result.report, plan_id)
    extra = attrs.evolve(records[0], case_id=records[0].case_id.replace("/0", "/9"))
    for added in (records[0], extra):
        evidence = oracle_result.report.evidence + (added,)
        forged = attrs.evolve(oracle_result, report=attrs.evolve(oracle_result.report, evidence=evidence))
        cert = next(c for c in forged.certificates if c.plan is not None and c.plan.plan_id == plan_id)
        authority = reconstruct_authority(forged)
        assert authority.get(cert.plan) is None  # the digest no longer rebuilds either way, and the set is wrong
        assert "more than once" in authority.why_not(cert.plan) or "does not produce" in authority.why_not(cert.plan)
