"""tilelang-metal's parallel programs (the schedule's mappings in Metal's spelling: metal_grid.py, lanes.py), run on
the Metal emulator against NumPy references and hand-computed values.

- Every mapping tilelang-cuda's general program gets, tilelang-metal's gets too (kernels without f64), and so does
  every tiled program (matmuls, the segmented fold: metal_region.py); the zoo kernels' Metal programs, general and
  tiled, are parallel: more than one threadgroup, more than one thread a threadgroup, and no software exp or
  division routine.
- What Metal spells differently: simdgroup shuffles of every accumulator dtype (bool, 8- to 64-bit integers,
  f32), the 64-bit atomic add in two words (histogram counts, scatter adds), f32 atomics as compare-and-swap
  loops, the error record claimed by a 32-bit compare-and-swap, threads past a flat nest's end storing nothing,
  the prelude in every kernel of a program of several launches; what Metal cannot do keeps the serial program
  (non-relaxed atomics, atomics on other widths), with the same results.
- The emulator catches what a wrong program would do: a barrier removed from a generated reduction is a data race
  naming both threads, an index moved past a buffer's end an out-of-bounds report (nothing performed).
"""
import math
import re

import numpy as np
import pytest

import intent_trace as intent
from example_modules import benchmark_module
from intent_trace import I
from intent_trace.kernel import Kernel
from metal_source import _metal_cannot_run as metal_cannot_run

pytest.importorskip("tilelang")
from backends.test_tilelang_metal import EXAMPLE_KERNELS, _definition  # noqa: E402
from intent_trace.backends.tilelang import metal, targets  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.executable import ProgramKernel, launch_sizes  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel, EmulationError  # noqa: E402
from intent_trace.backends.tilelang.program import schedule_of  # noqa: E402
from schedule import reduce_kernels, row_kernels, scan_kernels  # noqa: E402

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(1812)
U32 = 2.0 ** -24
#: internal helpers that are software evaluations of exp, division and the like (metal_math), which T10 replaces with
#: Metal's own functions and hardware division; only the functions Metal lacks (erf, erfc, lgamma, i0, expm1:
#: metal._SOFTWARE) keep them
SOFTWARE = ("itb_exp_core", "itb_expm1_core", "itb_log_core", "itb_div32", "itb_df_bits", "itb_pow_df",
            "itb_sin_poly", "itb_divf")


def emulated(kernel, checks=True, **constexprs):
    exe = intent.compile(kernel, target="tilelang-metal", emulate=True, checks=checks, **constexprs)
    assert exe.emulated
    return exe


def general(exe) -> str:
    return exe.schedule.general.mapping


# --- the same mappings as CUDA ------------------------------------------------------------------------------------

def _kernels(*modules):
    for module in modules:
        for name, value in sorted(vars(module).items()):
            if isinstance(value, Kernel):
                yield f"{module.__name__.rsplit('.', 1)[-1]}.{name}", value


SCHEDULE_KERNELS = dict(_kernels(row_kernels, reduce_kernels, scan_kernels, zoo))


@pytest.mark.parametrize("name", sorted(SCHEDULE_KERNELS))
def test_metal_gets_the_mapping_cuda_s_general_program_gets(name):
    graph = SCHEDULE_KERNELS[name].trace()
    if metal_cannot_run(graph) is not None:
        return  # Metal has no f64: such kernels are refused with a LoweringError (test_tilelang_metal.py)
    cuda = schedule_of(graph, targets.CUDA, specializations=()).general
    metal = schedule_of(graph, targets.METAL).general
    assert metal.mapping == cuda.mapping, (metal.describe(), cuda.describe())


#: CUDA mappings Metal does not have yet, where Metal runs the serial program (README: the segmented scan's three
#: kernels are CUDA's; Metal's runtime launches one kernel)
METAL_SERIAL = frozenset({"segmented_scan"})


@pytest.mark.parametrize("name", sorted(EXAMPLE_KERNELS))
def test_every_example_gets_the_mapping_cuda_s_general_program_gets(name):
    kernel, constexprs = EXAMPLE_KERNELS[name]
    graph = kernel.trace(**constexprs)
    cuda = schedule_of(graph, targets.CUDA, specializations=()).general
    metal = schedule_of(graph, targets.METAL).general.mapping
    assert metal == ("serial" if cuda.mapping in METAL_SERIAL else cuda.mapping)


