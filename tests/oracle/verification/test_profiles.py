"""Requirement: native kernels and executable CPU plans have complete classifications; dispositions stay explicit."""
from __future__ import annotations

import attrs
import numpy as np
import pytest

from intent_trace import I
from intent_trace.oracle import (ClassificationDisposition, LogicalKernel, PlanClassification, PlanKey,
                                 VerificationClass, VerificationProfile, VerificationStage, classify_profile_plans,
                                 kernel_manifest, verification_profile, verification_profiles)
from intent_trace.oracle.verification import catalogue as C, profiles as P


def test_verification_profiles_are_sorted_immutable_records():
    profiles = verification_profiles()
    ids = [p.profile_id for p in profiles]
    assert ids == sorted(ids)
    assert {"cpu-compiled", "metal-tilelang", "cuda-tilelang", "c-tilelang"} <= set(ids)
    cpu = verification_profile("cpu-compiled")
    assert cpu.stages == (VerificationStage.ORACLE, VerificationStage.TARGET)
    assert verification_profile("metal-tilelang").stages == (VerificationStage.TARGET,)
    assert all(isinstance(p, VerificationProfile) and isinstance(p.carrier, str) and isinstance(p.provider, str)
               for p in profiles)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cpu.profile_id = "x"


@pytest.mark.parametrize("selector", [None, 3, b"cpu-compiled", ("cpu-compiled",)])
def test_verification_profile_rejects_a_non_string_selector(selector):
    with pytest.raises(TypeError):
        verification_profile(selector)


def test_verification_profile_rejects_an_unknown_selector():
    with pytest.raises(ValueError, match="unknown verification profile 'cpu'"):
        verification_profile("cpu")
    with pytest.raises(ValueError):
        kernel_manifest("nope")


def test_kernel_manifest_binds_profile_operation_kernel_and_variant():
    manifest = kernel_manifest("cpu-compiled")
    assert all(isinstance(k, LogicalKernel) and k.profile_id == "cpu-compiled" for k in manifest)
    assert len({k.kernel_id for k in manifest}) == len(manifest)
    assert {k.operation for k in manifest} == {op.name for op in C.OPERATIONS}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        manifest[0].variant = "v2"


@pytest.mark.parametrize("profile", ["cpu-compiled", "metal-tilelang", "cuda-tilelang", "c-tilelang"])
def test_classify_the_complete_installed_backend(profile):
    manifest = kernel_manifest(profile)
    classes = classify_profile_plans(profile)
    plans = [c.plan for c in classes]
    assert len(set(plans)) == len(plans), "exactly one classification per plan"
    assert {c.kernel for c in classes} == set(manifest), "every logical kernel has its plans classified"
    for c in classes:
        assert c.plan.operation == c.kernel.operation
        assert (c.disposition is ClassificationDisposition.ACTIVE) == bool(c.classes)
        assert c.active or c.reason.strip()
    subjects = P.classify_profile_subjects(profile)
    assert {s.subject for s in subjects} == set(C.SUBJECTS)
    layouts = {s.subject.layout for s in subjects}
    assert {"non-compact", "hierarchical", "multi-output"} <= layouts


def test_metal_covers_an_executable_plan_for_every_computational_dispatch_name():
    classes = classify_profile_plans("metal-tilelang")
    covered = {c.plan.operation for c in classes if c.active}
    deferred_only = {c.plan.operation for c in classes} - covered
    assert covered | deferred_only == {op.name for op in C.OPERATIONS}
    assert all(c.plan.operation in covered or not c.active for c in classes)
    # Metal has no float64: no advertised plan uses it, and the f32 accumulations remain
    assert not any("f64" in C.plan_uses(c.plan) for c in classes)
    assert {"reduce_sum", "matmul", "cumsum", "reduce_max"} <= covered
    # every computational name has at least one plan (active, or deferred by the oracle with a reason)
    assert {c.plan.operation for c in classes} == {op.name for op in C.OPERATIONS}


def _catalogue():
    return P.build_catalogue(verification_profile("cpu-compiled"))


def test_reject_stale_classification_metadata_when_a_plan_is_gained():
    cat = _catalogue()
    kernel = cat.manifest[0]
    extra = PlanKey(kernel.operation, ("lhs", "rhs"), ("f64", "f64"), (), "f64", "none", None, "f64")
    with pytest.raises(ValueError, match="unknown plans|missing classifications"):
        P.validate_catalogue(attrs.evolve(cat, plans=cat.plans + ((kernel, extra),)))


def test_reject_stale_classification_metadata_when_a_plan_is_lost():
    cat = _catalogue()
    with pytest.raises(ValueError, match="missing plans|stale classifications"):
        P.validate_catalogue(attrs.evolve(cat, plans=cat.plans[1:]))


def test_reject_stale_classification_metadata_when_a_kernel_is_duplicated_or_lost():
    cat = _catalogue()
    with pytest.raises(ValueError, match="duplicate logical kernels"):
        P.validate_catalogue(attrs.evolve(cat, manifest=cat.manifest + (cat.manifest[0],)))
    with pytest.raises(ValueError, match="missing operations"):
        P.validate_catalogue(attrs.evolve(cat, manifest=cat.manifest[1:]))


