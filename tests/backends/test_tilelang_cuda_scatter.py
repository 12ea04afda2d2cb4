"""scatter_reduce on tilelang-cuda (cuda_scatter: a grid over the updates, one device atomic each: atomicAdd for an
integer add, a compare-and-swap loop around the serial program's combine for the others).

On the H200 (the lead's runs):

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda PYTHONPATH=$PWD .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_histogram.py tests/backends/test_tilelang_cuda_scatter.py \
        tests/backends/test_tilelang_cuda_gather.py tests/test_zoo_kernels.py

The program text: the CUDA program's structure and TileLang's lowering for sm_90a. The numbers, on every executable
target through the ``target`` fixture against ``np.add.at`` and hand-computed values: collisions at varied
positions, every update to one element, update counts no block divides, empty updates, 2-D destinations, NaN, inf
and signed zeros, out-of-range indices (the destination's IndexError, the caller's array unchanged; masked without
checks). Float sums are held to T5's bound per destination (from its own update count: the order of collisions is
free, T10); integers, maximum and minimum exactly.
"""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.indexed_support import EMULATED, UNCHECKED, body, make_compiled, within_t5
from backends.tilelang_support import cuda_source
from example_modules import benchmark_module
from intent_trace.backends.tilelang import targets
from intent_trace.backends.tilelang.program import lower, schedule_of
from intent_trace.backends.tilelang.target import generate

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(16)
UPDATES = (0, 1, 2, 255, 256, 257, 1000, 4099)


