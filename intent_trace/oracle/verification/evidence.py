"""Evidence, certificates and receipts: the immutable facts a stage produces, and their digests.

Every record has a canonical JSON form (sorted keys, no wall-clock time, no host state), so an
evidence digest computed twice from the same inputs is the same string, and a certificate can be
checked by recomputing the digest from the evidence it claims to rest on.
"""
from __future__ import annotations

import enum
import hashlib
import json

import attrs

from .comparison import Comparison, TolerancePolicy
from .records import LogicalKernel, PlanKey, Subject, VerificationClass, VerificationStage


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    BLOCKED = "blocked"
    DEFERRED = "deferred"


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _opt(value):
    return None if value is None else value.to_json()


@attrs.frozen
class Evidence:
    """One attempt (or one explicit non-attempt: blocked or deferred) at one case of one obligation."""

    stage: VerificationStage
    profile_id: str
    kernel: LogicalKernel | None
    plan: PlanKey | None
    subject: Subject | None
    verification_class: VerificationClass | None
    case_id: str
    outcome: Outcome
    reason: str = ""
    target_input_hashes: tuple = ()
    oracle_input_hashes: tuple = ()
    shapes: tuple = ()
    output_shapes: tuple = ()
    contraction_length: int | None = None
    seed: int | None = None
    policy: TolerancePolicy | None = None
    comparison: Comparison | None = None
    reference_plan: PlanKey | None = None  # Stage Two: the oracle plan the target was compared with
    receipt_id: str | None = None
    synchronized: bool = False
    # analytic cases: the reference's own comparison with the independent expectation (both must match it)
    reference_comparison: Comparison | None = None
    unwritten: int = 0  # output elements neither poisoned run wrote (cases.poisoned_run), both executions
    layouts: tuple = ()  # non-compact operands: layouts.evidence_layouts (caller view, what each target did)

    def __attrs_post_init__(self) -> None:
        if tuple(self.target_input_hashes) != tuple(self.oracle_input_hashes):
            raise ValueError(f"evidence {self.case_id}: target and oracle input-bit hashes differ; both executions "
                             f"must decode the same encoded payload")
        if (self.plan is None) == (self.subject is None):
            raise ValueError(f"evidence {self.case_id}: binds exactly one of a plan or a subject")
        if not isinstance(self.outcome, Outcome):
            raise TypeError(f"evidence {self.case_id}: outcome must be an Outcome, got {self.outcome!r}")

    @property
    def obligation(self):
        """What a certificate would cover: the (kernel, plan) pair, or the subject."""
        return (self.kernel, self.plan) if self.plan is not None else self.subject

    def to_json(self) -> dict:
        return {
            "stage": self.stage.value, "profile_id": self.profile_id, "kernel": _opt(self.kernel),
            "plan": _opt(self.plan), "plan_id": None if self.plan is None else self.plan.plan_id,
            "subject": _opt(self.subject),
            "class": None if self.verification_class is None else self.verification_class.value,
            "case_id": self.case_id, "outcome": self.outcome.value, "reason": self.reason,
            "target_input_hashes": list(self.target_input_hashes),
            "oracle_input_hashes": list(self.oracle_input_hashes),
            "shapes": [list(s) for s in self.shapes], "output_shapes": [list(s) for s in self.output_shapes],
            "contraction_length": self.contraction_length, "seed": self.seed, "policy": _opt(self.policy),
            "comparison": _opt(self.comparison), "reference_plan": _opt(self.reference_plan),
            "receipt_id": self.receipt_id, "synchronized": self.synchronized,
            "reference_comparison": _opt(self.reference_comparison), "unwritten": self.unwritten,
            "layouts": [list(x) for x in self.layouts],
        }


def evidence_digest(records) -> str:
    """SHA-256 over the canonical JSON lines of ``records``, in order."""
    h = hashlib.sha256()
    for r in records:
        h.update(canonical_json(r.to_json()).encode())
        h.update(b"\n")
    return h.hexdigest()


@attrs.frozen
class OracleCertificate:
    """Stage One's fact: this obligation passed every required class, on exactly this evidence."""

    profile_id: str
    kernel: LogicalKernel | None
    subject: Subject | None
    operation: str
    plan: PlanKey | None
    classes: tuple
    evidence_digest: str

    @property
    def obligation(self):
        return (self.kernel, self.plan) if self.plan is not None else self.subject

    def to_json(self) -> dict:
        return {"profile_id": self.profile_id, "kernel": _opt(self.kernel), "subject": _opt(self.subject),
                "operation": self.operation, "plan": _opt(self.plan),
                "plan_id": None if self.plan is None else self.plan.plan_id,
                "classes": [c.value for c in self.classes], "evidence_digest": self.evidence_digest}


@attrs.frozen
class CompilationReceipt:
    """One JIT specialisation: many receipts may sit under one logical classification."""

    receipt_id: str
    profile_id: str
    target: str
    kernel_id: str
    variant: str
    plan_id: str | None
    specialization: tuple  # ((dtype, shape), ...) of the call that selected this compilation
    graph_digest: str
    source_digest: str | None
    provider_version: str

    def to_json(self) -> dict:
        return {"receipt_id": self.receipt_id, "profile_id": self.profile_id, "target": self.target,
                "kernel_id": self.kernel_id, "variant": self.variant, "plan_id": self.plan_id,
                "specialization": [[d, list(s)] for d, s in self.specialization], "graph_digest": self.graph_digest,
                "source_digest": self.source_digest, "provider_version": self.provider_version}


@attrs.frozen
class StageReport:
    profile_id: str
    stage: VerificationStage
    evidence: tuple
    receipts: tuple
    emulated: bool = False  # the carrier ran on its host emulator (verification/emulation.py), not its device

    def counts(self) -> dict:
        out = {o.value: 0 for o in Outcome}
        for e in self.evidence:
            out[e.outcome.value] += 1
        return out


@attrs.frozen
class OracleStageResult:
    report: StageReport
    certificates: tuple
