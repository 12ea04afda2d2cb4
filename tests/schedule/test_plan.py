"""The schedule record (intent_trace.schedule.plan) and the schedule a TileLang executable reports
(``exe.schedule``, ``print(exe)``): built on this machine, nothing compiled (no GPU needed)."""
import attrs
import pytest

pytest.importorskip("tilelang")
from backends.tilelang_support import affine
from intent_trace.backends.tilelang import program as tl_program
from intent_trace.backends.tilelang import targets
from intent_trace.backends.tilelang.target import build
from intent_trace.display import executable_lines
from intent_trace.schedule.plan import MAPPINGS, Part, Schedule
from schedule.row_kernels import ROW_KERNELS, column_sum, logsumexp, row_cumsum, row_sum, softmax_rows, softmax_tensor

import intent_trace as intent
from intent_trace import I


@intent.kernel
def gather_rows(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("M", "K")], y: I.Out[I.f32, ("M",)]):
    ks = I.domain(0, idx.shape[1])
    for r in I.parallel(I.domain(1, idx.shape[0])):  # from row 1: a parallel loop, not a row group
        y[r] = I.reduce.sum(I.gather(x[:], idx[r, ks]), axis=0)


@intent.kernel
def mm16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    c[:, :] = I.cast(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32), I.f16)


def test_a_part_says_its_mapping_parameters_fused_ops_and_reason():
    part = Part("row_group", "why", (("threads", 256), ("passes", 2)), ("exp",), "N % 2 == 0")
    assert part.describe() == "row_group (threads=256, passes=2); fused: exp; when N % 2 == 0: why"
    assert part.param("threads") == 256 and part.param("absent", 7) == 7
    with pytest.raises(ValueError, match="unknown mapping 'tiles'"):
        Part("tiles", "why")
    schedule = Schedule([Part("tiled_matmul", "a", when="M % 128 == 0"), Part("serial", "b")])
    assert schedule.general.mapping == "serial" and schedule.mappings() == ("tiled_matmul", "serial")
    assert str(schedule).splitlines() == schedule.lines() and len(schedule) == 2
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        schedule.parts = ()
    assert set(MAPPINGS) >= {"row_group", "flat_nest", "parallel_grid", "serial"}


@pytest.mark.parametrize("kernel", ROW_KERNELS, ids=lambda k: k.name)
def test_row_kernels_get_a_row_group_on_cuda(kernel):
    schedule = build(kernel.trace(), target="tilelang-cuda").schedule
    assert schedule.mappings() == ("row_group",)
    assert schedule.general.param("threads") == 256
    assert schedule.general.param("on_chip").startswith("a warp per row if N <= ")


def test_the_rows_held_on_chip_depend_on_the_element_dtype():
    f64 = build(logsumexp.trace(), target="tilelang-cuda").schedule.general
    assert f64.param("on_chip") == "a warp per row if N <= 512, a block per row if N <= 4096"
    assert f64.param("passes") == 2


def test_both_softmax_spellings_get_the_same_cuda_schedule():
    a = build(softmax_rows.trace(), target="tilelang-cuda").schedule
    b = build(softmax_tensor.trace(), target="tilelang-cuda").schedule
    assert a == b


def test_other_graphs_keep_their_mapping_and_say_why():
    def general(k):
        return build(k.trace(), target="tilelang-cuda").schedule.general

    assert general(affine).mapping == "flat_nest" and general(affine).param("per_thread") == 8
    grid = general(gather_rows)
    assert grid.mapping == "parallel_grid" and grid.param("iterations") == "T.max(M - T.int64(1), T.int64(0))"
    serial = general(row_cumsum)
    assert serial.mapping == "serial" and "a scan is ordered" in serial.reason and "workspace" in serial.reason
    column = general(column_sum)  # one column per thread (flat_nest), not a row group
    assert column.mapping == "flat_nest"


def test_specialisations_are_parts_that_say_when_they_run():
    schedule = build(mm16.trace(), target="tilelang-cuda").schedule
    # the 128x256 tiles where their grid fills the GPU, the 128x128 tiles for the other calls (tried in order)
    assert list(schedule.mappings()[:2]) == ["tiled_matmul", "tiled_matmul"]
    wide, small = schedule.parts[:2]
    assert wide.when == "M > 0, N % 8 == 0, K % 8 == 0, ceil(M / 128) * ceil(N / 256) >= 128 blocks"
    assert small.when == "M > 0, N % 8 == 0, K % 8 == 0"
    assert "tile=128x256" in wide.describe() and "tile=128x128" in small.describe()
    assert schedule.general.mapping == "flat_nest"


def test_a_target_without_planners_says_so():
    (part,) = build(row_sum.trace(), target="tilelang-c").schedule
    assert part.mapping == "serial" and "plans no grids of threads" in part.reason


def test_print_shows_each_part_mapping_and_reason():
    exe = build(softmax_tensor.trace(), target="tilelang-cuda")
    lines = executable_lines(exe)
    (line,) = [x for x in lines if x.startswith("  schedule: general program: ")]
    assert line.endswith(exe.schedule.general.describe())
    assert ("row_group (grid=M, threads=256, passes=3, on_chip=a warp per row if N <= 1024, a block per row if "
            "N <= 8192, nan=a NaN fast path: a row with a NaN output computed again by the careful program, "
            "resident=4 blocks an SM)") in line  # passes: a row too long to hold on chip
    mm = executable_lines(build(mm16.trace(), target="tilelang-cuda"))
    assert any(x.startswith("  schedule: part 1: tiled_matmul") for x in mm)


@pytest.mark.parametrize("kernel", [affine, gather_rows, row_cumsum, column_sum, mm16],
                         ids=lambda k: k.name)
def test_graphs_that_are_not_row_groups_keep_their_program_text(kernel):
    """The row-group planner changes nothing for a graph it does not take: the CUDA program is the one the target
    wrote without it, byte for byte."""
    g = kernel.trace()
    without = attrs.evolve(targets.CUDA, row_group=None)
    assert tl_program.lower(g, targets.CUDA).text == tl_program.lower(g, without).text
