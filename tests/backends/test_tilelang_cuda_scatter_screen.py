"""The screened native f32 scatter-add on tilelang-cuda (cuda_scatter.ScatterPlan.screen): a first kernel raises a
flag when an update's value or a destination's initial element is not zero or a finite value of at least 2^-103;
the scatter then adds with the hardware's ``atomicAdd`` (``red.global.add.f32``, which flushes subnormals: the
sm_90a SASS says ``REDG.E.ADD.F32.FTZ.RN``) where the flag is down and with the compare-and-swap loop around the
serial add where it is up.

On the GPU (the lead's runs):

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda PYTHONPATH=$PWD .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_scatter_screen.py tests/backends/test_tilelang_cuda_scatter.py

The numbers on every executable target through the ``target`` fixture: sums whose every order is exact (small
integers, powers of two) compared with ``np.add.at`` bit for bit, random normal values within T5's bound per
destination, and the cases the flag exists for -- a subnormal value among many normal ones, a destination element
the screen refuses whose sum with a screened value is subnormal (the hardware's add would flush it to zero), NaN
payloads, each checked against the exact result hand-computed. tilelang-c runs the same two kernels with a block's
threads one after another, so the flag's logic is checked there; which add the GPU takes is what the GPU run checks.
"""
import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.cuda_ptx import assemble
from backends.indexed_support import EMULATED, UNCHECKED, body, make_compiled, within_t5
from backends.tilelang_support import cuda_source
from example_modules import benchmark_module
from intent_trace.backends.tilelang import cuda_scatter, targets
from intent_trace.backends.tilelang.program import lower, schedule_of
from intent_trace.backends.tilelang.target import generate

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(1718)
F = np.float32


@intent.kernel
def scatter_add_scaled(idx: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:] * 2.0, combine="add")


@pytest.fixture
def compiled(target, monkeypatch):
    return make_compiled(target, monkeypatch, "atomic_scatter")


# --- the program ---------------------------------------------------------------------------------------------

def test_the_screen_kernel_comes_first_and_the_scatter_branches_on_its_flag():
    text = body(generate(zoo.scatter_add.trace(), "tilelang-cuda"))
    first, second = text.split("    with T.Kernel(")[1:]
    assert "E[3] = T.int64(1)" in first and first.count("T.reinterpret(") == 6 and "atomic" not in first
    assert "E[3] == T.int64(0)" in second and "T.atomic_add(p2[" in second
    assert "it_atomic_add_relaxed_f32" in second  # the CAS loop where the flag is up


def test_only_an_f32_add_of_a_rank_1_view_is_screened():
    assert cuda_scatter.scatter_plan(zoo.scatter_add.trace(), screen=True).screen == ("p1", "p2", "d0", "d1")
    assert cuda_scatter.scatter_plan(scatter_add_scaled.trace(), screen=True).screen is None  # computed values
    assert "E[3]" not in generate(scatter_add_scaled.trace(), "tilelang-cuda")
    part = schedule_of(zoo.scatter_add.trace(), targets.CUDA).general
    assert part.param("atomic").startswith("atomicAdd where a first kernel finds every value")


def test_the_emulated_screen_is_a_serial_pass():
    text = body(lower(zoo.scatter_add.trace(), EMULATED).text)
    assert text.count("for z in T.serial(") == 2 and "T.get_thread_binding" not in text


def test_sm90_adds_with_one_native_atomic_where_the_flag_is_down(tmp_path):
    got = assemble(cuda_source(generate(zoo.scatter_add.trace(), "tilelang-cuda")), tmp_path)
    if got is None:
        pytest.fail("no nvcc on this machine: the sm_90a lowering is not checked")
    assert all(s == (0, 0) for s in got.spills.values()), got.spills
    ptx = "\n".join(got.ptx.values())
    assert ptx.count("atom.global.add.f32") == 1 and ptx.count("atom.global.cas.b32") == 1


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", (0, 1, 257, 4099))
def test_exact_sums_match_add_at(compiled, k):
    n = 31
    idx = RNG.integers(0, n, k)
    v = RNG.integers(-8, 8, k).astype(F)  # small integers: every order of the sums is exact
    dest = RNG.integers(-8, 8, n).astype(F)
    want = dest.copy()
    np.add.at(want, idx, v)
    compiled(zoo.scatter_add)(idx, v, dest)
    assert np.array_equal(dest, want)


