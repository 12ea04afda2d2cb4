"""Extent equalities stated in front of mapped work (``I.assume_equal``) are a prologue: checked before any launch, so
the grid, row-group and multi-block programs behind them still run (issue 15 item 4, issue 17 item 1).

Each kernel of prologue_kernels.py runs on every executable target through the ``mapped`` fixture: on tilelang-c
with tilelang-cuda's grid mappings emulated (a block's threads one after another), on emulated Metal with Metal's
own programs, and on generic and cpu (the oracle; cpu's row loop with the check made before it). On each mapping:
the schedule names the mapping and the prologue, the numbers meet NumPy's (sums within T5's bound, T10 leaves their
order free; counts exact), and a call whose stated sides differ raises EXTENT_EQUAL's ValueError naming both sides,
with every output as it was. The CUDA program itself (no error record from the check) is checked from its text.
"""
import math
import re

import attrs
import numpy as np
import pytest
from conftest import EMULATED_METAL

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.prologue_kernels import (dot_after, gather_rows_after, histogram_after, layer_norm_after,  # noqa: E402
                                       layer_norm_ref, scale_add_after, softmax_after, softmax_ref)
from intent_trace.backends.tilelang import (cuda_indexed, cuda_kernels, cuda_rows, cuda_scan,  # noqa: E402
                                            targets)
from intent_trace.backends.tilelang import target as tl_target  # noqa: E402
from backends.tilelang_support import cuda_source  # noqa: E402
from intent_trace.backends.tilelang.program import lower, schedule_of  # noqa: E402

RNG = np.random.default_rng(1515)
U32 = 2.0 ** -24
#: the C target running tilelang-cuda's grid mappings, a block's threads one after another
CUDA_GRIDS = attrs.evolve(
    targets.C, row_group=lambda g: cuda_rows.row_plan(g, emulated=True),
    flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True),
    parallel_grid=lambda g: cuda_kernels.parallel_grid(g, emulated=True),
    multi_block=lambda g: cuda_scan.multi_block(g, emulated=True),
    indexed_grid=lambda g: cuda_indexed.indexed_plan(g, emulated=True), host_workspaces=True)
GRID_TARGETS = ("tilelang-c", "tilelang-cuda", EMULATED_METAL)  # the targets whose programs are the mappings
PROLOGUE = re.compile(r"^prologue: assume_equal at prologue_kernels\.py:\d+: checked before any launch")


@pytest.fixture
def mapped(target, monkeypatch):
    """``mapped(kernel, mapping)``: the kernel compiled for this target; on tilelang-c with CUDA's grid mappings
    emulated. On a grid target the test fails unless the general program is ``mapping`` and the schedule's first
    line is the prologue."""
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, CUDA_GRIDS)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def mapped(kernel, mapping: str):
        exe = intent.compile(kernel, target=target)
        if target in GRID_TARGETS:
            assert exe.schedule.general.mapping == mapping, exe.schedule
            assert PROLOGUE.match(exe.schedule.lines()[0]), exe.schedule
        return exe

    return mapped


def _differ(lhs: str, a: int, rhs: str, b: int) -> str:
    """EXTENT_EQUAL's message (codegen/checks.py) for sides named ``lhs``/``rhs`` (regexes) of values a and b."""
    return rf"I\.assume_equal: the sides differ: {lhs} \(.*\) is {a}, but {rhs} \(.*\) is {b}"


def _raises_unchanged(exe, args, outputs, match):
    """The call raises the EXTENT_EQUAL ValueError and leaves every output as it was."""
    before = [o.copy() for o in outputs]
    with pytest.raises(ValueError) as e:
        exe(*args)
    assert re.fullmatch(match, str(e.value)), str(e.value)
    assert any("in op `assume_equal` at prologue_kernels.py:" in n for n in getattr(e.value, "__notes__", ())), \
        getattr(e.value, "__notes__", None)
    for o, b in zip(outputs, before):
        assert np.array_equal(o, b, equal_nan=True)


# --- softmax: a row group in the parallel spelling ------------------------------------------------------------

