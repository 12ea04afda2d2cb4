"""The law checker (generic, check_laws=True) names the helper, the law and a counterexample."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import LawViolation


@intent.fn
def subtract(a, b):
    return a - b


@intent.fn
def average(a, b):
    return (a + b) * 0.5


@intent.fn
def left(a, b):
    return a


def _reducer(combine, identity_value=0.0):
    @intent.kernel
    def k(x: I.In[I.f64, ("N",)], out: I.Out[I.f64, (1,)]):
        d = I.domain(0, x.shape[0])
        out[0] = I.reduce(x[d], axis=0, identity=I.cast(identity_value, I.f64), combine=combine)
    return k


def test_laws_non_associative_combine_is_caught_with_a_counterexample():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    with pytest.raises(LawViolation, match=r"reduce helper `average` breaks (associativity|the identity law)"):
        intent.compile(_reducer(average), target="generic", check_laws=True)(x, np.zeros(1))


def test_laws_subtraction_breaks_the_identity_law_and_names_values():
    with pytest.raises(LawViolation, match=r"`subtract` breaks the identity law.*x = 1\.") as info:
        intent.compile(_reducer(subtract), target="generic", check_laws=True)(np.array([1.0, 2.0, 3.0]),
                                                                               np.zeros(1))
    assert "spec §7" in str(info.value)


def test_laws_non_commutative_combine_breaks_reduce():
    with pytest.raises(LawViolation, match="commutativity|re-ordering|identity"):
        intent.compile(_reducer(left, 0.0), target="generic", check_laws=True)(np.array([3.0, 1.0, 2.0]),
                                                                              np.zeros(1))


def test_laws_a_correct_sum_passes_and_matches_numpy():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, (1,)], c: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        out[0] = I.reduce.sum(x[d], axis=0)
        c[d] = I.cumsum(x[d], axis=0)

    x = np.random.default_rng(0).standard_normal(500).astype(np.float32)
    out, c = np.zeros(1, np.float32), np.zeros(500, np.float32)
    intent.compile(k, target="generic", check_laws=True)(x, out, c)
    assert abs(out[0] - np.sum(x, dtype=np.float64)) <= 500 * 2**-24 * np.sum(np.abs(x))


def test_laws_non_associative_scan_combine_is_caught():
    @intent.kernel
    def k(x: I.In[I.f64, ("N",)], out: I.Out[I.f64, ("N",)]):
        d = I.domain(0, x.shape[0])
        out[d] = I.scan(x[d], axis=0, identity=I.cast(0.0, I.f64), combine=average)

    with pytest.raises(LawViolation, match="`average`"):
        intent.compile(k, target="generic", check_laws=True)(np.arange(1.0, 9.0), np.zeros(8))


def test_laws_region_fold_breaking_the_homomorphism_is_caught():
    @intent.kernel
    def k(x: I.In[I.f64, ("N",)], out: I.Out[I.f64, (1,)]):
        d = I.domain(0, x.shape[0])
        # The summary counts slices, which depends on where the source is cut.
        out[0] = I.region_fold(source=x[d], axis=0, summarize=lambda s: I.cast(1.0, I.f64),
                               combine=lambda a, b: a + b, identity=I.cast(0.0, I.f64))

    x = np.arange(50.0)
    with pytest.raises(LawViolation, match="region_fold helpers .*summarize\\(A \\+\\+ B\\)"):
        for seed in range(10):  # some pair of runs picks different segmentations
            intent.compile(k, target="generic", check_laws=True, seed=seed)(x, np.zeros(1))
