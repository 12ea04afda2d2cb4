"""The verifier charges T4's bound of each ``approximate=True`` option on every target (a GPU computes them with
its approximate instructions, T10: tanh.approx, ex2.approx, div.full), and no more: an output outside that bound
fails. The bounds are written out here from T4 (types-numerics-and-effects.md), independently of the registry's
table, which must agree with them."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops, traits
from intent_trace.oracle.verification.kernel_bounds import output_bounds

from .planting import planted

U = 2.0**-24  # f32's unit roundoff
T4 = {"div": ("ulp", 2), "exp2": ("ulp", 2), "tanh": ("absolute", 2.0**-10.9)}


@intent.kernel
def approximate_div(x: I.In[I.f32, ("N",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.fdiv(x[d], z[d], approximate=True)


@intent.kernel
def exact_div(x: I.In[I.f32, ("N",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] / z[d]


@intent.kernel
def approximate_tanh(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.tanh(x[d], approximate=True)


@intent.kernel
def approximate_exp2(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.exp2(x[d], approximate=True)


def _vectors(n=64, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    z = (rng.uniform(0.5, 4, n) * rng.choice([-1, 1], n)).astype(np.float32)
    return x, z


def test_the_registry_holds_t4s_bound_for_every_op_with_the_option():
    assert {op.name: bound for op, bound in traits.APPROXIMATE.items()} == T4
    assert {op.name for op in ops.REGISTRY.values() if "approximate" in op.attrs} == set(T4)


@pytest.mark.parametrize("target", ["generic", "tilelang-c", "tilelang-cuda", "tilelang-metal"])
def test_each_option_is_charged_t4s_bound_on_every_target(target):
    x, z = _vectors()
    y = np.zeros_like(x)
    # a quotient of exact operands: exact by default (T3), 2 ulp + the oracle's rounding with the option
    assert output_bounds(exact_div.trace(), (x, z, y), target)["y"].exact
    div = output_bounds(approximate_div.trace(), (x, z, y), target)["y"]
    assert div.rel == 2 * U * (2 + 1) and div.cancel is None
    # exp2: 2 ulp (T4) or the library's documented bound where larger (Metal's precise table: 4), + the oracle's 2
    exp2 = output_bounds(approximate_exp2.trace(), (x, y), target)["y"]
    assert exp2.rel == 2 * U * ((4 if target == "tilelang-metal" else 2) + 2)
    # tanh: an absolute error, no relative bound near 0: accepted normwise (against max |out| <= 1)
    tanh = output_bounds(approximate_tanh.trace(), (x, y), target)["y"]
    assert tanh.rel == 2.0**-10.9 + 2 * U * 2 and "tanh(approximate=True)" in tanh.cancel


def test_a_target_within_the_approximate_bound_passes_and_one_beyond_it_fails(monkeypatch):
    x, _ = _vectors()
    where = 17

    def off_by(delta):
        def fault(run, kernel, args):
            run()
            args[1][where] += np.float32(delta)
        return fault

    with planted(monkeypatch, "tilelang-c", off_by(2.0**-12)):  # inside T4's 2^-10.9 (max |tanh| here ~1)
        result = intent.verify(approximate_tanh, "tilelang-c", x, np.zeros_like(x))
    assert result.passed, str(result)
    with planted(monkeypatch, "tilelang-c", off_by(2.0**-9)):
        result = intent.verify(approximate_tanh, "tilelang-c", x, np.zeros_like(x))
    assert not result.passed and result.outputs[0].comparison.mismatches == 1


def test_a_quotient_beyond_the_charged_ulps_fails(monkeypatch):
    # 2 ulp (T4) + 1 (the oracle's rounding), 2u each (u = 2^-24): 6u relative, at most 6 ulp of the quotient (an ulp
    # is at least u of it); the policy's per-element limit is that, so 6 ulp away passes and 7 fails
    x, z = _vectors()

    def ulps_away(k, where):
        def fault(run, kernel, args):
            run()
            y = args[2].view(np.int32)
            y[where] += k
        return fault

    for k, where, passes in ((2, 3, True), (-6, 40, True), (7, 3, False), (-7, 63, False), (40, 0, False)):
        with planted(monkeypatch, "tilelang-c", ulps_away(k, where)):
            result = intent.verify(approximate_div, "tilelang-c", x, z, np.zeros_like(x))
        assert result.passed == passes, (k, where, str(result))