def test_random_normal_values_within_t5(compiled):
    k, n = 3000, 23
    idx = RNG.integers(0, n, k)
    v = (RNG.standard_normal(k) * 2.0 ** RNG.integers(-90, 90, k)).astype(F)
    dest = RNG.standard_normal(n).astype(F)
    got = dest.copy()
    compiled(zoo.scatter_add)(idx, v, got)
    within_t5(got, dest, idx, v)


@pytest.mark.parametrize("position", (0, 1500, 2999))
def test_one_subnormal_value_among_many_is_added_not_flushed(compiled, position):
    k = 3000
    idx = np.zeros(k, np.int64)
    idx[position] = 1
    v = np.full(k, 1.0, F)
    v[position] = 2.0 ** -140
    dest = np.array([0.0, 2.0 ** -141, 5.0], F)
    compiled(zoo.scatter_add)(idx, v, dest)
    assert dest[0] == k - 1 and dest[1] == F(3 * 2.0 ** -141) and dest[2] == 5.0


def test_a_destination_the_screen_refuses_keeps_a_subnormal_sum(compiled):
    # the value 2^-103 passes the screen; -(2^-103 - 2^-127) does not, and their sum 2^-127 is subnormal: the
    # hardware's add (FTZ) would store 0
    idx = np.array([0, 1], np.int64)
    v = np.array([2.0 ** -103, 2.0 ** -103], F)
    dest = np.array([-(2.0 ** -103 - 2.0 ** -127), 1.0], F)
    compiled(zoo.scatter_add)(idx, v, dest)
    assert dest[0] == F(2.0 ** -127) and dest[1] == F(1.0 + 2.0 ** -103)


def test_nan_payloads_and_infinities_take_the_serial_add(compiled):
    quiet = np.array([0x7FC01234], np.uint32).view(F)[0]
    idx = np.array([0, 0, 1, 1, 2], np.int64)
    v = np.array([1.0, 2.0, np.inf, -np.inf, 3.0], F)
    dest = np.array([quiet, 0.0, np.inf], F)
    compiled(zoo.scatter_add)(idx, v, dest)
    assert dest[:1].view(np.uint32)[0] == 0x7FC01234  # x86 keeps the NaN operand's payload (T3)
    assert dest[1:2].view(np.uint32)[0] == 0xFFC00000  # inf + -inf: x86's default NaN
    assert dest[2] == np.inf


@pytest.mark.parametrize("target", UNCHECKED)
def test_without_checks_the_screen_still_decides(target, monkeypatch):
    exe = make_compiled(target, monkeypatch, "atomic_scatter")(zoo.scatter_add, checks=False)
    idx = np.array([0, 0, 1], np.int64)
    v = np.array([2.0 ** -140, 2.0 ** -140, 4.0], F)
    dest = np.zeros(2, F)
    exe(idx, v, dest)
    assert dest[0] == F(2.0 ** -139) and dest[1] == 4.0
    dest = np.zeros(2, F)
    exe(idx, np.array([1.0, 2.0, 4.0], F), dest)
    assert dest[0] == 3.0 and dest[1] == 4.0


def test_the_unscreened_plan_is_the_cas_loop_alone():
    spec = attrs.evolve(targets.CUDA, indexed_grid=cuda_scatter.scatter_plan)  # (Metal's, and the A/B's "cas")
    text = body(lower(zoo.scatter_add.trace(), spec).text)
    assert text.count("with T.Kernel(") == 1 and "E[3]" not in text and "T.atomic_add" not in text
