"""Language §5: conflicting effects between points of a ``parallel`` are refused at run time.

Generic (on by default) and cpu (with ``checks=True``, its default) record per element which points read,
wrote or combined it. A write/write or read/write pair of two points, or a plain access beside another
point's atomic/scatter_reduce, is a RuntimeError naming the view, the element and both points, and the
caller's arrays stay unchanged. Atomics among themselves, scatter_reduce collisions, In views read by every
point and a point touching its own element twice are not races. The reference for "racy" is computed here
from the index data with NumPy (a repeated destination, a read of another point's element).

Racy kernels are checked on the targets that detect races (generic, checked cpu: serial and parallel
builds); kernels without races run on every executable target through the shared fixture.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

CHECKING = ("generic", "cpu")


@pytest.fixture(params=CHECKING)
def checking(request) -> str:
    return request.param


def _refuses(kernel, target, args, *fragments):
    """The call raises a RuntimeError whose message holds every fragment; array arguments are unchanged."""
    before = [np.array(a, copy=True) for a in args]
    with pytest.raises(RuntimeError) as info:
        intent.compile(kernel, target=target)(*args)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "spec §5" in message
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    return message


# --- write/write: a data-derived destination repeated ---------------------------------------------------------

@intent.kernel
def scatter(idx: I.In[I.i32, ("N",)], x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("M",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        y[idx[i]] = x[i]


def test_every_pair_of_points_writing_one_element_is_refused(checking):
    n = 5
    x = np.arange(1, n + 1, dtype=np.float32)
    for p, q in itertools.combinations(range(n), 2):  # first, middle and last points, every pair
        idx = np.arange(n, dtype=np.int32)[::-1].copy()
        idx[q] = idx[p]
        y = np.full(n, -1.0, np.float32)
        _refuses(scatter, checking, (idx, x, y), "y: ", f"parallel points {p} and {q} both write element {idx[p]}")


def test_a_permutation_writes_each_element_once(run):
    idx = np.array([3, 0, 4, 1, 2], np.int32)
    x = np.arange(5, dtype=np.float32)
    y = np.full(5, -1.0, np.float32)
    run(scatter, idx, x, y)
    want = np.full(5, -1.0, np.float32)
    want[idx] = x
    np.testing.assert_array_equal(y, want)


# --- read/write: a point reads what another point writes ------------------------------------------------------

@intent.kernel
def neighbour(src: I.In[I.i32, ("N",)], x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.f32, ("N",)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        y[i] = x[i]
        z[i] = y[src[i]]


def test_every_pair_of_a_reader_and_another_writer_is_refused(checking):
    n = 4
    x = np.arange(n, dtype=np.float32)
    for p, q in itertools.permutations(range(n), 2):  # point p reads y[q], which point q writes
        src = np.arange(n, dtype=np.int32)
        src[p] = q
        y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
        # Points run in order on both targets (cpu: its serial build): the earlier access is named first.
        want = (f"parallel point {p} reads element {q} and point {q} writes it" if p < q else
                f"parallel point {q} writes element {q} and point {p} reads it")
        _refuses(neighbour, checking, (src, x, y, z), "y: ", want)


def test_the_issue_probe_shifted_neighbour_is_refused(checking):
    @intent.kernel
    def shifted(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.f32, ("N",)]):
        n = x.shape[0]
        for i in I.parallel(I.domain(0, n)):
            y[i] = x[i] * 2.0
            z[i] = y[(i + 1) % n]

    x = np.arange(6, dtype=np.float32)
    _refuses(shifted, checking, (x, np.zeros(6, np.float32), np.zeros(6, np.float32)), "y: ",
             "point 0 reads element 1 and point 1 writes it")


def test_reading_its_own_element_after_writing_it_is_no_race(run):
    n = 5
    x = np.arange(n, dtype=np.float32)
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    run(neighbour, np.arange(n, dtype=np.int32), x, y, z)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, x)


@intent.kernel
def twice_and_shared_input(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        y[i] = x[0]  # every point reads x[0]: an In view is never a race
        y[i] = y[i] + x[i]  # the same point writes its element twice and reads it between


def test_a_point_writing_its_element_twice_and_shared_reads_are_no_race(run):
    x = np.arange(1, 6, dtype=np.float32)
    y = np.zeros(5, np.float32)
    run(twice_and_shared_input, x, y)
    np.testing.assert_array_equal(y, x[0] + x)


# --- rank two views: rows read by other points -----------------------------------------------------------------

@intent.kernel
def row_mix(src: I.In[I.i32, ("M",)], x: I.In[I.f32, ("M", "K")], y: I.Out[I.f32, ("M", "K")],
            z: I.Out[I.f32, ("M", "K")]):
    k = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        y[r, k] = x[r, k] + 1.0
        z[r, k] = y[src[r], k]


def test_a_row_read_by_another_point_is_refused_and_names_the_element(checking):
    m, kk = 4, 3
    x = np.arange(m * kk, dtype=np.float32).reshape(m, kk)
    for p, q in ((0, 3), (3, 0), (1, 2)):
        src = np.arange(m, dtype=np.int32)
        src[p] = q
        y, z = np.zeros((m, kk), np.float32), np.zeros((m, kk), np.float32)
        message = _refuses(row_mix, checking, (src, x, y, z), "y: ")
        element = f"({q}, 0)" if checking == "generic" else f"{q * kk} (row-major flat index)"
        assert f"element {element}" in message
        assert f"point {min(p, q)}" in message and f"point {max(p, q)}" in message or \
            f"points {min(p, q)} and {max(p, q)}" in message


def test_own_rows_of_a_rank_two_view_are_no_race(run):
    m, kk = 4, 3
    x = np.arange(m * kk, dtype=np.float32).reshape(m, kk)
    y, z = np.zeros((m, kk), np.float32), np.zeros((m, kk), np.float32)
    run(row_mix, np.arange(m, dtype=np.int32), x, y, z)
    np.testing.assert_array_equal(z, x + 1.0)


# --- atomics and scatter_reduce combine; a plain access beside them is a race ----------------------------------

@intent.kernel
def count_and_peek(idx: I.In[I.i32, ("N",)], peek: I.In[I.i32, ("N",)], counts: I.InOut[I.i32, ("B",)],
                   seen: I.Out[I.i32, ("N",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        I.atomic.add(counts[idx[i]], I.cast(1, I.i32), order="relaxed")
        seen[i] = I.atomic.load(counts[peek[i]], order="relaxed")


@intent.kernel
def count_and_read(idx: I.In[I.i32, ("N",)], peek: I.In[I.i32, ("N",)], counts: I.InOut[I.i32, ("B",)],
                   seen: I.Out[I.i32, ("N",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        I.atomic.add(counts[idx[i]], I.cast(1, I.i32), order="relaxed")
        seen[i] = counts[peek[i]]


def test_atomics_from_every_point_to_one_element_are_no_race(checking):
    idx = np.zeros(6, np.int32)
    counts, seen = np.zeros(2, np.int32), np.zeros(6, np.int32)
    intent.compile(count_and_peek, target=checking)(idx, np.ones(6, np.int32), counts, seen)
    np.testing.assert_array_equal(counts, [6, 0])
    np.testing.assert_array_equal(seen, 0)


def test_a_plain_read_of_an_element_another_point_updates_atomically_is_refused(checking):
    # points 0 and 1 add into counts[0] and counts[1]; each reads the other's element plainly
    idx = np.array([0, 1], np.int32)
    message = _refuses(count_and_read, checking, (idx, idx[::-1].copy(), np.zeros(2, np.int32), np.zeros(2, np.int32)),
                       "counts: ", "point 0 reads element 1 and point 1 updates atomically")
    assert "reads" in message
    counts, seen = np.zeros(2, np.int32), np.zeros(2, np.int32)
    intent.compile(count_and_read, target=checking)(idx, idx, counts, seen)  # each reads its own: no race
    np.testing.assert_array_equal(counts, [1, 1])
    np.testing.assert_array_equal(seen, [1, 1])


@intent.kernel
def histogram_then_clear(idx: I.In[I.i32, ("R", "C")], clear: I.In[I.i32, ("R",)], counts: I.InOut[I.i32, ("B",)]):
    cols = I.domain(0, idx.shape[1])
    for r in I.parallel(I.domain(0, idx.shape[0])):
        I.scatter_reduce(counts, idx[r, cols], 1, combine="add")  # collisions combine: no race among them
        counts[clear[r]] = I.cast(0, I.i32)


def test_scatter_reduce_collisions_combine_but_a_plain_write_beside_them_is_refused(checking):
    idx = np.array([[1, 1], [1, 2], [2, 1]], np.int32)
    # each point clears an element no scatter touches and no other point clears: no race
    counts = np.zeros(6, np.int32)
    intent.compile(histogram_then_clear, target=checking)(idx, np.array([3, 4, 5], np.int32), counts)
    np.testing.assert_array_equal(counts, [0, 4, 2, 0, 0, 0])
    # points clearing one element race (write/write)
    _refuses(histogram_then_clear, checking, (idx, np.array([0, 3, 0], np.int32), np.zeros(6, np.int32)),
             "counts: ", "parallel points 0 and 2 both write element 0")
    # point 2 clears element 1, which points 0 and 1 update through scatter_reduce
    _refuses(histogram_then_clear, checking, (idx, np.array([3, 4, 1], np.int32), np.zeros(6, np.int32)),
             "counts: ", "updates atomically (an atomic or scatter_reduce) element 1 and point 2 writes it")


# --- nested parallels and per-point buffers ---------------------------------------------------------------------

@intent.kernel
def nested(dst: I.In[I.i32, ("M",)], x: I.In[I.f32, ("M", "K")], y: I.Out[I.f32, ("M", "K")]):
    for r in I.parallel(I.domain(0, x.shape[0])):
        for c in I.parallel(I.domain(0, x.shape[1])):
            y[dst[r], c] = x[r, c]


def test_outer_points_conflict_through_their_inner_points(checking):
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    _refuses(nested, checking, (np.array([0, 2, 0], np.int32), x, np.zeros((3, 2), np.float32)), "y: ",
             "parallel points 0 and 2 both write element")


def test_nested_parallels_without_conflict(run):
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = np.zeros((3, 2), np.float32)
    run(nested, np.array([2, 0, 1], np.int32), x, y)
    np.testing.assert_array_equal(y, x[[1, 2, 0]])


@intent.kernel
def per_point_scratch(x: I.In[I.f32, ("M", "K")], y: I.Out[I.f32, ("M",)]):
    k = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        scratch = I.buffer((x.shape[1],), I.f32, init=0.0)  # each point's own: never shared
        scratch[k] = x[r, k] * 2.0
        y[r] = I.reduce.sum(scratch[k], axis=0)


def test_a_buffer_allocated_per_point_is_no_race(run):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.zeros(4, np.float32)
    run(per_point_scratch, x, y)
    np.testing.assert_array_equal(y, (x * 2).sum(axis=1))


def test_cpu_without_checks_records_nothing():
    exe = intent.compile(neighbour, target="cpu", checks=False)
    assert "RS.record" not in exe.source
    assert "RS.record" in intent.compile(neighbour, target="cpu").source


def test_the_parallel_build_finds_the_same_races(monkeypatch):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    n = 4096
    x = np.arange(n, dtype=np.float32)
    for p, q in ((0, n - 1), (n - 1, 0), (n // 2, n // 2 + 1)):
        idx = np.arange(n, dtype=np.int32)
        idx[q] = idx[p]
        y = np.zeros(n, np.float32)
        exe = intent.compile(scatter, target="cpu")
        with pytest.raises(RuntimeError, match=f"y: parallel points ({p} and {q}|{q} and {p}) both write element "
                                               f"{idx[p]}"):
            exe(idx, x, y)
        np.testing.assert_array_equal(y, 0)
        assert exe.module.kernel_parallel.signatures
    src = np.arange(n, dtype=np.int32)
    exe = intent.compile(neighbour, target="cpu")
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    exe(src, x, y, z)  # no race: the parallel build runs to the end
    np.testing.assert_array_equal(z, x)
    src[7] = 1000
    with pytest.raises(RuntimeError, match="y: parallel point"):
        exe(src, x, y, z)


# --- property: both checking targets refuse exactly the kernels NumPy finds racy --------------------------------

@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=8), st.lists(st.integers(0, 7), min_size=8, max_size=8))
def test_racy_exactly_when_numpy_says_so(dest, reads):
    n = len(dest)
    idx = np.array(dest, np.int32)
    src = np.array(reads[:n], np.int32) % n
    # point i writes y[idx[i]] and then reads y[idx[src[i]]]
    written_by = {}
    racy = len(set(dest)) != n
    for i in range(n):
        written_by.setdefault(dest[i], i)
    for i in range(n):
        owner = written_by[dest[src[i]]]
        racy |= owner != i
    x = np.arange(n, dtype=np.float32)
    outcomes = []
    for target in CHECKING:
        y, z = np.zeros(6, np.float32), np.zeros(n, np.float32)
        try:
            intent.compile(write_then_read, target=target)(idx, src, x, y, z)
            outcomes.append(False)
        except RuntimeError as e:
            assert "spec §5" in str(e)
            outcomes.append(True)
    assert outcomes == [racy, racy]


@intent.kernel
def write_then_read(idx: I.In[I.i32, ("N",)], src: I.In[I.i32, ("N",)], x: I.In[I.f32, ("N",)],
                    y: I.InOut[I.f32, ("M",)], z: I.Out[I.f32, ("N",)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        y[idx[i]] = x[i]
        z[i] = y[idx[src[i]]]


def test_cpu_records_only_views_points_may_share():
    # twice_and_shared_input addresses y only at the point itself, row_mix writes z only at its own row:
    # no element can meet another point's, so the checked cpu build keeps no record for them.
    assert "RS.record" not in intent.compile(twice_and_shared_input, target="cpu").source
    exe = intent.compile(row_mix, target="cpu")
    serial = exe.source.split("def kernel(")[1].split("def kernel_parallel")[0]
    assert serial.count("RS.record") == 2  # y: its own row, and row src[r]
    records = [site.message.format(0, 0, 0, **site.texts) for site in exe.error_sites if "race record" in
               site.message.format(0, 0, 0, **site.texts)]
    assert len(records) == 1 and "the race record of y" in records[0]
