"""expm1 (e^x - 1, C99 7.12.6.3): accurate where ``exp(x) - 1`` cancels, over the whole range of every float dtype,
C99 Annex F's special values, and the language's errors, on every target.

References: ``math.expm1`` and ``numpy.expm1`` in float64 (independent of the library), rounded once to the tested
format (test_math_library's ``round_to``); errors are counted in ulps of that format on the ordered line of its bit
patterns (``check_accuracy``: within 2 ulp in f32, T4; f16/bf16: within 1 ulp, computed in f32 and rounded once).
"""
import math

import numpy as np
import pytest
from test_math_library import FLOATS, NP, check_accuracy, ids, ordered, round_to, run_unary

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops


def test_i_expm1_builds_the_registered_op():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.expm1(x[d])

    graph = k.trace()
    assert [n.op for n in graph.walk() if n.op is ops.expm1] == [ops.expm1]
    assert "expm1 %" in str(graph)


def _tiny_f32() -> np.ndarray:
    """|x| from the smallest subnormal up to 2^-1, both signs: where e^x - 1 loses its digits to the subtraction."""
    rng = np.random.default_rng(71)
    powers = [s * 2.0**-k for k in range(1, 150) for s in (1.0, -1.0)]
    mantissas = list(rng.uniform(1, 2, 200) * 2.0 ** rng.integers(-60, -1, 200) * rng.choice([-1, 1], 200))
    return np.array(powers + mantissas + list(rng.uniform(-1e-4, 1e-4, 200)), np.float32)


def test_expm1_keeps_its_accuracy_where_exp_minus_one_cancels(run):
    x = _tiny_f32()
    got = run_unary(run, "expm1", I.f32, x)
    check_accuracy("expm1", x, got, I.f32)
    want = np.array([math.expm1(float(v)) for v in x]).astype(np.float32)  # correctly rounded but for rare ties
    assert np.abs(ordered(got) - ordered(want)).max() <= 2
    # the inputs are where it matters: exp then subtract, each correctly rounded in f32, is wrong by up to 100%
    with np.errstate(all="ignore"):
        naive = np.float32(np.exp(x.astype(np.float64)).astype(np.float32) - np.float32(1))
    rel = np.abs(naive.astype(np.float64) - want) / np.abs(want.astype(np.float64))
    assert rel.max() >= 0.5 and np.median(rel) > 2.0**-10


def test_expm1_of_subnormals_and_the_smallest_values_is_the_value_itself(run):
    tiny = [2.0**-149, -(2.0**-149), 3 * 2.0**-149, 2.0**-126, -(2.0**-126), 2.0**-100, -(2.0**-40)]
    got = run_unary(run, "expm1", I.f32, np.array(tiny, np.float32))
    assert [float(v) for v in got] == [float(np.float32(v)) for v in tiny]  # e^x - 1 = x(1 + x/2 + ...) rounds to x


# Where implementations change method: the reduction k = round(x / ln2) (k = 0 for |x| <= ln2/2, k > 60 past 41.6),
# the overflow to inf past 88.72 (f32), and where e^x - 1 rounds to -1.
_BOUNDARIES = [0.3465735, 0.3465736, -0.3465735, -0.3465736, 0.6931472, -0.6931472, 41.5, 41.6, 41.7, 88.72, 88.7228,
               88.7229, 88.73, 89.0, 89.5, 100.0, -16.6, -17.0, -17.5, -39.99, -40.0, -40.01, -88.0, -103.97, -104.0,
               -150.0, -1e30, 1e30, 9.3e-10, -9.3e-10, 9.4e-10, -9.4e-10, 1e-5, -1e-5, 0.5, -0.5, 1.0, -1.0, 10.0,
               -10.0, 11.089, 11.09, 11.1]


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_expm1_across_the_range_and_at_the_reduction_boundaries(run, dt):
    rng = np.random.default_rng(72)
    if dt is I.f16:
        spread = [(-20, 11.1), (-1, 1), (-1e-3, 1e-3)]
    elif dt is I.f64:
        spread = [(-800, 710), (-40, 40), (-1e-6, 1e-6)]
    else:
        spread = [(-110, 90), (-2, 2), (-1e-3, 1e-3)]
    values = _BOUNDARIES + [v for lo, hi in spread for v in rng.uniform(lo, hi, 300)]
    x = round_to(np.array(values), dt)
    # bound: 2 ulp in f32 (T4), 1 ulp in f16/bf16 (computed in f32, rounded once) and f64 (libm's expm1 is within 1)
    check_accuracy("expm1", x, run_unary(run, "expm1", dt, x), dt)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_expm1_special_values_are_exact(run, dt):
    x = round_to(np.array([0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e4, -1e4]), dt)
    got = run_unary(run, "expm1", dt, x)
    want = [0.0, -0.0, math.inf, -1.0, math.nan, math.nan, math.inf, -1.0]  # C99 F.9.3.3; overflow; the limit -1
    for g, w in zip((float(v) for v in got), want):
        if math.isnan(w):
            assert math.isnan(g)
        else:
            assert g == w and math.copysign(1, g) == math.copysign(1, w), (list(got), want)


def test_expm1_of_an_empty_extent_writes_nothing(run):
    got = run_unary(run, "expm1", I.f32, np.zeros(0, np.float32))
    assert got.shape == (0,)



def test_expm1_of_an_integer_is_a_type_error():
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.expm1(x[d])

    with pytest.raises(TypeError, match="floating"):
        k.trace()
    with pytest.raises(TypeError):
        I.expm1(2.0)  # a Python number is not a traced value


@intent.kernel
def _expm1_rows(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.expm1(x[d])


def test_expm1_with_a_wrong_extent_or_dtype_leaves_the_output_unchanged(run):
    x = np.array([0.5, -0.5, 1e-6], np.float32)
    out = np.full(4, 7.0, np.float32)
    with pytest.raises(ValueError, match="N"):
        run(_expm1_rows, x, out)
    assert np.array_equal(out, np.full(4, 7.0, np.float32))
    out64 = np.full(3, 7.0, np.float64)
    with pytest.raises(TypeError):
        run(_expm1_rows, x, out64)
    assert np.array_equal(out64, np.full(3, 7.0))
    ok = np.zeros(3, NP[I.f32])
    run(_expm1_rows, x, ok)
    check_accuracy("expm1", x, ok, I.f32)
