"""Row groups on tilelang-cuda (cuda_rows: one thread block per row, a strided fold per thread and butterflies of
warp shuffles per reduction, producers and consumers fused).

Two halves. The program text: the CUDA target's row program has the structure the mapping promises (a block per
row, shuffles within and across warps, two barriers per reduction, no error record), and TileLang lowers it for
sm_90a. The numbers: every row kernel runs on every executable target through the shared ``target`` fixture against
NumPy references, with rows of lengths no block divides (1, 2, 255, 256, 257, 1000, 1024, 2500) and NaN/inf/-0 rows.
On tilelang-c the C target runs CUDA's row mapping emulated (each phase between barriers a serial loop over the block's
threads; the shuffles' values exchanged through buffers, a phase per step, so each lane combines the same pair in
the same order as on CUDA); on a GPU machine ``INTENT_TRACE_TEST_TARGETS=tilelang-cuda`` runs the same tests on the
real program.

Sums are checked against T5's bound (a parallel order is not the serial one, T10); max, min, argmax and integer
results must be exact.
"""
import math
import re

import attrs
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import intent_trace as intent

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda_rows, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.program import lower
from intent_trace.backends.tilelang.target import generate
from schedule.row_kernels import (layer_norm, logsumexp, rms_norm, rms_norm_f16, row_argmax, row_argmax_rows,
                                  row_max_bf16, row_max_f16, row_max_min, row_sum, row_sum_f64_rows, row_sum_i32,
                                  softmax_read_twice, softmax_rows, softmax_tensor)

RNG = np.random.default_rng(17)
#: below, at and past a block's 256 threads, its 1024-element chunk of slots (4 a thread) with 4k+1 and 4k+3
#: tails, the rows a warp holds (1024 f32 or 512 f64 elements: 32 or 16 slots a lane) and a block holds (8192 f32
#: or 4096 f64 elements) and one past each; longer rows in passes of 4096-element chunks (16 a thread) and a tail
#: of one element or of 16 strides but one
LENGTHS = (1, 2, 255, 256, 257, 512, 513, 1024, 1025, 1027, 2500, 4096, 4097, 8192, 8193, 12287)
U32, U64 = 2.0 ** -24, 2.0 ** -53
#: the C target running CUDA's row mapping, a block's threads one after another
EMULATED = attrs.evolve(targets.C, row_group=lambda g: cuda_rows.row_plan(g, emulated=True), host_workspaces=True)
ROW_TARGETS = ("tilelang-c", "tilelang-cuda")  # the targets whose programs are row groups


@pytest.fixture
def compiled(target, monkeypatch):
    """``compiled(kernel)``: the kernel for this target; on tilelang-c with CUDA's row mapping emulated. On a
    target that runs row groups, the test fails unless the program is one."""
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel):
        if target in ROW_TARGETS:
            exe = tl_target.build(kernel.trace(), target=target)
            assert exe.schedule.general.mapping == "row_group", exe.schedule
            return exe
        return intent.compile(kernel, target=target)

    return compiled


# --- the program ---------------------------------------------------------------------------------------------

def _kernel_body(program: str, careful: bool = False) -> list:
    """The kernel's lines; unless ``careful``, each row's careful program (a NaN row computed again: the block
    under ``if f<k> != 0:``, cuda_rows_nan) left out, so the text is the fast program's, the one that runs."""
    lines = program.splitlines()
    body = lines[next(i for i, x in enumerate(lines) if x.startswith("def kernel(")):]
    if careful:
        return body
    kept, skip = [], None
    for line in body:
        pad = len(line) - len(line.lstrip())
        if skip is not None and (pad > skip or not line.strip()):
            continue
        skip = pad if re.fullmatch(r"if (?:f|nan)\d+ != 0:", line.strip()) else None
        if skip is None:
            kept.append(line)
    return kept


