"""Full reductions on tilelang-cuda (cuda_reduce: a grid of blocks folds strided slices into partials, warp
shuffles and a shared-memory tree per block, a second kernel combines the partials and runs the consumers).

On the H200 (the lead), the real CUDA program on the shared ``target`` fixture:

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_reduce.py tests/schedule/test_reduce.py
    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/test_zoo_kernels.py -k "full_sum"

Two halves. The program text: the CUDA program has the structure the mapping promises (a grid of blocks, a
grid-stride unrolled fold, shuffles, a workspace of partials, a second kernel of one block, no error record), and
TileLang lowers it for sm_90a. The numbers: every kernel runs on every executable target through the shared
``target`` fixture against NumPy references, at sizes below, at and past one block's chunk (2048 elements), one
grid-stride round (1024 blocks of 2048), tails no chunk divides, empty sources, and NaN/inf/-0. On tilelang-c the C
target runs CUDA's mapping emulated (each phase between barriers a serial loop over the block's threads, the
shuffles exchanged through buffers).

Sums are checked against T5's bound (a parallel order is not the serial one, T10); max, min, argmax, custom
integer combines and integer sums must be exact.
"""
import math
import re

import attrs
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source
from conftest import EXECUTABLE_TARGETS
from backends.cuda_ptx import assemble, longest_load_run
from intent_trace.backends.tilelang import cuda_reduce, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.program import lower
from intent_trace.backends.tilelang.target import generate
from schedule.reduce_kernels import (any_nan, argmax_all, argmin_all, custom_max_i32, full_max_f16, full_sum,
                                     full_sum_2d, full_sum_i32, mean_f64, min_bf16, prod_f64, sum_and_max,
                                     weighted_norm)

RNG = np.random.default_rng(23)
CHUNK = cuda_reduce.THREADS * cuda_reduce.UNROLL  # 2048 elements: a block's chunk
#: empty, one element, below/at/past a warp, a block's threads and its chunk, tails, several chunks per block
#: past one grid-stride round (1024 blocks of 2048) and a tail past it
SIZES = (0, 1, 2, 31, 33, 255, 256, 257, 2047, 2048, 2049, 6001, 65536 + 7)
SMALL = (0, 1, 257, 2049, 6001, 65536 + 7)
#: one grid-stride round (one element short, exactly, one over), and two rounds with a tail: run on the grid
#: targets only (the oracle's interpreter takes minutes at these sizes; NumPy is the reference)
LARGE = (CHUNK * cuda_reduce.BLOCKS - 1, CHUNK * cuda_reduce.BLOCKS, CHUNK * cuda_reduce.BLOCKS + 1,
         CHUNK * cuda_reduce.BLOCKS * 2 + 2053)
U32, U64 = 2.0 ** -24, 2.0 ** -53
EMULATED = attrs.evolve(targets.C, multi_block=lambda g: cuda_reduce.multi_block(g, emulated=True),
                        host_workspaces=True)
#: the two forms of a full reduction on the grid targets: CUDA's one kernel (the last block folds the partials) and
#: two (CUDA's default, cuda_reduce.ONE_KERNEL), the C target emulating each
FORMS = {"one_kernel": {"tilelang-c": EMULATED, "tilelang-cuda": attrs.evolve(
             targets.CUDA, multi_block=lambda g: cuda_reduce.multi_block(g, single_pass=True))},
         "two_kernels": {"tilelang-c": attrs.evolve(EMULATED, multi_block=lambda g: cuda_reduce.multi_block(
             g, emulated=True, single_pass=False)), "tilelang-cuda": targets.CUDA}}
GRID_TARGETS = ("tilelang-c", "tilelang-cuda")  # the targets whose programs are multi-block


def _use(target: str, form: str, monkeypatch) -> None:
    monkeypatch.setitem(targets.TARGETS, target, FORMS[form][target])
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})


