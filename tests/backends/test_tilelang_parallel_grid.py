"""tilelang-cuda's grids of threads, run on this machine. A graph's top-level ``parallel`` loop runs one iteration
per thread (cuda_kernels.ParallelGrid, 32 threads a block); a graph whose one effect is a whole write of a pure
expression runs one element (or 8, when pointwise) per thread (cuda_kernels.FlatNest). Here the C target runs the same mapping with each block's threads one after another
(``emulated``) and host workspaces, so the generated structure (iteration index, the last block's spare threads,
the error record claimed by the first failing thread, the fallback when an iteration would need a workspace) is
checked on this machine against NumPy and generic; the CUDA text is checked by lowering it with TileLang."""
import re

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import TARGET, affine, cuda_source, row_prefix_max, run_both
from example_modules import example
from intent_trace.backends.tilelang import cuda_kernels, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.target import build, generate

RNG = np.random.default_rng(23)


@pytest.fixture
def emulated(monkeypatch):
    """The C target with tilelang-cuda's grid mappings (a block's threads one after another) and host workspaces."""
    monkeypatch.setitem(targets.TARGETS, TARGET, attrs.evolve(
        targets.C, parallel_grid=lambda g: cuda_kernels.parallel_grid(g, emulated=True),
        flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True), host_workspaces=True))
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})


softmax_rows = example("row_softmax").softmax_rows


@intent.kernel
def gather_rows(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("M", "K")], y: I.Out[I.f32, ("M",)], scale: I.f32):
    ks = I.domain(0, idx.shape[1])
    for r in I.parallel(I.domain(1, idx.shape[0])):  # row 0 is left alone
        y[r] = I.reduce.sum(I.gather(x[:], idx[r, ks]), axis=0) * scale