@pytest.mark.parametrize("m,n", [(2, 1), (4, 257), (6, 1025), (2, 8193)])  # a warp's row, a block's, longer rows
def test_softmax_after_a_statement_is_a_row_group(mapped, m, n):
    exe = mapped(softmax_after, "row_group")
    x = (RNG.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe(x, np.zeros(m // 2, np.float32), y)
    want = softmax_ref(x)
    spread = np.max(np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True)), axis=1, keepdims=True)
    assert np.all(np.abs(y - want) <= (n + 2 * spread + 10) * U32 * want)  # tests/backends/test_tilelang_cuda_rows


def test_softmax_rows_that_are_not_twice_h_raise_and_write_nothing(mapped):
    exe = mapped(softmax_after, "row_group")
    x = RNG.standard_normal((5, 33)).astype(np.float32)
    y = np.full_like(x, 7.0)
    _raises_unchanged(exe, (x, np.zeros(2, np.float32), y), [y], _differ("M", 5, r"2\*H", 4))


# --- layer norm: a row group in the tensor spelling, its weights' length stated to be the row's ---------------

@pytest.mark.parametrize("m,n", [(3, 1), (4, 300), (2, 1030)])
def test_layer_norm_with_weights_stated_row_long_is_a_row_group(mapped, m, n):
    exe = mapped(layer_norm_after, "row_group")
    x = (RNG.standard_normal((m, n)) * 2 + 3).astype(np.float32)
    w, b = RNG.standard_normal((2, n)).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe(x, w, b, y)
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    norm = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    # the bound of tests/backends/test_tilelang_cuda_rows.py's layer norm (T5 for the two row sums)
    spread = np.max(np.abs(x64), axis=1, keepdims=True) / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    bound = (4 * (n + 2) * (1 + spread) + 8) * U32 * (np.abs(norm * w) + np.abs(w)) + U32 * np.abs(b) * 2
    assert np.all(np.abs(y - layer_norm_ref(x, w, b)) <= bound)


def test_layer_norm_weights_of_another_length_raise_and_write_nothing(mapped):
    exe = mapped(layer_norm_after, "row_group")
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    y = np.full_like(x, -1.0)
    w = b = np.ones(9, np.float32)
    _raises_unchanged(exe, (x, w, b, y), [y], _differ("K", 9, "N", 8))


# --- a flat write nest --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 1023, 1025, 5000])  # empty, one, either side of a block's 1024 elements
def test_a_write_nest_after_a_statement_is_a_flat_nest(mapped, n):
    exe = mapped(scale_add_after, "flat_nest")
    x, y = RNG.standard_normal((2, n)).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    exe(x, y, out)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)  # one product and one sum, each rounded once


@pytest.mark.parametrize("n", [0, 3, 1025])
def test_a_write_nest_over_the_statements_value_is_a_flat_nest(mapped, n):
    # `d = I.domain(0, n)` with n the statement's value: its loop is the extent's, so the grid planned over it runs
    from backends.prologue_kernels import scale_add_over_value

    exe = mapped(scale_add_over_value, "flat_nest")
    x, y = RNG.standard_normal((2, n)).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    exe(x, y, out)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)
    out = np.full(4, 4.0, np.float32)
    _raises_unchanged(exe, (np.ones(4, np.float32), np.ones(3, np.float32), out), [out], _differ("H", 3, "N", 4))


def test_a_write_nest_over_inputs_of_two_lengths_raises_and_writes_nothing(mapped):
    exe = mapped(scale_add_after, "flat_nest")
    out = np.full(6, 4.0, np.float32)
    _raises_unchanged(exe, (np.ones(6, np.float32), np.ones(5, np.float32), out), [out], _differ("H", 5, "N", 6))