def _tiers(body: list, warp: int = 1024, block: int = 8192) -> tuple:
    """The row's three programs: (rows of up to ``warp`` elements, a warp's; up to ``block``, a block's, both
    held on chip; longer rows, re-read by each pass)."""
    heads = [f"if d1 <= T.int64({warp}):", f"elif d1 <= T.int64({block}):", "else:"]
    at = [next(i for i, x in enumerate(body) if x.strip() == heads[0])]
    indent = body[at[0]][:len(body[at[0]]) - len(body[at[0]].lstrip())]
    at += [body.index(indent + h, at[0]) for h in heads[1:]]
    end = next((i for i in range(at[2] + 1, len(body)) if not body[i].startswith(indent + " ")), len(body))
    at.append(end)
    return tuple("\n".join(body[a + 1:b]) for a, b in zip(at, at[1:]))


@pytest.mark.parametrize("kernel", [softmax_rows, softmax_tensor], ids=lambda k: k.name)
def test_the_cuda_program_is_a_block_per_row_with_shuffles_per_reduction(kernel):
    body = _kernel_body(generate(kernel.trace(), "tilelang-cuda"))
    assert body[0] == "def kernel(p0: T.Tensor((d0, d1,), 'float32'), p1: T.Tensor((d0, d1,), 'float32')):"
    # a block per row, or 8 rows a block (a warp's each) where a warp holds them
    assert body[1].strip() == ("with T.Kernel(T.max(T.if_then_else(d1 <= T.int64(1024), T.ceildiv(d0, T.int64(8)), "
                               "d0), T.int64(1)), threads=256, prelude=PRELUDE) as bx:")
    text = "\n".join(body)
    assert text.count("T.get_thread_binding()") == 1
    assert text.count("T.alloc_shared((9,), 'float32')") == 2  # per reduction: 8 warps' totals and the result
    assert text.count("c4 = T.alloc_local((32,), 'float32')") == 1  # the row's 32 slots a thread (registers)
    warp, on_chip, passes = _tiers(body)
    for copy in (on_chip, passes):
        assert copy.count("T.sync_threads()") == 2 * 2  # after the warps' totals, after the row's result
        for step in (16, 8):  # the butterfly within each warp
            assert copy.count(f", {step})") == 2
        for step in (4, 2, 1):  # ... and then across the 8 warps' totals
            assert copy.count(f", {step})") == 2 * 2
        assert copy.count("T.shfl_xor(") == 2 * 8
    # a warp's row: its lanes' butterfly alone gives every lane the total (no barrier, no shared memory); lane l
    # holds elements l, l + 32, ... (chunks of 4 * 32)
    assert "T.sync_threads()" not in warp and "s2[" not in warp and "s3[" not in warp
    assert warp.count("T.shfl_xor(") == 2 * 5 and "tx1 % 32" in warp and "tx1 // 32" in warp
    # (each on-chip pass in two parts: the chunks the row fills, no guard per element, and the chunk it ends in)
    assert warp.count("p0[") == 2 and warp.count("* T.int64(128) <= d1:") == 4
    assert warp.count("* T.int64(128) < d1 and d1 < T.Cast('int64', c") == 4
    # long rows: two reductions and the write, three passes, each chunks of 16 elements a thread (unrolled: the
    # registers the slots take), then the tail
    assert passes.count("T.serial(T.floordiv(d1, T.int64(4096)))") == 3 and passes.count("T.unroll(16)") == 3
    assert passes.count("T.serial(T.ceildiv(d1 - n") == 3 and passes.count("p0[") == 2 * 3
    assert passes.count("it_exp_f32") == 2 * 2  # the producer fused into the sum's pass and the write's, both parts
    # rows on chip: one read of each element into its slot, then the two folds and the write from the slots,
    # every slot unrolled (8 chunks of 4, a chunk's guard that the row reaches it); the loads in two loops (the
    # whole chunks' loads all issued before the edge's), each later pass one loop whose iteration holds both parts
    # of its chunk (a chunk's slots read in that iteration alone: what is live is what is still to be read)
    assert on_chip.count("p0[") == 2 and "T.serial" not in on_chip
    assert on_chip.count("T.unroll(8)") == 2 + 3 and on_chip.count("T.unroll(4)") == 2 * 4
    assert on_chip.count("* T.int64(1024) <= d1:") == 4 and on_chip.count(" < d1 and d1 < ") == 4
    for copy in (warp, on_chip):
        loops = re.findall(r"for (c\d+) in T\.unroll\(8\):", copy)
        wholes = re.findall(r"if T\.Cast\('int64', (c\d+) \+ 1\) \* T\.int64\(\d+\) <= d1:", copy)
        edges = re.findall(r"if T\.Cast\('int64', (c\d+)\) \* T\.int64\(\d+\) < d1 and d1 <", copy)
        assert len(loops) == 5 and wholes[:1] == loops[:1] and edges[:1] == loops[1:2]
        assert wholes[1:] == edges[1:] == loops[2:]  # the folds' and the write's parts share their chunk's loop
    # exp(x - max) is kept in slots by the sum's fold (h5) and the write divides those: one exp per element
    assert text.count("T.alloc_local((32,), 'float32')") == 2
    for copy in (warp, on_chip):
        assert copy.count("it_exp_f32") == 2 and copy.count("h5[") == 2 * 2
        assert copy.index("h5[c") < copy.index("it_div_f32") and "it_div_f32', h5[" in copy
    assert "E: T.Tensor" not in text and "W0" not in text  # no error record, no workspace