@pytest.mark.parametrize("name", sorted({*SCHEDULE_KERNELS, *EXAMPLE_KERNELS}))
def test_metal_gets_a_tiled_program_where_cuda_does(name):
    """A matmul CUDA tiles (tensor cores or CUDA cores) is tiled on Metal too (simdgroup matrices:
    test_tilelang_metal_matmul.py), so is a segmented fold (flash attention: test_tilelang_metal_region.py), and Metal
    tiles nothing CUDA does not."""
    kernel, constexprs = EXAMPLE_KERNELS.get(name) or (SCHEDULE_KERNELS[name], {})
    graph = kernel.trace(**constexprs)
    if metal_cannot_run(graph) is not None:
        return
    cuda = schedule_of(graph, targets.CUDA).mappings()[:-1]
    metal = schedule_of(graph, targets.METAL).mappings()[:-1]
    assert set(metal) == set(cuda), (metal, cuda)


ZOO_SHAPES = 4096  # every extent of the inspected launch: large enough that every grid has several threadgroups


@pytest.mark.parametrize("name", sorted(n for n, v in vars(zoo).items() if isinstance(v, Kernel)))
def test_every_zoo_kernel_s_metal_program_is_parallel_and_calls_no_software_exp_or_division(name):
    """The general program and every tiled one (a matmul's simdgroup-matrix program, test_tilelang_metal_matmul.py)."""
    exe = intent.compile(getattr(zoo, name), target="tilelang-metal")
    assert general(exe) != "serial", exe.schedule
    for program in (exe.program, *(spec.program for spec in exe.specializations)):
        _check_parallel_program(name, program, len(exe.graph.extents))


def _check_parallel_program(name: str, program: str, extents: int) -> None:
    sizes = launch_sizes(program, {f"d{k}": ZOO_SHAPES for k in range(extents)})
    assert max(math.prod(blocks) for blocks, _ in sizes) > 1, (name, sizes)  # a final pass may be one threadgroup
    assert all(threads > 1 for _, threads in sizes), (name, sizes)
    msl = metal.kernel_source(program)
    assert msl.count("[[kernel") == len(sizes)
    kernels = "".join(part.split(") {", 1)[1] for part in msl.split("[[kernel")[1:])
    called = set(re.findall(r"\b(it_\w+)\(", kernels))
    for helper in called:  # exp, division, ...: Metal's own (T10); a function Metal lacks (erf) stays software
        if not helper.startswith(tuple(f"it_{f}_" for f in metal._SOFTWARE)):
            body = _definition(msl, helper)
            assert not [r for r in SOFTWARE if f"{r}(" in body], (name, helper, body)
    if "it_exp_f32" in called:
        assert "metal::precise::exp(" in _definition(msl, "it_exp_f32")
    if "it_div_f32" in called:
        assert "float r = a / b;" in _definition(msl, "it_div_f32")


# --- running them: the emulator against NumPy ---------------------------------------------------------------------

@intent.kernel
def row_max_i16(k: I.In[I.i16, ("M", "N")], top: I.Out[I.i16, ("M",)]):
    top[:] = I.reduce.max(k[:, :], axis=1)


@intent.kernel
def row_any(x: I.In[I.f32, ("M", "N")], some: I.Out[I.bool, ("M",)]):
    some[:] = I.reduce.any(x[:, :] > 3.0, axis=1)


@intent.kernel
def row_sum_u8(k: I.In[I.u8, ("M", "N")], total: I.Out[I.u64, ("M",)]):
    total[:] = I.reduce.sum(I.cast(k[:, :], I.u64), axis=1)