@pytest.fixture
def compiled(target, monkeypatch):
    """``compiled(kernel)``: the kernel for this target; on the grid targets in CUDA's default form (two kernels;
    tilelang-c emulates it), where the test fails unless the program is multi-block. The one-kernel form runs
    under ``one_kernel`` below."""
    if target in GRID_TARGETS:
        _use(target, "two_kernels", monkeypatch)

    def compiled(kernel):
        if target in GRID_TARGETS:
            exe = tl_target.build(kernel.trace(), target=target)
            assert exe.schedule.general.mapping == "full_reduce", exe.schedule
            return exe
        return intent.compile(kernel, target=target)

    return compiled


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u) if n else 0.0


def _sum_bound(x: np.ndarray, u: float) -> float:
    """T5: |computed - exact| <= γ_n · Σ|x_i|, and the result's own rounding."""
    a = np.abs(x.astype(np.float64))
    return _gamma(x.size, u) * float(a.sum()) + u * abs(math.fsum(x.astype(np.float64).ravel()))


# --- the program ---------------------------------------------------------------------------------------------

def _kernels(program: str) -> tuple:
    """(the grid's fold, the last block's fold of the partials and the consumers: after ``if last``)."""
    body = program[program.index("def kernel("):]
    first, second = re.split(r"\n        if last\d+:", body)
    return first, second


def _one_kernel(kernel) -> str:
    return lower(kernel.trace(), FORMS["one_kernel"]["tilelang-cuda"]).text


def test_the_cuda_default_is_two_kernels_without_a_ticket():
    """CUDA's full reductions run as two kernels (cuda_reduce.ONE_KERNEL: one kernel measured slower, its ticket's
    per-call zero fill included): the second kernel of one block folds the partials; no workspace is zeroed per
    call, no atomic, no fence; the schedule says why."""
    assert cuda_reduce.ONE_KERNEL is False
    program = lower(full_sum.trace(), targets.CUDA)
    assert program.text.count("with T.Kernel(") == 2 and "itg_" not in program.text and "if last" not in program.text
    assert "with T.Kernel(1, threads=256) as bx:" in program.text
    (partials,) = program.workspaces
    assert partials.shape == ("1024",) and not partials.zeroed
    form = tl_target.build(full_sum.trace(), target="tilelang-cuda").schedule.general.param("form")
    assert form == "two kernels, partials then a final block " + cuda_reduce.MEASURED_FASTER


def test_the_cuda_program_is_one_kernel_whose_last_block_folds_the_partials():
    program = _one_kernel(full_sum)
    assert ("def kernel(p0: T.Tensor((d0,), 'float32'), p1: T.Tensor((1,), 'float32'), "
            "W0: T.Tensor((1024,), 'float32'), W1: T.Tensor((1,), 'int32')):") in program
    assert program.count("with T.Kernel(") == 1
    grid, final = _kernels(program)
    # a grid of up to 1024 blocks of 256 threads: one per chunk of 2048 elements
    assert ("with T.Kernel(T.min(T.max(T.ceildiv(d0, T.int64(2048)), T.int64(1)), T.int64(1024)), threads=256, "
            "prelude=PRELUDE) as bx:") in grid
    # thread 0 stores the block's partial, then takes the ticket (W1: zeroed per call) with an acq_rel atomic (the
    # partial's store released by it); the block whose ticket is the last one fences and folds every partial
    tail = grid[grid.index("W0[bx] = "):]
    assert "itg_ticket_acq_rel', T.access_ptr(W1[0], 'rw')" in tail and "itg_fence" not in grid
    assert re.search(r"last\d+ = T.alloc_var\('bool', init=T.Cast\('int64', s\d+\[0\]\) == T.min\(.*\) - "
                     r"T.int64\(1\)\)", tail)
    assert final.split("\n")[1].strip() == "T.evaluate(T.call_extern('int32', 'itg_fence', ))"
    assert "itg_ticket" not in final and "W1" not in final
    # a grid-stride loop over chunks, 8 unrolled reads a thread, then the tail under a guard per element; in each,
    # the 8 reads into registers first, then the 8 combines (a combine's NaN branch would hold the next read)
    assert grid.count("T.unroll(8)") == 4 and grid.count("p0[") == 2 and "T.floormod(n" in grid
    assert "T.alloc_local((8,), 'float32')" in grid
    loops = grid.split("T.unroll(8)")[1:]
    for load, fold in (loops[0:2], loops[2:4]):
        assert "p0[" in load and "it_add_f32" not in load and re.search(r"\bf\d+\[u\d+\] = t\d+", load)
        assert "p0[" not in fold.split("if b")[0] and "it_add_f32" in fold
    assert final.count("T.unroll(4)") == 2 and "T.alloc_local((4,), 'float32')" in final  # the partials: the same
    for text in (grid, final):
        assert text.count("T.shfl_xor(") == 5 + 3  # within warps, then across the 8 warps' totals
    # the block combine's shared buffer, allocated once and used by both folds; a barrier before the ticket is read
    assert grid.count("T.get_thread_binding()") == 1 and "T.get_thread_binding()" not in final
    assert grid.count("T.sync_threads()") == 3 and final.count("T.sync_threads()") == 2
    assert grid.count("T.alloc_shared((9,), 'float32')") == 1 and "T.alloc_shared" not in final
    assert grid.count("W0[bx] = ") == 1 and "W0[" in final and "p1[" in final and "p1[" not in grid
    assert "E: T.Tensor" not in program  # no error record: the program cannot fail
    partials, ticket = lower(full_sum.trace(), FORMS["one_kernel"]["tilelang-cuda"]).workspaces
    assert partials.shape == ("1024",) and not partials.zeroed and ticket.shape == ("1",) and ticket.zeroed


