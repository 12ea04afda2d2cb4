"""The kernel-verification spec: profiles, plans, payloads, comparison, stages, certificates, reports.

Every public name is importable from ``intent_trace.oracle`` (DESIGN.md §3). Names load lazily, so
importing a target (``intent_trace.oracle.generic``) never pays for the verifier.
"""
from __future__ import annotations

import importlib

# public name -> submodule that defines it
EXPORTS = {
    **dict.fromkeys((
        "EncodedFloat32Payload", "EncodedInt32Payload", "EncodedBoolPayload", "EncodedInputs",
        "ExactStructuralPayload", "AnalyticCase", "arbitrary_float32_payload", "wide_exponent_float32_payload",
        "adversarial_float32_payload", "analytic_cases", "exact_structural_payload"), "payloads"),
    **dict.fromkeys((
        "float32_bits", "float32_ulp_distance", "compare_float32", "compare_exact", "Comparison", "Deviations",
        "Tolerance", "TolerancePolicy", "gamma_bound", "exact_policy", "stage_one_two_path_policy",
        "stage_two_float32_policy", "MAX_ULP_DISTANCE"), "comparison"),
    **dict.fromkeys((
        "VerificationStage", "VerificationClass", "ClassificationDisposition", "VerificationProfile", "LogicalKernel",
        "PlanKey", "PlanClassification", "Subject"), "records"),
    **dict.fromkeys((
        "verification_profiles", "verification_profile", "kernel_manifest", "classify_profile_plans",
        "classify_profile_subjects", "SubjectClassification"), "profiles"),
    **dict.fromkeys(("Outcome", "Evidence", "OracleCertificate", "CompilationReceipt", "StageReport",
                     "OracleStageResult", "evidence_digest"), "evidence"),
    **dict.fromkeys(("run_oracle_stage", "run_target_stage", "reporting_progress"), "stages"),
    **dict.fromkeys(("verify_backend", "VerificationReport", "SCHEMA_VERSION"), "report"),
    **dict.fromkeys(("verify", "KernelVerification", "OutputComparison"), "kernels"),
}


def __getattr__(name: str):
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))


__all__ = sorted(EXPORTS)
