"""Histograms on tilelang-cuda (cuda_histogram: a zeroing kernel, then a grid-stride counting kernel whose blocks
count into private bins in shared memory and add them into the output with device atomics; more bins than shared
memory holds: device atomics on the output directly).

On the H200 (the lead's runs):

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda PYTHONPATH=$PWD .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_histogram.py tests/backends/test_tilelang_cuda_scatter.py \
        tests/backends/test_tilelang_cuda_gather.py tests/test_zoo_kernels.py

Two halves, as for row groups. The program text: the CUDA program has the structure the mapping promises and
TileLang lowers it for sm_90a on this machine. The numbers: every histogram kernel runs on every executable target
through the shared ``target`` fixture against ``np.bincount``, with value counts at and past every block and
grid-stride boundary (also through a plan of 2 blocks of 32 threads, so several grid-stride steps run), every value
in one bin, bins that do not divide the block, empty input, out-of-range values (cpu's ValueError, the output
unchanged; masked without checks). On tilelang-c the C target runs CUDA's mapping emulated (the block's threads one
after another, each phase between barriers a serial loop). Counts are integers: exact.
"""
import attrs
import numpy as np
import pytest

from intent_trace import I
import intent_trace as intent

pytest.importorskip("tilelang")
from backends.indexed_support import EMULATED, UNCHECKED, body, make_compiled
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda_histogram, cuda_indexed, targets
from intent_trace.backends.tilelang.program import lower, schedule_of
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.target import generate
from example_modules import benchmark_module

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(256)
#: around a thread's, a block's (256 threads x 8 values: 2048) and a grid-stride step's boundaries
COUNTS = (0, 1, 2, 7, 255, 256, 257, 2047, 2048, 2049, 6000)
#: a plan of 2 blocks of 32 threads, 2 values each: 128 values a grid-stride step, so these counts take many steps
SMALL = attrs.evolve(targets.C, host_workspaces=True, indexed_grid=lambda g: (
    cuda_histogram.histogram_plan(g, True, threads=32, unroll=2, max_blocks=2) or cuda_indexed.indexed_plan(g, True)))


@intent.kernel
def hist_valid(v: I.In[I.i32, ("N",)], ok: I.In[I.bool, ("N",)], counts: I.Out[I.i32, (300,)]):
    x = v[:] // 3
    counts[:] = I.histogram(x, bins=300, valid=ok[:] & (x >= 0) & (x < 300), count_dtype=I.i32)


@intent.kernel
def hist_2d(v: I.In[I.i64, ("M", "N")], counts: I.Out[I.i64, (1000,)]):
    counts[:] = I.histogram(v[:, :], bins=1000, count_dtype=I.i64)


@intent.kernel
def hist_wide(v: I.In[I.i32, ("N",)], counts: I.Out[I.i64, (10000,)]):
    counts[:] = I.histogram(v[:], bins=10000, count_dtype=I.i64)


@intent.kernel
def hist_small_count(v: I.In[I.u8, ("N",)], counts: I.Out[I.i16, (256,)]):
    counts[:] = I.histogram(v[:], bins=256, count_dtype=I.i16)


@pytest.fixture
def compiled(target, monkeypatch):
    return make_compiled(target, monkeypatch, "privatised_histogram")


# --- the program ---------------------------------------------------------------------------------------------

def test_the_cuda_program_zeroes_then_counts_in_shared_bins_and_adds_them_atomically():
    text = body(generate(zoo.histogram256.trace(), "tilelang-cuda"))
    kernels = text.split("    with T.Kernel(")
    assert len(kernels) == 3  # the zeroing kernel, then the counting kernel
    zero, count = kernels[1], kernels[2]
    assert zero.startswith("1, threads=256, prelude=PRELUDE) as bz:") and "p1[bz * 256 + tz] = T.Cast('int64', 0)" in zero
    assert count.startswith("T.max(T.min(T.ceildiv(d0, T.int64(2048)), T.int64(512)), T.int64(1)), threads=256) as bx:")
    assert count.count("T.alloc_shared((256,), 'uint32')") == 1 and count.count("T.sync_threads()") == 2
    assert count.count("T.unroll(8)") == 2  # the step's 8 loads, then its 8 counts
    assert count.index("p0[") < count.index("T.atomic_add(s") < count.index("T.atomic_add(p1[")
    assert count.count("T.atomic_add(") == 2 and "itc_claim" in count and "itc_return" not in count


def test_more_bins_than_shared_memory_holds_are_counted_in_the_output_directly():
    text = body(generate(hist_wide.trace(), "tilelang-cuda"))
    assert "alloc_shared" not in text and "T.sync_threads()" not in text
    assert text.count("T.atomic_add(p1[") == 1 and "T.ceildiv(10000, 256)" not in text
    assert "with T.Kernel(40, threads=256" in text  # 10000 bins zeroed by 40 blocks


def test_the_emulated_program_runs_each_phase_as_a_loop_over_the_threads():
    text = body(lower(zoo.histogram256.trace(), EMULATED).text)
    assert "T.get_thread_binding" not in text and "T.sync_threads" not in text and "T.atomic_add" not in text
    assert text.count("in T.serial(256):") == 3 + 1  # zero the bins, count, add them; the zeroing kernel's loop
    assert "T.alloc_local((256,), 'uint32')" in text