# --- a top-level parallel loop -----------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 2, 33, 100])  # only row 0 (no iteration), one, past a block's 32 threads
def test_a_parallel_loop_after_a_statement_is_a_parallel_grid(mapped, m):
    exe = mapped(gather_rows_after, "parallel_grid")
    x = RNG.standard_normal(50).astype(np.float32)
    idx = RNG.integers(0, 50, (m, 7)).astype(np.int32)
    w = RNG.standard_normal(m).astype(np.float32)
    y = np.full(m, 3.0, np.float32)
    exe(x, idx, w, y)
    t = x[idx[1:]].astype(np.float64)
    want = t.sum(axis=1) * w[1:]
    gamma = 8 * U32 / (1 - 8 * U32)  # 6 sums and a product (T5), the result's rounding
    bound = gamma * np.abs(t).sum(axis=1) * np.abs(w[1:]) + U32 * np.abs(want)
    assert y[0] == 3.0 and np.all(np.abs(y[1:] - want) <= bound)  # row 0 is not an iteration


def test_a_parallel_loop_with_weights_of_another_length_raises_and_writes_nothing(mapped):
    exe = mapped(gather_rows_after, "parallel_grid")
    y = np.full(4, 3.0, np.float32)
    args = (np.ones(5, np.float32), np.zeros((4, 2), np.int32), np.ones(3, np.float32), y)
    _raises_unchanged(exe, args, [y], _differ("J", 3, "M", 4))


# --- a histogram ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2049, 20000])  # empty, one, past a block's 2048 values, several blocks
def test_a_histogram_after_a_statement_is_privatised(mapped, n):
    exe = mapped(histogram_after, "privatised_histogram")
    v = RNG.integers(-20, 320, n).astype(np.int32)
    ok = RNG.random(n) < 0.8
    counts = np.full(300, -1, np.int32)
    exe(v, ok, counts)
    keep = v[ok & (v >= 0) & (v < 300)]
    np.testing.assert_array_equal(counts, np.bincount(keep, minlength=300).astype(np.int32))


def test_a_histogram_whose_mask_is_shorter_raises_and_writes_nothing(mapped):
    exe = mapped(histogram_after, "privatised_histogram")
    counts = np.full(300, 3, np.int32)
    _raises_unchanged(exe, (np.zeros(10, np.int32), np.ones(9, bool), counts), [counts], _differ("K", 9, "N", 10))


# --- a full reduction -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 257, 2049, 6001])  # empty, one, a block's threads and chunk and past
def test_a_dot_product_after_a_statement_is_a_full_reduction(mapped, n):
    exe = mapped(dot_after, "full_reduce")
    x, y = RNG.standard_normal((2, n)).astype(np.float32)
    out = np.full(1, np.nan, np.float32)
    exe(x, y, out)
    p = x.astype(np.float64) * y
    gamma = (n + 1) * U32 / (1 - (n + 1) * U32)  # n products and n - 1 sums (T5), the result's rounding
    assert abs(float(out[0]) - math.fsum(p)) <= gamma * float(np.abs(p).sum()) + U32 * abs(math.fsum(p))


def test_a_dot_product_of_two_lengths_raises_and_writes_nothing(mapped):
    exe = mapped(dot_after, "full_reduce")
    out = np.full(1, 2.5, np.float32)
    _raises_unchanged(exe, (np.ones(4, np.float32), np.ones(3, np.float32), out), [out], _differ("N", 4, "H", 3))


# --- the CUDA programs ----------------------------------------------------------------------------------------

CUDA = targets.TARGETS["tilelang-cuda"]
MAPPINGS = [(softmax_after, "row_group"), (layer_norm_after, "row_group"), (scale_add_after, "flat_nest"),
            (histogram_after, "privatised_histogram"), (dot_after, "full_reduce"),
            (gather_rows_after, "parallel_grid")]


@pytest.mark.parametrize("kernel,mapping", MAPPINGS, ids=lambda k: getattr(k, "name", k))
def test_cuda_gets_the_mapping_and_its_program_records_no_check_of_the_statement(kernel, mapping):
    graph = kernel.trace()
    schedule = schedule_of(graph, CUDA)
    assert schedule.general.mapping == mapping and PROLOGUE.match(str(schedule)), schedule
    program = lower(graph, CUDA)
    assert [n.op.name for n in program.prologue] == ["assume_equal"]
    assert not any("assume_equal" in site.message for site in program.error_sites)
    if mapping in ("row_group", "full_reduce"):  # plans that must not fail: no error record at all
        assert program.error_sites == () and ", E: T.Tensor(" not in program.text