@intent.kernel
def row_snapshot(x: I.InOut[I.f32, ("M", "N")]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        old = I.buffer((x.shape[1],), I.f32, init=x[r, cols])  # a workspace per iteration: not mapped
        x[r, cols] = old[cols] * 2.0


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_the_top_level_parallel_loop_is_recognised_and_near_misses_are_not():
    grid = cuda_kernels.parallel_grid(softmax_rows.trace())
    assert grid is not None and grid.length == "d0" and grid.threads == cuda_kernels.GRID_THREADS
    assert cuda_kernels.parallel_grid(gather_rows.trace()).length == "T.max(d1 - T.int64(1), T.int64(0))"

    @intent.kernel
    def scatter_body(x: I.In[I.i32, ("M", "K")], v: I.In[I.i32, ("K",)], counts: I.InOut[I.i32, (4,)]):
        for r in I.parallel(I.domain(0, x.shape[0])):  # scatter_reduce's updates are not device atomics
            I.scatter_reduce(counts, x[r, :] % 4, v[:], combine="add")

    @intent.kernel
    def write_first(x: I.In[I.f32, ("M",)], y: I.Out[I.f32, ("M",)]):
        y[0] = x[0]  # a write before the loop: every thread would repeat it
        for r in I.parallel(I.domain(1, x.shape[0])):
            y[r] = x[r]

    @intent.kernel
    def strided(x: I.In[I.f32, ("M",)], y: I.Out[I.f32, ("M",)]):
        for r in I.parallel(I.domain(0, x.shape[0], 2)):
            y[r] = x[r]

    @intent.kernel
    def read_then_write(x: I.InOut[I.f32, ("M",)]):
        first = x[0]  # read before the loop, which writes x: another thread's iteration could come first
        for r in I.parallel(I.domain(0, x.shape[0])):
            x[r] = x[r] + first

    for k in (scatter_body, write_first, strided, read_then_write):
        assert cuda_kernels.parallel_grid(k.trace()) is None, k


@pytest.mark.parametrize("m", [0, 1, 31, 32, 33, 70])
def test_row_softmax_on_the_emulated_grid(emulated, m):
    exe = build(softmax_rows.trace(), target=TARGET)
    assert "for tx" in exe.program and "as bx:" in exe.program and "T.ceildiv(d0, T.int64(32))" in exe.program
    x = (RNG.standard_normal((m, 9)) * 4).astype(np.float32)
    out = run_both(softmax_rows, x, np.full((m, 9), np.nan, np.float32))
    np.testing.assert_allclose(out["y"], _softmax(x), rtol=3e-6, atol=1e-7)


def test_an_offset_domain_and_a_check_claimed_by_the_first_failing_iteration(emulated):
    exe = build(gather_rows.trace(), target=TARGET)
    assert "itc_claim" in exe.program and exe.error_sites
    x = np.arange(5, dtype=np.float32)
    idx = RNG.integers(0, 5, (40, 3)).astype(np.int32)
    out = run_both(gather_rows, x, idx, np.full(40, -1.0, np.float32), 0.5)
    np.testing.assert_array_equal(out["y"][1:], x[idx[1:]].sum(axis=1) * 0.5)
    assert out["y"][0] == -1.0
    bad = idx.copy()
    bad[7, 1], bad[35, 2] = 9, -4  # two failing rows: one error, with its own values
    y = np.full(40, -1.0, np.float32)
    with pytest.raises(IndexError, match=r"coordinate (9|-4) on axis 0 is outside its extent 5"):
        exe(x, bad, y, 0.5)
    assert (y == -1.0).all()


@intent.kernel
def histogram_atomics(x: I.In[I.i32, ("M",)], counts: I.InOut[I.i32, (4,)], small: I.InOut[I.u8, (4,)],
                      total: I.InOut[I.f32, (1,)]):
    for r in I.parallel(I.domain(0, x.shape[0])):
        b = x[r] % 4
        I.atomic.add(counts[b], 1, order="relaxed")
        I.atomic.max(small[b], I.cast(x[r], I.u8), order="acq_rel")
        I.atomic.add(total[0], I.cast(x[r], I.f32), order="release")


def test_atomics_in_the_mapped_loop(emulated):
    assert cuda_kernels.parallel_grid(histogram_atomics.trace()) is not None
    assert "for tx" in build(histogram_atomics.trace(), target=TARGET).program
    x = RNG.integers(0, 200, 77).astype(np.int32)
    out = run_both(histogram_atomics, x, np.zeros(4, np.int32), np.zeros(4, np.uint8), np.zeros(1, np.float32))
    np.testing.assert_array_equal(out["counts"], np.bincount(x % 4, minlength=4))
    np.testing.assert_array_equal(out["small"], [x[x % 4 == b].max(initial=0) for b in range(4)])
    assert out["total"][0] == np.float32(x.sum())  # integers below 2^24: exact in any order


def test_an_iteration_needing_a_workspace_falls_back_to_the_serial_program(emulated):
    program = build(row_snapshot.trace(), target=TARGET).program
    assert "for tx" not in program and "W0" in program
    x = RNG.standard_normal((40, 5)).astype(np.float32)
    out = run_both(row_snapshot, x)
    np.testing.assert_array_equal(out["x"], x * 2)


def test_cuda_gets_one_iteration_per_thread_and_an_atomic_claim():
    program = generate(gather_rows.trace(), "tilelang-cuda")
    assert "threads=32" in program and "T.get_thread_binding()" in program and "for tx" not in program
    source = cuda_source(program)
    assert "atomicCAS" in source and re.search(r"__launch_bounds__\(32", source)
    atomics = generate(histogram_atomics.trace(), "tilelang-cuda")
    assert "T.get_thread_binding()" in atomics and "itc_cas_u8" in atomics and "__threadfence" in atomics
    assert "threadIdx.x" in source and "blockIdx.x" in source


# --- the write nest on a grid (FlatNest), elements with loops of their own ------------------------------------

@intent.kernel
def row_sums(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M",)]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m] = I.reduce.sum(x[m, n], axis=1)


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)



@pytest.mark.parametrize("shape", [(0, 4), (1, 1), (33, 7), (130, 3)])
def test_row_sums_and_matmul_one_element_per_thread(emulated, shape):
    m, n = shape
    assert "for tx" in build(row_sums.trace(), target=TARGET).program
    x = RNG.standard_normal((m, n)).astype(np.float32)
    out = run_both(row_sums, x, np.full(m, np.nan, np.float32))  # bit for bit: each row in the serial order
    np.testing.assert_allclose(out["out"], x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    a, b = RNG.standard_normal((m, n + 2)).astype(np.float32), RNG.standard_normal((n + 2, 5)).astype(np.float32)
    out = run_both(matmul_f32, a, b, np.full((m, 5), np.nan, np.float32))
    np.testing.assert_allclose(out["c"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_a_pointwise_nest_takes_eight_elements_per_thread(emulated):
    program = build(affine.trace(), target=TARGET).program
    assert "for tx" in program and "T.unroll(8)" in program
    # spare threads repeat the last element: of the nest (flat), of the row (a row's chunk, rows of 1024 or more)
    body = program.split("T.unroll(8)")[1]
    assert "d0 * d1 - 1)" in body and ", d1 - 1)" in body
    # 1147 elements: two blocks of 1024, the second mostly spare; rows of 1030: two chunks a row, the second spare
    for m, n in ((0, 3), (3, 5), (37, 31), (2, 1030)):
        x = RNG.standard_normal((m, n)).astype(np.float32)
        out = run_both(affine, x, np.zeros((m, n), np.float32))
        np.testing.assert_array_equal(out["y"], (x * np.float32(1.5)) - np.float32(0.25))


def test_an_element_needing_a_workspace_keeps_the_serial_program(emulated):
    assert cuda_kernels.flat_nest(row_prefix_max.trace()) is not None  # planned, then abandoned by the emitter
    program = build(row_prefix_max.trace(), target=TARGET).program
    assert "for tx" not in program and "W0" in program
    x = RNG.standard_normal((6, 9)).astype(np.float32)
    out = run_both(row_prefix_max, x, np.zeros(6, np.float32))
    np.testing.assert_array_equal(out["out"], np.cumsum(x, axis=1, dtype=np.float32).max(axis=1))


@intent.kernel
def gather_sums(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("M", "K")], y: I.Out[I.f32, ("M",)]):
    m, k = I.domain(0, idx.shape[0]), I.domain(0, idx.shape[1])
    y[m] = I.reduce.sum(I.gather(x[:], idx[m, k]), axis=1)


def test_a_check_in_a_nest_on_the_grid_is_claimed_once(emulated):
    exe = build(gather_sums.trace(), target=TARGET)
    assert "for tx" in exe.program and "itc_claim" in exe.program
    x = np.arange(5, dtype=np.float32)
    idx = RNG.integers(0, 5, (50, 3)).astype(np.int32)
    out = run_both(gather_sums, x, idx, np.zeros(50, np.float32))
    np.testing.assert_array_equal(out["y"], x[idx].sum(axis=1))
    idx[3, 0], idx[44, 2] = 7, -1
    y = np.zeros(50, np.float32)
    with pytest.raises(IndexError, match=r"coordinate (7|-1) on axis 0 is outside its extent 5"):
        exe(x, idx, y)
    assert not y.any()


@intent.kernel
def transpose_add(x: I.In[I.i32, ("A", "B", "C")], y: I.In[I.i32, ("C",)], z: I.Out[I.i32, ("A", "B", "C")]):
    z[:, :, :] = x[:, :, :] + y[None, None, :]


@pytest.mark.parametrize("wide", [False, True], ids=["32-bit", "64-bit"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (2, 1, 300), (9, 130, 1)])
def test_flat_nest_coordinates_in_either_width(emulated, monkeypatch, shape, wide):
    # a flat nest finds each element's coordinates with one division per axis but the first, in 32-bit arithmetic
    # below 2**31 elements; the 64-bit branch (above it) is taken here by lowering the limit to 0
    from intent_trace.backends.tilelang import emitter

    if wide:
        monkeypatch.setattr(emitter, "INT32_FLAT", 0)
    program = build(transpose_add.trace(), target=TARGET).program
    assert ("T.int64(0)" if wide else "T.int64(2147483648)") in program and "uint32" in program
    x = RNG.integers(-1000, 1000, shape).astype(np.int32)
    y = RNG.integers(-1000, 1000, shape[2]).astype(np.int32)
    out = run_both(transpose_add, x, y, np.zeros(shape, np.int32))
    np.testing.assert_array_equal(out["z"], x + y)  # every element once, at its own place