def test_fused_producers_and_consumers_and_several_reductions():
    program = _one_kernel(weighted_norm)
    grid, final = _kernels(program)
    assert grid.count("it_mul_f32") >= 2 and "p1[" in grid  # x * w * s computed where x and w are read
    assert "it_sqrt_f32" in final and "it_sqrt_f32" not in grid  # the consumer runs once, in the final kernel
    program = _one_kernel(sum_and_max)
    grid, final = _kernels(program)
    assert grid.count("p0[") == 2  # one read of each element feeds both folds (main and tail)
    assert "W0" in grid and "W1" in grid and grid.count("T.sync_threads()") == 5 and "W2[0]" in grid
    program = _one_kernel(argmax_all)
    assert "W0: T.Tensor((1024,), 'float32'), W1: T.Tensor((1024,), 'int64')" in program  # both leaves
    program = generate(full_sum_2d.trace(), "tilelang-cuda")
    assert "T.ceildiv(d0 * d1, T.int64(2048))" in program and "T.floormod(j" in program


def test_the_schedule_reports_the_mapping(monkeypatch):
    exe = tl_target.build(full_sum.trace(), target="tilelang-cuda")
    (part,) = exe.schedule
    assert part.mapping == "full_reduce" and part.param("elements") == "N" and part.param("passes") == 2
    assert ("full_reduce (elements=N, blocks=up to 1024, threads=256, per_thread=8, passes=2, form=two kernels, "
            "partials then a final block (measured faster on CUDA") in str(exe.schedule)
    _use("tilelang-cuda", "one_kernel", monkeypatch)
    exe = tl_target.build(full_sum.trace(), target="tilelang-cuda")
    assert ("form=one kernel, the last block to take the atomic ticket folds the partials)") in str(exe.schedule)
    metal = tl_target.build(full_sum.trace(), target="tilelang-metal").schedule.general
    assert metal.param("form").startswith("two kernels") and "fence" in metal.param("form")
    part = tl_target.build(weighted_norm.trace(), target="tilelang-cuda").schedule.general
    assert part.fused == ("mul",)


