"""An unwritten output always fails: every case runs twice, from two poison fills no result can equal both of.

Faults are planted through the cpu oracle's compiled executable (``planting``).
"""
from __future__ import annotations

import numpy as np
import pytest

from intent_trace.oracle import Outcome

from .planting import only, planted, stage_one

EQ_F32 = "eq(lhs:f32,rhs:f32|compute:f32)->bool"
ADD_I32 = "add(lhs:i32,rhs:i32|compute:i32)->i32"
CAST_F32_BOOL = "cast(x:f32|f32->bool|compute:bool)->bool"


def _stores_only_true(run, args):
    """The kernel runs into a scratch buffer; only its True results reach the real output."""
    out = args[-1]
    scratch = out.copy()
    run(*args[:-1], scratch)
    out[scratch] = True


@pytest.mark.parametrize("plan_id", [EQ_F32, CAST_F32_BOOL])
def test_a_boolean_kernel_that_never_stores_false_fails(monkeypatch, plan_id):
    with planted(monkeypatch, "cpu", only(plan_id, _stores_only_true)):
        evidence = stage_one(plan_id)
    assert any(e.outcome is Outcome.FAILED for e in evidence)
    for e in evidence:  # a case whose results are all True (a cast of non-zero values) is fully written
        assert (e.outcome is Outcome.FAILED) == (e.unwritten > 0) == ("never written" in e.reason)


def test_a_kernel_that_writes_nothing_fails_with_every_element_unwritten(monkeypatch):
    with planted(monkeypatch, "cpu", only(ADD_I32, lambda run, args: None)):
        evidence = stage_one(ADD_I32)
    assert evidence and all(e.outcome is Outcome.FAILED for e in evidence)
    assert [e.unwritten for e in evidence] == [int(np.prod(e.output_shapes[0])) for e in evidence]


def test_a_kernel_that_skips_one_element_fails_at_every_position(monkeypatch):
    """One element left unwritten, at each position in turn, always shows."""
    from intent_trace.oracle.verification.cases import poisoned_run

    for skip in range(0, 12):
        def call(outputs, skip=skip):
            values = np.arange(12, dtype=np.int32)
            mask = np.arange(12) != skip
            outputs[0][mask] = values[mask]
            outputs[1][:] = True  # a Boolean output fully written with True
        _, unwritten = poisoned_run(call, [((12,), np.int32), ((12,), np.bool_)])
        assert unwritten == (1, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float64, np.int64, np.uint8, np.float16])
def test_poisoned_run_counts_unwritten_elements_of_every_dtype(dtype):
    from intent_trace.oracle.verification.cases import poison, poisoned_run

    assert poison((3,), dtype, 0).tobytes() != poison((3,), dtype, 1).tobytes()
    written = np.zeros(5, dtype)

    def writes_all(outputs):
        outputs[0][:] = written

    def writes_half(outputs):
        outputs[0][:3] = written[:3]

    def writes_none(outputs):
        pass
    assert poisoned_run(writes_all, [((5,), dtype)])[1] == (0,)
    assert poisoned_run(writes_half, [((5,), dtype)])[1] == (2,)
    outs, unwritten = poisoned_run(writes_none, [((5,), dtype)])
    assert unwritten == (5,) and outs[0].tobytes() == poison((5,), dtype, 0).tobytes()


def test_a_result_equal_to_one_poison_fill_is_written():
    """A kernel may legitimately store a value equal to one fill: the other run shows it wrote it."""
    from intent_trace.oracle.verification.cases import poison, poisoned_run

    value = poison((4,), np.float32, 0)

    def call(outputs):
        outputs[0][:] = value
    assert poisoned_run(call, [((4,), np.float32)])[1] == (0,)
