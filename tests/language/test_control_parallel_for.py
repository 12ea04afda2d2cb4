"""Language §5-6: parallel iteration (I.parallel) and effect-only ordered for loops, with break_/continue_."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I


# --- parallel ------------------------------------------------------------------------------------------

def test_parallel_runs_every_point_once(run):
    @intent.kernel
    def k(y: I.InOut[I.i32, ("N",)]):
        for i in I.parallel(I.domain(0, y.shape[0])):
            y[i] = y[i] + 1

    y = np.array([5, 0, -3], np.int32)
    run(k, y)
    np.testing.assert_array_equal(y, [6, 1, -2])


def test_parallel_row_body(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", 3)], y: I.Out[I.f32, ("M",)]):
        for row in I.parallel(I.domain(0, x.shape[0])):
            y[row] = x[row, 0] * 100.0 + x[row, 1] * 10.0 + x[row, 2]

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.zeros(4, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x[:, 0] * 100 + x[:, 1] * 10 + x[:, 2])
    g = k.trace()
    (par,) = _nodes(g, "parallel")
    assert {n.op.name for n in par.regions[0].nodes} >= {"read", "write"}


def test_parallel_over_subregion_writes_only_its_members(run):
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.InOut[I.i32, ("N",)]):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d[1:3]):
            y[i] = x[i] * 2

    x = np.array([1, 2, 3, 4], np.int32)
    y = np.zeros(4, np.int32)
    run(k, x, y)
    np.testing.assert_array_equal(y, [0, 4, 6, 0])


def test_parallel_provable_write_conflict_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d):
            y[0] = x[i]

    with pytest.raises(intent.TraceError, match=r"\by\b") as e:
        k.trace()
    assert "same elements" in str(e.value)


def test_parallel_whole_domain_write_in_every_point_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        for _ in I.parallel(d):
            y[d] = x[d]

    with pytest.raises(intent.TraceError, match=r"\by\b"):
        k.trace()


@intent.kernel
def _scatter_points(idx: I.In[I.i32, ("N",)], x: I.In[I.f32, ("N",)], dest: I.InOut[I.f32, ("M",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        dest[idx[i]] = x[i]


def test_parallel_data_dependent_writes_without_conflict(run):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    dest = np.zeros(4, np.float32)
    run(_scatter_points, np.array([2, 0, 3], np.int32), x, dest)  # a permutation: no conflict
    np.testing.assert_array_equal(dest, [2.0, 0.0, 1.0, 3.0])


def test_parallel_data_dependent_write_conflict_is_a_runtime_error_naming_the_view():
    # T9: the tracer cannot prove this conflict; generic (the semantic authority) checks it at run time.
    x = np.array([1.0, 2.0, 3.0], np.float32)
    dest = np.zeros(4, np.float32)
    with pytest.raises(RuntimeError, match="dest"):
        intent.compile(_scatter_points, target="generic")(np.array([2, 0, 2], np.int32), x, dest)
    np.testing.assert_array_equal(dest, 0)


def test_parallel_has_no_loop_carried_values():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        total = x[0]
        for i in I.parallel(d):
            total = total + x[i]
        y[d] = x[d] + total

    with pytest.raises(intent.TraceError, match="I.loop") as e:
        k.trace()
    assert "parallel" in str(e.value)


def test_parallel_break_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            I.break_(when=x[i] > 0.0)
            y[i] = x[i]

    with pytest.raises(intent.TraceError, match="parallel"):
        k.trace()


# --- effect-only ordered for ---------------------------------------------------------------------------

def test_for_runs_in_logical_order(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[0] = x[0]
        for i in d[1:]:
            y[i] = y[i - 1] + x[i]  # reads what the previous iteration wrote

    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    y = np.zeros(4, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.cumsum(x))


def test_for_value_escaping_body_is_a_trace_error_pointing_to_loop():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        total = x[0]
        for i in d:
            total = total + x[i]
        y[d] = x[d] * total

    with pytest.raises(intent.TraceError, match=r"I\.loop") as e:
        k.trace()
    assert isinstance(e.value, ValueError)
    assert "for" in str(e.value)


def test_for_python_break_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            y[i] = x[i]
            break

    with pytest.raises(intent.TraceError, match="break") as e:
        k.trace()
    assert "I.break_" in str(e.value)


def test_for_python_break_inside_loop_body_function_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])

        def body(i, c):
            for j in d:
                y[j] = c
                break
            return c + x[i]

        I.loop(d, x[0], body)

    with pytest.raises(intent.TraceError, match="I.break_"):
        k.trace()


def test_for_python_return_inside_body_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            y[i] = x[i]
            return

    with pytest.raises(intent.TraceError, match="return"):
        k.trace()


def test_for_break_stops_and_continue_skips(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            I.break_(when=x[i] < 0.0)
            I.continue_(when=x[i] == 0.0)
            y[i] = x[i] * 10.0

    x = np.array([1.0, 0.0, 2.0, -1.0, 3.0], np.float32)
    y = np.full(5, 7.0, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, [10.0, 7.0, 20.0, 7.0, 7.0])


def test_for_break_with_carry_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            I.break_(when=x[i] < 0.0, carry=x[i])
            y[i] = x[i]

    with pytest.raises(intent.TraceError, match=r"I\.loop"):
        k.trace()
