"""``intent.verify`` defaults to the bound its graph implies, accepts one-component tolerances, and catches
wrong, non-finite-replaced and unwritten outputs planted through the target's compiled executable."""
from __future__ import annotations

import math

import numpy as np
import pytest
from example_modules import example

import intent_trace as intent
from intent_trace import I, compiler
from intent_trace.oracle import Tolerance
from intent_trace.oracle.verification.kernel_policy import EXACT_ID, GRAPH_ID, USER_ID


softmax_rows = example("row_softmax").softmax_rows


@intent.kernel
def affine_i32(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * 3 - 7


@intent.kernel
def transpose_f32(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N", "M")]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[n, m] = I.transpose(x[m, n], (1, 0))


@intent.kernel
def exp_above(x: I.In[I.f32, ("N",)], y: I.Out[I.bool, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.exp(x[d]) > 1.5


def _inputs(m=6, n=37, seed=0):
    x = (np.random.default_rng(seed).standard_normal((m, n)) * 4).astype(np.float32)
    return x, np.zeros_like(x)


def _planting(monkeypatch, plant):
    """The next compiled executable (the candidate: intent.verify compiles it before the oracle) runs,
    then ``plant(outputs...)`` alters what it wrote; ``plant`` may also replace the run entirely."""
    real = compiler.compile
    state = {"first": True}

    def compile_(kernel, target="cpu", **options):
        exe = real(kernel, target=target, **options)
        if not state["first"]:
            return exe
        state["first"] = False

        class Planted:
            graph = exe.graph

            def __call__(self, *args):
                plant(exe, *args)

        return Planted()

    monkeypatch.setattr(compiler, "compile", compile_)


def test_softmax_passes_by_default_on_every_target(target):
    x, y = _inputs()
    result = intent.verify(softmax_rows, target, x, y)
    assert result.passed, str(result)
    out = result.outputs[0]
    assert out.policy.policy_id == (GRAPH_ID if out.comparison.mismatches else out.policy.policy_id)
    assert out.policy.policy_id == GRAPH_ID and out.policy.ulps is not None
    assert "exp" in out.policy.reason and "K=37" in out.policy.reason  # the policy says why
    assert "policy:" in str(result) and GRAPH_ID in str(result)
    assert np.all(y == 0)  # the caller's arrays are never written


def test_softmax_bound_is_the_documented_sum():
    # e = exp: 2 ulp (generic) + 2 ulp (oracle) <= 8u; s = sum of 37 positive terms: 8u + 2 * 37u;
    # e / s: the operands' bounds add, plus 2u for the two roundings.
    result = intent.verify(softmax_rows, "generic", *_inputs())
    assert result.outputs[0].policy.ulps == 8 + (8 + 74) + 2
    assert result.outputs[0].policy.absolute is None  # one-signed terms: no cancellation fallback


@pytest.mark.parametrize("where", [0, 5, 221])  # first, inside, last element of a 6 x 37 output
def test_a_one_element_sign_flip_fails(monkeypatch, where):
    def flip(exe, x, y):
        exe(x, y)
        y.reshape(-1)[where] = -y.reshape(-1)[where]

    _planting(monkeypatch, flip)
    result = intent.verify(softmax_rows, "generic", *_inputs())
    assert not result.passed and result.outputs[0].comparison.mismatches >= 1


def test_a_nan_replaced_by_zero_fails(monkeypatch):
    x, y = _inputs()
    x[2, 3] = np.nan  # row 2 of the softmax is NaN everywhere

    def zero_nan(exe, x, y):
        exe(x, y)
        y[2, 10] = 0.0

    _planting(monkeypatch, zero_nan)
    result = intent.verify(softmax_rows, "generic", x, y)
    assert not result.passed


def test_an_unwritten_output_fails_even_when_the_callers_buffer_holds_the_answer(monkeypatch):
    x, _ = _inputs()
    answer = np.zeros_like(x)
    intent.compile(softmax_rows, target="cpu")(x, answer)
    _planting(monkeypatch, lambda exe, x, y: None)  # the target writes nothing
    result = intent.verify(softmax_rows, "generic", x, answer.copy())
    assert not result.passed


def test_one_unwritten_element_fails(monkeypatch):
    def skip_one(exe, x, y):
        keep = y.copy()
        exe(x, y)
        y[4, 36] = keep[4, 36]

    _planting(monkeypatch, skip_one)
    x, _ = _inputs()
    answer = np.zeros_like(x)
    intent.compile(softmax_rows, target="cpu")(x, answer)
    assert not intent.verify(softmax_rows, "generic", x, answer).passed


def test_an_integer_kernel_stays_exact(monkeypatch, target):
    x = np.array([0, 1, -1, 2**31 - 1, -2**31, 12345], np.int32)
    result = intent.verify(affine_i32, target, x, np.zeros(6, np.int32))
    assert result.passed and result.outputs[0].policy.policy_id == EXACT_ID


def test_an_integer_off_by_one_fails_and_deviates_by_one(monkeypatch):
    def off(exe, x, y):
        exe(x, y)
        y[2] += 1  # 3 * 2 - 7 = -1 becomes 0: a deviation of 1, not 2**32 - 1 (unsigned words)

    _planting(monkeypatch, off)
    result = intent.verify(affine_i32, "generic", np.arange(6, dtype=np.int32), np.zeros(6, np.int32))
    assert not result.passed and result.outputs[0].comparison.deviations.absolute == 1


def test_a_pure_movement_kernel_stays_exact(monkeypatch):
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    assert intent.verify(transpose_f32, "generic", x, np.zeros((5, 3), np.float32)).outputs[0].policy.policy_id == EXACT_ID

    def one_ulp(exe, x, y):
        exe(x, y)
        y.view(np.uint32)[2, 1] ^= 1

    _planting(monkeypatch, one_ulp)
    result = intent.verify(transpose_f32, "generic", x, np.zeros((5, 3), np.float32))
    assert not result.passed and result.outputs[0].policy.policy_id == EXACT_ID


def test_a_comparison_of_vendor_math_has_no_bound_and_says_so():
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    result = intent.verify(exp_above, "generic", x, np.zeros(9, np.bool_))
    policy = result.outputs[0].policy
    assert policy.policy_id == EXACT_ID and "no bound follows" in policy.reason and "gt" in policy.reason


def test_one_component_tolerances(monkeypatch):
    x, y = _inputs()
    assert intent.verify(softmax_rows, "generic", x, y, tolerance=Tolerance(ulps=4)).passed
    assert intent.verify(softmax_rows, "generic", x, y, tolerance=Tolerance(relative=1e-5)).passed
    assert intent.verify(softmax_rows, "generic", x, y, tolerance=Tolerance(absolute=1e-6)).passed
    tight = intent.verify(softmax_rows, "generic", x, y, tolerance=Tolerance(ulps=0))
    assert not tight.passed and tight.outputs[0].policy.policy_id == USER_ID
    assert "ulps <= 4" in intent.verify(softmax_rows, "generic", x, y, tolerance=Tolerance(ulps=4)).outputs[0].policy.reason


@pytest.mark.parametrize("fields, error", [
    ({"ulps": -1}, ValueError), ({"relative": math.nan}, ValueError), ({"absolute": -1e-3}, ValueError),
    ({"absolute": "1"}, TypeError), ({"ulps": 1.5}, TypeError), ({"relative": True}, TypeError)])
def test_invalid_tolerances_are_rejected(fields, error):
    with pytest.raises(error):
        Tolerance(**fields)


@pytest.mark.parametrize("bad, error", [(Tolerance(), ValueError), (0.1, TypeError)])
def test_verify_rejects_an_unconstrained_or_foreign_tolerance(bad, error):
    x, y = _inputs()
    with pytest.raises(error):
        intent.verify(softmax_rows, "generic", x, y, tolerance=bad)


# --- the graph analysis itself (kernel_bounds), on traced graphs and argument shapes -------------------------

@intent.kernel
def exp_rows(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.exp(x[d])


@intent.kernel
def counted(v: I.In[I.i32, ("K",)], counts: I.Out[I.i32, ("N",)], total: I.Out[I.f32, ("N",)],
            w: I.In[I.f32, ("K",)]):
    counts[I.domain(0, counts.shape[0])] = 0
    total[I.domain(0, total.shape[0])] = 0.0
    for i in I.parallel(I.domain(0, v.shape[0])):
        I.atomic.add(counts[v[i]], 1, order="relaxed")
    I.scatter_reduce(total, v[:], w[:], combine="add")


@intent.kernel
def carried_exp(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)], z: I.Out[I.i32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[0] = I.loop(d, I.cast(0.0, I.f32), lambda i, acc: acc * 0.5 + I.exp(x[i]))
    z[d] = I.cast(I.exp(x[d]), I.i32)


def _bounds(kernel, *args, target="generic"):
    from intent_trace.oracle.verification.kernel_bounds import output_bounds

    return output_bounds(kernel.trace(), args, target)


def test_vendor_bounds_follow_the_target_table():
    x, y = np.zeros(5, np.float32), np.zeros(5, np.float32)
    u = 2.0 ** -24
    assert _bounds(exp_rows, x, y)["y"].rel == 2 * u * (2 + 2)  # T4's 2 ulp on both sides
    assert _bounds(exp_rows, x, y, target="tilelang-cuda")["y"].rel == 2 * u * (2 + 2)
    assert _bounds(exp_rows, x, y, target="tilelang-metal")["y"].rel == 2 * u * (4 + 2)  # MSL precise: 4 ulp


def test_commutative_atomics_stay_exact_and_float_scatter_add_accumulates_its_collisions():
    v, w = np.array([0, 1, 1, 2, 1], np.int32), np.ones(5, np.float32)
    b = _bounds(counted, v, np.zeros(3, np.int32), np.zeros(3, np.float32), w)
    assert b["counts"].exact
    assert b["total"].accumulates and b["total"].rel == 2 * (5 + 1) * 2.0 ** -24 and b["total"].sign == 1


def test_a_compounding_loop_carry_and_a_rounding_to_integer_have_no_bound():
    b = _bounds(carried_exp, np.zeros(4, np.float32), np.zeros(1, np.float32), np.zeros(4, np.int32))
    assert b["y"].unbounded and "loop carry" in b["y"].unbounded
    assert b["z"].unbounded and "cast" in b["z"].unbounded
