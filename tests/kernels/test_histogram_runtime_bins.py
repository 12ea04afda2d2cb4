"""Histograms with a runtime bin count (issue 15 item 3; spec §13: bins is a positive logical index).

``bins=counts.shape[0]`` counts straight into a dynamic output view; a runtime scalar gives a result of its own
extent, written through ``I.assume_equal`` or into a domain of a larger view. A bin count that is not positive is a
ValueError naming it, raised when the kernel runs, and no output is written. Every kernel runs on every executable
target through the shared ``run`` fixture against ``np.bincount``; tilelang-cuda's counting grid (shared-memory bins
when they fit, the output's otherwise, chosen when the kernel runs) runs through its C emulation with bin counts on
both sides of the shared-memory limit.
"""
import re

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import intent_trace as intent
from intent_trace import I

RNG = np.random.default_rng(13)


@intent.kernel
def hist_out(v: I.In[I.i32, ("N",)], counts: I.Out[I.i32, ("B",)]):
    counts[:] = I.histogram(v[:], bins=counts.shape[0], count_dtype=I.i32)


@intent.kernel
def hist_scalar(v: I.In[I.i64, ("N",)], counts: I.Out[I.i64, ("B",)], nbins: I.i32):
    h = I.histogram(v[:], bins=nbins, count_dtype=I.i64)
    I.assume_equal(counts.shape[0], I.cast(nbins, I.index))  # the result meets the output's extent
    counts[:] = h


@intent.kernel
def hist_prefix(v: I.In[I.u8, ("N",)], ok: I.In[I.bool, ("N",)], counts: I.InOut[I.u16, ("C",)], nbins: I.index):
    x = v[:]
    h = I.histogram(x, bins=nbins, valid=ok[:] & (I.cast(x, I.index) < nbins), count_dtype=I.u16)
    counts[I.domain(0, nbins)] = h  # the first nbins counts; the rest of `counts` stays as it was


def _counts(v, bins, valid=None):
    v = np.asarray(v).reshape(-1)
    if valid is not None:
        v = v[np.asarray(valid).reshape(-1)]
    return np.bincount(v.astype(np.int64), minlength=bins)[:bins]


@pytest.mark.parametrize("n,bins", [(0, 1), (1, 1), (7, 3), (300, 17), (1000, 256), (64, 1000)])
def test_bins_from_the_output_extent_count_into_it(run, n, bins):
    v = RNG.integers(0, bins, n).astype(np.int32)
    counts = np.full(bins, -5, np.int32)
    run(hist_out, v, counts)
    np.testing.assert_array_equal(counts, _counts(v, bins))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 200), bins=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_bins_from_a_runtime_scalar_meet_the_output_through_assume_equal(run, n, bins, seed):
    v = np.random.default_rng(seed).integers(0, bins, n).astype(np.int64)
    counts = np.full(bins, 9, np.int64)
    run(hist_scalar, v, counts, bins)  # one kernel for every (n, bins): compiled once per target
    np.testing.assert_array_equal(counts, _counts(v, bins))


@pytest.mark.parametrize("n,bins,size", [(50, 5, 9), (0, 3, 3), (200, 256, 300), (10, 1, 1)])
def test_a_runtime_bin_count_writes_a_prefix_of_a_larger_view(run, n, bins, size):
    v = RNG.integers(0, 260, n).astype(np.uint8)
    ok = RNG.random(n) < 0.7
    counts = np.full(size, 77, np.uint16)
    run(hist_prefix, v, ok, counts, bins)
    expected = np.full(size, 77, np.uint16)
    expected[:bins] = _counts(v, bins, ok & (v.astype(np.int64) < bins))
    np.testing.assert_array_equal(counts, expected)


def test_a_bin_count_that_is_not_positive_is_a_value_error_naming_it(run):
    v = np.array([0, 1], np.int32)
    with pytest.raises(ValueError, match=r"I\.histogram: bins \(B\) is 0; the number of bins must be positive"):
        run(hist_out, v, np.zeros(0, np.int32))
    for bad in (0, -3):
        counts = np.full(4, 6, np.int64)
        with pytest.raises(ValueError, match=rf"bins \(nbins\) is {bad}; the number of bins must be positive"):
            run(hist_scalar, v.astype(np.int64), counts, bad)
        np.testing.assert_array_equal(counts, 6)
    counts = np.full(5, 8, np.uint16)
    with pytest.raises(ValueError, match=r"bins \(nbins\) is 0"):
        run(hist_prefix, np.zeros(3, np.uint8), np.ones(3, bool), counts, 0)
    np.testing.assert_array_equal(counts, 8)


def test_a_value_outside_the_runtime_bins_is_a_value_error_and_writes_nothing(run):
    counts = np.full(3, 4, np.int32)
    with pytest.raises(ValueError, match=r"value 3 is outside the bins \[0, 3\)"):
        run(hist_out, np.array([0, 2, 3, 1], np.int32), counts)
    np.testing.assert_array_equal(counts, 4)