def test_a_thread_folds_its_slots_in_four_chains_and_then_a_tree():
    """On chip a thread's slots go to one accumulator per slot of a chunk (slot k of every chunk to accumulator k,
    each from the identity): 4 independent chains of combines (4 each for 16 slots) instead of one of 16, in which
    every combine waits on the previous one's NaN test (T3's payload rule, a compare and a select). The 4 are
    combined in a tree (pairs, then the pair of pairs) and then into the thread's accumulator, which starts from the
    identity as the serial fold does; the passes over memory keep one chain. ptxas sm_90a, the row sum with its
    length fixed at 4096: 16 -> 7 dependent adds and 49 -> 22 instructions on the chain into the first shuffle."""
    warp, on_chip, passes = _tiers(_kernel_body(generate(row_sum.trace(), "tilelang-cuda")))
    add = r"t\d+ = T\.call_extern\('float32', 'it_add_f32', "
    for copy in (warp, on_chip):
        (lane,) = re.findall(r"(a\d+) = T\.alloc_local\(\(4,\), 'float32'\)", copy)
        (acc, identity), = re.findall(r"(c\d+) = T\.alloc_var\('float32', init=(x\d+)\)", copy)
        assert [f"{lane}[{k}] = {identity}" in copy for k in range(4)] == [True] * 4
        reads = re.findall(rf"(x\d+) = {lane}\[(u\d+)\]\n\s+{add}(x\d+), c3\[c\d+ \* 4 \+ (u\d+)\]\)\n"
                           rf"\s+(r\d+) = t\d+\n\s+{lane}\[(u\d+)\] = (r\d+)", copy)
        assert len(reads) == 2  # the whole chunks' part and the edge's: slot u of the chunk into accumulator u
        assert all(x == y and u == v == w and r == q for x, u, y, v, r, w, q in reads)
        tree = re.search(rf"(x\d+) = {lane}\[0\]\n\s+(x\d+) = {lane}\[1\]\n\s+{add}\1, \2\)\n\s+(r\d+) = t\d+\n"
                         rf"\s+(x\d+) = {lane}\[2\]\n\s+(x\d+) = {lane}\[3\]\n\s+{add}\4, \5\)\n\s+(r\d+) = t\d+\n"
                         rf"\s+(x\d+) = \3\n\s+(x\d+) = \6\n\s+{add}\7, \8\)\n\s+(r\d+) = t\d+\n"
                         rf"\s+(x\d+) = {acc}\n\s+{add}\10, \9\)", copy)
        assert tree and copy.index(tree.group(0)) > copy.rindex(f"{lane}[u")  # after the fold, before the shuffles
        assert copy.index(tree.group(0)) < copy.index("T.shfl_xor(")
    (acc,) = re.findall(r"(c\d+) = T\.alloc_var\('float32', init=x\d+\)", passes)
    assert "T.alloc_local((4,)" not in passes and passes.count(f"{acc} = r") == 2 + 5 + 3  # one chain over memory


