"""Any exception of one case (not only the spec's recoverable RuntimeError/ValueError) becomes complete
error evidence and the other cases run. Faults are planted through the compiled executable."""
from __future__ import annotations

import pytest

from intent_trace.oracle import Outcome
from intent_trace.oracle.verification import stages

from .planting import only, planted, stage_one

ADD_F32 = "add(lhs:f32,rhs:f32|compute:f32)->f32"


@pytest.mark.parametrize("error", [KeyError("planted"), TypeError("planted"), ZeroDivisionError("planted"),
                                   AssertionError("planted")])
def test_an_unexpected_exception_in_one_case_is_error_evidence(monkeypatch, error):
    calls = []

    def raising(run, args):
        calls.append(1)
        if len(calls) == 1:  # the first case's first run only
            raise error
        return run()
    with planted(monkeypatch, "cpu", only(ADD_F32, raising)):
        evidence = stage_one(ADD_F32)
    assert len(evidence) > 2 and [e.outcome for e in evidence] == [Outcome.ERROR] + [Outcome.PASSED] * (len(evidence) - 1)
    e = evidence[0]
    assert type(error).__name__ in e.reason and "planted" in e.reason
    assert e.target_input_hashes and e.shapes and e.policy is not None and e.kernel.operation == "add"


def test_an_unexpected_exception_in_stage_two_leaves_a_report(monkeypatch, oracle_result):
    """A KeyError in one target case used to abort the whole stage: now the stage returns its report."""
    def raising(run, args):
        raise KeyError("planted")
    # the cpu profile as target: its executables (and the oracle's, the same target) raise for one plan
    with planted(monkeypatch, "cpu", only("neg(x:f32|compute:f32)->f32", raising)):
        report = stages.run_target_stage("cpu-compiled", oracle_result)
    neg = [e for e in report.evidence if e.plan is not None and e.plan.plan_id == "neg(x:f32|compute:f32)->f32"]
    assert neg and all(e.outcome is Outcome.ERROR and "KeyError" in e.reason for e in neg)
    assert sum(e.outcome is Outcome.PASSED for e in report.evidence) > 150