def test_the_emulated_program_loops_over_the_threads_of_each_phase():
    program = lower(full_sum.trace(), EMULATED).text
    grid, final = _kernels(program)
    assert "T.get_thread_binding" not in program and "T.sync_threads" not in program and "shfl" not in program
    assert "with T.Kernel(T.min(T.max(T.ceildiv(d0, T.int64(2048)), T.int64(1)), T.int64(1024)), prelude" in grid
    assert grid.count("T.alloc_local((256,), 'float32')") == 2  # every thread's register, twice (reused by final)
    # blocks run in order, which is their ticket order: the ticket a plain increment, no fence, nothing waits
    assert "itg_" not in program and "W1[0] = W1[0] + 1" in grid
    for text in (grid, final):
        assert text.count("in T.serial(256):") == 1 + 5 and text.count("in T.serial(32):") == 1 + 3
        assert text.count("T.bitwise_xor(") == 8


@pytest.mark.parametrize("kernel", [full_sum, argmax_all, weighted_norm, full_sum_2d, any_nan, full_max_f16],
                         ids=lambda k: k.name)
def test_tilelang_lowers_the_program_for_sm90(kernel):
    source = cuda_source(_one_kernel(kernel))
    assert source.count("__global__ void __launch_bounds__(256") == 1  # one kernel: the last block folds
    assert "atom.acq_rel.gpu.global.add.u32" in source and "fence.acq_rel.gpu;" in source
    assert "__syncthreads();" in source and "__shfl_xor_sync(" in source and "__shared__" in source
    assert "blockIdx.x" in source
    source = cuda_source(generate(kernel.trace(), "tilelang-cuda"))  # the default: two kernels, nothing atomic
    assert source.count("__global__ void __launch_bounds__(256") == 2
    assert "atom." not in source and "fence." not in source
    assert "__syncthreads();" in source and "__shfl_xor_sync(" in source and "__shared__" in source
    assert "blockIdx.x" in source


def test_a_thread_has_a_chunk_of_loads_in_flight_and_every_block_is_resident(tmp_path):
    """In the PTX the local nvcc makes of the grid kernel, a thread issues its 8 loads of a chunk with no branch
    between them (folded as read, each load waited on the previous combine's NaN branch: one in flight), and ptxas
    gives it at most 32 registers, so 8 blocks of 256 threads fit an SM and 1024 blocks are resident at once on a
    132-SM H100/H200 (more registers would run the grid in two waves)."""
    source = cuda_source(_one_kernel(full_sum))
    main = source[source.index("kernel_kernel(float*"):]
    main = main[:main.index("it_add_f32(")]  # the CUDA source: a chunk's loads into registers before its combines
    assert "p0[" in main and re.search(r"\bf\d+\[u\w+\] = t\d+;", main)
    got = assemble(source, tmp_path)
    if got is None:  # no nvcc here: the source's order alone
        return
    grid = got.ptx["kernel_kernel"]
    assert longest_load_run(grid, "ld.global.nc.f32") == 8  # the final kernel's guarded loads: predicated by ptxas
    assert got.registers["kernel_kernel"] <= 32