def test_a_runtime_scalar_that_is_not_the_output_extent_is_assume_equals_error(run):
    counts = np.full(4, 1, np.int64)
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: B .* is 4, but nbins .* is 5"):
        run(hist_scalar, np.zeros(3, np.int64), counts, 5)
    np.testing.assert_array_equal(counts, 1)


def test_the_kir_takes_the_bin_count_as_its_last_operand():
    text = str(hist_out.trace())
    assert re.search(r"%\d+: i32\[B\] = histogram %\d+, B \{has_valid=False\}", text), text
    text = str(hist_prefix.trace())
    assert re.search(r"u16\[nbins\] = histogram %\d+, %\d+, nbins \{has_valid=True\}", text), text


# --- tilelang-cuda's counting grid, emulated on the C target -------------------------------------------------

pytest.importorskip("tilelang")
from backends.indexed_support import EMULATED, body, make_compiled  # noqa: E402
from backends.tilelang_support import cuda_source  # noqa: E402
from intent_trace.backends.tilelang import cuda_histogram, cuda_indexed, targets  # noqa: E402
from intent_trace.backends.tilelang.program import lower, schedule_of  # noqa: E402
from intent_trace.backends.tilelang.target import generate  # noqa: E402

#: 2 blocks of 32 threads, 2 values each, 64 private bins: bin counts past 64 take the output's bins
SMALL = attrs.evolve(targets.C, host_workspaces=True, indexed_grid=lambda g: (
    cuda_histogram.histogram_plan(g, True, threads=32, unroll=2, max_blocks=2, shared_bins=64)
    or cuda_indexed.indexed_plan(g, True)))


@pytest.fixture
def compiled(target, monkeypatch):
    return make_compiled(target, monkeypatch, "privatised_histogram")


@pytest.fixture
def small(target, monkeypatch):
    return make_compiled(target, monkeypatch, "privatised_histogram", SMALL)


@pytest.mark.parametrize("bins", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("n", [0, 1, 127, 128, 129, 1000])
def test_the_grid_counts_into_private_or_output_bins_as_the_run_chooses(small, bins, n):
    v = RNG.integers(0, bins, n).astype(np.int32)
    counts = np.full(bins, -1, np.int32)
    small(hist_out)(v, counts)
    np.testing.assert_array_equal(counts, _counts(v, bins))


@pytest.mark.parametrize("bins", [8192, 8193])
def test_the_full_size_grid_at_the_shared_memory_limit(compiled, bins):
    v = np.concatenate([RNG.integers(0, bins, 5000), [bins - 1] * 3]).astype(np.int32)
    counts = np.full(bins, 3, np.int32)
    compiled(hist_out)(v, counts)
    np.testing.assert_array_equal(counts, _counts(v, bins))


def test_the_grid_refuses_a_bin_count_that_is_not_positive(small):
    counts = np.zeros(0, np.int32)
    with pytest.raises(ValueError, match=r"bins \(B\) is 0; the number of bins must be positive"):
        small(hist_out)(np.array([1, 2], np.int32), counts)
    with pytest.raises(ValueError, match=r"bins \(B\) is 0"):
        small(hist_out)(np.zeros(0, np.int32), counts)  # no values at all: the bin count is still checked


def test_the_grid_refuses_a_value_outside_the_runtime_bins(small):
    counts = np.full(70, 2, np.int32)
    with pytest.raises(ValueError, match=r"value 70 is outside the bins \[0, 70\)"):
        small(hist_out)(np.array([0, 70, 5], np.int32), counts)
    np.testing.assert_array_equal(counts, 2)


def test_the_cuda_program_holds_both_paths_and_chooses_when_it_runs():
    text = body(generate(hist_out.trace(), "tilelang-cuda"))
    kernels = text.split("    with T.Kernel(")
    assert len(kernels) == 3
    assert kernels[1].startswith("T.max(T.min(T.ceildiv(d1, T.int64(256))")  # the zeroing launch: d1 = B
    count = kernels[2]
    assert count.count("T.alloc_shared((8192,), 'uint32')") == 1 and "d1 <= T.int64(8192)" in count
    assert count.count("T.atomic_add(p1[") == 2 and count.count("T.atomic_add(s") == 1
    assert count.count("itc_claim") >= 2  # the bin count's check and the values'


def test_the_schedule_names_the_runtime_bins_and_says_where_they_are_counted():
    part = schedule_of(hist_out.trace(), targets.CUDA).general
    assert part.mapping == "privatised_histogram" and part.param("bins") == "B"
    assert "chosen when the kernel runs" in part.param("bins_in")
    serial = schedule_of(hist_scalar.trace(), targets.CUDA).general
    assert serial.mapping == "serial"


def test_the_emulated_program_is_the_grid_with_the_threads_as_loops():
    text = body(lower(hist_out.trace(), EMULATED).text)
    assert "T.get_thread_binding" not in text and "T.alloc_local((8192,), 'uint32')" in text


def test_tilelang_lowers_the_runtime_bins_program_for_sm90():
    source = cuda_source(generate(hist_out.trace(), "tilelang-cuda"))
    assert source.count("__global__ void __launch_bounds__(256") == 2 and "__shared__" in source
    assert "AtomicAdd(" in source