def test_reject_duplicate_or_mismatched_classifications():
    cat = _catalogue()
    with pytest.raises(ValueError, match="duplicate classifications"):
        P.validate_catalogue(attrs.evolve(cat, classifications=cat.classifications + (cat.classifications[0],)))
    first = cat.classifications[0]
    wrong = PlanClassification(first.kernel, first.plan, (VerificationClass.BIT_EXACT,), first.disposition)
    with pytest.raises(ValueError, match="mismatched classifications"):
        P.validate_catalogue(attrs.evolve(cat, classifications=(wrong,) + cat.classifications[1:]))


def test_reject_missing_unknown_or_duplicate_subjects():
    cat = _catalogue()
    with pytest.raises(ValueError, match="missing subjects"):
        P.validate_catalogue(attrs.evolve(cat, subjects=cat.subjects[1:]))
    with pytest.raises(ValueError, match="duplicate subjects"):
        P.validate_catalogue(attrs.evolve(cat, subjects=cat.subjects + (cat.subjects[0],)))
    rogue = attrs.evolve(cat.subjects[0], subject=attrs.evolve(cat.subjects[0].subject, name="teleport"))
    with pytest.raises(ValueError, match="unknown subjects"):
        P.validate_catalogue(attrs.evolve(cat, subjects=cat.subjects + (rogue,)))


def test_reject_a_registry_op_the_catalogue_does_not_account_for(monkeypatch):
    # random_bits is a verification operation now: drop it from the operations the registry is checked against
    monkeypatch.setattr(C, "OPERATIONS", tuple(op for op in C.OPERATIONS if op.canonical_op != "random_bits"))
    with pytest.raises(ValueError, match="missing registry ops.*random_bits"):
        P.validate_catalogue(_catalogue())


def test_reject_an_operation_the_backend_cannot_lower(monkeypatch):
    table = dict(P.lowering_table("cpu"))
    del table[next(op for op in table if op.name == "fma")]
    monkeypatch.setattr(P, "lowering_table", lambda target: table)
    with pytest.raises(ValueError, match="stale operations.*fma"):
        P.validate_catalogue(_catalogue())


def test_plan_classification_keeps_dispositions_explicit():
    first = classify_profile_plans("cpu-compiled")[0]
    with pytest.raises(ValueError, match="no verification class"):
        PlanClassification(first.kernel, first.plan, (), ClassificationDisposition.ACTIVE)
    with pytest.raises(ValueError, match="no active classes"):
        PlanClassification(first.kernel, first.plan, first.classes, ClassificationDisposition.DEFERRED, "why")
    with pytest.raises(ValueError, match="non-empty reason"):
        PlanClassification(first.kernel, first.plan, (), ClassificationDisposition.DEFERRED, "  ")
    with pytest.raises(ValueError, match="canonical order"):
        PlanClassification(first.kernel, first.plan, tuple(reversed(first.classes)), first.disposition)


def test_report_a_vendor_transcendental_plan_classification():
    by_id = {c.plan.plan_id: c for c in classify_profile_plans("cpu-compiled")}
    exp = by_id["exp(x:f32|compute:f32)->f32"]
    assert exp.disposition is ClassificationDisposition.DEFERRED and not exp.classes
    assert "vendor-transcendental" in exp.reason
    assert by_id["sqrt(x:f32|compute:f32)->f32"].active  # correctly rounded: verified bit for bit


def test_split_pow_by_executable_plan():
    by_id = {c.plan.plan_id: c for c in classify_profile_plans("cpu-compiled")}
    assert by_id["pow(lhs:i32,rhs:i32|compute:i32)->i32"].active
    floating = by_id["pow(lhs:f32,rhs:f32|compute:f32)->f32"]
    assert floating.disposition is ClassificationDisposition.DEFERRED and "floating pow" in floating.reason


def test_plan_key_from_plan_like_normalises_every_spelling():
    key = PlanKey.from_plan_like({"operation": "matmul", "operands": [("lhs", np.float32), ("rhs", "float32")],
                                  "conversions": [("f32", I.f64), "f64 -> float32"], "compute_dtype": I.f64,
                                  "accumulation": "dot", "accumulation_dtype": "float64", "output_dtype": "f32"})
    assert key == next(p for op in C.OPERATIONS if op.name == "matmul" for p in op.plans
                       if p.accumulation_dtype == "f64")
    assert PlanKey.from_plan_like(key) == key  # normalised again (a PlanKey may be built non-canonically)
    assert PlanKey.from_plan_like(attrs.evolve(key)) == key
    assert hash(PlanKey.from_plan_like(key.to_json())) == hash(key)


@pytest.mark.parametrize("bad, error", [
    ({"operands": [("x", "f32")], "compute_dtype": "f32", "output_dtype": "f32"}, TypeError),
    ({"operation": "add", "operands": [("x", "f32")], "output_dtype": "f32"}, TypeError),
    ({"operation": "add", "operands": [("x", "f32"), ("x", "f32")], "compute_dtype": "f32", "output_dtype": "f32"},
     ValueError),
    ({"operation": "add", "operands": [("x", "f32")], "compute_dtype": "f32", "output_dtype": "f32",
      "accumulation": "sum"}, ValueError),
    ({"operation": "add", "operands": [("x", "quaternion")], "compute_dtype": "f32", "output_dtype": "f32"},
     TypeError),
])
def test_plan_key_from_plan_like_rejects_malformed_plans(bad, error):
    with pytest.raises(error):
        PlanKey.from_plan_like(bad)
