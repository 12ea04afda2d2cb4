"""Installed profiles, their manifests and plan classifications, and the completeness check.

A profile's catalogue (:class:`ProfileCatalogue`) is built from the verification catalogue, the
carrier's limits and the oracle's deferrals; :func:`validate_catalogue` then checks it against
itself, the op registry, the witness kernels and the backend's lowering table. Every public lookup
goes through that check, so a catalogue that drifted from the compiler raises ValueError before
anything is prepared or executed.
"""
from __future__ import annotations

import functools
import importlib

import attrs

from ...graph import ops as kir_ops
from . import catalogue as C
from .coverage_ops import required_classes as coverage_classes
from .records import (ClassificationDisposition, LogicalKernel, PlanClassification, PlanKey, Subject,
                      VerificationClass as VC, VerificationProfile, VerificationStage)

ORACLE, TARGET = VerificationStage.ORACLE, VerificationStage.TARGET
KERNEL_VARIANT = "v1"

_PROFILES = {p.profile_id: p for p in (
    VerificationProfile("c-tilelang", "tilelang-c", "tilelang", (TARGET,), "tilelang-c"),
    VerificationProfile("cpu-compiled", "numba-llvm-cpu", "numba", (ORACLE, TARGET), "cpu"),
    VerificationProfile("cuda-tilelang", "tilelang-cuda", "tilelang", (TARGET,), "tilelang-cuda"),
    VerificationProfile("metal-tilelang", "tilelang-metal", "tilelang", (TARGET,), "tilelang-metal"),
)}
ORACLE_PROFILE_ID = "cpu-compiled"

# target -> (module, attribute path) of the lowering rule table keyed by OpDef
_LOWERING_TABLES = {"cpu": ("intent_trace.oracle.numba.emitter", "NumbaEmitter.rules"),
                    "generic": ("intent_trace.oracle.generic", "RULES")}
for _t in ("tilelang-c", "tilelang-cuda", "tilelang-metal"):
    _LOWERING_TABLES[_t] = ("intent_trace.backends.tilelang.rules", "RULES")


def verification_profiles() -> tuple:
    """Every installed profile, sorted by profile_id."""
    return tuple(_PROFILES[k] for k in sorted(_PROFILES))


def verification_profile(profile_id: str) -> VerificationProfile:
    if type(profile_id) is not str:  # an exact string: a str subclass may compare or hash as it likes
        raise TypeError(f"a profile selector is a str profile_id, got {type(profile_id).__name__}")
    try:
        return _PROFILES[profile_id]
    except KeyError:
        raise ValueError(f"unknown verification profile {profile_id!r}; installed: {', '.join(sorted(_PROFILES))}") \
            from None


def _resolve(profile) -> VerificationProfile:
    if isinstance(profile, str):  # verification_profile rejects str subclasses
        return verification_profile(profile)
    if not isinstance(profile, VerificationProfile):
        raise TypeError(f"expected a VerificationProfile or profile_id, got {type(profile).__name__}")
    if _PROFILES.get(profile.profile_id) != profile:
        raise ValueError(f"profile {profile.profile_id!r} is not the installed profile of that id")
    return profile


# --- the catalogue of one profile ---------------------------------------------------------------

@attrs.frozen
class SubjectClassification:
    profile_id: str
    subject: Subject
    classes: tuple
    disposition: ClassificationDisposition = ClassificationDisposition.ACTIVE

    def to_json(self) -> dict:
        return {"profile_id": self.profile_id, "subject": self.subject.to_json(),
                "classes": [c.value for c in self.classes], "disposition": self.disposition.value}


@attrs.frozen
class ProfileCatalogue:
    profile: VerificationProfile
    manifest: tuple  # LogicalKernel, ...
    plans: tuple  # (LogicalKernel, PlanKey), ... every plan the carrier advertises
    classifications: tuple  # PlanClassification, ...
    subjects: tuple  # SubjectClassification, ...


def kernel_id(profile: VerificationProfile, operation: str) -> str:
    return f"{profile.provider}.{profile.carrier}.{operation}"


