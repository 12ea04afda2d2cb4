"""Language §5-6: ordered loops with carried values, I.loop and I.while_: carries (scalar, tensor, tuple,
record), carry schema errors, break_/continue_ in carried loops."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I


# --- I.loop ---------------------------------------------------------------------------------------------------

def test_loop_scalar_carry(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        total = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), lambda i, acc: acc * 0.5 + x[i])
        y[0] = total

    x = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    y = np.zeros(1, np.float32)
    run(k, x, y)
    want = np.float32(0.0)
    for v in x:
        want = want * np.float32(0.5) + v
    np.testing.assert_array_equal(y, [want])


def test_loop_tensor_carry(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
        cols = I.domain(0, x.shape[1])
        init = I.zeros((x.shape[1],), I.f32)
        y[cols] = I.loop(I.domain(0, x.shape[0]), init, lambda r, acc: I.maximum(acc, x[r, cols]))

    x = np.array([[1.0, -5.0, 2.0], [0.0, 3.0, 9.0]], np.float32)
    y = np.zeros(3, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.maximum(0, x.max(axis=0)))


def test_loop_tuple_carry(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (2,)], c: I.Out[I.i32, (1,)]):
        def body(i, carry):
            lo, hi, count = carry
            return I.minimum(lo, x[i]), I.maximum(hi, x[i]), count + 1

        lo, hi, count = I.loop(I.domain(0, x.shape[0]), (x[0], x[0], I.cast(0, I.i32)), body)
        y[0] = lo
        y[1] = hi
        c[0] = count

    x = np.array([3.0, -1.0, 7.0, 2.0], np.float32)
    y, c = np.zeros(2, np.float32), np.zeros(1, np.int32)
    run(k, x, y, c)
    np.testing.assert_array_equal(y, [-1.0, 7.0])
    np.testing.assert_array_equal(c, [4])


def test_loop_carry_permutation_swaps_simultaneously(run):
    """Rotated carries: each new leaf reads the old ones, never one already updated."""
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, (3,)]):
        a, b, c = I.loop(I.domain(0, x.shape[0]), (x[0], x[1], x[2]), lambda i, t: (t[2], t[0], t[0] + t[1]))
        y[0] = a
        y[1] = b
        y[2] = c

    x = np.array([1, 2, 3, 0, 0], np.int32)
    state = [1, 2, 3]
    for _ in range(5):
        state = [state[2], state[0], state[0] + state[1]]
    y = np.zeros(3, np.int32)
    run(k, x, y)
    np.testing.assert_array_equal(y, state)


def test_loop_record_carry(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (2,)]):
        def body(i, s):
            m = I.maximum(s.max, x[i])
            return I.record(max=m, sum=s.sum * I.exp(s.max - m) + I.exp(x[i] - m))

        init = I.record(max=I.cast(float("-inf"), I.f32), sum=I.cast(0.0, I.f32))
        out = I.loop(I.domain(0, x.shape[0]), init, body)
        y[0] = out.max
        y[1] = out.sum

    x = np.array([0.5, 2.0, -1.0], np.float32)
    y = np.zeros(2, np.float32)
    run(k, x, y)
    assert y[0] == 2.0
    np.testing.assert_allclose(y[1], np.exp(x.astype(np.float64) - 2.0).sum(), rtol=1e-6)


def test_loop_over_empty_domain_returns_init(run):
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, (1,)], n: I.index):
        y[0] = I.loop(I.domain(0, n), I.cast(42, I.i32), lambda i, acc: acc + x[i])

    y = np.zeros(1, np.int32)
    run(k, np.array([1, 2], np.int32), y, 0)
    np.testing.assert_array_equal(y, [42])


def test_loop_carry_dtype_change_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), lambda i, acc: I.cast(acc, I.f64))

    with pytest.raises(intent.TraceError, match="f32 became f64") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


def test_loop_carry_rank_change_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N", 3)], y: I.Out[I.f32, (3,)]):
        init = I.zeros((3,), I.f32)
        y[:] = I.loop(I.domain(0, x.shape[0]), init, lambda r, acc: I.reshape(acc + x[r, :], (1, 3)))

    with pytest.raises(intent.TraceError, match="rank 1 became rank 2"):
        k.trace()


def test_loop_carry_widened_by_broadcast_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
        cols = I.domain(0, x.shape[1])
        total = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), lambda r, acc: acc + x[r, cols])
        y[cols] = total

    with pytest.raises(intent.TraceError, match="never widens") as e:
        k.trace()
    assert "I.full" in str(e.value)


def test_loop_carry_dynamic_extent_change_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("M",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
        dm, dn = I.domain(0, x.shape[0]), I.domain(0, z.shape[0])
        y[dm] = I.loop(I.domain(0, 2), x[dm], lambda i, acc: z[dn])

    with pytest.raises(intent.TraceError, match="provably"):
        k.trace()


def test_loop_tuple_carry_component_change_is_a_trace_error_naming_the_component():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        t = I.loop(I.domain(0, x.shape[0]), (x[0], I.cast(0, I.i32)), lambda i, c: (c[0], I.cast(c[1], I.i64)))
        y[0] = t[0]

    with pytest.raises(intent.TraceError, match=r"\[1\]"):
        k.trace()


def test_loop_record_carry_field_change_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        init = I.record(a=x[0], b=x[0])
        r = I.loop(I.domain(0, x.shape[0]), init, lambda i, c: I.record(b=c.b, a=c.a))
        y[0] = r.a

    with pytest.raises(intent.TraceError, match="record fields"):
        k.trace()


def test_loop_body_returning_nothing_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        y[0] = I.loop(I.domain(0, x.shape[0]), x[0], lambda i, c: None)

    with pytest.raises(intent.TraceError, match="new carry"):
        k.trace()


def test_loop_value_escaping_body_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        leaked = []

        def body(i, c):
            leaked.append(x[i] * 2.0)
            return c

        I.loop(I.domain(0, x.shape[0]), x[0], body)
        y[0] = leaked[0]

    with pytest.raises(intent.TraceError, match="I.loop"):
        k.trace()


# --- break_ / continue_ in carried loops -------------------------------------------------------------------------

def test_loop_break_default_carry_is_the_iteration_start(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)], seen: I.InOut[I.i32, ("N",)]):
        def body(i, acc):
            I.break_(when=x[i] < 0.0)
            seen[i] = 1
            return acc + x[i]

        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), body)

    x = np.array([1.0, 2.0, -5.0, 4.0], np.float32)
    y, seen = np.zeros(1, np.float32), np.zeros(4, np.int32)
    run(k, x, y, seen)
    np.testing.assert_array_equal(y, [3.0])  # carry at the start of the breaking iteration
    np.testing.assert_array_equal(seen, [1, 1, 0, 0])  # the rest of that iteration did not run


def test_loop_break_with_carry_gives_the_loop_result(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        def body(i, acc):
            I.break_(when=x[i] < 0.0, carry=acc * 100.0)
            return acc + x[i]

        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), body)

    y = np.zeros(1, np.float32)
    run(k, np.array([1.0, 2.0, -5.0, 4.0], np.float32), y)
    np.testing.assert_array_equal(y, [300.0])
    run(k, np.array([1.0, 2.0, 5.0], np.float32), y)  # no break: the normal final carry
    np.testing.assert_array_equal(y, [8.0])


def test_loop_continue_default_carry_skips_the_update(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        def body(i, acc):
            I.continue_(when=x[i] < 0.0)
            return acc + x[i]

        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), body)

    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0], np.float32)
    y = np.zeros(1, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, [x[x >= 0].sum()])


def test_loop_continue_with_carry_starts_the_next_iteration(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        def body(i, acc):
            I.continue_(when=x[i] < 0.0, carry=acc * 2.0)  # a negative element doubles the sum so far
            return acc + x[i]

        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), body)

    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0], np.float32)
    y = np.zeros(1, np.float32)
    run(k, x, y)
    want = 0.0
    for v in x:
        want = want * 2 if v < 0 else want + v
    np.testing.assert_array_equal(y, [want])


def test_loop_break_with_tuple_carry(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)], pos: I.Out[I.index, (1,)]):
        def body(i, c):
            total, where = c
            I.break_(when=total + x[i] > 5.0, carry=(total, i))
            return total + x[i], where

        total, where = I.loop(I.domain(0, x.shape[0]), (I.cast(0.0, I.f32), I.cast(-1, I.index)), body)
        y[0] = total
        pos[0] = where

    x = np.array([1.0, 2.0, 2.5, 4.0], np.float32)
    y, pos = np.zeros(1, np.float32), np.zeros(1, np.int64)
    run(k, x, y, pos)
    np.testing.assert_array_equal(y, [3.0])
    np.testing.assert_array_equal(pos, [2])


def test_loop_break_carry_schema_mismatch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        def body(i, acc):
            I.break_(when=x[i] < 0.0, carry=I.cast(acc, I.f64))
            return acc + x[i]

        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), body)

    with pytest.raises(intent.TraceError, match="f32 became f64"):
        k.trace()


def test_break_with_python_bool_when():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], STOP: I.Constexpr[bool] = False):
        for i in I.domain(0, x.shape[0]):
            I.break_(when=STOP)
            y[i] = x[i]

    assert not _nodes(k.trace(), "break")
    assert len(_nodes(k.trace(STOP=True), "break")) == 1


def test_break_with_tensor_predicate_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        for i in d:
            I.break_(when=x[d] > 0.0)
            y[i] = x[i]

    with pytest.raises(intent.TraceError, match=r"I\.select"):
        k.trace()


def test_break_outside_loop_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        I.break_(when=x[0] > 0.0)
        y[d] = x[d]

    with pytest.raises(intent.TraceError, match="outside an ordered loop"):
        k.trace()


def test_continue_inside_if_branch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            I.if_(x[i] > 0.0, lambda: I.continue_())
            y[i] = x[i]

    with pytest.raises(intent.TraceError, match=r"I\.continue\(when=pred\)|directly in the loop body"):
        k.trace()


# --- I.while_ ----------------------------------------------------------------------------------------------------

def test_while_runs_until_condition_fails(run):
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, (2,)]):
        def cond(c):
            i, total = c
            return (i < x.shape[0]) & (total < 10)

        def body(c):
            i, total = c
            return i + 1, total + x[i]

        i, total = I.while_(cond, body, (I.cast(0, I.index), I.cast(0, I.i32)))
        y[0] = I.cast(i, I.i32)
        y[1] = total

    y = np.zeros(2, np.int32)
    run(k, np.array([3, 4, 5, 6], np.int32), y)
    np.testing.assert_array_equal(y, [3, 12])
    run(k, np.array([1, 1], np.int32), y)
    np.testing.assert_array_equal(y, [2, 2])


def test_while_false_at_start_returns_init(run):
    @intent.kernel
    def k(y: I.Out[I.i32, (1,)], start: I.i32):
        y[0] = I.while_(lambda c: c < 0, lambda c: c - 1, start)

    y = np.zeros(1, np.int32)
    run(k, y, 5)
    np.testing.assert_array_equal(y, [5])


def test_while_break_and_continue(run):
    @intent.kernel
    def k(y: I.Out[I.i32, (1,)]):
        def body(c):
            I.break_(when=c > 20, carry=c * 1000)
            I.continue_(when=(c % 2) == 1, carry=c + 3)
            return c + 1

        y[0] = I.while_(lambda c: c < 100, body, I.cast(0, I.i32))

    y = np.zeros(1, np.int32)
    run(k, y)
    c = 0
    while c < 100:
        if c > 20:
            c *= 1000
            break
        c = c + 3 if c % 2 == 1 else c + 1
    np.testing.assert_array_equal(y, [c])


def test_while_cond_must_return_bool_scalar():
    @intent.kernel
    def k(y: I.Out[I.i32, (1,)]):
        y[0] = I.while_(lambda c: c, lambda c: c - 1, I.cast(3, I.i32))

    with pytest.raises(intent.TraceError, match="bool"):
        k.trace()


def test_while_carry_schema_change_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.i32, (1,)]):
        y[0] = I.while_(lambda c: c < 3, lambda c: I.cast(c, I.i64) + 1, I.cast(0, I.i32))

    with pytest.raises(intent.TraceError, match="i32 became i64"):
        k.trace()
