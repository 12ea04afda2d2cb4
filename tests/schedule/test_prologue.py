"""The prologue (intent_trace.schedule.prologue): which checks a call can make before any launch, the nodes they are
computed from, and the extents they make one; and how the schedule record and the TileLang executable report and
make them. Built on this machine from traced graphs; the kernels' numbers are tests/backends/test_prologue.py's."""
import re

import numpy as np
import pytest

import intent_trace as intent
from backends.prologue_kernels import dot_after, layer_norm_after, softmax_after
from intent_trace import I
from intent_trace.arguments import bind_arguments
from intent_trace.schedule.plan import Part, Schedule
from intent_trace.schedule.prologue import extent_index, extent_vars, prologue

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang import targets  # noqa: E402
from intent_trace.backends.tilelang.executable import check_prologue  # noqa: E402
from intent_trace.backends.tilelang.program import schedule_of  # noqa: E402


@intent.kernel
def from_scalars(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("M",)], out: I.Out[I.f32, ("N",)], k: I.i64):
    """Sides computed from extents and an integer scalar by index arithmetic."""
    I.assume_equal(x.shape[0], (y.shape[0] + I.cast(k, I.index)) // 2)
    out[:] = x[:] + 1.0


@intent.kernel
def from_a_view(x: I.In[I.f32, ("N",)], m: I.In[I.i64, (1,)], out: I.Out[I.f32, ("N",)]):
    """A side read from a view's element: known only in the program."""
    I.assume_equal(x.shape[0], I.cast(m[0], I.index))
    out[:] = x[:] + 1.0


def test_a_statement_of_extents_and_its_index_arithmetic_are_the_prologue():
    graph = from_scalars.trace()
    pro = prologue(graph)
    assert pro and pro.complete
    (check,) = pro.checks
    assert "check" in check.op.effects and pro.nodes[-1] is check
    # the cast of k, the sum and the division are what the check is computed from; the write's nodes are not
    assert [n.op.name for n in pro.nodes] == ["cast", "add", "floordiv", "assume_equal"]
    assert all(n in pro for n in pro.nodes) and not any(n in pro for n in graph.body.nodes[len(pro.nodes):])
    assert re.fullmatch(r"assume_equal at test_prologue\.py:\d+", pro.describe()[0])


def test_a_statement_about_a_view_element_is_not_the_prologue():
    pro = prologue(from_a_view.trace())
    assert not pro and pro.checks == () and not pro.complete  # the graph has a check the prologue does not make


@intent.kernel
def after_a_histogram(v: I.In[I.i64, ("N",)], counts: I.Out[I.i64, ("B",)], nbins: I.i32):
    h = I.histogram(v[:], bins=nbins, count_dtype=I.i64)  # fails when nbins <= 0
    I.assume_equal(counts.shape[0], I.cast(nbins, I.index))
    counts[:] = h


@intent.kernel
def after_reads(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.Out[I.f32, ("N",)]):
    a, d = x[:], I.domain(0, x.shape[0])  # a whole-axis read and a unit domain cannot fail
    I.assume_equal(y.shape[0], x.shape[0])
    out[d] = a + y[:]


def test_a_statement_after_work_that_may_fail_stays_where_it_stands():
    """Made first, it would be reported instead of the histogram's bin count error that precedes it (the body's
    order, generic's); after reads and domains that cannot fail it is made first."""
    pro = prologue(after_a_histogram.trace())
    assert not pro and not pro.complete
    schedule = schedule_of(after_a_histogram.trace(), targets.TARGETS["tilelang-cuda"])
    assert schedule.prologue == () and schedule.general.mapping == "serial"
    pro = prologue(after_reads.trace())
    assert pro and pro.complete and [n.op.name for n in pro.nodes] == ["assume_equal"]


def test_the_body_order_of_errors_on_every_target(target):
    """nbins = 0 fails the histogram and the statement; the histogram's error, the first in the body, on every
    target; nbins = 5 fails the statement only."""
    exe = intent.compile(after_a_histogram, target=target)
    counts = np.full(4, 6, np.int64)
    with pytest.raises(ValueError, match=r"bins \(nbins\) is 0; the number of bins must be positive"):
        exe(np.zeros(2, np.int64), counts, 0)
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: B .* is 4, but nbins .* is 5"):
        exe(np.zeros(2, np.int64), counts, 5)
    np.testing.assert_array_equal(counts, 6)


@intent.kernel
def _plain(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    out[:] = x[:] * 2.0


def test_a_graph_without_statements_has_an_empty_complete_prologue():
    empty = prologue(_plain.trace())
    assert not empty and empty.complete and empty.nodes == () and empty.describe() == ()


def test_extents_stated_equal_share_the_index_of_their_class_first_extent():
    graph = layer_norm_after.trace()  # extents M, N, K; K stated equal to N
    names = [ev.extent.name for ev in graph.extents]
    index = extent_index(graph)
    by_name = {ev.extent.name: index[ev.extent] for ev in graph.extents}
    assert by_name["K"] == by_name["N"] == min(names.index("N"), names.index("K")) and by_name["M"] == names.index("M")
    assert set(extent_vars(graph).values()) == {names.index("M"), by_name["N"]}
    # unstated extents keep their own indices; a prologue value equal to an extent covers it
    plain = _plain.trace()
    assert extent_index(plain) == {ev.extent: k for k, ev in enumerate(plain.extents)}
    soft = softmax_after.trace()
    (n,) = prologue(soft).checks[0].outputs
    assert extent_vars(soft)[n] == [ev.extent.name for ev in soft.extents].index("M")


def test_extents_stated_in_a_check_made_in_place_stay_apart():
    graph = from_a_view.trace()
    assert extent_index(graph, False) == {ev.extent: k for k, ev in enumerate(graph.extents)}
    assert extent_index(graph) == extent_index(graph, False)  # not complete: nothing is united


def test_the_schedule_names_the_prologue_first_and_no_part_holds_it():
    schedule = Schedule([Part("serial", "why")], ("assume_equal at k.py:3",))
    assert schedule.lines()[0] == ("prologue: assume_equal at k.py:3: checked before any launch (their operands are "
                                   "extents and scalars, known once the arguments are bound)")
    assert schedule.lines()[1:] == [Part("serial", "why").describe()] and Schedule([]).prologue_line() is None
    # a serial program's part leaves the checks the host makes out of its nodes
    graph = from_scalars.trace()
    (check,) = prologue(graph).checks
    serial = schedule_of(graph, targets.TARGETS["tilelang-c"])
    assert serial.general.mapping == "serial" and check not in serial.general.nodes
    assert serial.prologue == prologue(graph).describe()
    full = schedule_of(dot_after.trace(), targets.TARGETS["tilelang-cuda"])
    assert full.general.mapping == "full_reduce" and str(full).startswith("prologue: assume_equal at ")


def test_the_host_makes_the_checks_with_the_reference_rules():
    """check_prologue evaluates the check's arithmetic (floor division of index values) on the bound arguments."""
    graph = from_scalars.trace()
    x, out = np.zeros(3, np.float32), np.zeros(3, np.float32)
    for m, k, ok in ((4, 2, True), (5, 2, True), (4, 4, False), (0, 7, True), (0, 8, False), (9, -3, True)):
        values, dims = bind_arguments(graph, (x, np.zeros(m, np.float32), out, k), target="tilelang-c")
        if ok:
            check_prologue(graph, values, dims)
        else:
            with pytest.raises(ValueError, match=rf"the sides differ: N \(.*\) is 3, but .* is {(m + k) // 2}"):
                check_prologue(graph, values, dims)


def test_the_executable_checks_before_anything_runs(target):
    """On every target: the statement's arithmetic as the language defines it, and nothing written on failure."""
    exe = intent.compile(from_scalars, target=target)
    x = np.arange(3, dtype=np.float32)
    out = np.full(3, -2.0, np.float32)
    exe(x, np.zeros(4, np.float32), out, 3)  # (4 + 3) // 2 == 3
    np.testing.assert_array_equal(out, x + 1)
    out[:] = -2.0
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: N \(.*\) is 3, but .* is 4"):
        exe(x, np.zeros(4, np.float32), out, 4)
    np.testing.assert_array_equal(out, -2.0)
