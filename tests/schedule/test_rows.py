"""The row-group recogniser (intent_trace.schedule.rows): which graphs are row groups, what their plan says, that
both spellings of a row kernel get one plan, and why each near miss is refused. Traced graphs only: no target."""
import attrs
import pytest

from intent_trace.schedule import rows
from intent_trace.schedule.plan import Part
from schedule.row_kernels import (NEAR_MISSES, ROW_KERNELS, layer_norm, logsumexp, rms_norm, rms_norm_f16, row_argmax,
                                  row_argmax_rows, row_max_min, row_sum, row_sum_i32, softmax_rows, softmax_tensor)

#: kernel -> (form, combines, levels, row_write, fused pointwise ops)
EXPECTED = {
    softmax_rows: ("parallel", ("max", "sum"), (1, 2), True, ("div", "exp", "sub")),
    softmax_tensor: ("tensor", ("max", "sum"), (1, 2), True, ("div", "exp", "sub")),
    layer_norm: ("parallel", ("sum", "sum"), (1, 2), True, ("add", "cast", "div", "mul", "sqrt", "sub")),
    rms_norm: ("tensor", ("sum",), (1,), True, ("add", "cast", "div", "mul", "sqrt")),
    logsumexp: ("tensor", ("max", "sum"), (1, 2), False, ("add", "exp", "log", "sub")),
    row_sum: ("tensor", ("sum",), (1,), False, ()),
    row_sum_i32: ("tensor", ("sum",), (1,), False, ("cast",)),
    row_argmax: ("tensor", ("_argmax_combine",), (1,), False, ()),
    row_argmax_rows: ("parallel", ("_argmax_combine",), (1,), False, ()),
    row_max_min: ("tensor", ("<lambda>", "max"), (1, 1), True, ("div", "sub")),
    rms_norm_f16: ("tensor", ("sum",), (1,), True, ("add", "cast", "div", "mul", "sqrt")),
}


@pytest.mark.parametrize("kernel", ROW_KERNELS, ids=lambda k: k.name)
def test_row_kernels_are_row_groups(kernel):
    group = rows.recognise(kernel.trace())
    assert isinstance(group, rows.RowGroup), group
    assert (group.rows, group.cols) == (0, 1)  # extents M, N
    if kernel in EXPECTED:
        form, combines, levels, row_write, fused = EXPECTED[kernel]
        assert (group.form, group.combines, group.levels, group.row_write, group.fused) == \
            (form, combines, levels, row_write, fused)
        assert group.passes == len(combines) + row_write  # one read of the row per reduction, one for the write
        assert (group.loop is None) == (form == "tensor")


def test_the_reductions_and_the_write_are_the_graphs_own_nodes():
    g = softmax_tensor.trace()
    group = rows.recognise(g)
    assert group.write is g.body.nodes[-1]
    assert [n for n in g.body.nodes if n in group.reductions] == list(group.reductions)
    assert len(group.reshapes) == 2 and all(n in g.body.nodes for n in group.reshapes)


def test_both_softmax_spellings_get_the_same_plan():
    a, b = softmax_rows.trace(), softmax_tensor.trace()
    pa, pb = rows.recognise(a).part(a), rows.recognise(b).part(b)
    assert pa == pb and pa.describe() == pb.describe()
    assert pa.mapping == "row_group" and pa.param("threads") == rows.THREADS and pa.param("passes") == 3
    assert pa.param("grid") == "M" and pa.fused == ("div", "exp", "sub")
    assert pa.nodes != pb.nodes  # equal plans of different graphs (nodes are not compared)


def test_row_groups_of_one_pass_and_of_two_levels_differ():
    one, two = rows.recognise(row_max_min.trace()), rows.recognise(softmax_tensor.trace())
    assert one.levels == (1, 1) and two.levels == (1, 2)  # min and max read only x; softmax's sum reads its max


@pytest.mark.parametrize("kernel,phrase", NEAR_MISSES, ids=lambda v: getattr(v, "name", "reason"))
def test_near_misses_are_refused_with_their_reason(kernel, phrase):
    refused = rows.recognise(kernel.trace())
    assert isinstance(refused, rows.Rejected), refused
    assert phrase in refused.reason


def test_a_refusal_names_the_users_line():
    from schedule.row_kernels import column_sum

    assert "row_kernels.py:" in rows.recognise(column_sum.trace()).reason


def test_plans_are_frozen_slotted_records():
    group = rows.recognise(row_sum.trace())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        group.rows = 1
    assert not hasattr(group, "__dict__") and not hasattr(rows.Rejected("x"), "__dict__")
    part = group.part(row_sum.trace())
    assert isinstance(part, Part) and not hasattr(part, "__dict__")
