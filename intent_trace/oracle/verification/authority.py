"""Stage One's certificates, issued from evidence and re-derived from it before Stage Two trusts them.

A certificate is only as good as the evidence it names, and an :class:`OracleStageResult` is an
ordinary value a caller can rebuild: relabel a failed record "passed", drop a failing case, mark
evidence as another stage's, then recompute the certificate digest. So Stage Two does not take a
record's outcome on trust. For every obligation it regenerates the deterministic cases of the plan
(or subject) and checks each record against its case: identity and labels (stage, profile, kernel,
plan, class, case id, input hashes, shapes, seed), the policy (recomputed from the case, so a
loosened tolerance is caught), and the outcome (recomputed from the recorded comparison and that
policy). The case set must be complete, each case recorded once. Only then is the certificate
rebuilt and compared. What fails any check grants nothing, and the reason is kept for the blocked
evidence it causes.
"""
from __future__ import annotations

import functools

import attrs

from .acceptance import case_policy
from .cases import operation_cases, subject_case
from .comparison import exact_policy
from .evidence import OracleCertificate, Outcome, evidence_digest
from .profiles import ORACLE_PROFILE_ID, catalogue_for, operation
from .records import VerificationStage
from .witnesses import subject_kernels


def certificate_from(profile_id, obligation, classes, records):
    """A certificate only for complete passing coverage: every class attempted, every attempt passed."""
    if not records or any(r.outcome is not Outcome.PASSED for r in records):
        return None
    if {r.verification_class for r in records} != set(classes):
        return None
    if isinstance(obligation, tuple):
        kernel, plan = obligation
        return OracleCertificate(profile_id, kernel, None, plan.operation, plan, tuple(classes), evidence_digest(records))
    return OracleCertificate(profile_id, None, obligation, f"subject:{obligation.name}", None, tuple(classes),
                             evidence_digest(records))


def certify(profile_id, cat, evidence):
    """Every certificate the evidence supports, in catalogue order."""
    by_obligation = _by_obligation(evidence)
    for c in cat.classifications:
        if c.active:
            cert = certificate_from(profile_id, (c.kernel, c.plan), c.classes, by_obligation.get((c.kernel, c.plan)))
            if cert is not None:
                yield cert
    for s in cat.subjects:
        cert = certificate_from(profile_id, s.subject, s.classes, by_obligation.get(s.subject))
        if cert is not None:
            yield cert


def _by_obligation(evidence) -> dict:
    out: dict = {}
    for e in evidence:
        out.setdefault(e.obligation, []).append(e)
    return out


@attrs.frozen
class Authority:
    """The certificates that survived re-derivation, keyed by oracle plan or subject, and why the others did not."""

    certificates: dict
    problems: dict  # obligation key (plan or subject) -> reason

    def get(self, key):
        return self.certificates.get(key)

    def why_not(self, key) -> str:
        return self.problems.get(key, "no certificate was issued")


@functools.lru_cache(maxsize=None)
def _plan_cases(plan, classes) -> dict:
    op = operation(plan.operation)
    return {case.case_id: case for case in operation_cases(op, plan, classes)}


@functools.lru_cache(maxsize=None)
def _subject_case(subject) -> dict:
    case = subject_case(subject, subject_kernels()[subject.name])
    return {case.case_id: case}


def record_problem(record, case, kernel, plan, subject) -> str | None:
    """Why ``record`` is not a genuine passing Stage One record of ``case`` (None when it is)."""
    expected = {
        "stage": VerificationStage.ORACLE, "profile_id": ORACLE_PROFILE_ID, "kernel": kernel, "plan": plan,
        "subject": subject, "verification_class": case.verification_class, "case_id": case.case_id,
        "target_input_hashes": case.inputs.input_hashes, "oracle_input_hashes": case.inputs.input_hashes,
        "shapes": case.shapes, "output_shapes": case.output_shapes, "contraction_length": case.contraction_length,
        "seed": case.seed, "reference_plan": None,
        "policy": exact_policy() if plan is None else case_policy(case, plan, VerificationStage.ORACLE),
    }
    for field, value in expected.items():
        if getattr(record, field) != value:
            return f"record {record.case_id}: its {field} does not follow from the case generator"
    if record.outcome is not Outcome.PASSED:
        return f"record {record.case_id} is {record.outcome.value}"
    if record.comparison is None or not record.policy.accepts(record.comparison):
        return f"record {record.case_id} is labelled passed, but its recorded comparison fails its policy"
    if case.expected is not None and (record.reference_comparison is None or
                                      not record.policy.accepts(record.reference_comparison)):
        return f"record {record.case_id} is labelled passed, but the reference disagreed with the analytic expectation"
    if record.reason or record.unwritten or not record.synchronized or record.receipt_id is None:
        return f"record {record.case_id} is labelled passed without a clean synchronized execution"
    return None


def obligation_problem(records, cases: dict, kernel, plan, subject) -> str | None:
    """Why ``records`` are not the complete genuine evidence of one obligation's ``cases``."""
    ids = [r.case_id for r in records or ()]
    if len(set(ids)) != len(ids):
        return "a case is recorded more than once"
    missing = sorted(set(cases) - set(ids))
    if missing:
        return f"the evidence lacks {len(missing)} required case(s), e.g. {missing[0]}"
    extra = sorted(set(ids) - set(cases))
    if extra:
        return f"the evidence holds case(s) the generator does not produce, e.g. {extra[0]}"
    for r in records:
        problem = record_problem(r, cases[r.case_id], kernel, plan, subject)
        if problem is not None:
            return problem
    return None


def reconstruct_authority(oracle_result) -> Authority:
    """The certificates of ``oracle_result`` that re-derive from its evidence (module docstring)."""
    cat = catalogue_for(ORACLE_PROFILE_ID)
    by_obligation = _by_obligation(oracle_result.report.evidence)
    obligations = {(c.kernel, c.plan): (c.classes, c.plan, lambda c=c: _plan_cases(c.plan, c.classes))
                   for c in cat.classifications if c.active}
    obligations.update({s.subject: (s.classes, s.subject, lambda s=s: _subject_case(s.subject)) for s in cat.subjects})
    certificates, problems = {}, {}
    for cert in oracle_result.certificates:
        obligation = cert.obligation
        if obligation not in obligations:
            continue  # a certificate for something the oracle's catalogue does not hold
        classes, key, cases = obligations[obligation]
        kernel, plan = obligation if isinstance(obligation, tuple) else (None, None)
        subject = None if isinstance(obligation, tuple) else obligation
        records = by_obligation.get(obligation)
        problem = obligation_problem(records, cases(), kernel, plan, subject)
        if problem is None:
            rebuilt = certificate_from(ORACLE_PROFILE_ID, obligation, classes, records)
            if rebuilt is None or rebuilt != cert:
                problem = "the certificate does not rebuild from its evidence (digest, classes or coverage differ)"
        if problem is None:
            certificates[key] = cert
        else:
            problems[key] = problem
    return Authority(certificates, problems)