def test_the_schedule_says_histogram_and_why_other_counts_stay_serial():
    part = schedule_of(zoo.histogram256.trace(), targets.CUDA).general
    assert part.mapping == "privatised_histogram" and part.param("bins") == 256
    assert part.param("bins_in") == "shared memory" and part.param("threads") == 256
    assert schedule_of(hist_wide.trace(), targets.CUDA).general.param("bins_in") == "global memory"
    serial = schedule_of(hist_small_count.trace(), targets.CUDA).general
    assert serial.mapping == "serial" and "counts of dtype i16" in serial.reason
    assert schedule_of(zoo.histogram256.trace(), targets.C).general.mapping == "serial"  # the C target's own


@pytest.mark.parametrize("kernel", [zoo.histogram256, hist_valid, hist_wide], ids=lambda k: k.name)
def test_tilelang_lowers_the_histogram_program_for_sm90(kernel):
    source = cuda_source(generate(kernel.trace(), "tilelang-cuda"))
    assert source.count("__global__ void __launch_bounds__(256") == 2 and "AtomicAdd(" in source
    assert ("__shared__" in source) == (kernel is not hist_wide) and "blockIdx.x" in source


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", COUNTS)
def test_u8_histogram_matches_bincount(compiled, n):
    v = RNG.integers(0, 256, n).astype(np.uint8)
    counts = np.full(256, -7, np.int64)  # the kernel owns its output: every count is written
    compiled(zoo.histogram256)(v, counts)
    assert np.array_equal(counts, np.bincount(v, minlength=256))


@pytest.mark.parametrize("n", (1, 127, 128, 129, 1000, 4097))
def test_many_grid_stride_steps_count_every_value_once(monkeypatch, n):
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", SMALL)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = tl_target.build(zoo.histogram256.trace(), target="tilelang-c")
    assert "T.Kernel(T.max(T.min(T.ceildiv(d0, T.int64(64)), T.int64(2))" in exe.program
    v = RNG.integers(0, 256, n).astype(np.uint8)
    counts = np.zeros(256, np.int64)
    exe(v, counts)
    assert np.array_equal(counts, np.bincount(v, minlength=256))


@pytest.mark.parametrize("at", (0, 1, 255))
def test_every_value_in_one_bin(compiled, at):
    v = np.full(5000, at, np.uint8)
    counts = np.zeros(256, np.int64)
    compiled(zoo.histogram256)(v, counts)
    want = np.zeros(256, np.int64)
    want[at] = 5000
    assert np.array_equal(counts, want)


@pytest.mark.parametrize("n", (0, 5, 2049, 7000))
def test_valid_mask_and_computed_values_with_bins_no_block_divides(compiled, n):
    v = RNG.integers(-50, 1000, n).astype(np.int32)
    ok = RNG.random(n) < 0.7
    counts = np.full(300, 3, np.int32)
    compiled(hist_valid)(v, ok, counts)
    x = np.trunc(v / 3).astype(np.int64)  # integer // truncates toward zero (T2)
    keep = ok & (x >= 0) & (x < 300)
    assert np.array_equal(counts, np.bincount(x[keep], minlength=300).astype(np.int32))


@pytest.mark.parametrize("shape", ((0, 4), (3, 0), (1, 1), (7, 300), (33, 65)))
def test_two_dimensional_values(compiled, shape):
    v = RNG.integers(0, 1000, shape).astype(np.int64)
    counts = np.full(1000, 9, np.int64)
    compiled(hist_2d)(v, counts)
    assert np.array_equal(counts, np.bincount(v.reshape(-1), minlength=1000))


@pytest.mark.parametrize("n", (0, 1, 3000))
def test_bins_in_global_memory(compiled, n):
    v = RNG.integers(0, 10000, n).astype(np.int32)
    v[: n // 2] = 9999  # collisions: half of them on the last bin
    counts = np.full(10000, 1, np.int64)
    compiled(hist_wide)(v, counts)
    assert np.array_equal(counts, np.bincount(v, minlength=10000))


@pytest.mark.parametrize("bad", (-1, 10000, 2 ** 31 - 1))
@pytest.mark.parametrize("position", (0, 1500, 2999))
def test_a_value_outside_the_bins_is_an_error_and_leaves_the_output(compiled, bad, position):
    v = RNG.integers(0, 10000, 3000).astype(np.int32)
    v[position] = bad
    counts = np.full(10000, 4, np.int64)
    with pytest.raises(ValueError, match=rf"I.histogram: value {bad} is outside the bins \[0, 10000\)"):
        compiled(hist_wide)(v, counts)
    assert np.all(counts == 4)


@pytest.mark.parametrize("target", UNCHECKED)
@pytest.mark.parametrize("kernel", [hist_2d, hist_wide], ids=lambda k: k.name)
def test_without_checks_a_value_outside_the_bins_is_not_counted(target, monkeypatch, kernel):
    compiled = make_compiled(target, monkeypatch, "privatised_histogram")
    bins = 1000 if kernel is hist_2d else 10000
    v = RNG.integers(-3, bins + 3, (2, 2500))
    v = v.astype(np.int64) if kernel is hist_2d else v.reshape(-1).astype(np.int32)
    counts = np.zeros(bins, np.int64)
    compiled(kernel, checks=False)(v, counts)
    flat = v.reshape(-1)
    assert np.array_equal(counts, np.bincount(flat[(flat >= 0) & (flat < bins)], minlength=bins))
