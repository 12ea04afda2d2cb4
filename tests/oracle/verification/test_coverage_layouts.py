"""Non-compact subjects pass real strided, transposed and offset NumPy views to every executing target, the
evidence records the caller's layout and what each target did with it, and a target that reads a view's
buffer as if it were compact is caught (planted through its compiled executable)."""
from __future__ import annotations

import numpy as np
import pytest

from intent_trace.oracle.verification import catalogue as C
from intent_trace.oracle.verification import layouts as L
from intent_trace.oracle.verification import stages
from intent_trace.oracle.verification.evidence import Outcome
from intent_trace.oracle.verification.records import VerificationStage as S

from .test_coverage_ops import PlantedRunner

NON_COMPACT = ("strided-read", "strided-view", "transposed-view", "offset-view")


def _subject(name):
    return next(s for s in C.SUBJECTS if s.name == name)


@pytest.mark.parametrize("shape", [(9,), (5, 7), (2, 3, 4)])
def test_place_builds_real_views_with_the_same_values(shape):
    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3.5
    strided, transposed, offset = (L.place(values, lay) for lay in (L.STRIDED, L.TRANSPOSED, L.OFFSET))
    for v in (strided, transposed, offset):
        np.testing.assert_array_equal(v, values)
        assert v.base is not None and v.base.size > v.size or v is transposed
    assert not strided.flags.c_contiguous and strided.strides[-1] == 3 * values.itemsize
    assert "offset 0 bytes" not in L.describe(offset)
    if len(shape) > 1:
        assert transposed.flags.f_contiguous and not transposed.flags.c_contiguous
        assert not offset.flags.c_contiguous


def read_views_as_compact(exe, args):
    """A fault (the classic stride bug): every non-contiguous In view's buffer is read as if it were compact,
    from the view's first element on."""
    bad = []
    for a, p in zip(args, exe.graph.params):
        if p.type.access == "In" and not a.flags.c_contiguous:
            start = a.__array_interface__["data"][0] - a.base.__array_interface__["data"][0]
            a = np.ndarray(a.shape, a.dtype, buffer=a.base, offset=start)
        bad.append(a)
    exe(*bad)


@pytest.fixture(scope="module")
def evidence():
    generic, cpu = stages._Runner("cpu-compiled", "generic"), stages._Runner("cpu-compiled", "cpu")
    target = stages._Runner("c-tilelang", "tilelang-c")
    out = {}
    for name in NON_COMPACT:
        s = _subject(name)
        out[name] = (stages._subject_evidence(S.ORACLE, "cpu-compiled", s, generic, cpu, None),
                     stages._subject_evidence(S.TARGET, "c-tilelang", s, cpu, target, None),
                     stages._subject_evidence(S.TARGET, "c-tilelang", s, cpu, PlantedRunner(target, read_views_as_compact), None))
    return out


def test_non_compact_subjects_pass_on_cpu_and_c_tilelang_and_record_their_layouts(evidence):
    for name, (one, two, _) in evidence.items():
        for e, reference, candidate in ((one[0], "generic", "cpu"), (two[0], "cpu", "tilelang-c")):
            assert e.outcome is Outcome.PASSED, (name, e.reason)
            assert e.layouts and e.layouts == tuple(tuple(x) for x in e.layouts)
            laid = {role: lay for role, lay, *_ in e.layouts}
            assert laid["in0"] != L.COMPACT and laid[f"out{0}"] != L.COMPACT
            for role, lay, caller, ref_did, cand_did in e.layouts:
                assert ref_did == L.effective(reference) and cand_did == L.effective(candidate)
                if lay != L.COMPACT:
                    assert "C-contiguous" not in caller or "offset 0 bytes" not in caller
            assert e.to_json()["layouts"]


def test_effective_layouts_name_what_each_target_does():
    assert "view itself" in L.effective("generic") and "view itself" in L.effective("cpu")
    assert "staging copy" in L.effective("tilelang-c") and "staging copy" in L.effective("tilelang-metal")


def test_a_target_that_ignores_strides_is_caught(evidence):
    for name, (_, _, planted) in evidence.items():
        assert planted[0].outcome is Outcome.FAILED, name