def required_classes(op: C.Operation, plan: PlanKey) -> tuple:
    """The classes an active plan must pass, in canonical order."""
    own = coverage_classes(op.kind, plan)
    if own is not None:
        return own
    dtype = plan.operand_dtypes[-1] if op.kind == C.POINTWISE else plan.operand_dtypes[0]
    floating = dtype == "f32" or (op.converts and "f32" in plan.operand_dtypes)
    if op.kind == C.POINTWISE or op.name == "reduce_max" or not floating:
        return (VC.BIT_EXACT, VC.SIGNED_ZERO, VC.SPECIAL_VALUES) if floating else (VC.BIT_EXACT, VC.SPECIAL_VALUES)
    analytic = (VC.ANALYTIC,) if op.name in ("reduce_sum", "matmul") else ()
    # special values (NaN, signed infinities, overflow, subnormals) are exact obligations of floating
    # accumulations too: a target that flushes subnormals or replaces non-finite results must fail
    return tuple(sorted((VC.SIGNED_ZERO, VC.SPECIAL_VALUES, VC.STRUCTURAL, *analytic, VC.NUMERICAL,
                         VC.WIDE_EXPONENT), key=list(VC).index))


def _classification(profile: VerificationProfile, kernel: LogicalKernel, op: C.Operation,
                    plan: PlanKey) -> PlanClassification:
    reason = C.oracle_deferral(plan)
    if reason is not None:
        if profile.profile_id != ORACLE_PROFILE_ID:
            reason = f"the cpu-compiled oracle defers this plan ({reason})"
        return PlanClassification(kernel, plan, (), ClassificationDisposition.DEFERRED, reason)
    return PlanClassification(kernel, plan, required_classes(op, plan), ClassificationDisposition.ACTIVE)


def build_catalogue(profile: VerificationProfile) -> ProfileCatalogue:
    limits = C.CARRIER_LIMITS.get(profile.carrier, frozenset())
    manifest, plans, classifications = [], [], []
    for op in C.OPERATIONS:
        kernel = LogicalKernel(profile.profile_id, op.name, kernel_id(profile, op.name), KERNEL_VARIANT)
        manifest.append(kernel)
        for plan in op.plans:
            if C.plan_uses(plan) & limits:
                continue
            plans.append((kernel, plan))
            classifications.append(_classification(profile, kernel, op, plan))
    subjects = tuple(SubjectClassification(profile.profile_id, s, (VC.BIT_EXACT,)) for s in C.SUBJECTS)
    return ProfileCatalogue(profile, tuple(manifest), tuple(plans), tuple(classifications), subjects)


# --- completeness -------------------------------------------------------------------------------

def _duplicates(items) -> list:
    seen, dup = set(), []
    for item in items:
        if item in seen:
            dup.append(item)
        seen.add(item)
    return dup


def _fail(kind: str, what: str, items) -> None:
    items = list(items)
    if items:
        shown = ", ".join(sorted(map(str, items))[:8]) + (" ..." if len(items) > 8 else "")
        raise ValueError(f"incomplete verification catalogue: {kind} {what}: {shown}")


def validate_catalogue(cat: ProfileCatalogue) -> None:
    """Raise ValueError for any duplicate, missing, stale, unknown or mismatched entry."""
    profile = cat.profile
    ops_by_name = {op.name: op for op in C.OPERATIONS}
    # logical kernels
    _fail("duplicate", "logical kernels", _duplicates(k.kernel_id for k in cat.manifest))
    _fail("duplicate", "manifest operations", _duplicates(k.operation for k in cat.manifest))
    _fail("mismatched", "kernel profiles", [k.kernel_id for k in cat.manifest if k.profile_id != profile.profile_id])
    _fail("unknown", "operations", [k.operation for k in cat.manifest if k.operation not in ops_by_name])
    _fail("missing", "operations", set(ops_by_name) - {k.operation for k in cat.manifest})
    kernels = {k.kernel_id: k for k in cat.manifest}
    # plans
    _fail("duplicate", "plans", [p.plan_id for p in _duplicates(p for _, p in cat.plans)])
    _fail("stale", "plans (kernel not in the manifest)", [p.plan_id for k, p in cat.plans if kernels.get(k.kernel_id) != k])
    _fail("mismatched", "plans (operation differs from kernel)", [p.plan_id for k, p in cat.plans if p.operation != k.operation])
    known = {p for op in C.OPERATIONS for p in op.plans}
    _fail("unknown", "plans", [p.plan_id for _, p in cat.plans if p not in known])
    limits = C.CARRIER_LIMITS.get(profile.carrier, frozenset())
    advertised = {p for _, p in cat.plans}
    _fail("missing", "plans", [p.plan_id for p in known - advertised if not C.plan_uses(p) & limits])
    # classifications: exactly one per advertised plan, the one the rules give
    _fail("duplicate", "classifications", [p.plan_id for p in _duplicates(c.plan for c in cat.classifications)])
    classified = {c.plan: c for c in cat.classifications}
    _fail("missing", "classifications", [p.plan_id for p in advertised - set(classified)])
    _fail("stale", "classifications", [p.plan_id for p in set(classified) - advertised])
    plan_kernel = {p: k for k, p in cat.plans}
    expected = {p: _classification(profile, plan_kernel[p], ops_by_name[p.operation], p) for p in advertised
                if p.operation in ops_by_name}
    _fail("mismatched", "classifications", [p.plan_id for p, c in classified.items()
                                            if p in expected and (c != expected[p])])
    # subjects
    names = [s.subject.name for s in cat.subjects]
    _fail("duplicate", "subjects", _duplicates(names))
    _fail("missing", "subjects", {s.name for s in C.SUBJECTS} - set(names))
    _fail("unknown", "subjects", set(names) - {s.name for s in C.SUBJECTS})
    _fail("mismatched", "subjects", [s.subject.name for s in cat.subjects
                                     if s.subject not in C.SUBJECTS or s.profile_id != profile.profile_id or
                                     s.classes != (VC.BIT_EXACT,)])
    _validate_against_registry()
    _validate_lowering(profile)