def test_one_value_per_row_is_written_by_thread_zero_and_argmax_keeps_both_leaves():
    body = _kernel_body(generate(row_argmax.trace(), "tilelang-cuda"))
    text = "\n".join(body)
    assert "T.alloc_shared((9,), 'float32')" in text and "T.alloc_shared((9,), 'int64')" in text
    assert text.count("T.alloc_local((32,), 'float32')") == 1  # the values on chip; the index is the position
    warp, on_chip, passes = _tiers(body)
    for copy in (on_chip, passes):
        assert copy.count("T.shfl_xor(") == 2 * 8  # each leaf exchanged
        assert copy.count("if tx1 == 0:") == 2  # the result, the write
    assert passes.count("T.serial(T.ceildiv(d1") == 1 and on_chip.count("p0[") == 2
    assert warp.count("T.shfl_xor(") == 2 * 5 and warp.count(" == 0:") == 1  # the warp's first lane writes


def test_the_rows_held_on_chip_fill_a_thread_s_registers_by_dtype():
    """f64 values take two registers: 16 slots, rows of up to 4096 elements; a row of f16 values computes in f32
    (the slots hold the decoded values): 32 slots."""
    body = _kernel_body(generate(logsumexp.trace(), "tilelang-cuda"))
    assert "T.alloc_local((16,), 'float64')" in "\n".join(body) and "T.if_then_else(d1 <= T.int64(512)" in body[1]
    warp, on_chip, passes = _tiers(body, 512, 4096)
    assert warp.count("p0[") == on_chip.count("p0[") == 2 and passes.count("p0[") == 2 * 2
    body = _kernel_body(generate(rms_norm_f16.trace(), "tilelang-cuda"))
    assert "T.alloc_local((32,), 'float32')" in "\n".join(body)
    assert all(copy.count("p0[") == 2 for copy in _tiers(body)[:2])
    # x[:, :] spelled twice is one value: one set of slots, one load of each element
    body = _kernel_body(generate(softmax_read_twice.trace(), "tilelang-cuda"))
    assert "\n".join(body).count("c4 = T.alloc_local((32,), 'float32')") == 1 and "T.int64(1024)" in body[1]
    assert all(copy.count("p0[") == 2 for copy in _tiers(body)[:2])
    # the per-column weights are not the row's elements: read where used (every row shares them)
    body = _kernel_body(generate(layer_norm.trace(), "tilelang-cuda"))
    assert "\n".join(body).count("T.alloc_local((32,)") == 1
    for copy in _tiers(body)[:2]:
        assert copy.count("p0[") == 2 and copy.count("p1[") == 2 and copy.count("p2[") == 2


def test_the_emulated_program_loops_over_the_threads_of_each_phase():
    body = _kernel_body(lower(row_sum.trace(), EMULATED).text)
    text = "\n".join(body)
    assert ("with T.Kernel(T.max(T.if_then_else(d1 <= T.int64(1024), T.ceildiv(d0, T.int64(8)), d0), T.int64(1)), "
            "prelude=PRELUDE) as bx:") in text
    assert "T.get_thread_binding" not in text and "T.sync_threads" not in text and "shfl" not in text
    assert text.count("T.alloc_local((256,), 'float32')") == 2  # every thread's register, twice
    assert text.count("T.alloc_local((8192,), 'float32')") == 1  # every thread's 32 slots
    warp, on_chip, passes = _tiers(body)
    for copy, loads in ((on_chip, 1), (passes, 0)):
        assert copy.count("in T.serial(256):") == loads + 1 + 5  # the loads, the fold, the butterfly within warps
        assert copy.count("in T.serial(32):") == 1 + 3  # the warps' totals, the butterfly across them
        assert copy.count("T.bitwise_xor(") == 8
    assert on_chip.count("* 32 + c") == 2 * 2  # thread tx's slots: tx * 32 + slot (the load, the fold; two parts)
    # a warp's rows: the block's 8 rows one after another, each its lanes' phases (the loads, the fold, the
    # butterfly)
    assert warp.count("in T.serial(8):") == 1 and warp.count("in T.serial(32):") == 1 + 1 + 5
    assert warp.count("T.bitwise_xor(") == 5 and "in T.serial(256)" not in warp


