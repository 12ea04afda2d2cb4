"""Pointwise ops whose NaN result T3 fixes (trait ``first_nan``: add, sub, mul, div, fma) carry special-value
witnesses where two or three NaN operands meet, held bit for bit: the first NaN operand, quieted (x86). Without them
no stage looked at two NaN operands: tilelang-c's add and mul (g++ commuted them) returned the second one's payload
and Stage Two passed. (Generic's NumPy loops did it only in their scalar tail, which these witnesses' lengths, 400 and
8000, do not have: tests/kernels/test_nan_fma_chain.py covers every position.) Other ops (pow, maximum) keep one NaN
a combination."""
from __future__ import annotations

import numpy as np
import pytest

from intent_trace.graph import ops
from intent_trace.oracle import Outcome
from intent_trace.oracle.verification import catalogue as C
from intent_trace.oracle.verification.cases import operation_cases
from intent_trace.oracle.verification.records import VerificationClass as VC

from .planting import after, only, planted, stage_one

FIRST_NAN = ("add(lhs:f32,rhs:f32|compute:f32)->f32", "mul(lhs:f32,rhs:f32|compute:f32)->f32",
             "fma(a:f32,b:f32,c:f32|compute:f32)->f32")


def _special_operands(plan_id):
    op, plan = next((op, p) for op in C.OPERATIONS for p in op.plans if p.plan_id == plan_id)
    case = operation_cases(op, plan, (VC.SPECIAL_VALUES,))[0]  # every combination (then the tail and broadcast forms)
    return [np.asarray(x.bits, np.uint32) for x in case.inputs.operands]


def _nans(words):
    return (words & 0x7FFFFFFF) > 0x7F800000


@pytest.mark.parametrize("name, arity", [("add", 2), ("sub", 2), ("mul", 2), ("div", 2), ("fma", 3),
                                         ("pow", 2), ("maximum", 2)])
def test_special_values_hold_several_nans_only_where_t3_fixes_the_result(name, arity):
    roles = "a:f32,b:f32,c:f32" if arity == 3 else "lhs:f32,rhs:f32"
    operands = _special_operands(f"{name}({roles}|compute:f32)->f32")
    count = sum(_nans(w).astype(int) for w in operands)
    fixed = "first_nan" in ops.REGISTRY[name].traits
    assert fixed == (name in ("add", "sub", "mul", "div", "fma"))
    assert count.max() == (arity if fixed else 1)
    if fixed:  # every pair of distinct NaN words in every pair of positions, so one of each order
        first, second = operands[0][(count == 2) & _nans(operands[0])], operands[1][(count == 2) & _nans(operands[0])]
        assert {(int(a), int(b)) for a, b in zip(first, second) if a != b} >= {(0x7FC00001, 0xFFC00123),
                                                                              (0xFFC00123, 0x7FC00001)}


def _second_nan(args):
    """The result of two NaN operands made the second one's (what NumPy's scalar tail and g++ gave)."""
    a, b, y = args[0], args[1], args[-1]
    both = np.isnan(a) & np.isnan(b)
    y[both] = (b.view(np.uint32)[both] | np.uint32(0x00400000)).view(np.float32)


@pytest.mark.parametrize("plan_id", FIRST_NAN)
def test_stage_one_holds_two_nan_operands_exact(plan_id):
    special = [e for e in stage_one(plan_id) if e.verification_class is VC.SPECIAL_VALUES]
    assert special and all(e.outcome is Outcome.PASSED for e in special), [e.reason for e in special]


@pytest.mark.parametrize("plan_id", FIRST_NAN)
def test_a_target_that_keeps_the_second_nan_fails(monkeypatch, plan_id):
    with planted(monkeypatch, "cpu", only(plan_id, after(_second_nan))):
        evidence = stage_one(plan_id)
    # the fault is planted in the plan's kernel; the broadcast forms are kernels of their own
    special = [e for e in evidence if e.verification_class is VC.SPECIAL_VALUES and "broadcast" not in e.case_id]
    assert len(special) == 2 and all(e.outcome is Outcome.FAILED for e in special)
