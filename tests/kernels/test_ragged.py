"""Ragged relations (spec §14) from ordinary ops, on every executable target.

No ragged op exists: ``members = member_source[offsets[g]:offsets[g + 1]]`` is a subregion with
data-derived bounds, and ``mapping[members]`` or ``I.indices(members)`` gives the member rows. These
CSR-style kernels are checked against plain NumPy loops over the segments, including empty groups.
"""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

RNG = np.random.default_rng(2718)


def csr_offsets(sizes) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def segments(offsets):
    return [slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]


@intent.kernel
def segment_sum(offsets: I.In[I.i64, ("G1",)], values: I.In[I.f64, ("R",)], out: I.Out[I.f64, ("G",)]):
    member_source = I.domain(0, values.shape[0])
    for g in I.domain(0, out.shape[0]):
        members = member_source[offsets[g]:offsets[g + 1]]
        out[g] = I.reduce.sum(values[members], axis=0)


@pytest.mark.parametrize("sizes", [[3, 0, 2, 5], [0, 0, 0], [1], [0, 4, 0, 0, 7, 0]])
def test_ragged_segment_sum_matches_numpy_including_empty_groups(run, sizes):
    offsets = csr_offsets(sizes)
    values = RNG.integers(-100, 100, int(offsets[-1])).astype(np.float64)  # integers: sums are exact
    out = np.full(len(sizes), np.nan)
    run(segment_sum, offsets, values, out)
    np.testing.assert_array_equal(out, [values[s].sum() for s in segments(offsets)])
    assert all(out[k] == 0.0 for k, n in enumerate(sizes) if n == 0)


@intent.kernel
def mapped_segment_stats(offsets: I.In[I.i32, ("G1",)], mapping: I.In[I.index, ("R",)], x: I.In[I.f32, ("S",)],
                         total: I.Out[I.f32, ("G",)], best: I.Out[I.f32, ("G",)], weighted: I.Out[I.i64, ("G",)]):
    member_source = I.domain(0, mapping.shape[0])
    rows = x[:]
    for g in I.parallel(I.domain(0, total.shape[0])):
        members = member_source[offsets[g]:offsets[g + 1]]
        picked = I.gather(rows, mapping[members])  # the indexed relation: rows mapping[m] for m in members
        total[g] = I.reduce.sum(picked, axis=0)
        best[g] = I.reduce.max(picked, axis=0)
        weighted[g] = I.reduce.sum(I.indices(members) * mapping[members], axis=0)  # member coordinates


@pytest.mark.parametrize("sizes", [[2, 0, 3, 1], [0, 5], [4]])
def test_ragged_mapped_members_gather_rows_and_keep_source_coordinates(run, sizes):
    offsets = csr_offsets(sizes).astype(np.int32)
    r = int(offsets[-1])
    x = RNG.integers(-20, 20, 9).astype(np.float32)
    mapping = RNG.integers(0, 9, r).astype(np.int64)
    total, best, weighted = np.zeros(len(sizes), np.float32), np.zeros(len(sizes), np.float32), \
        np.zeros(len(sizes), np.int64)
    run(mapped_segment_stats, offsets, mapping, x, total, best, weighted)
    segs = segments(offsets)
    np.testing.assert_array_equal(total, [x[mapping[s]].sum() for s in segs])
    np.testing.assert_array_equal(best, [x[mapping[s]].max() if s.stop > s.start else -np.inf for s in segs])
    np.testing.assert_array_equal(weighted, [int((np.arange(s.start, s.stop) * mapping[s]).sum()) for s in segs])


def test_ragged_offsets_past_the_members_are_an_index_error(run):
    offsets = np.array([0, 2, 9], np.int64)
    out = np.full(2, 5.0)
    with pytest.raises(IndexError, match="ends past its parent's extent 4"):
        run(segment_sum, offsets, np.ones(4), out)
    np.testing.assert_array_equal(out, [5.0, 5.0])


def test_ragged_members_keep_their_source_relation_in_the_graph():
    text = str(mapped_segment_stats.trace())
    assert "subregion" in text and "indices" in text
    assert "⟨indices of %" in text  # I.indices(members) names the root member domain, not a bare i64
