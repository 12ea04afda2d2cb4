"""Scans along a long axis on tilelang-cuda: one pass with decoupled look-back (cuda_scan_lookback: a block a tile
taken from an atomic ticket, its aggregate published, the predecessors' statuses read 32 at a time by warp 0, its
inclusive prefix published, its prefixes written from registers), and the two-kernel reduce-then-scan that Metal
keeps (cuda_scan: block totals in a first kernel, then each block combines the totals before it in order and scans
its tiles, warp shuffles up and a shared-memory scan of the warps' totals per tile).

On the H200 (the lead), the real CUDA program on the shared ``target`` fixture:

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_scan.py tests/schedule/test_scan.py
    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/test_zoo_kernels.py -k "cumsum"

Two halves. The program text (two kernels, the workspace of block totals, shuffles up, no error record; TileLang
lowers it for sm_90a). The numbers on every executable target against NumPy: sizes below, at and past a warp, a
block's tile (1024 elements), one tile per block of the full grid (1024 tiles) and several with a tail, empty axes,
NaN/inf. Floating sums: T5's bound per prefix (a scan may be re-associated, T10); integer sums, cummax and a
combine that is associative but not commutative (forward fill: re-ordering would break it) exactly.
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
from backends.tilelang_support import assembled, cuda_source
from conftest import EXECUTABLE_TARGETS
from intent_trace.backends.tilelang import cuda_scan, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.program import lower
from intent_trace.backends.tilelang.target import generate
from schedule.scan_kernels import (cummax_f32, cumsum_f32, cumsum_f64_scaled, cumsum_i32, exclusive_cumsum_i64,
                                   forward_fill, reverse_cumsum)

RNG = np.random.default_rng(31)
TILE = cuda_scan.THREADS * cuda_scan.UNROLL  # 1024: the two-kernel program's tile
LB = cuda_scan.LOOKBACK  # the single pass's knobs (tests/backends/test_tilelang_cuda_scan_variants.py: the others)
ONE_PASS_TILE = LB.tile  # the single pass's tile
SIZES = (0, 1, 3, 4, 5, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049, 4097,
         100003)
SMALL = (0, 1, 33, 1025, 2049, 4097, 100003)
#: a tile for every block of the full two-kernel grid (one element short, exactly, one over), then three tiles a
#: block with a tail; for the single pass, more tiles than a look-back window (32) and the same around 1024 tiles
#: (grid targets only: the oracle's interpreter takes minutes at these sizes; NumPy is the reference)
LARGE = (TILE * cuda_scan.BLOCKS - 1, TILE * cuda_scan.BLOCKS, TILE * cuda_scan.BLOCKS + 1,
         TILE * cuda_scan.BLOCKS * 2 + 777, ONE_PASS_TILE * 33 + 5)
U32, U64 = 2.0 ** -24, 2.0 ** -53
EMULATED = attrs.evolve(targets.C, multi_block=lambda g: cuda_scan.multi_block(g, emulated=True),
                        host_workspaces=True)
#: the two-kernel program (Metal's mapping) in CUDA's spelling and emulated on the C target
TWO_KERNELS = attrs.evolve(targets.CUDA, multi_block=lambda g: cuda_scan.multi_block(g, single_pass=False))
TWO_KERNELS_EMULATED = attrs.evolve(EMULATED, multi_block=lambda g: cuda_scan.multi_block(g, emulated=True,
                                                                                          single_pass=False))
GRID_TARGETS = ("tilelang-c", "tilelang-cuda")


def _use(target, monkeypatch):
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})


@pytest.fixture
def compiled(target, monkeypatch):
    """``compiled(kernel)``: the kernel for this target; on tilelang-c with CUDA's mapping emulated. On a target
    that runs multi-block programs, the test fails unless the program is one."""
    _use(target, monkeypatch)

    def compiled(kernel):
        if target in GRID_TARGETS:
            exe = tl_target.build(kernel.trace(), target=target)
            assert exe.schedule.general.mapping == "multi_block_scan", exe.schedule
            return exe
        return intent.compile(kernel, target=target)

    return compiled


def _prefix_bound(terms: np.ndarray, u: float) -> np.ndarray:
    """T5 per prefix: |computed_i - exact_i| <= γ_{i+1} · Σ_{k<=i} |t_k|, and the result's own rounding."""
    n = np.arange(1, terms.size + 1)
    gamma = n * u / (1 - n * u)
    exact = np.cumsum(terms)
    return gamma * np.cumsum(np.abs(terms)) + u * np.abs(exact)