def _validate_against_registry() -> None:
    """Every registry op is a verification operation, exercised by a subject, or excluded with a reason.

    Cached per content of the registry and of the catalogue's claims, so an op registered (or a claim
    changed) after the first lookup is seen at the next one."""
    claimed = frozenset({op.canonical_op for op in C.OPERATIONS} | {name for s in C.SUBJECTS for name in s.covers})
    _validate_registry_snapshot(frozenset(kir_ops.REGISTRY), claimed, frozenset(C.EXCLUDED_OPS))


@functools.lru_cache(maxsize=8)
def _validate_registry_snapshot(registry: frozenset, claimed: frozenset, excluded: frozenset) -> None:
    registry, claimed = set(registry), set(claimed)
    _fail("unknown", "registry ops named by the catalogue", (claimed | excluded) - registry)
    _fail("mismatched", "ops both covered and excluded", claimed & excluded)
    _fail("missing", "registry ops (neither covered nor excluded)", registry - claimed - excluded)
    from .witnesses import subject_kernels

    kernels = subject_kernels()
    for subject in C.SUBJECTS:
        graph = kernels[subject.name].trace()
        _fail("mismatched", f"subject {subject.name} (its witness does not use)", set(subject.covers) - _graph_ops(graph))


def _graph_ops(graph) -> set:
    return {node.op.name for node in graph.walk()}


def lowering_table(target: str):
    """The target's rule table keyed by OpDef, or None when this build does not provide the target."""
    from ... import compiler

    if target not in compiler.targets():
        return None
    module, path = _LOWERING_TABLES[target]
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return None
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _validate_lowering(profile: VerificationProfile) -> None:
    table = lowering_table(profile.target)
    if table is None:
        return  # the provider is absent; Stage Two raises the actionable RuntimeError
    needed = {op.canonical_op for op in C.OPERATIONS} | {name for s in C.SUBJECTS for name in s.covers}
    _fail("stale", f"operations ({profile.target} has no lowering rule)",
          [n for n in needed if kir_ops.REGISTRY[n] not in table])


def catalogue_for(profile) -> ProfileCatalogue:
    """The validated catalogue of an installed profile (the seam tests use to plant stale entries)."""
    profile = _resolve(profile)
    cat = _built(profile)
    validate_catalogue(cat)
    return cat


@functools.lru_cache(maxsize=None)
def _built(profile: VerificationProfile) -> ProfileCatalogue:
    return build_catalogue(profile)


def kernel_manifest(profile) -> tuple:
    return catalogue_for(profile).manifest


def classify_profile_plans(profile) -> tuple:
    return catalogue_for(profile).classifications


def classify_profile_subjects(profile) -> tuple:
    return catalogue_for(profile).subjects


def operation(name: str) -> C.Operation:
    for op in C.OPERATIONS:
        if op.name == name:
            return op
    raise ValueError(f"unknown verification operation {name!r}")