@pytest.mark.parametrize("n", [1, 33, 1025, 8193])  # a warp's row, a block's row on chip, a pass per level
def test_row_shuffles_of_i64_i16_bool_and_u64_accumulators(n):
    x = RNG.standard_normal((3, n)).astype(np.float32)
    x[1, n // 2] = x[1, 0] = 9.0  # a tie: the first index wins
    k = RNG.integers(-300, 300, (3, n)).astype(np.int16)
    u = RNG.integers(0, 256, (3, n)).astype(np.uint8)
    cases = [(row_kernels.row_argmax, (x,), np.zeros(3, np.int64), np.argmax(x, axis=1)),
             (row_max_i16, (k,), np.zeros(3, np.int16), k.max(axis=1)),
             (row_any, (x,), np.zeros(3, bool), (x > 3.0).any(axis=1)),
             (row_sum_u8, (u,), np.zeros(3, np.uint64), u.astype(np.uint64).sum(axis=1))]
    for kernel, args, out, want in cases:
        exe = emulated(kernel)
        assert general(exe) == "row_group", exe.schedule
        exe(*args, out)
        assert out.tolist() == want.tolist(), kernel


@pytest.mark.parametrize("n", [0, 1, 2047, 2049, 3 * 2048 * 8 + 5])  # empty, one block, a tail, a grid-stride loop
def test_full_reduction_and_scan_of_several_threadgroups(n):
    x = RNG.integers(-50, 50, n).astype(np.int32)
    y = np.zeros(1, np.int64)
    exe = emulated(reduce_kernels.full_sum_i32)
    assert general(exe) == "full_reduce"
    exe(x, y)
    assert y[0] == x.astype(np.int64).sum()
    f = x.astype(np.float32)
    out = np.zeros(n, np.float32)
    scan = emulated(zoo.cumsum)
    assert general(scan) == "multi_block_scan"
    scan(f, out)
    assert out.tolist() == np.cumsum(f.astype(np.float64)).tolist()  # small integers: exact in any association


@intent.kernel
def histogram_i32(v: I.In[I.i32, ("N",)], counts: I.Out[I.i32, (8200,)]):
    counts[:] = I.histogram(v[:], bins=8200, count_dtype=I.i32)


@pytest.mark.parametrize("kernel,bins,dtype", [(zoo.histogram256, 256, np.uint8), (histogram_i32, 8200, np.int32)],
                         ids=["i64-counts-shared-bins", "i32-counts-device-bins"])
@pytest.mark.parametrize("n", [1, 4097, 40000])
def test_histograms_with_two_word_and_native_atomic_adds(kernel, bins, dtype, n):
    v = RNG.integers(0, bins, n).astype(dtype)
    v[: n // 3] = bins - 1  # a third of the values in one bin: every thread of a group collides
    counts = np.full(bins, -7, np.int64 if bins == 256 else np.int32)
    exe = emulated(kernel)
    assert general(exe) == "privatised_histogram"
    exe(v, counts)
    assert counts.tolist() == np.bincount(v, minlength=bins).tolist()
    if bins == 256:  # the counts are i64: two 32-bit atomic adds (the carry out of the low word)
        assert "itb_atomic_add64(" in exe.source and "atomic_fetch_add_explicit(w + 1" in exe.source


def test_the_two_word_add_carries_into_the_high_word():
    """itb_atomic_add64 from many threads onto elements whose low words wrap: the exact 64-bit sums."""
    from intent_trace.backends.tilelang.metal_atomics import ADD64

    src = "#include <metal_stdlib>\nusing namespace metal;\n" + ADD64 + """
kernel void adds(device long* out [[buffer(0)]], device const long* v [[buffer(1)]],
                 uint t [[thread_position_in_grid]]) {
  itb_atomic_add64(&out[t % 3], v[t]);
}
"""
    v = RNG.integers(-(1 << 62), 1 << 62, 96).astype(np.int64)
    v[:10] = 0xFFFFFFFF  # low words that carry
    out = np.array([0xFFFFFFF0, -1, 1 << 40], np.int64)
    want = [int(out[e]) + int(v[e::3].astype(object).sum()) for e in range(3)]
    EmulatedKernel(src)({"out": out, "v": v}, grid=3, threads=32, seed=11)
    assert out.tolist() == [(w + (1 << 63)) % (1 << 64) - (1 << 63) for w in want]  # T2: wrap-around


def _scatter(dtype, combine):
    @intent.kernel
    def k(idx: I.In[I.i32, ("K",)], v: I.In[dtype, ("K",)], dest: I.InOut[dtype, ("N",)]):
        I.scatter_reduce(dest, idx[:], v[:], combine=combine)
    return k


@pytest.mark.parametrize("dtype,combine", [(I.f32, "add"), (I.i32, "add"), (I.i64, "add"), (I.i32, "max"),
                                           (I.f32, "min"), (I.u32, "xor")], ids=str)
def test_scatters_as_metal_atomics(dtype, combine):
    n, k = 5, 700
    idx = RNG.integers(0, n, k).astype(np.int32)
    np_dt = np.dtype(dtype.np)
    v = (RNG.standard_normal(k) * 8).astype(np_dt) if dtype == I.f32 else RNG.integers(-99, 99, k).astype(np_dt)
    dest = (np.arange(n) * 3).astype(np_dt)
    want = dest.copy()
    {"add": np.add, "max": np.maximum, "min": np.minimum, "xor": np.bitwise_xor}[combine].at(want, idx, v)
    exe = emulated(_scatter(dtype, combine))
    assert general(exe) == "atomic_scatter"
    exe(idx, v, dest)
    if dtype == I.f32 and combine == "add":  # collisions in any order: T5's bound per element
        for e in range(n):
            terms = v[idx == e].astype(np.float64)
            assert abs(dest[e] - want[e]) <= (len(terms) + 2) * U32 * (np.abs(terms).sum() + abs(3.0 * e))
        assert "atomic_compare_exchange_weak_explicit" in exe.source  # a CAS loop around the serial combine
    else:
        assert dest.tolist() == want.tolist()


def test_a_scatter_metal_s_atomics_cannot_do_keeps_the_serial_program():
    idx = np.array([1, 0, 1, 1], np.int32)
    v = np.array([5, -3, 9, 2], np.int64)
    dest = np.array([4, 4], np.int64)
    exe = emulated(_scatter(I.i64, "max"))  # no 64-bit compare-and-swap on Metal
    assert general(exe) == "serial"
    # the schedule says Metal's own reason first, not only the shared planners'
    assert "target tilelang-metal cannot run its grid: a scatter's max on i64 elements (Metal has no 64-bit " \
           "compare-and-swap)" in exe.schedule.parts[-1].reason
    exe(idx, v, dest)
    assert dest.tolist() == [4, 9]


def _atomic_loop(dtype, order):
    @intent.kernel
    def k(idx: I.In[I.i32, ("K",)], v: I.In[dtype, ("K",)], dest: I.InOut[dtype, ("N",)], old: I.Out[dtype, ("K",)]):
        for i in I.parallel(I.domain(0, idx.shape[0])):
            old[i] = I.atomic.add(dest[idx[i]], v[i], order=order)
    return k


@pytest.mark.parametrize("dtype,order,mapping", [(I.i32, "relaxed", "parallel_grid"),
                                                 (I.f32, "relaxed", "parallel_grid"), (I.i32, "acq_rel", "serial"),
                                                 (I.i64, "relaxed", "serial")], ids=str)
def test_parallel_loops_with_atomics_run_on_threads_only_where_metal_s_atomics_can(dtype, order, mapping):
    k, n = 300, 4
    idx = RNG.integers(0, n, k).astype(np.int32)
    np_dt = np.dtype(dtype.np)
    v = RNG.integers(-9, 9, k).astype(np_dt)  # small integers: f32 sums exact in any order
    dest, old = np.zeros(n, np_dt), np.zeros(k, np_dt)
    exe = emulated(_atomic_loop(dtype, order))
    assert general(exe) == mapping, exe.schedule
    if mapping == "serial":
        assert "target tilelang-metal cannot run its grid: its parallel loop has" in exe.schedule.parts[-1].reason
    exe(idx, v, dest, old)
    assert dest.tolist() == np.bincount(idx, weights=v.astype(np.float64), minlength=n).astype(np_dt).tolist()
    for e in range(n):  # each point saw the sum of the points before it, in whatever order they ran
        points = np.flatnonzero(idx == e)
        assert sorted([0, *(old[points] + v[points]).tolist()]) == sorted([*old[points].tolist(), dest[e]])


@intent.kernel
def gather_checked(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("K",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        y[i] = x[idx[i]] * 2.0


def test_a_failing_check_on_a_grid_is_claimed_once_and_commits_nothing():
    exe = emulated(gather_checked)
    assert general(exe) == "parallel_grid" and "atomic_compare_exchange_weak_explicit" in exe.source
    x = np.arange(6, dtype=np.float32)
    idx = np.array([0, 5, 2] * 70, np.int32)
    y = np.zeros(210, np.float32)
    exe(x, idx, y)
    assert y.tolist() == (2.0 * x[idx]).tolist()
    before = y.copy()
    bad = idx.copy()
    bad[[3, 100, 200]] = [6, -1, 60]  # three threads of two threadgroups fail: one claims the record
    with pytest.raises(IndexError, match=r"coordinate (6|-1|60) on axis 0 is outside its extent 6"):
        exe(x, bad, y)
    assert y.tolist() == before.tolist()


@intent.kernel
def tail(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = x[:, :] * 3.0 + 1.0


@pytest.mark.parametrize("shape", [(1, 1), (3, 341), (7, 1025)])  # totals no threadgroup's 1024 elements divide
def test_threads_past_a_flat_nest_s_end_store_nothing(shape):
    exe = emulated(tail)
    assert general(exe) == "flat_nest"
    assert "T.min(" not in exe.program.split("def kernel(")[1]  # no recomputed last element (a race on Metal)
    x = RNG.standard_normal(shape).astype(np.float32)
    y = np.zeros_like(x)
    exe(x, y)
    assert y.tolist() == (x * np.float32(3.0) + np.float32(1.0)).tolist()


def test_every_kernel_of_a_program_of_several_launches_carries_the_prelude():
    exe = intent.compile(zoo.full_sum, target="tilelang-metal")
    assert exe.program.count("prelude=PRELUDE") == exe.program.count("T.Kernel(") == 2
    msl = exe.source[exe.source.index("#include <metal_stdlib>"):]
    assert msl.count("#define itm_return() return") == msl.count("[[kernel") == 2


# --- what the emulator catches in a program gone wrong ------------------------------------------------------------

def test_a_barrier_removed_from_a_generated_reduction_is_a_race_naming_both_threads():
    exe = emulated(zoo.row_sum)
    kernel = ProgramKernel(exe.program)
    barriers = [i for i, line in enumerate(kernel.source.split("\n")) if "threadgroup_barrier(" in line]
    assert len(barriers) >= 2  # the warps' totals stored, then the row's total
    lines = kernel.source.split("\n")
    lines[barriers[0]] = ""  # the barrier between the warps' totals and the first warp's reads of them
    planted = "\n".join(lines)
    kernel.kernels[0] = EmulatedKernel(planted)
    x = RNG.standard_normal((2, 3000)).astype(np.float32)  # a block per row (rows past 1024 elements)
    with pytest.raises(EmulationError) as e:
        kernel(x, np.zeros(2, np.float32))
    race = re.search(r"data race on threadgroup array (\w+)\[\d+\]: (read|write) by thread \((\d+),0,0\) of "
                     r"threadgroup \((\d+),0,0\) at line (\d+) and (read|write) by thread \((\d+),0,0\) of threadgroup "
                     r"\((\d+),0,0\) at line (\d+), with no barrier between them", str(e.value))
    assert race is not None, str(e.value)
    assert race[3] != race[7] and race[4] == race[8]  # two threads of one threadgroup
    assert {race[2], race[6]} == {"read", "write"}
    store, load = (planted.split("\n")[int(race[n]) - 1] for n in (5, 9))
    assert race[1] in store and race[1] in load
    y = np.zeros(2, np.float32)
    exe(x, y)  # the generated program itself: no race, the row sums
    assert np.all(np.abs(y - x.astype(np.float64).sum(axis=1)) <= 3000 * U32 * np.abs(x).sum(axis=1))


def test_an_index_moved_past_the_end_is_reported_and_not_performed():
    exe = emulated(zoo.gelu)
    kernel = ProgramKernel(exe.program)
    store = re.compile(r"^(\s*)p1\[(.+)\] = (.+);$", re.M)
    assert len(store.findall(kernel.source)) == 1
    planted = store.sub(lambda m: f"{m[1]}p1[(({m[2]}) + (long)1)] = {m[3]};", kernel.source)
    kernel.kernels[0] = EmulatedKernel(planted)
    x = RNG.standard_normal(1500).astype(np.float32)
    y = np.full(1500, 7.0, np.float32)
    line = next(i + 1 for i, text in enumerate(planted.split("\n")) if store.match(text))
    with pytest.raises(EmulationError, match=rf"out-of-bounds write of device buffer p1: element 1500 of 1500, by "
                                             rf"thread \(\d+,0,0\) of threadgroup \(1,0,0\) at line {line} "
                                             r"\(not performed\)"):
        kernel(x, y)
    assert y[0] == 7.0  # element 0 is no thread's (each wrote the next one) ...
    assert np.all(y[1:] != 7.0)  # ... and nothing past the end was written (the buffer is exactly 1500)
