"""The several-NaN witnesses of the ops whose NaN result T3 fixes (trait ``first_nan``) include a loop-invariant
operand and lengths with a vector remainder. Before them, the witnesses' operands were all arrays read at the
element's own index, 400 and 8000 elements long (multiples of 16): cpu's add and mul returned a scalar operand's NaN
over the first operand's (LLVM holds the invariant in a register and made it the instruction's first source), and a
NumPy loop's scalar tail could keep the second operand's NaN, and Stage One passed both.

The faults below are the real one (cpu's code generator as it was: the plain ``a + b``, compiled in a fresh process
with its own kernel cache) and a planted one (the result of two NaNs made the second operand's in a vector loop's
remainder, as NumPy's tail did): each fails only the new witnesses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from intent_trace.oracle import Outcome
from intent_trace.oracle.verification.cases import operation_cases
from intent_trace.oracle.verification.records import VerificationClass as VC

from .planting import after, only, plan, planted, stage_one

ADD, MUL = "add(lhs:f32,rhs:f32|compute:f32)->f32", "mul(lhs:f32,rhs:f32|compute:f32)->f32"
FMA = "fma(a:f32,b:f32,c:f32|compute:f32)->f32"
NAN_WORDS = 5  # the NaN words of the f32 edge pool (cases._edges)


def _nans(words):
    return (np.asarray(words, np.uint32) & 0x7FFFFFFF) > 0x7F800000


def _special_cases(plan_id):
    op, p = plan(plan_id)
    return operation_cases(op, p, (VC.SPECIAL_VALUES,))


@pytest.mark.parametrize("plan_id, arity", [(ADD, 2), (MUL, 2), ("sub(lhs:f32,rhs:f32|compute:f32)->f32", 2),
                                            ("div(lhs:f32,rhs:f32|compute:f32)->f32", 2), (FMA, 3)])
def test_several_nan_witnesses_have_a_remainder_and_each_operand_invariant(plan_id, arity):
    cases = _special_cases(plan_id)
    tail = next(c for c in cases if c.case_id.endswith("/tail"))
    n = tail.output_shapes[0][0]
    words = [np.asarray(x.bits, np.uint32) for x in tail.inputs.operands]
    assert n % 16 and n % 8 and n % 4, n  # a remainder at every vector width
    every = np.logical_and.reduce([_nans(w) for w in words])
    assert every[-NAN_WORDS ** arity:].all()  # the last elements: every operand a NaN, every combination
    broadcast = [c for c in cases if c.broadcast is not None]
    assert sorted({c.broadcast for c in broadcast}) == list(range(arity))
    for c in broadcast:
        (word,) = c.inputs.operands[c.broadcast].bits
        assert _nans([word]).all() and c.shapes[c.broadcast] == (1,)
        assert all(s == (c.output_shapes[0][0],) for i, s in enumerate(c.shapes) if i != c.broadcast)
    # every NaN word invariant in every position: each two-NaN order occurs with the invariant first and second
    assert len(broadcast) == arity * NAN_WORDS


@pytest.mark.parametrize("plan_id", [ADD, MUL, FMA])
def test_stage_one_holds_the_new_witnesses(plan_id):
    special = [e for e in stage_one(plan_id) if e.verification_class is VC.SPECIAL_VALUES]
    assert len(special) == 2 + len(plan(plan_id)[1].operand_dtypes) * NAN_WORDS
    assert all(e.outcome is Outcome.PASSED for e in special), [(e.case_id, e.reason) for e in special
                                                               if e.outcome is not Outcome.PASSED]


# cpu's add and mul as main spelled them (``a + b``), in a process of their own with a kernel cache of its own
_PLAIN_CPU = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from intent_trace.oracle.numba import elementwise as E, scalar_rules as S
    for op in S.COMMUTED:
        S.SCALAR_RULES[op] = S.arith
    E.invariant_first_nan_arith = lambda node, d, a, b, k: S.arith(node, d, a, b)
    from planting import stage_one
    from intent_trace.oracle.verification.records import VerificationClass as VC
    print(json.dumps({{e.case_id[len({plan_id!r}) + 1:]: e.outcome.name for e in stage_one({plan_id!r})
                       if e.verification_class is VC.SPECIAL_VALUES}}))
""")


@pytest.mark.parametrize("plan_id", [ADD, MUL])
def test_cpus_commuted_add_and_mul_fail_only_the_new_witnesses(tmp_path, plan_id):
    script = _PLAIN_CPU.format(tests=os.path.dirname(os.path.abspath(__file__)), plan_id=plan_id)
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcomes["special-values/0"] == "PASSED"  # the witnesses as they were let it through
    failed = {k for k, v in outcomes.items() if v == "FAILED"}
    # the invariant second operand: LLVM made it the instruction's first source, so its NaN won
    assert failed and all(k.startswith("special-values/broadcast") for k in failed), outcomes
    assert {f"special-values/broadcast1/{j}" for j in range(NAN_WORDS)} <= failed


def _second_nan_in_the_remainder(args):
    """Two NaN operands give the second one's payload past the last multiple of 16 (NumPy's scalar tail)."""
    a, b, y = args[0], args[1], args[-1]
    tail = np.arange(y.size) >= y.size - y.size % 16
    both = np.isnan(a) & np.isnan(b) & tail
    y[both] = (b.view(np.uint32)[both] | np.uint32(0x00400000)).view(np.float32)


@pytest.mark.parametrize("plan_id", [ADD, MUL])
def test_a_target_that_keeps_the_second_nan_in_its_remainder_fails_the_tail_witness(monkeypatch, plan_id):
    with planted(monkeypatch, "cpu", only(plan_id, after(_second_nan_in_the_remainder))):
        evidence = {e.case_id[len(plan_id) + 1:]: e.outcome for e in stage_one(plan_id)
                    if e.verification_class is VC.SPECIAL_VALUES and "broadcast" not in e.case_id}
    assert evidence == {"special-values/0": Outcome.PASSED, "special-values/tail": Outcome.FAILED}