@pytest.mark.parametrize("kernel", [softmax_tensor, row_argmax, layer_norm], ids=lambda k: k.name)
def test_tilelang_lowers_the_row_program_for_sm90(kernel):
    source = cuda_source(generate(kernel.trace(), "tilelang-cuda"))
    assert "__launch_bounds__(256" in source and "__syncthreads();" in source and "__shfl_xor_sync(" in source
    assert "__shared__" in source and "threadIdx.x" in source and "blockIdx.x" in source


# --- the numbers ----------------------------------------------------------------------------------------------

def _softmax_bound(x: np.ndarray) -> np.ndarray:
    """Per element, relative: x - max rounds (|x - max|·u of exp's argument), exp within 2 ulp, the sum of N
    positive terms within (N-1)·u (T5), the division one rounding; twice the producer's error (numerator and sum)."""
    n = x.shape[1]
    spread = np.max(np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True)), axis=1, keepdims=True)
    return (n + 2 * spread + 10) * U32


def _softmax_reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as the kernel's
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kernel", [softmax_rows, softmax_tensor, softmax_read_twice], ids=lambda k: k.name)
def test_softmax_matches_numpy_within_the_bound(compiled, kernel, n):
    x = (RNG.standard_normal((3, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(kernel)(x, y)
    want = _softmax_reference(x)
    assert np.all(np.abs(y - want) <= _softmax_bound(x) * want)


@pytest.mark.parametrize("kernel", [softmax_rows, softmax_tensor], ids=lambda k: k.name)
def test_softmax_rows_with_nan_inf_and_signed_zeros(compiled, kernel):
    n = 257
    x = (RNG.standard_normal((6, n)) * 3).astype(np.float32)
    x[0, 200] = np.nan  # a NaN anywhere makes its row NaN (max propagates it)
    x[1, 256] = np.inf  # inf - inf: NaN
    x[2, :] = -np.inf  # -inf - (-inf): NaN
    x[3, :] = 0.0
    x[3, ::2] = -0.0  # -0 < +0 (T3) and exp(±0) = 1: every element 1/n
    x[4, 5] = np.float32(80.0)  # one element dominates, the rest underflow towards 0
    y = np.zeros_like(x)
    compiled(kernel)(x, y)
    want = _softmax_reference(x)
    assert np.array_equal(np.isnan(y), np.isnan(want)) and np.isnan(y[:3]).all()
    ok = ~np.isnan(want)
    assert np.all(np.abs(y[ok] - want[ok]) <= (_softmax_bound(np.nan_to_num(x)) * np.ones_like(x))[ok] * want[ok]
                  + 2.0 ** -149)
    assert np.all(y[3] == np.float32(1.0 / n)) or np.all(np.abs(y[3] - 1.0 / n) <= (n + 4) * U32 / n)


@pytest.mark.parametrize("n", LENGTHS)
def test_layer_norm_matches_numpy_within_the_bound(compiled, n):
    x = (RNG.standard_normal((4, n)) * 2 + 3).astype(np.float32)
    w = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(layer_norm)(x, w, b, y)
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    norm = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    want = norm * w + b
    # the mean and the variance each within (N + 2)·u relative to their magnitude (T5), the centred value's
    # error relative to the row's spread; a few roundings for sqrt, the division, the weight and the bias
    spread = np.max(np.abs(x64), axis=1, keepdims=True) / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    bound = (4 * (n + 2) * (1 + spread) + 8) * U32 * (np.abs(norm * w) + np.abs(w)) + U32 * np.abs(b) * 2
    assert np.all(np.abs(y - want) <= bound)


@pytest.mark.parametrize("n", LENGTHS)
def test_rms_norm_matches_numpy_within_the_bound(compiled, n):
    x = RNG.standard_normal((3, n)).astype(np.float32)
    w = (RNG.standard_normal(n) + 1).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(rms_norm)(x, w, y)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    # squares (one rounding each), their sum within (N-1)·u (positive terms), the mean, + eps, sqrt halves the
    # relative error; the division and the weight: relative to the result
    assert np.all(np.abs(y - want) <= ((n + 8) * U32) * np.abs(want) + 2.0 ** -149)


@pytest.mark.parametrize("n", LENGTHS)
def test_rms_norm_f16_computes_in_f32_and_rounds_once_to_f16(compiled, n):
    x = (RNG.standard_normal((3, n)) * 3).astype(np.float16)
    y = np.full_like(x, np.nan)
    compiled(rms_norm_f16)(x, y)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6)
    # the f32 computation as rms_norm's (relative (N + 8)·2^-24), then one rounding to f16 (half an ulp: 2^-11
    # relative for normal results, 2^-25 absolute below them)
    bound = ((n + 8) * U32 + 2.0 ** -11) * np.abs(want) + 2.0 ** -25
    assert np.all(np.abs(y.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("kernel,dtype", [(row_max_f16, np.float16), (row_max_bf16, ml_dtypes.bfloat16)],
                         ids=("f16", "bf16"))
def test_half_precision_row_max_is_exact(compiled, kernel, dtype):
    n = 300
    x = (RNG.standard_normal((5, n)) * 100).astype(dtype)
    x[1, 299] = np.nan
    x[2, :] = np.where(np.arange(n) % 2 == 0, -0.0, -1.0).astype(dtype)  # -0 is the maximum
    x[3, :] = np.where(np.arange(n) == 257, 0.0, -0.0).astype(dtype)  # +0 > -0 (T3)
    x[4, :] = -np.inf
    y = np.zeros(5, dtype)
    compiled(kernel)(x, y)
    want = _ieee_extreme(x.astype(np.float32), True).astype(dtype)
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16)) or \
        (np.isnan(y[1]) and np.array_equal(np.delete(y.view(np.uint16), 1), np.delete(want.view(np.uint16), 1)))


@pytest.mark.parametrize("n", LENGTHS)
def test_logsumexp_matches_numpy_within_the_bound(compiled, n):
    x = RNG.standard_normal((5, n)) * 10
    x[3, n // 2] = 700.0  # exp would overflow without the max taken first
    y = np.full(5, np.nan)
    compiled(logsumexp)(x, y)
    m = x.max(axis=1)
    s = np.array([math.fsum(np.exp(r - r.max())) for r in x])
    want = np.log(s) + m
    spread = np.max(np.abs(x - m[:, None]), axis=1)
    # the sum's relative error is log's absolute error; the max is exact
    assert np.all(np.abs(y - want) <= (n + 2 * spread + 10) * U64 + 4 * U64 * np.abs(want))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kernel", [row_sum, row_sum_f64_rows], ids=lambda k: k.name)
def test_row_sums_are_within_the_bound(compiled, kernel, n):
    dtype, u = (np.float32, U32) if kernel is row_sum else (np.float64, U64)
    x = (RNG.standard_normal((4, n)) * 10 ** RNG.uniform(-3, 3, (4, 1))).astype(dtype)
    x[1, :] = -x[1, :]
    y = np.full(4, np.nan, dtype)
    compiled(kernel)(x, y)
    exact = np.array([math.fsum(r.astype(np.float64)) for r in x])
    gamma = n * u / (1 - n * u)  # T5: |computed - exact| <= γ_n · Σ|x_i| (and the result's rounding)
    assert np.all(np.abs(y.astype(np.float64) - exact) <= gamma * np.abs(x).astype(np.float64).sum(axis=1)
                  + u * np.abs(exact))


@pytest.mark.parametrize("n", LENGTHS)
def test_integer_row_sums_are_exact(compiled, n):
    info = np.iinfo(np.int32)
    x = RNG.integers(info.min, info.max, (3, n), dtype=np.int32, endpoint=True)
    x[0, :] = info.max  # the i64 accumulator holds n * 2**31 exactly
    y = np.zeros(3, np.int64)
    compiled(row_sum_i32)(x, y)
    assert np.array_equal(y, x.astype(np.int64).sum(axis=1))


def _argmax_rows(n: int) -> np.ndarray:
    """Rows whose maximum sits at different positions (first, in one thread's slice, at the block boundary, past
    it, last), with ties (the lowest index wins), NaNs (the first NaN wins), signed zeros (-0 == +0: a tie)."""
    positions = sorted({0, min(1, n - 1), min(255, n - 1), min(256, n - 1), min(257, n - 1), n - 1})
    rows = []
    for p in positions:
        r = RNG.standard_normal(n).astype(np.float32)
        r[p] = 9.0
        rows.append(r)
        tie = r.copy()
        tie[n - 1] = 9.0  # a tie with the last element
        rows.append(tie)
    nan = RNG.standard_normal(n).astype(np.float32)
    nan[positions[-1]] = np.nan
    nan[positions[len(positions) // 2]] = np.nan
    zeros = np.where(np.arange(n) % 3 == 0, np.float32(-0.0), np.float32(0.0))
    return np.stack([*rows, nan, zeros, np.full(n, -np.inf, np.float32)])


@pytest.mark.parametrize("n", LENGTHS)
def test_argmax_is_exact(compiled, n):
    x = _argmax_rows(n)
    y = np.full(x.shape[0], -7, np.int64)
    compiled(row_argmax)(x, y)
    assert np.array_equal(y, np.argmax(x, axis=1))  # NumPy: the first NaN, the first of equal maxima


@pytest.mark.parametrize("n", LENGTHS)
def test_integer_argmax_in_the_parallel_form_is_exact(compiled, n):
    x = RNG.integers(-3, 3, (5, n), dtype=np.int32)  # many ties
    x[4, :] = np.iinfo(np.int32).min
    y = np.full(5, -7, np.int64)
    compiled(row_argmax_rows)(x, y)
    assert np.array_equal(y, np.argmax(x, axis=1))


def _ieee_extreme(x: np.ndarray, largest: bool) -> np.ndarray:
    """IEEE 754-2019 maximum/minimum along rows (T3): any NaN gives NaN, -0 < +0."""
    out = np.max(x, axis=1) if largest else np.min(x, axis=1)
    for k, r in enumerate(x):
        if np.isnan(r).any():
            out[k] = np.nan
        elif out[k] == 0:
            zeros = r[r == 0]
            out[k] = np.float32(0.0) if (largest and (~np.signbit(zeros)).any()) or \
                (not largest and not np.signbit(zeros).any()) else np.float32(-0.0)
    return out


@pytest.mark.parametrize("n", LENGTHS)
def test_a_min_and_a_max_of_one_level_are_exact(compiled, n):
    x = (RNG.standard_normal((5, n)) * 5).astype(np.float32)
    x[1, n // 2] = np.nan
    x[2, :] = RNG.choice(np.array([-0.0, 0.0, 1.5], np.float32), n)
    x[3, :] = RNG.choice(np.array([-0.0, -2.0], np.float32), n)
    y = np.zeros_like(x)
    compiled(row_max_min)(x, y)
    lo, hi = _ieee_extreme(x, False)[:, None], _ieee_extreme(x, True)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        want = (x - lo) / (hi - lo)  # f32 NumPy arithmetic: correctly rounded, as T3's
    assert np.array_equal(y.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.array_equal(np.isnan(y), np.isnan(want))


def test_no_rows_and_empty_rows(compiled):
    x = np.zeros((0, 5), np.float32)
    y = np.zeros((0, 5), np.float32)
    compiled(softmax_tensor)(x, y)  # no block has a row: nothing happens
    x = np.zeros((3, 0), np.float32)
    s = np.full(3, np.nan, np.float32)
    compiled(row_sum)(x, s)
    assert np.array_equal(s, np.zeros(3, np.float32))  # the identity
    i = np.zeros(3, np.int64)
    compiled(row_argmax)(x, i)
    assert np.array_equal(i, np.full(3, np.iinfo(np.int64).max))  # the index identity (no position)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 700), m=st.integers(1, 4), data=st.data())
def test_property_argmax_exact_and_sum_within_the_bound(compiled, n, m, data):
    values = data.draw(st.lists(st.sampled_from([-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, 3.0, 1e6, -1e-6]),
                                min_size=m * n, max_size=m * n))
    x = np.array(values, np.float32).reshape(m, n)
    i = np.zeros(m, np.int64)
    compiled(row_argmax)(x, i)
    assert np.array_equal(i, np.argmax(x, axis=1))
    s = np.zeros(m, np.float32)
    compiled(row_sum)(x, s)
    exact = np.array([math.fsum(r.astype(np.float64)) for r in x])
    gamma = n * U32 / (1 - n * U32)
    assert np.all(np.abs(s - exact) <= gamma * np.abs(x).astype(np.float64).sum(axis=1) + U32 * np.abs(exact))


def test_the_reductions_of_one_level_share_their_pass():
    """A min and a max that read only the row: one strided pass folds both (each element read once), then each
    reduction's shuffles; the write is the second pass."""
    _, on_chip, passes = _tiers(_kernel_body(generate(row_max_min.trace(), "tilelang-cuda")))
    assert passes.count("T.serial(T.floordiv(d1, T.int64(4096)))") == 2 and passes.count("p0[r") == 2 * 2
    fold = passes[:passes.index("T.shfl_xor(")]
    assert "it_min_f32" in fold and "it_max_f32" in fold and fold.count("p0[") == 2  # one read per part
    fold = on_chip[:on_chip.index("T.shfl_xor(")]
    # the load's two loops, then the fold's one (both parts of a chunk in its iteration); both folds read the slots
    assert fold.count("T.unroll(8)") == 2 + 1 and fold.count("c4[") == 2 * (1 + 2)
    assert "it_min_f32" in fold and "it_max_f32" in fold and on_chip.count("p0[") == 2


@pytest.mark.parametrize("kernel,fn,warp", [(rms_norm, "it_sqrt_f32", 1024), (logsumexp, "it_log_f64", 512)],
                         ids=["rms", "lse"])
def test_a_value_of_the_rows_alone_is_computed_once_per_row(kernel, fn, warp):
    """Tensor form: ``sqrt(mean_square + eps)`` (a vector over the rows, broadcast back over the row) is computed
    at the row's level, before the pass that writes the row, not once per element of that pass."""
    for tier in _tiers(_kernel_body(generate(kernel.trace(), "tilelang-cuda")), warp, 8 * warp):
        lines = tier.splitlines()
        # the fast program's helper (it_), or the careful one's (itr_) in a tier without the NaN fast path
        (at,) = [k for k, x in enumerate(lines) if f"'{fn}'" in x or f"'{fn.replace('it_', 'itr_')}'" in x]
        row = next(x for x in lines if x.lstrip().startswith("if r") and " < d0:" in x)
        depth = len(row) - len(row.lstrip()) + 4  # the row's own block
        assert len(lines[at]) - len(lines[at].lstrip()) == depth, lines[at]  # in no loop over the row