def test_other_graphs_keep_their_programs():
    @intent.kernel
    def row_total(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
        y[:] = I.reduce.sum(x[:, :], axis=1)

    @intent.kernel
    def point_out(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        y[0] = I.reduce.sum(x[:], axis=0)  # y[0] needs N > 0: a check, so no multi-block program

    assert cuda_reduce.reduce_plan(row_total.trace()) is None
    assert tl_target.build(row_total.trace(), target="tilelang-cuda").schedule.general.mapping == "row_group"
    assert cuda_reduce.reduce_plan(point_out.trace()) is not None
    schedule = tl_target.build(point_out.trace(), target="tilelang-cuda").schedule
    assert schedule.general.mapping == "serial" and "run-time checks" in schedule.general.reason


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_full_sum_is_within_the_bound(compiled, n):
    x = (RNG.standard_normal(n) * 10 ** RNG.uniform(-3, 3)).astype(np.float32)
    y = np.full(1, np.nan, np.float32)
    compiled(full_sum)(x, y)
    assert abs(float(y[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x, U32)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("n", LARGE)
@pytest.mark.parametrize("grid_target", [t for t in EXECUTABLE_TARGETS if t in GRID_TARGETS])
def test_grid_stride_rounds_are_within_the_bound_and_exact(grid_target, n, form, monkeypatch):
    _use(grid_target, form, monkeypatch)
    x = RNG.standard_normal(n).astype(np.float32)
    x[n - 1] = 9.0  # the maximum in the tail (or the last chunk), a tie earlier
    x[n // 2 + 3] = 9.0
    got, i = np.zeros(2, np.float32), np.zeros(1, np.int64)
    for kernel, out in ((sum_and_max, got), (argmax_all, i)):
        exe = tl_target.build(kernel.trace(), target=grid_target)
        assert exe.schedule.general.mapping == "full_reduce"
        exe(x, out)
    assert abs(float(got[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x, U32)
    assert got[1] == 9.0 and i[0] == n // 2 + 3


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (1, 1), (7, 300), (33, 2049), (1000, 131)])
def test_a_2d_source_reduced_over_both_axes(compiled, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    y = np.full(1, np.nan, np.float32)
    compiled(full_sum_2d)(x, y)
    assert abs(float(y[0]) - math.fsum(x.astype(np.float64).ravel())) <= _sum_bound(x, U32)


@pytest.mark.parametrize("n", SMALL)
def test_fused_producers_and_a_consumer(compiled, n):
    x, w = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    y = np.full(1, np.nan, np.float32)
    compiled(weighted_norm)(x, w, y, np.float32(0.5))
    terms = x.astype(np.float64) * w * 0.5  # each product rounded twice in f32: 2u relative per term
    total = math.fsum(terms)
    bound = (_gamma(n, U32) + 2 * U32) * float(np.abs(terms).sum()) + U32 * abs(total)
    s = float(y[0]) - 0.5  # the consumer: sqrt(|sum|) + 0.5
    assert abs(s * s - abs(total)) <= 2 * bound + 8 * U32 * abs(total) + 1e-30


@pytest.mark.parametrize("n", SMALL)
def test_integer_sums_are_exact_and_wrap(compiled, n):
    info = np.iinfo(np.int32)
    x = RNG.integers(info.min, info.max, n, dtype=np.int32, endpoint=True)
    if n:
        x[: n // 2] = info.max  # the i64 accumulator holds them exactly
    y = np.zeros(1, np.int64)
    compiled(full_sum_i32)(x, y)
    assert y[0] == x.astype(np.int64).sum()


@pytest.mark.parametrize("n", SIZES)
def test_max_min_argmax_and_argmin_are_exact(compiled, n):
    x = RNG.standard_normal(n).astype(np.float32)
    for p in sorted({0, n // 3, n - 1}) if n else ():
        x[p] = 9.0  # ties: the lowest index wins
    got = np.zeros(2, np.float32)
    compiled(sum_and_max)(x, got)
    assert got[1] == (np.max(x) if n else -np.inf)
    assert abs(float(got[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x, U32)
    i = np.full(1, -7, np.int64)
    compiled(argmax_all)(x, i)
    assert i[0] == (int(np.argmax(x)) if n else np.iinfo(np.int64).max)
    i[0] = -7
    compiled(argmin_all)(x, i)
    assert i[0] == (int(np.argmin(x)) if n else np.iinfo(np.int64).max)


@pytest.mark.parametrize("n", (1, 257, 6001))
def test_nan_inf_and_signed_zeros(compiled, n):
    x = RNG.standard_normal(n).astype(np.float32)
    got, i = np.zeros(2, np.float32), np.zeros(1, np.int64)
    x[n // 2] = np.nan
    x[n - 1] = np.nan
    compiled(sum_and_max)(x, got)
    assert np.isnan(got).all()
    compiled(argmax_all)(x, i)
    assert i[0] == n // 2  # NaN is the maximum, the first NaN wins
    flag = np.zeros(1, np.bool_)
    compiled(any_nan)(x, flag)
    assert flag[0]
    compiled(any_nan)(np.nan_to_num(x), flag)
    assert not flag[0]
    x = np.full(n, -np.inf, np.float32)
    x[n // 3] = np.inf
    compiled(sum_and_max)(x, got)  # inf + -inf: NaN; max: inf
    assert (np.isnan(got[0]) if n > 1 else got[0] == np.inf) and got[1] == np.inf
    compiled(argmax_all)(x, i)
    assert i[0] == n // 3
    x = np.where(np.arange(n) % 2 == 0, np.float32(-0.0), np.float32(-1.0)).astype(np.float32)
    compiled(sum_and_max)(x, got)
    assert got[1] == 0.0 and np.signbit(got[1])  # -0 is the maximum
    x = np.full(n, -0.0, np.float32)
    compiled(sum_and_max)(x, got)  # 0.0 (the identity) + -0.0 ... = +0.0
    assert got[0] == 0.0 and not np.signbit(got[0])


@pytest.mark.parametrize("n", SMALL)
def test_half_precision_and_f64_reductions(compiled, n):
    x = (RNG.standard_normal(n) * 100).astype(np.float16)
    y = np.zeros(1, np.float16)
    compiled(full_max_f16)(x, y)
    assert y.view(np.uint16)[0] == (np.max(x) if n else np.float16(-np.inf)).view(np.uint16)
    b = (RNG.standard_normal(n) * 100).astype(ml_dtypes.bfloat16)
    z = np.zeros(1, ml_dtypes.bfloat16)
    compiled(min_bf16)(b, z)
    assert z.view(np.uint16)[0] == (np.min(b.astype(np.float32)).astype(ml_dtypes.bfloat16) if n else
                                    np.array(np.inf, ml_dtypes.bfloat16)).view(np.uint16)
    d = RNG.standard_normal(n) + 3
    m = np.zeros(1, np.float64)
    compiled(mean_f64)(d, m)
    if n:
        assert abs(m[0] - math.fsum(d) / n) <= (_gamma(n, U64) * np.abs(d).sum() / n + 4 * U64 * abs(m[0]))
    else:
        assert np.isnan(m[0])  # 0 / 0
    p = 1 + RNG.standard_normal(n) * 1e-3
    q = np.zeros(1, np.float64)
    compiled(prod_f64)(p, q)
    assert abs(q[0] - math.prod(p)) <= (n + 1) * U64 * 1.01 * abs(math.prod(p)) + 1e-300


@pytest.mark.parametrize("n", SMALL)
def test_a_custom_combine_with_its_identity(compiled, n):
    x = RNG.integers(-1000, 1000, n, dtype=np.int32)
    y = np.zeros((), np.int32)
    compiled(custom_max_i32)(x, y)
    assert y == max(-5000, int(x.max()) if n else -5000)


def test_wrong_dtype_and_extent_leave_the_output_unchanged(compiled):
    y = np.full(1, 7.0, np.float32)
    exe = compiled(full_sum)
    with pytest.raises(TypeError):
        exe(np.zeros(5, np.float64), y)
    with pytest.raises(ValueError):
        exe(np.zeros(5, np.float32), np.zeros(2, np.float32))
    assert y[0] == 7.0


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_partials_are_made_in_the_targets_memory_not_copied_there(form, monkeypatch):
    """A CUDA launch's workspaces are torch tensors made on the device: a host tensor moved there (``.cuda()``) is a
    blocking copy, a stream synchronisation before every launch. Checked without a GPU: the target's memory here is
    torch's ``meta`` device, and moving a host tensor there fails the test. The default (two kernels) has no ticket."""
    _use("tilelang-cuda", form, monkeypatch)
    exe = tl_target.build(full_sum.trace(), target="tilelang-cuda")

    def to_device(tensor):
        assert tensor.device.type == "meta", "a host workspace copied to the device"
        return tensor

    exe.spec = attrs.evolve(exe.spec, device_tensors="meta", to_device=to_device)
    (n,) = [ev.extent for ev in exe.graph.extents]
    w, *ticket = exe._workspace_tensors({n: 1 << 24}, ())
    assert w.device.type == "meta" and tuple(w.shape) == (cuda_reduce.BLOCKS,) and w.dtype.itemsize == 4
    assert len(ticket) == (form == "one_kernel")
    for t in ticket:
        assert t.device.type == "meta" and tuple(t.shape) == (1,)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("grid_target", [t for t in EXECUTABLE_TARGETS if t in GRID_TARGETS])
def test_the_one_kernel_form_sums_within_the_bound_and_keeps_nans_and_extremes(grid_target, n, monkeypatch):
    """The one-kernel form (not CUDA's default) at every size of SIZES: a sum within T5's bound, a NaN at a position
    that moves with ``n`` found, and the maximum found where it is planted."""
    _use(grid_target, "one_kernel", monkeypatch)
    x = (RNG.standard_normal(n) * 10 ** RNG.uniform(-3, 3)).astype(np.float32)
    y = np.full(1, np.nan, np.float32)
    tl_target.build(full_sum.trace(), target=grid_target)(x, y)
    assert abs(float(y[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x, U32)
    if n:
        k = (n * 7) // 11
        x[k] = 1e30
        got, i = np.zeros(2, np.float32), np.zeros(1, np.int64)
        tl_target.build(sum_and_max.trace(), target=grid_target)(x, got)
        tl_target.build(argmax_all.trace(), target=grid_target)(x, i)
        assert got[1] == np.float32(1e30) and i[0] == k
        x[(n * 3) // 5] = np.nan
        tl_target.build(sum_and_max.trace(), target=grid_target)(x, got)
        assert np.isnan(got[0]) and np.isnan(got[1])


def test_each_call_gets_a_ticket_at_zero(monkeypatch):
    """The ticket is zeroed per call (a stale ticket would make no block the last, or the wrong one): the workspace
    tensors handed to the kernel are recorded, the first call's ticket ends at its block count, and the second call
    starts again at zero and gets the right sum."""
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", EMULATED)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = tl_target.build(full_sum.trace(), target="tilelang-c")
    seen = []
    made = exe._workspace_tensors

    def recorded(*a, **k):
        tensors = made(*a, **k)
        seen.append([t.clone() for t in tensors] + [tensors])
        return tensors

    monkeypatch.setattr(exe, "_workspace_tensors", recorded)
    for n in (5 * CHUNK + 3, 3 * CHUNK):
        x = RNG.standard_normal(n).astype(np.float32)
        y = np.zeros(1, np.float32)
        exe(x, y)
        assert abs(float(y[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x, U32)
    assert len(seen) == 2
    for (_, ticket_before, (_, ticket_after)), blocks in zip(seen, (6, 3)):
        assert int(ticket_before[0]) == 0 and int(ticket_after[0]) == blocks


def test_a_launch_makes_fresh_workspaces_of_shapes_planned_once(monkeypatch):
    """``launch`` plans the workspaces' shapes once per argument shapes (checked against the allocation limit there)
    and only allocates per call, in the target's memory (``meta`` here, without a GPU), fresh each call; a shape
    too large for the limit is refused when the plan is made."""
    _use("tilelang-cuda", "one_kernel", monkeypatch)
    exe = tl_target.build(full_sum.trace(), target="tilelang-cuda")
    exe.spec = attrs.evolve(exe.spec, device_tensors="meta")
    (n,) = [ev.extent for ev in exe.graph.extents]
    made = exe._workspace_maker({n: 5 * CHUNK + 3}, exe.workspaces)
    first, second = made(()), made(())
    for tensors in (first, second):
        (w, ticket) = tensors
        assert w.device.type == ticket.device.type == "meta"
        assert tuple(w.shape) == (cuda_reduce.BLOCKS,) and str(w.dtype) == "torch.float32"
        assert tuple(ticket.shape) == (1,) and str(ticket.dtype) == "torch.int32"
    assert all(a is not b for a, b in zip(first, second))
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "16")
    with pytest.raises(ValueError, match="workspace W0 of shape"):
        exe._workspace_maker({n: 5 * CHUNK + 3}, exe.workspaces)
