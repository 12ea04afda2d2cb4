"""Language §9.1/§9.2: summarize and emit must not observe how the compiler cut the source.

Reading the slice extent as a value (``I.cast(s.shape[0], I.f32)``) or the slice-relative coordinates of a
domain over it (``I.indices(I.domain(0, s.shape[0]))``) makes the result depend on the cut, so targets that
cut differently disagree. Both are TraceErrors naming the helper and the user's line; sizing tensors with
the extent (``I.reshape(v, (s.shape[0], 1))``) stays legal, as do the examples' helpers.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from tests.example_modules import example


def _line(marker: str) -> str:
    """``test_region_cut.py:<line>`` of the line of this file that carries ``marker``."""
    lines = inspect.getsource(inspect.getmodule(_line)).splitlines()
    (number,) = [k + 1 for k, text in enumerate(lines) if text.rstrip().endswith(marker)]
    return f"test_region_cut.py:{number}"


def _fold(summarize, combine=lambda a, b: a + b, identity=None):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        d = I.domain(0, x.shape[0])
        y[0] = I.region_fold(source=x[d], axis=0, summarize=summarize, combine=combine,
                             identity=I.cast(0.0, I.f32) if identity is None else identity())

    return k


def _expect_rejected(kernel, helper: str, what: str, marker: str):
    with pytest.raises(intent.TraceError) as info:
        kernel.trace()
    message = str(info.value)
    assert f"helper `{helper}`" in message and what in message and "§9.1" in message
    assert message.startswith(_line(marker)), message


def test_summarize_reading_the_slice_extent_is_rejected():
    @intent.fn
    def count_by_extent(s):
        return I.cast(s.shape[0], I.f32)  # probe: extent

    _expect_rejected(_fold(count_by_extent), "count_by_extent", "the slice extent", "# probe: extent")


def test_summarize_reading_slice_relative_coordinates_is_rejected():
    @intent.fn
    def relative_positions(s):
        pos = I.indices(I.domain(0, s.shape[0]))  # probe: coords
        return I.reduce.sum(s * I.cast(pos, I.f32), axis=0)

    _expect_rejected(_fold(relative_positions), "relative_positions", "slice-relative coordinates",
                     "# probe: coords")


def test_extent_reaching_the_summary_through_arithmetic_and_control_is_rejected():
    @intent.fn
    def through_a_loop(s):
        n = s.shape[0]  # probe: loop extent

        def body(i, acc):
            return acc + I.cast(i, I.f32)

        return I.loop(I.domain(0, n), I.cast(0.0, I.f32), body) + I.reduce.sum(s, axis=0)  # probe: loop

    _expect_rejected(_fold(through_a_loop), "through_a_loop", "slice-relative coordinates", "# probe: loop")
    with pytest.raises(intent.TraceError, match=f"the extent is read at {_line('# probe: loop extent')}"):
        _fold(through_a_loop).trace()

    @intent.fn
    def through_a_branch(s):
        half = s.shape[0] // 2  # probe: branch
        return I.if_(half > 0, lambda: I.reduce.sum(s, axis=0), lambda: I.cast(0.0, I.f32))

    _expect_rejected(_fold(through_a_branch), "through_a_branch", "the slice extent", "# probe: branch")


def test_arg_reduce_position_is_slice_relative_but_its_value_is_not():
    @intent.fn
    def argmax_position(s):
        return I.arg_reduce.max(s, axis=0)[1]  # probe: argmax

    _expect_rejected(_fold(argmax_position, combine=lambda a, b: I.maximum(a, b), identity=lambda: I.cast(-1, I.index)),
                     "argmax_position", "slice-relative coordinates", "# probe: argmax")

    @intent.fn
    def argmax_value(s):
        return I.arg_reduce.max(s, axis=0)[0]

    names = [n.op.name for n in _fold(argmax_value, combine=lambda a, b: I.maximum(a, b)).trace().walk()]
    assert "region_fold" in names


def test_emit_reading_slice_relative_coordinates_is_rejected():
    @intent.fn
    def emit_positions(s, state):
        return s + I.cast(I.indices(I.domain(0, s.shape[0])), I.f32) + state  # probe: emit

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        outs, _ = I.region_scan(source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                                combine=lambda a, b: a + b, identity=I.cast(0.0, I.f32),
                                initial_state=I.cast(0.0, I.f32), apply=lambda t, st: st + t, emit=emit_positions)
        y[d] = outs

    _expect_rejected(k, "emit_positions", "slice-relative coordinates", "# probe: emit")


def test_region_scan_summarize_reading_the_extent_is_rejected():
    @intent.fn
    def transition(s):
        return I.reduce.sum(s, axis=0) * I.cast(s.shape[0], I.f32)  # probe: scan summarize

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        outs, _ = I.region_scan(source=x[d], axis=0, summarize=transition, combine=lambda a, b: a + b,
                                identity=I.cast(0.0, I.f32), initial_state=I.cast(0.0, I.f32),
                                apply=lambda t, st: st + t, emit=lambda s, st: I.cumsum(s, axis=0) + st)
        y[d] = outs

    _expect_rejected(k, "transition", "the slice extent", "# probe: scan summarize")


@intent.fn
def _row_sums(s):
    """The extent sizes tensors only: (n,) -> (n, 1) -> (n,), and n ones summed: legal (§9.1)."""
    column = I.reshape(s, (s.shape[0], 1))
    ones = I.full((s.shape[0],), 1.0, I.f32)
    return I.reduce.sum(I.reshape(column, (s.shape[0],)), axis=0), I.reduce.sum(ones, axis=0)


@intent.kernel
def _sum_and_count(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (2,)]):
    d = I.domain(0, x.shape[0])
    total, count = I.region_fold(source=x[d], axis=0, summarize=_row_sums,
                                 combine=lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                 identity=(I.cast(0.0, I.f32), I.cast(0.0, I.f32)))
    y[0] = total
    y[1] = count


@pytest.mark.parametrize("n", [1, 5, 300])
def test_the_extent_used_only_as_a_shape_traces_and_runs(run, n):
    x = np.arange(n, dtype=np.float32) % 7
    y = np.zeros(2, np.float32)
    run(_sum_and_count, x, y)
    np.testing.assert_array_equal(y, [np.sum(x, dtype=np.float64), n])  # small integers: exact in f32


def test_the_examples_summarize_and_emit_helpers_still_trace():
    for name, kernels in (("flash_attention", ("attention", "attention_f16")),
                          ("causal_linear_attention", ("linear_attention",))):
        module = example(name)
        for kernel in kernels:
            names = [n.op.name for n in getattr(module, kernel).trace().walk()]
            assert "region_fold" in names or "region_scan" in names
