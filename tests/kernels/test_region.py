"""Region fold and region scan (spec §9) on every target, against NumPy references.

generic cuts the source at random on every run (seeded); cpu cuts it into fixed slices. A helper
that satisfies the §9 laws gives the same answer (within the T5 bound) for every segmentation.
"""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

NEG_INF = -np.inf


@intent.fn
def lse_summary(x):
    m = I.reduce.max(x, axis=0)
    return m, I.reduce.sum(I.exp(x - m), axis=0), I.cast(True, I.bool)


@intent.fn
def lse_combine(a, b):
    """A validity flag instead of a NaN-producing -inf sentinel (spec §9.1)."""
    ma, sa, va = a
    mb, sb, vb = b
    m = I.maximum(ma, mb)
    zero = I.cast(0.0, I.f64)
    return (I.select(va | vb, m, ma), I.select(va, sa * I.exp(ma - m), zero) + I.select(vb, sb * I.exp(mb - m), zero),
            va | vb)


@intent.kernel
def logsumexp(x: I.In[I.f64, ("N",)], out: I.Out[I.f64, (1,)], valid: I.Out[I.bool, (1,)]):
    d = I.domain(0, x.shape[0])
    m, s, v = I.region_fold(source=x[d], axis=0, summarize=lse_summary, combine=lse_combine,
                            identity=(I.cast(NEG_INF, I.f64), I.cast(0.0, I.f64), I.cast(False, I.bool)))
    out[0] = m + I.log(s)
    valid[0] = v


@pytest.mark.parametrize("n", [1, 7, 300, 1000])
def test_region_fold_logsumexp_matches_numpy(run, n):
    x = np.random.default_rng(n).standard_normal(n) * 10
    out, valid = np.zeros(1), np.zeros(1, bool)
    run(logsumexp, x, out, valid)
    want = np.log(np.sum(np.exp(x - x.max()))) + x.max()
    assert valid[0]
    assert abs(out[0] - want) <= 1e-12 * max(1.0, abs(want))


def test_region_fold_empty_source_returns_the_identity(run):
    out, valid = np.full(1, 5.0), np.ones(1, bool)
    run(logsumexp, np.zeros(0), out, valid)
    assert out[0] == NEG_INF and not valid[0]


@intent.fn
def position_summary(x, coords, shift):
    """Slices keep absolute source coordinates when I.indices is passed as a source component."""
    best = I.arg_reduce.max(x, axis=0)
    return best[0], I.reduce.max(coords, axis=0) + shift


@intent.kernel
def last_coordinate(x: I.In[I.f32, ("N",)], out: I.Out[I.index, (1,)], shift: I.index):
    d = I.domain(0, x.shape[0])
    _, last = I.region_fold(source=(x[d], I.indices(d)), axis=0, summarize=position_summary,
                            combine=lambda a, b: (I.maximum(a[0], b[0]), I.maximum(a[1], b[1])),
                            identity=(I.cast(NEG_INF, I.f32), I.cast(-1, I.index)), operands=(shift,))
    out[0] = last


def test_region_fold_sees_absolute_coordinates_and_runtime_operands(run):
    x = np.arange(600, dtype=np.float32)
    out = np.zeros(1, np.int64)
    run(last_coordinate, x, out, 10)
    assert out[0] == 599 + 10


@intent.kernel
def chunked_cumsum(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, ("N",)], total: I.Out[I.f64, (1,)]):
    d = I.domain(0, x.shape[0])
    outs, final = I.region_scan(
        source=x[d], axis=0,
        summarize=lambda s: I.reduce.sum(s, axis=0), combine=lambda a, b: a + b, identity=I.cast(0.0, I.f64),
        initial_state=I.cast(0.0, I.f64), apply=lambda t, state: state + t,
        emit=lambda s, state: I.cumsum(s, axis=0) + state)
    y[d] = outs
    total[0] = final


@pytest.mark.parametrize("n", [0, 1, 5, 700])
def test_region_scan_emits_prefix_outputs_and_final_state(run, n):
    x = np.random.default_rng(n).standard_normal(n)
    y, total = np.zeros(n), np.zeros(1)
    run(chunked_cumsum, x, y, total)
    np.testing.assert_allclose(y, np.cumsum(x), rtol=0, atol=1e-12 * max(1, n))
    assert abs(total[0] - np.sum(x)) <= 1e-12 * max(1, n)


@intent.kernel
def elementwise_region_scan(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.region_scan(source=x[d], axis=0, combine=lambda a, b: I.maximum(a, b), identity=I.cast(NEG_INF, I.f32))


def test_region_scan_without_slice_helpers_canonicalises_to_scan(run):
    g = elementwise_region_scan.trace()
    names = [n.op.name for n in g.walk()]
    assert "scan" in names and "region_scan" not in names
    x = np.array([1, 3, 2, 5, 4], np.float32)
    y = np.zeros_like(x)
    run(elementwise_region_scan, x, y)
    np.testing.assert_array_equal(y, np.maximum.accumulate(x))


def test_region_fold_summary_that_depends_on_the_slice_extent_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.region_fold(source=x[d], axis=0, summarize=lambda s: s, combine=lambda a, b: a,
                             identity=x[d])

    with pytest.raises(intent.TraceError, match="slice extent"):
        k.trace()


def test_region_fold_summarize_that_reads_a_view_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        d = I.domain(0, x.shape[0])

        def summarize(s):
            return I.reduce.sum(s, axis=0) + x[0]

        y[0] = I.region_fold(source=x[d], axis=0, summarize=summarize, combine=lambda a, b: a + b,
                             identity=I.cast(0.0, I.f32))

    with pytest.raises(intent.TraceError, match="summarize"):
        k.trace()


def test_region_scan_emit_must_keep_the_slice_axis():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        d = I.domain(0, x.shape[0])
        outs, _ = I.region_scan(source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                                combine=lambda a, b: a + b, identity=I.cast(0.0, I.f32),
                                initial_state=I.cast(0.0, I.f32), apply=lambda t, s: s + t,
                                emit=lambda s, state: I.reduce.sum(s, axis=0, acc_dtype=I.f32) + state)
        y[0] = outs

    with pytest.raises(intent.TraceError, match="slice"):
        k.trace()
