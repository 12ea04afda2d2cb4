"""Small holes that let wrong inputs or stale state through (issue 14, item 10)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from intent_trace.graph import ops as kir_ops
from intent_trace.oracle import PlanKey, Tolerance, verification_profile, verify_backend
from intent_trace.oracle.verification import profiles
from intent_trace.oracle.verification import report as R
from intent_trace.oracle.verification.acceptance import compare_outputs


def test_from_plan_like_normalises_a_plan_key_too():
    raw = PlanKey("reduce_sum", ["x"], ["float32"], [("float32", "float64")], "float64", "sum", "float64", "float32")
    key = PlanKey.from_plan_like(raw)
    assert key == PlanKey("reduce_sum", ("x",), ("f32",), ("f32->f64",), "f64", "sum", "f64", "f32")
    assert PlanKey.from_plan_like(key) == key and hash(PlanKey.from_plan_like(key)) == hash(key)
    with pytest.raises(ValueError):
        PlanKey.from_plan_like(PlanKey("add", ("lhs", "lhs"), ("f32", "f32"), (), "f32", "none", None, "f32"))


def test_an_op_registered_after_the_first_lookup_is_detected(monkeypatch):
    profiles.catalogue_for("cpu-compiled")  # the first lookup (cached)
    some = next(iter(kir_ops.REGISTRY.values()))
    monkeypatch.setitem(kir_ops.REGISTRY, "an_op_added_later", some)
    with pytest.raises(ValueError, match="an_op_added_later"):
        profiles.catalogue_for("cpu-compiled")
    monkeypatch.delitem(kir_ops.REGISTRY, "an_op_added_later")
    profiles.catalogue_for("cpu-compiled")  # and its removal is seen as well


def test_the_report_lists_each_receipt_once(oracle_result, monkeypatch):
    import attrs

    monkeypatch.setattr(R, "run_oracle_stage", lambda p: oracle_result)
    # verifying cpu-compiled as a target compiles the oracle's specialisations again: the same receipts
    monkeypatch.setattr(R, "run_target_stage",
                        lambda p, o, **kw: attrs.evolve(oracle_result.report, stage=R.VerificationStage.TARGET))
    report = verify_backend("cpu-compiled")
    ids = [r.receipt_id for r in report.receipts]
    assert len(ids) == len(set(ids)) == len({r.receipt_id for r in oracle_result.report.receipts})
    assert report.to_jsonl().count('"record":"receipt"') == len(ids)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint32, np.uint8])
def test_integer_deviations_are_measured_on_values_not_words(dtype):
    info = np.iinfo(dtype)
    e = np.array([0, info.max, info.min, 5], dtype)
    a = np.array([-1 if info.min < 0 else 1, info.max, info.min, 5], dtype)
    c = compare_outputs((e,), (a,), ("i32",))
    assert c.mismatches == 1 and c.deviations.absolute == 1 and c.deviations.ulps == 1
    wide = compare_outputs((np.array([info.min], dtype),), (np.array([info.max], dtype),), ("i32",))
    assert wide.deviations.absolute == int(info.max) - int(info.min)


@pytest.mark.parametrize("fields, error", [
    ((math.nan, 0.0, 0), ValueError), ((0.0, math.nan, 0), ValueError), ((-1e-9, 0.0, 0), ValueError),
    ((0.0, -1.0, 0), ValueError), ((0.0, 0.0, -1), ValueError), ((0.0, 0.0, 2**32), ValueError),
    (("0.1", 0.0, 0), TypeError), ((0.0, 0.0, 1.5), TypeError), ((True, 0.0, 0), TypeError),
    ((0.0, 0.0, True), TypeError), ((None, 0.0, 0), TypeError)])
def test_tolerance_fields_are_validated(fields, error):
    with pytest.raises(error):
        Tolerance(*fields)


def test_tolerance_accepts_its_valid_domain():
    assert Tolerance(0, 0.0, 0).ulps == 0
    assert Tolerance(math.inf, math.inf, 2**32 - 1).absolute == math.inf
    assert Tolerance(1e-3, 0.5, np.int64(4)).ulps == 4


class _Sneaky(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("selector", [_Sneaky("cpu-compiled"), _Sneaky("anything")])
def test_a_str_subclass_is_not_an_exact_string_selector(selector, monkeypatch):
    ran = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: ran.append(p))
    with pytest.raises(TypeError):
        verification_profile(selector)
    with pytest.raises(TypeError):
        verify_backend(selector)
    assert not ran


def test_the_report_file_keeps_a_fresh_files_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        R.write_atomically(tmp_path / "r.jsonl", "x\n")
    finally:
        os.umask(old)
    assert (os.stat(tmp_path / "r.jsonl").st_mode & 0o777) == 0o640