# --- the program ---------------------------------------------------------------------------------------------

def _common_one_pass(body: str, program: str) -> None:
    assert body.count(f"with T.Kernel(T.max(T.ceildiv(d0, T.int64({ONE_PASS_TILE})), T.int64(1)), "
                      f"threads={LB.threads}, prelude=PRELUDE) as bx:") == 1 and body.count("T.Kernel(") == 1
    assert "bx" not in body.split(" as bx:")[1]  # the tile is the ticket's, never the block index
    assert body.count("p0[") == 1 and body.count("p1[") == 1  # the source read once, the prefixes written once
    warp_steps = math.ceil(math.log2(LB.threads // 32))  # the block scan's steps over its warps' totals
    assert body.count("T.shfl_down(") == 5 and body.count("T.shfl_up(") == 5 + warp_steps + 1  # look-back; scan
    # the look-back: warp 0, windows of 32 tiles back from the tile, until a window holds an inclusive prefix
    assert re.search(r"for w\d+ in T.serial\(T.ceildiv\(t\d+, T.int64\(32\)\)\):", body)
    assert "E: T.Tensor" not in program and "shfl_xor" not in program and "\n    while " not in program


def test_the_cuda_program_is_one_pass_with_a_ticket_and_a_look_back():
    """f32: a tile's status is one 64-bit word (flag high, value bits low), stored and read whole: no fence."""
    program = generate(cumsum_f32.trace(), "tilelang-cuda")
    assert ("def kernel(p0: T.Tensor((d0,), 'float32'), p1: T.Tensor((d0,), 'float32'), W0: T.Tensor((W0_0,), "
            "'int64')):") in program
    (status,) = lower(cumsum_f32.trace(), targets.CUDA).workspaces
    assert status.zeroed and status.shape == (f"d0/{ONE_PASS_TILE}+1",) and status.dtype == "int64"
    body = program[program.index("def kernel("):]
    _common_one_pass(body, program)
    # thread 0 takes the ticket, a barrier, then the tile (read once into registers, LB.unroll a thread), the scan
    # (tile 0 publishes its total as its inclusive prefix; any other tile its aggregate, then looks back)
    word = r"T.shift_left\(T.Cast\('int64', {}\), T.int64\(32\)\) \+ T.Cast\('int64', T.reinterpret\("
    order = [r"itg_ticket64', T.access_ptr\(W0\[0\], 'rw'\)", r"T.sync_threads\(\)", r"p0\[", r"T.shfl_up\(",
             r"itg_publish64', T.access_ptr\(W0\[0\], 'rw'\), T.int64\(0\), " + word.format(2),
             r"itg_publish64', T.access_ptr\(W0\[0\], 'rw'\), t\d+, " + word.format(1),
             "itg_wait64'", r"T.shift_right\(f\d+, T.int64\(32\)\)", "itg_first'", r"T.shfl_down\(", "break",
             r"itg_publish64', T.access_ptr\(W0\[0\], 'rw'\), t\d+, " + word.format(2), r"p1\["]
    at = [re.search(x, body).start() for x in order]
    assert at == sorted(at), order
    assert "T.reinterpret(T.Cast('uint32', T.bitwise_and(f" in body and f"T.alloc_local(({LB.unroll},), 'float32')" in body
    # the tile through shared memory (padded one word in 32): loaded striped (a warp's 32 consecutive elements),
    # each thread's run taken from there, its prefixes put back there and stored striped
    assert body.count(f"T.alloc_shared(({ONE_PASS_TILE + ONE_PASS_TILE // 32},), 'float32')") == 2
    assert re.search(rf"e\d+ = v\d+ \* {LB.threads} \+ tx\d+\n\s+j\d+ = o\d+ \+ T.Cast\('int64', e\d+\)", body)
    assert re.search(r"g\d+\[e\d+ \+ e\d+ // 32\] = t\d+", body)  # the striped load into shared
    assert re.search(rf"e\d+ = tx\d+ \* {LB.unroll} \+ u\d+\n\s+f\d+\[u\d+\] = g\d+\[e\d+ \+ e\d+ // 32\]", body)
    assert re.search(r"p1\[j\d+\] = g\d+\[e\d+ \+ e\d+ // 32\]", body)
    assert body.count("itg_publish64'") == 3 and body.count("itg_wait64'") == 1 and "itg_fence" not in body
    source = cuda_source(program)
    assert "st.relaxed.gpu.global.s64" in source and "ld.relaxed.gpu.global.s64" in source
    assert "atomicAdd((unsigned long long*)f, 1ull)" in source and "__ballot_sync(0xffffffffu, p)" in source
    assert "fence" not in source.split("itg_wait64")[1].split("}")[0]


def test_a_64_bit_scan_publishes_its_values_then_a_flag():
    """i64 (a cumsum of i32 accumulates in i64): the values cannot share a 64-bit word with the flag, so they live
    in arrays of their own (aggregates W1, inclusive prefixes W2), stored before a release store of the flag; the
    wait polls relaxed and fences once."""
    program = generate(cumsum_i32.trace(), "tilelang-cuda")
    assert ("W0: T.Tensor((W0_0,), 'int32'), W1: T.Tensor((W1_0,), 'int64'), W2: T.Tensor((W2_0,), 'int64')):"
            in program)
    flags, aggregates, prefixes = lower(cumsum_i32.trace(), targets.CUDA).workspaces
    assert flags.zeroed and not aggregates.zeroed and not prefixes.zeroed
    assert flags.shape == aggregates.shape == prefixes.shape == (f"d0/{ONE_PASS_TILE}+1",)
    body = program[program.index("def kernel("):]
    _common_one_pass(body, program)
    order = [r"itg_ticket', T.access_ptr\(W0\[0\], 'rw'\)", r"T.sync_threads\(\)", r"p0\[", r"T.shfl_up\(",
             r"W2\[T.int64\(0\)\] = r\d+", r"publish', T.access_ptr\(W0\[0\], 'rw'\), T.int64\(0\), 2\)",
             r"W1\[t\d+\] = r", r"publish', T.access_ptr\(W0\[0\], 'rw'\), t\d+, 1\)", "itg_wait'", "itg_first'",
             r"T.shfl_down\(", "break", r"W2\[t\d+\] = ", r"publish', T.access_ptr\(W0\[0\], 'rw'\), t\d+, 2\)",
             r"p1\["]
    at = [re.search(x, body).start() for x in order]
    assert at == sorted(at), order
    assert body.count("itg_wait'") == 1 and body.count("itg_publish'") == 3
    assert "T.if_then_else(f" in body and "== 2, W2[T.max(j" in body and "W1[T.max(j" in body
    source = cuda_source(program)
    assert "st.release.gpu.global.s32" in source and "ld.relaxed.gpu.global.s32" in source
    assert "fence.acq_rel.gpu" in source and "ld.acquire" not in source


def test_the_two_kernel_program_is_two_grids_with_shuffles_up():
    program = lower(cumsum_f32.trace(), TWO_KERNELS).text
    assert ("def kernel(p0: T.Tensor((d0,), 'float32'), p1: T.Tensor((d0,), 'float32'), "
            "W0: T.Tensor((1024,), 'float32')):") in program
    body = program[program.index("def kernel("):]
    grid = "T.min(T.max(T.ceildiv(d0, T.int64(1024)), T.int64(1)), T.int64(1024))"
    assert body.count(f"with T.Kernel({grid}, threads=256") == 2 and body.count("prelude=PRELUDE") == 1
    totals, scan = body.split(f"\n    with T.Kernel({grid}, threads=256) as bx:")
    assert totals.count("T.shfl_up(") == 5 + 3 + 1  # within warps, across the 8 warps' totals, the lane before
    assert scan.count("T.shfl_up(") == 2 * (5 + 3 + 1)  # the carry's fold, then each tile
    assert totals.count("T.sync_threads()") == 3 and scan.count("T.sync_threads()") == 6
    assert "W0[bx] = " in totals and "p1[" not in totals and "p1[j" in scan and "W0[i" in scan
    # a thread's run of 4 elements: loaded into registers, then folded (a combine's NaN branch would hold the next
    # load); in the scan the carry's totals the same way, then the run loaded, folded and, from the registers
    # (no second read), its prefixes written
    assert totals.count("T.unroll(4)") == 2 and scan.count("T.unroll(4)") == 2 + 2 + 1
    assert totals.count("p0[") == 1 and scan.count("p0[") == 1 and "T.alloc_local((4,), 'float32')" in scan
    for text in (totals, scan[re.search(r"for k\d+ in T.serial\(n", scan).start():]):  # the tiles
        load, fold = text.split("T.unroll(4)")[1:3]
        assert "p0[" in load and "it_add_f32" not in load and "p0[" not in fold and "it_add_f32" in fold
    prefixes = scan.split("T.unroll(4)")[-1]
    assert "p1[j" in prefixes and "p0[" not in prefixes and re.search(r"\bf\d+\[u\d+\]", prefixes)
    assert "E: T.Tensor" not in program and "shfl_xor" not in program


def test_the_schedule_reports_the_mapping_and_other_scans_keep_their_programs():
    exe = tl_target.build(cumsum_f32.trace(), target="tilelang-cuda")
    assert str(exe.schedule).startswith(f"multi_block_scan (elements=N, blocks=one a tile, threads={LB.threads}, "
                                        f"per_thread={LB.unroll}, passes=1, form=one pass, decoupled look-back")
    metal = tl_target.build(cumsum_f32.trace(), target="tilelang-metal").schedule.general
    assert metal.mapping == "multi_block_scan" and metal.param("passes") == 2
    assert metal.param("form").startswith("reduce-then-scan, two kernels") and "wait" in metal.param("form")
    assert tl_target.build(cumsum_f64_scaled.trace(), target="tilelang-cuda").schedule.general.fused == \
        ("add", "mul")
    assert cuda_scan.scan_plan(reverse_cumsum.trace()) is None
    assert tl_target.build(reverse_cumsum.trace(), target="tilelang-cuda").schedule.general.mapping == "serial"


def test_the_emulated_single_pass_runs_the_look_back_with_serial_lanes_and_nothing_waits():
    """Blocks run in order on the C target, which is their ticket order: the ticket is a plain increment, a flag a
    plain read (the predecessor is done), the window's lanes serial loops; the window loop is bounded by the tiles
    before the block, so nothing can spin."""
    program = lower(cumsum_f32.trace(), EMULATED).text
    assert "T.get_thread_binding" not in program and "T.sync_threads" not in program and "shfl" not in program
    assert "itg_" not in program and "break" in program and "\n    while " not in program
    body = program[program.index("def kernel("):]
    assert re.search(r"W0\[0\] = W0\[0\] \+ T.int64\(1\)", body) and body.count("T.Kernel(") == 1
    assert re.search(r"for w\d+ in T.serial\(T.ceildiv\(t\d+, T.int64\(32\)\)\):", body)
    assert body.count("in T.serial(32):") == 2  # the window's flags, then its values folded earliest first
    # the striped load, the fold, 5 shuffle steps, the exclusive, the prefixes, the striped store
    assert body.count(f"in T.serial({LB.threads}):") == 1 + 1 + 5 + 1 + 1 + 1


def test_the_emulated_program_loops_over_the_threads_of_each_phase():
    program = lower(cumsum_f32.trace(), TWO_KERNELS_EMULATED).text
    assert "T.get_thread_binding" not in program and "T.sync_threads" not in program and "shfl" not in program
    body = program[program.index("def kernel("):]
    assert body.count("in T.serial(256):") == 3 * (1 + 5 + 1) + 1  # per scan: the fold, 5 steps, the prefixes
    assert body.count("in T.serial(8):") == 3 * (1 + 3)  # the warps' totals, then their 3 steps


@pytest.mark.parametrize("kernel", [cumsum_f32, cummax_f32, forward_fill, cumsum_i32, exclusive_cumsum_i64],
                         ids=lambda k: k.name)
@pytest.mark.parametrize("form", ["one_pass", "two_kernels"])
def test_tilelang_lowers_the_program_for_sm90(kernel, form):
    target = targets.CUDA if form == "one_pass" else TWO_KERNELS
    source = cuda_source(lower(kernel.trace(), target).text)
    launch = f"__global__ void __launch_bounds__({LB.threads if form == 'one_pass' else 256}"
    assert source.count(launch) == (1 if form == "one_pass" else 2)
    assert "__shfl_up_sync(" in source and "__syncthreads();" in source and "__shared__" in source
    got = assembled(source)  # the local nvcc (ptxas' report), where there is one
    if got is not None:  # ptxas for sm_90a: no spills; f32: 8 blocks of 256 an SM (two kernels), and the one
        assert all(spills == (0, 0) for spills in got.spills.values()), got.spills  # pass 768 threads or more
        if kernel is cumsum_f32:
            assert max(got.registers.values()) <= (32 if form == "two_kernels" else 65536 // 768), got.registers


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_cumsum_is_within_the_bound_per_prefix(compiled, n):
    x = (RNG.standard_normal(n) * 10 ** RNG.uniform(-3, 3)).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    compiled(cumsum_f32)(x, y)
    assert np.all(np.abs(y - np.cumsum(x.astype(np.float64))) <= _prefix_bound(x.astype(np.float64), U32))


@pytest.mark.parametrize("n", SMALL)
def test_fused_producers(compiled, n):
    x, w = RNG.standard_normal(n), RNG.standard_normal(n)
    y = np.full(n, np.nan)
    compiled(cumsum_f64_scaled)(x, w, y, 0.25)
    terms = x * w + 0.25  # each term within 2u of its exact value
    bound = _prefix_bound(terms, U64) + 2 * U64 * np.cumsum(np.abs(terms))
    assert np.all(np.abs(y - np.cumsum(terms)) <= bound)


@pytest.mark.parametrize("n", SIZES)
def test_integer_cummax_and_forward_fill_are_exact(compiled, n):
    info = np.iinfo(np.int32)
    x = RNG.integers(info.min, info.max, n, dtype=np.int32, endpoint=True)
    y = np.zeros(n, np.int64)
    compiled(cumsum_i32)(x, y)
    assert np.array_equal(y, np.cumsum(x.astype(np.int64)))
    f = np.full(n, np.nan, np.float32)
    v = RNG.standard_normal(n).astype(np.float32)
    compiled(cummax_f32)(v, f)
    assert np.array_equal(f, np.maximum.accumulate(v))
    fill = np.where(RNG.random(n) < 0.9, -1, RNG.integers(0, 1000, n)).astype(np.int32)
    if n > 300:
        fill[200:n - 5] = -1  # a long gap across tiles and blocks
    out = np.zeros(n, np.int32)
    compiled(forward_fill)(fill, out)
    want, last = np.empty(n, np.int32), -1
    for k, value in enumerate(fill):
        last = value if value != -1 else last
        want[k] = last
    assert np.array_equal(out, want)


@pytest.mark.parametrize("n", SMALL)
def test_exclusive_scans_start_from_the_identity(compiled, n):
    x = RNG.integers(-(2 ** 40), 2 ** 40, n, dtype=np.int64)
    y = np.full(n, 7, np.int64)
    compiled(exclusive_cumsum_i64)(x, y)
    assert np.array_equal(y, np.concatenate([[0], np.cumsum(x)[:-1]]) if n else y)


@pytest.mark.parametrize("n", (1, 1025, 4097))
def test_nan_and_inf(compiled, n):
    x = RNG.standard_normal(n).astype(np.float32)
    x[n // 2] = np.nan
    y, m = np.zeros(n, np.float32), np.zeros(n, np.float32)
    compiled(cumsum_f32)(x, y)
    compiled(cummax_f32)(x, m)
    assert not np.isnan(y[: n // 2]).any() and np.isnan(y[n // 2:]).all()
    assert np.array_equal(m[: n // 2], np.maximum.accumulate(x[: n // 2])) and np.isnan(m[n // 2:]).all()
    x = np.ones(n, np.float32)
    x[n - 1] = np.inf
    compiled(cumsum_f32)(x, y)
    assert y[n - 1] == np.inf and np.all(y[: n - 1] == np.arange(1, n, dtype=np.float32))


@pytest.mark.parametrize("n", (0, 1, 1023, 1024, 1025, 4097, TILE * 3 + 5))
def test_the_two_kernel_program_emulated(n, monkeypatch):
    """The program Metal keeps, in CUDA's mapping on the C target: exact integer and forward-fill scans, a float
    sum within the bound."""
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", TWO_KERNELS_EMULATED)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = tl_target.build(cumsum_f32.trace(), target="tilelang-c")
    assert exe.schedule.general.param("passes") == 2
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    exe(x, y)
    assert np.all(np.abs(y - np.cumsum(x.astype(np.float64))) <= _prefix_bound(x.astype(np.float64), U32))
    i = RNG.integers(-1000, 1000, n).astype(np.int32)
    z = np.zeros(n, np.int64)
    tl_target.build(cumsum_i32.trace(), target="tilelang-c")(i, z)
    assert np.array_equal(z, np.cumsum(i.astype(np.int64)))


#: a NaN or an inf at the first element, the ends of the first tile and its successor's start, a look-back window's
#: boundary (tile 32) and the last element, in a length of 33 single-pass tiles and a tail
PLACES = (0, ONE_PASS_TILE - 1, ONE_PASS_TILE, ONE_PASS_TILE + 1, ONE_PASS_TILE * 32 + 7, ONE_PASS_TILE * 33 + 4)


@pytest.mark.parametrize("at", PLACES)
@pytest.mark.parametrize("grid_target", [t for t in EXECUTABLE_TARGETS if t in GRID_TARGETS])
def test_nan_and_inf_at_tile_boundaries(grid_target, at, monkeypatch):
    """Against NumPy: a cumsum is finite before a NaN and NaN from it on, a cummax the running maximum before it
    and NaN from it on (the prefix carried across tiles through the look-back), an inf propagates the same way."""
    _use(grid_target, monkeypatch)
    n = ONE_PASS_TILE * 33 + 5
    x = RNG.standard_normal(n).astype(np.float32)
    x[at] = np.nan
    y, m = np.zeros(n, np.float32), np.zeros(n, np.float32)
    tl_target.build(cumsum_f32.trace(), target=grid_target)(x, y)
    tl_target.build(cummax_f32.trace(), target=grid_target)(x, m)
    assert not np.isnan(y[:at]).any() and np.isnan(y[at:]).all()
    assert np.array_equal(m[:at], np.maximum.accumulate(x[:at])) and np.isnan(m[at:]).all()
    x[at] = np.inf
    tl_target.build(cumsum_f32.trace(), target=grid_target)(x, y)
    tl_target.build(cummax_f32.trace(), target=grid_target)(x, m)
    assert np.isfinite(y[:at]).all() and (y[at:] == np.inf).all()
    assert np.array_equal(m, np.maximum.accumulate(x))
    i = np.zeros(n, np.int64)
    exact = RNG.integers(-(2 ** 31), 2 ** 31, n, dtype=np.int64).astype(np.int32)
    tl_target.build(cumsum_i32.trace(), target=grid_target)(exact, i)
    assert np.array_equal(i, np.cumsum(exact.astype(np.int64)))


@pytest.mark.parametrize("n", LARGE)
@pytest.mark.parametrize("grid_target", [t for t in EXECUTABLE_TARGETS if t in GRID_TARGETS])
def test_every_block_and_several_tiles_a_block(grid_target, n, monkeypatch):
    _use(grid_target, monkeypatch)
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    exe = tl_target.build(cumsum_f32.trace(), target=grid_target)
    assert exe.schedule.general.mapping == "multi_block_scan"
    exe(x, y)
    assert np.all(np.abs(y - np.cumsum(x.astype(np.float64))) <= _prefix_bound(x.astype(np.float64), U32))
    i = RNG.integers(-1000, 1000, n).astype(np.int32)
    z = np.zeros(n, np.int64)
    tl_target.build(cumsum_i32.trace(), target=grid_target)(i, z)
    assert np.array_equal(z, np.cumsum(i.astype(np.int64)))


@intent.kernel
def cumsum_of_f16(x: I.In[I.f16, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(I.cast(x[:], I.f32), axis=0)


@intent.kernel
def cumsum_of_bf16(x: I.In[I.bf16, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(I.cast(x[:], I.f32), axis=0)


@pytest.mark.parametrize("n", SMALL)
def test_half_precision_sources_held_in_registers(compiled, n):
    """The run's reads are held in registers in the view's value dtype (f16, bf16: stored as their bits, decoded
    where read) and converted where folded and again where the prefixes are written."""
    for kernel, dtype in ((cumsum_of_f16, np.float16), (cumsum_of_bf16, ml_dtypes.bfloat16)):
        x = (RNG.standard_normal(n) * 100).astype(dtype)
        if n > 2:
            x[n // 2] = -0.0
        y = np.full(n, np.nan, np.float32)
        compiled(kernel)(x, y)
        exact = x.astype(np.float64)
        assert np.all(np.abs(y - np.cumsum(exact)) <= _prefix_bound(exact, U32))


def test_wrong_dtype_and_extent_leave_the_output_unchanged(compiled):
    y = np.full(4, 7.0, np.float32)
    exe = compiled(cumsum_f32)
    with pytest.raises(TypeError):
        exe(np.zeros(4, np.float64), y)
    with pytest.raises(ValueError):
        exe(np.zeros(5, np.float32), y)
    assert np.all(y == 7.0)


def test_each_call_gets_its_ticket_and_flags_at_zero(monkeypatch):
    """The flags workspace is zeroed per call: a first call leaves its ticket at its tile count and every tile's
    status inclusive; the next call's workspace starts at zero again (a stale status would hand a block a
    predecessor's old prefix), and its prefixes are right at another size."""
    _use("tilelang-c", monkeypatch)
    exe = tl_target.build(cumsum_i32.trace(), target="tilelang-c")
    seen = []
    made = exe._workspace_tensors

    def recorded(*a, **k):
        tensors = made(*a, **k)
        seen.append((tensors[0].clone(), tensors[0]))
        return tensors

    monkeypatch.setattr(exe, "_workspace_tensors", recorded)
    for n in (ONE_PASS_TILE * 5 + 3, ONE_PASS_TILE * 2):
        x = RNG.integers(-1000, 1000, n).astype(np.int32)
        y = np.zeros(n, np.int64)
        exe(x, y)
        assert np.array_equal(y, np.cumsum(x.astype(np.int64)))
    for (before, after), tiles in zip(seen, (6, 2)):
        assert before.shape == (tiles + 1,) and not before.any()
        assert int(after[0]) == tiles and (after[1:] == 2).all()


def test_a_workspace_axis_sized_by_an_extent_or_a_scalar_divided_rounded_up():
    """``"d0/2048+1"``: ceil(extent 0 / 2048) + 1 (a scan's tiles and its ticket); ``"p1/4"``: ceil(max(0, the
    call's argument 1) / 4); each a dynamic axis of its own in the parameter's shape, a plain extent kept."""
    from intent_trace.backends.tilelang.storage import Workspace

    space = Workspace("W3", ("d0/2048+1", "p1/4", "7", "d0"), "int32", zeroed=True)
    assert space.dims() == ("W3_0", "W3_1", "7", "d0")
    assert space.dynamic_lines() == ["W3_0 = T.dynamic('W3_0', 'int64')", "W3_1 = T.dynamic('W3_1', 'int64')"]
    assert space.sizes({0: 4097}, (None, 9)) == (4, 3, 7, 4097)
    assert space.sizes({0: 0}, (None, -5)) == (1, 0, 7, 0)
    assert space.sizes({0: 2048}, (None, 8)) == (2, 2, 7, 2048)
    with pytest.raises(ValueError, match="workspace W3"):
        space.sizes({0: 1 << 62}, (None, 1 << 62))
