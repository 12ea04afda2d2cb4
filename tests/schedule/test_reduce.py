"""The full-reduction recogniser (schedule/reduce.py): which graphs are reductions over every axis of their source,
what it records (axes, combines, fused producers, the consumers after the grid's pass), and why near misses are
refused. No GPU: the recogniser is target-neutral."""
from intent_trace.graph import ops
from intent_trace.schedule import reduce as R
from intent_trace.schedule.rows import Rejected
from schedule.reduce_kernels import (argmax_all, custom_max_i32, full_sum, full_sum_2d, mean_f64, partial_read,
                                     row_sums, sum_and_max, two_levels, weighted_norm, written_whole)


def test_a_full_sum_is_one_reduction_and_one_write():
    g = full_sum.trace()
    found = R.recognise(g)
    assert isinstance(found, R.FullReduction)
    assert found.axes == (0,) and found.combines == ("sum",) and found.fused == ()
    assert found.write is g.body.nodes[-1] and found.post == (found.write,)
    part = found.part(g)
    assert part.mapping == "full_reduce" and part.param("elements") == "N"


def test_producers_consumers_and_several_reductions():
    found = R.recognise(weighted_norm.trace())
    assert found.fused == ("mul",) and len(found.reductions) == 1
    assert {n.op for n in found.post} >= {ops.sqrt, ops.add, ops.write}
    found = R.recognise(sum_and_max.trace())
    assert found.combines == ("sum", "max") and sum(n.op is ops.write for n in found.post) == 2
    assert R.recognise(full_sum_2d.trace()).axes == (0, 1)
    assert R.recognise(argmax_all.trace()).combines == ("_argmax_combine",)
    assert R.recognise(custom_max_i32.trace()).combines == ("_max",)
    found = R.recognise(mean_f64.trace())  # x.shape[0] as f64 depends on nothing: computed where it is used
    assert any(n.op is ops.cast for n in found.pre + found.post)


def test_near_misses_say_why():
    for kernel, why in ((row_sums, "keeps axes"), (two_levels, "broadcasts a reduction"), (written_whole, "broadcasts a reduction"),
                        (partial_read, "kernel extents")):
        found = R.recognise(kernel.trace())
        assert isinstance(found, Rejected) and why in found.reason, (kernel.name, found)