@pytest.mark.parametrize("kernel", [layer_norm_after, dot_after], ids=lambda k: k.name)
def test_tilelang_lowers_the_programs_for_sm90(kernel):
    """A class's extents named by its first name (K as N): the lowering for sm_90a takes the program (on this
    machine: lowered, not compiled)."""
    source = cuda_source(lower(kernel.trace(), CUDA).text)
    assert "__global__" in source and "threadIdx.x" in source


def test_without_checks_there_is_no_prologue():
    """checks=False (T9): the host checks nothing; the schedule says nothing of a prologue."""
    schedule = schedule_of(softmax_after.trace(), CUDA, checks=False)
    assert schedule.general.mapping == "row_group" and schedule.prologue == () and "prologue" not in str(schedule)


# --- a check the prologue cannot make keeps the serial program --------------------------------------------------

@intent.kernel
def softmax_after_a_read(x: I.In[I.f32, ("M", "N")], m: I.In[I.i64, (1,)], y: I.Out[I.f32, ("M", "N")]):
    n = I.assume_equal(x.shape[0], I.cast(m[0], I.index))  # a side read from a view: known only in the program
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, n)):
        row = x[r, cols]
        e = I.exp(row - I.reduce.max(row, axis=0))
        y[r, cols] = e / I.reduce.sum(e, axis=0)


def test_a_statement_about_a_value_read_from_a_view_is_made_in_place(run, target):
    """Its operand is an element of a view, not an extent: no prologue; the check stays where it stands (the CUDA
    program is serial), with the same results and the same error on every target."""
    pro = schedule_of(softmax_after_a_read.trace(), CUDA)
    assert pro.prologue == () and pro.general.mapping == "serial", pro
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    y = np.zeros_like(x)
    run(softmax_after_a_read, x, np.array([3]), y)
    spread = np.max(np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True)), axis=1, keepdims=True)
    assert np.all(np.abs(y - softmax_ref(x)) <= (5 + 2 * spread + 10) * U32 * softmax_ref(x))
    y[:] = 9.0
    with pytest.raises(ValueError, match=r"the sides differ: M \(.*\) is 3, but <value> \(.*\) is 4"):
        run(softmax_after_a_read, x, np.array([4]), y)
    assert np.all(y == 9.0)


# --- a tiled matmul whose K extents are stated equal ---------------------------------------------------------

def test_a_tiled_matmul_behind_its_prologue(monkeypatch):
    # a's K and b's K are two kernel extents until the statement (made on the host first) makes them one axis: the
    # tensor-core program applies (CUDA's, lowered; emulated on the C target for the numbers)
    from backends.prologue_kernels import matmul_after

    graph = matmul_after.trace()
    assert [s.name for s in cuda_kernels.specializations(graph, targets.CUDA)] == ["matmul_epilogue"] * 2
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", attrs.evolve(
        targets.C, specializations=cuda_kernels.emulated_specializations))
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = intent.compile(matmul_after, target="tilelang-c")
    for m, k, n in ((1, 8, 8), (37, 64, 24), (130, 72, 16)):  # tails no tile divides, K and N in 16-byte rows
        sizes = {"M": m, "K": k, "J": k, "N": n}
        assert exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents}) is not None
        a = RNG.integers(-8, 8, (m, k)).astype(np.float16)  # exact products and sums: any order gives these bits
        b = RNG.integers(-8, 8, (k, n)).astype(np.float16)
        c = np.full((m, n), np.nan, np.float32)
        exe(a, b, c)
        np.testing.assert_array_equal(c, np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0))
    a, b, c = np.ones((4, 8), np.float16), np.ones((16, 8), np.float16), np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: K \(.*\) is 8, but J \(.*\) is 16"):
        exe(a, b, c)
    assert not c.any()
