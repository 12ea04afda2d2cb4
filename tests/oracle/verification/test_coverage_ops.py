"""The data-dependent, packed-format, RNG, atomic and region ops have plans, classes and evidence: every
case passes Stage One (cpu vs generic) and Stage Two on c-tilelang, metal-tilelang classifies them, and
one wrong element planted through the target's compiled executable fails every case of every plan."""
from __future__ import annotations

import numpy as np
import pytest

from intent_trace.graph import ops as kir
from intent_trace.oracle.verification import catalogue as C
from intent_trace.oracle.verification import coverage_ops as K
from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.evidence import Outcome
from intent_trace.oracle.verification.profiles import catalogue_for, classify_profile_plans, operation
from intent_trace.oracle.verification.records import VerificationClass as VC, VerificationStage as S

NEWLY_COVERED = ("quantize", "quantized_dot", "scaled_contract", "sparse_contract", "histogram", "scatter_reduce", "unique_store",
                 "region_fold", "region_scan", "random_bits", "atomic_load", "atomic_store", "atomic_rmw",
                 "atomic_compare_exchange")


def _coverage_classifications(profile="cpu-compiled"):
    return [c for c in classify_profile_plans(profile) if operation(c.plan.operation).kind in K.KINDS]


def test_only_non_covered_ops_stay_excluded_and_metal_classifies_every_new_op():
    assert C.EXCLUDED_OPS == {}
    for profile in ("cpu-compiled", "c-tilelang", "metal-tilelang", "cuda-tilelang"):
        active = {operation(c.plan.operation).canonical_op for c in _coverage_classifications(profile) if c.active}
        assert set(NEWLY_COVERED) <= active, (profile, set(NEWLY_COVERED) - active)
    assert set(NEWLY_COVERED) <= set(kir.REGISTRY)


def test_classes_are_exact_where_the_result_is_exact():
    classes = {c.plan.plan_id: c.classes for c in _coverage_classifications()}
    exact = (VC.BIT_EXACT, VC.SPECIAL_VALUES)
    for plan_id, cls in classes.items():
        op = plan_id.split("(")[0]
        if op.startswith("quantized_dot"):
            assert cls == (VC.NUMERICAL,), plan_id
        elif op.startswith(("scaled_contract", "sparse_contract")) or "sum:f32" in plan_id:
            assert cls == (VC.STRUCTURAL, VC.NUMERICAL), plan_id
        else:
            assert cls == exact, plan_id


class PlantedRunner(stages._Runner):
    """A target runner whose compiled executables (the base runner's, shared) run through
    ``fault(exe, args)``: the fault calls the real executable and alters what it wrote (or what it read)."""

    def __init__(self, base: stages._Runner, fault):
        super().__init__(base.profile_id, base.target)
        self.base, self.fault = base, fault

    def executable(self, kernel):
        exe, fault = self.base.executable(kernel), self.fault

        class Planted:
            graph, source = exe.graph, getattr(exe, "source", None)

            def __call__(self, *args):
                fault(exe, args)

        return Planted()


def wrong_element(where: str):
    """A fault: the real call, then one bit flipped (a bool negated) in the first or last element of the
    first Out parameter."""
    def fault(exe, args):
        exe(*args)
        outputs = [a for a, p in zip(args, exe.graph.params) if getattr(p.type, "access", None) == "Out"]
        out = outputs[0]  # possibly a non-compact view: index it in place (a reshape could copy)
        at = np.unravel_index(0 if where == "first" else out.size - 1, out.shape)
        if out.dtype == np.bool_:
            out[at] = not out[at]
        else:
            out.view(np.dtype(f"u{out.dtype.itemsize}"))[at] ^= 1 << (out.dtype.itemsize * 8 - 2)
    return fault


@pytest.fixture(scope="module")
def evidence():
    """(stage one, stage two, planted stage two) evidence per plan id of every coverage plan."""
    generic, cpu = stages._Runner("cpu-compiled", "generic"), stages._Runner("cpu-compiled", "cpu")
    target = stages._Runner("c-tilelang", "tilelang-c")
    out = {}
    for i, c in enumerate(_coverage_classifications()):
        one = stages._plan_evidence(S.ORACLE, "cpu-compiled", c, generic, cpu, None, None)
        two = stages._plan_evidence(S.TARGET, "c-tilelang", c, cpu, target, None, None)
        planted = stages._plan_evidence(S.TARGET, "c-tilelang", c, cpu,
                                        PlantedRunner(target, wrong_element("first" if i % 2 else "last")), None, None)
        out[c.plan.plan_id] = (one, two, planted)
    return out


def test_every_new_case_passes_stage_one_and_stage_two_on_c_tilelang(evidence):
    assert len(evidence) == len(_coverage_classifications())
    for plan_id, (one, two, _) in evidence.items():
        bad = [(e.stage.value, e.case_id, e.outcome.value, e.reason) for e in one + two
               if e.outcome is not Outcome.PASSED]
        assert not bad, bad
        assert len(one) == len(two) > 0


def test_a_planted_wrong_element_fails_every_case_of_every_new_plan(evidence):
    for plan_id, (_, _, planted) in evidence.items():
        assert planted and all(e.outcome is Outcome.FAILED for e in planted), \
            [(e.case_id, e.outcome.value) for e in planted if e.outcome is not Outcome.FAILED]


def test_numerical_cases_carry_per_element_bounds_and_really_differ_from_exact(evidence):
    numerical = [e for one, two, _ in evidence.values() for e in one + two if e.verification_class is VC.NUMERICAL]
    assert numerical and all(e.policy.envelope_digest for e in numerical)
    assert any(e.comparison.mismatches for e in numerical)  # the bound is exercised, not only exact agreement


def test_every_catalogue_plan_of_the_new_ops_is_in_the_profile():
    cat = catalogue_for("c-tilelang")
    plans = {p for _, p in cat.plans}
    for name, _, kind, op_plans in K.specs():
        assert set(op_plans) <= plans, name


def test_operation_cases_with_real_views_record_their_layouts(evidence):
    laid = {}
    for plan_id, (one, two, _) in evidence.items():
        for e in one + two:
            for role, layout, caller, *_ in e.layouts:
                laid.setdefault(plan_id.split("(")[0], set()).add(layout)
    assert {"strided", "offset"} <= laid["scatter_reduce_add"] and {"strided", "offset"} <= laid["atomic_max"]
    assert {"transposed", "strided", "offset"} <= laid["sparse_contract_two_of_four"]
    assert {"transposed", "strided", "offset"} <= laid["scaled_contract"]