@intent.kernel
def scatter_add_i64(idx: I.In[I.i64, ("K",)], v: I.In[I.i64, ("K",)], dest: I.InOut[I.i64, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine="add")


@intent.kernel
def scatter_add_i32(idx: I.In[I.i32, ("K",)], v: I.In[I.i32, ("K",)], dest: I.InOut[I.i32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine=lambda a, b: b + a)


@intent.kernel
def scatter_max_f32(idx: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine="max")


@intent.kernel
def scatter_min_f32(idx: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine="min")


@intent.kernel
def scatter_xor_u32(idx: I.In[I.i64, ("K",)], v: I.In[I.u32, ("K",)], dest: I.InOut[I.u32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine="xor")


@intent.kernel
def scatter_add_2d(r: I.In[I.i64, ("K",)], c: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)],
                   dest: I.InOut[I.f32, ("M", "N")]):
    I.scatter_reduce(dest, (r[:], c[:]), v[:] * 2.0, combine="add")


@intent.kernel
def scatter_sub(idx: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine=lambda a, b: a - b)


@pytest.fixture
def compiled(target, monkeypatch):
    return make_compiled(target, monkeypatch, "atomic_scatter")


# --- the program ---------------------------------------------------------------------------------------------

def test_the_cuda_program_is_a_grid_over_the_updates_with_one_atomic_each():
    text = body(generate(zoo.scatter_add.trace(), "tilelang-cuda"))
    text = text[text.index(" as bz:"):]  # after the screen kernel (test_tilelang_cuda_scatter_screen.py)
    assert "with T.Kernel(T.max(T.min(T.ceildiv(d0, T.int64(256)), T.int64(1073741824)), T.int64(1)), " \
           "threads=256) as bx:" in text
    scatter = text[text.index(" as bx:"):]
    assert "j2 = T.Cast('int64', bx) * T.int64(256) + T.Cast('int64', tx1)" in scatter and "if j2 < d0:" in scatter
    assert scatter.count("it_atomic_add_relaxed_f32") == 1 and "itc_claim" in scatter and "T.serial" not in scatter
    program = generate(scatter_add_i64.trace(), "tilelang-cuda")
    assert "it_atomic_iadd_relaxed_i64" in program and "atomicAdd((unsigned long long*)q" in program
    assert "itc_cas_" not in program  # a native add needs no CAS loop


def test_the_emulated_program_loops_over_a_block_s_threads():
    text = body(lower(zoo.scatter_add.trace(), EMULATED).text)
    assert "T.get_thread_binding" not in text and text.count("in T.serial(256):") == 1
    assert "with T.Kernel(T.max(T.min(T.ceildiv(d0, T.int64(256)), T.int64(1073741824)), T.int64(1))) as bx:" in text


def test_the_schedule_says_atomic_scatter_and_why_other_combines_stay_serial():
    part = schedule_of(zoo.scatter_add.trace(), targets.CUDA).general
    assert part.mapping == "atomic_scatter" and part.param("combine") == "add"
    assert part.param("atomic").endswith("else a compare-and-swap loop around the combine")  # (screened)
    assert schedule_of(scatter_max_f32.trace(), targets.CUDA).general.param("atomic") == \
        "a compare-and-swap loop around the combine"
    assert schedule_of(scatter_add_i64.trace(), targets.CUDA).general.param("atomic") == "atomicAdd"
    serial = schedule_of(scatter_sub.trace(), targets.CUDA).general
    assert serial.mapping == "serial" and "not one built-in binary op" in serial.reason


@pytest.mark.parametrize("kernel", [zoo.scatter_add, scatter_add_i64, scatter_max_f32, scatter_xor_u32,
                                    scatter_add_2d], ids=lambda k: k.name)
def test_tilelang_lowers_the_scatter_program_for_sm90(kernel):
    source = cuda_source(generate(kernel.trace(), "tilelang-cuda"))
    assert "__launch_bounds__(256" in source and "blockIdx.x" in source
    assert "atomicCAS(" in source or "atomicAdd(" in source


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", UPDATES)
def test_f32_add_matches_add_at_within_the_bound(compiled, k):
    n = 37
    idx = RNG.integers(0, n, k)
    v = RNG.standard_normal(k).astype(np.float32)
    dest = RNG.standard_normal(n).astype(np.float32)
    got = dest.copy()
    compiled(zoo.scatter_add)(idx, v, got)
    within_t5(got, dest, idx, v)


@pytest.mark.parametrize("at", (0, 17, 36))
def test_every_update_to_one_element(compiled, at):
    k, n = 3000, 37
    idx = np.full(k, at, np.int64)
    v = RNG.integers(-8, 8, k).astype(np.float32)  # small integers: every order of the sums is exact
    dest = np.arange(n, dtype=np.float32)
    got = dest.copy()
    compiled(zoo.scatter_add)(idx, v, got)
    want = dest.copy()
    want[at] += v.sum()
    assert np.array_equal(got, want)


def test_f32_add_of_inf_nan_and_signed_zeros(compiled):
    idx = np.array([0, 0, 1, 1, 2, 3, 3, 4], np.int64)
    v = np.array([np.inf, 1.0, np.inf, -np.inf, np.nan, -0.0, -0.0, 2.0 ** -140], np.float32)
    dest = np.array([5.0, 0.0, 1.0, -0.0, 2.0 ** -140], np.float32)
    compiled(zoo.scatter_add)(idx, v, dest)
    assert dest[0] == np.inf and np.isnan(dest[1]) and np.isnan(dest[2])
    assert dest[3] == 0 and np.signbit(dest[3])  # -0 + -0 + -0 = -0
    assert dest[4] == np.float32(2.0 ** -139)  # subnormals are added, not flushed (T3)


@pytest.mark.parametrize("k", UPDATES)
@pytest.mark.parametrize("kernel,dtype", [(scatter_add_i64, np.int64), (scatter_add_i32, np.int32)],
                         ids=["i64", "i32"])
def test_integer_add_is_exact_and_wraps(compiled, kernel, dtype, k):
    n = 29
    info = np.iinfo(dtype)
    idx = RNG.integers(0, n, k).astype(np.int64 if dtype is np.int64 else np.int32)
    v = RNG.integers(info.min, info.max, k, dtype=dtype)
    dest = RNG.integers(info.min, info.max, n, dtype=dtype)
    want = dest.copy()
    with np.errstate(over="ignore"):
        np.add.at(want, idx, v)  # wraps modulo 2^bits, as T2 says
    compiled(kernel)(idx, v, dest)
    assert np.array_equal(dest, want)


@pytest.mark.parametrize("k", (0, 1, 300, 2049))
@pytest.mark.parametrize("kernel,fold", [(scatter_max_f32, np.maximum), (scatter_min_f32, np.minimum)],
                         ids=["max", "min"])
def test_maximum_and_minimum_are_exact(compiled, kernel, fold, k):
    n = 41
    idx = RNG.integers(0, n, k)
    v = (RNG.standard_normal(k) * 100).astype(np.float32)
    dest = (RNG.standard_normal(n) * 100).astype(np.float32)
    want = dest.copy()
    fold.at(want, idx, v)
    compiled(kernel)(idx, v, dest)
    assert np.array_equal(dest, want)


def test_maximum_and_minimum_order_signed_zeros_and_propagate_nan(compiled):
    idx = np.array([0, 0, 1, 2, 2], np.int64)
    v = np.array([0.0, -0.0, -0.0, np.nan, 5.0], np.float32)
    hi = np.array([-0.0, 0.0, 1.0], np.float32)
    compiled(scatter_max_f32)(idx, v, hi)
    assert hi[0] == 0 and not np.signbit(hi[0]) and hi[1] == 0 and not np.signbit(hi[1]) and np.isnan(hi[2])
    lo = np.array([0.0, 0.0, 1.0], np.float32)
    compiled(scatter_min_f32)(idx, v, lo)
    assert np.signbit(lo[0]) and np.signbit(lo[1]) and np.isnan(lo[2])


def test_xor_of_unsigned_words(compiled):
    k, n = 5000, 13
    idx = RNG.integers(0, n, k)
    v = RNG.integers(0, 2 ** 32, k, dtype=np.uint32)
    dest = RNG.integers(0, 2 ** 32, n, dtype=np.uint32)
    want = dest.copy()
    np.bitwise_xor.at(want, idx, v)
    compiled(scatter_xor_u32)(idx, v, dest)
    assert np.array_equal(dest, want)


@pytest.mark.parametrize("shape,k", [((3, 5), 0), ((3, 5), 700), ((1, 1), 300), ((17, 4), 2000)])
def test_two_dimensional_destination(compiled, shape, k):
    r = RNG.integers(0, shape[0], k)
    c = RNG.integers(0, shape[1], k)
    v = RNG.integers(-8, 8, k).astype(np.float32)
    dest = RNG.integers(-8, 8, shape).astype(np.float32)
    want = dest.copy()
    np.add.at(want, (r, c), v * 2)
    compiled(scatter_add_2d)(r, c, v, dest)
    assert np.array_equal(dest, want)


@pytest.mark.parametrize("bad", (-1, 37, 2 ** 40))
@pytest.mark.parametrize("position", (0, 600, 1999))
def test_an_index_outside_the_destination_is_an_error_and_leaves_it(compiled, bad, position):
    idx = RNG.integers(0, 37, 2000)
    idx[position] = bad
    v = np.ones(2000, np.float32)
    dest = np.arange(37, dtype=np.float32)
    with pytest.raises(IndexError, match=rf"dest: coordinate {bad} on axis 0 is outside its extent 37"):
        compiled(zoo.scatter_add)(idx, v, dest)
    assert np.array_equal(dest, np.arange(37, dtype=np.float32))


@pytest.mark.parametrize("target", UNCHECKED)
def test_without_checks_an_update_outside_the_destination_is_not_applied(target, monkeypatch):
    compiled = make_compiled(target, monkeypatch, "atomic_scatter")
    idx = RNG.integers(-5, 42, 3000)
    v = RNG.integers(-8, 8, 3000).astype(np.int64)
    dest = np.zeros(37, np.int64)
    keep = (idx >= 0) & (idx < 37)
    want = np.zeros(37, np.int64)
    np.add.at(want, idx[keep], v[keep])
    compiled(scatter_add_i64, checks=False)(idx, v, dest)
    assert np.array_equal(dest, want)
