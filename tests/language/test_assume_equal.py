"""``I.assume_equal``: an extent equality the tracer cannot prove, stated by the kernel (issue 15 item 4).

After the statement the two extents are one extent for shapes (values made before it included); every target
checks it where it stands, and a run whose sides differ is a ValueError that names both sides distinctly (each
side's expression and the line that made it, even when both are made on one line) and writes no output.
References: NumPy, hand values.
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(4)


@intent.kernel
def interleave_twice(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.Out[I.f32, ("N",)]):
    n = I.assume_equal(x.shape[0], 2 * y.shape[0])
    twice = I.reshape(I.join(y[:], y[:] * 2.0), (2 * y.shape[0],))  # y[0], 2y[0], y[1], 2y[1], ...
    out[I.domain(0, n)] = x[:] + twice


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=st.integers(0, 40), seed=st.integers(0, 2**32 - 1))
def test_two_extents_stated_equal_are_one_extent(run, h, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(2 * h).astype(np.float32)
    y = rng.standard_normal(h).astype(np.float32)
    out = np.full(2 * h, np.nan, np.float32)
    run(interleave_twice, x, y, out)
    np.testing.assert_array_equal(out, x + np.stack([y, y * np.float32(2)], axis=1).reshape(-1))


def test_sides_that_differ_are_a_value_error_naming_both_and_nothing_is_written(run):
    out = np.full(6, 3.0, np.float32)
    with pytest.raises(ValueError) as e:
        run(interleave_twice, np.zeros(6, np.float32), np.zeros(2, np.float32), out)
    text = str(e.value)
    assert re.match(r"I\.assume_equal: the sides differ: N \(an extent named in the signature of kernel "
                    r"interleave_twice at test_assume_equal\.py:\d+\) is 6, but 2\*H \(made at "
                    r"test_assume_equal\.py:\d+\) is 4$", text), text
    assert any(re.search(r"in op `assume_equal` at test_assume_equal\.py:\d+", n) for n in e.value.__notes__)
    np.testing.assert_array_equal(out, 3.0)


@intent.kernel
def one_line(a: I.In[I.f32, ("A",)], b: I.In[I.f32, ("B",)], out: I.Out[I.f32, ("P",)]):
    I.assume_equal(a.shape[0] * 2, b.shape[0] + 1); rows = I.domain(0, b.shape[0] + 1)  # noqa: E702
    out[rows] = I.reshape(I.join(a[:], a[:]), (2 * a.shape[0],))  # extent 2*A written over B + 1 rows


def test_two_sides_made_on_one_line_are_named_apart(run):
    a = RNG.standard_normal(3).astype(np.float32)
    out = np.full(7, 5.0, np.float32)
    run(one_line, a, np.zeros(5, np.float32), out)
    np.testing.assert_array_equal(out, np.concatenate([np.repeat(a, 2), [5.0]]))
    with pytest.raises(ValueError) as e:
        run(one_line, a, np.zeros(4, np.float32), out)
    m = re.match(r"I\.assume_equal: the sides differ: 2\*A \(made at (test_assume_equal\.py:\d+)\) is 6, but B \+ 1 "
                 r"\(made at (test_assume_equal\.py:\d+)\) is 5$", str(e.value))
    assert m and m[1] == m[2], str(e.value)  # one line, two expressions: each side by its own text


@intent.kernel
def made_before(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("M",)], out: I.Out[I.f32, ("N",)]):
    a, b = x[:], y[:]  # shapes [N] and [M], made before the statement
    I.assume_equal(y.shape[0], x.shape[0])
    out[:] = a * b


@pytest.mark.parametrize("n", [0, 1, 9])
def test_values_made_before_the_statement_meet_after_it(run, n):
    x, y = RNG.standard_normal((2, n)).astype(np.float32)
    out = np.zeros(n, np.float32)
    run(made_before, x, y, out)
    np.testing.assert_array_equal(out, x * y)
    with pytest.raises(ValueError, match=r"the sides differ: M .* is 2, but N .* is 3"):
        run(made_before, np.zeros(3, np.float32), np.zeros(2, np.float32), np.zeros(3, np.float32))


@intent.kernel
def static_side(x: I.In[I.f32, ("N",)], w: I.In[I.f32, (4,)], out: I.Out[I.f32, (4,)]):
    n = I.assume_equal(x.shape[0], 4)
    assert n == 4  # a static side makes the value static
    out[:] = x[:] * w[:]


def test_an_extent_stated_equal_to_a_static_size(run):
    x, w = RNG.standard_normal((2, 4)).astype(np.float32)
    out = np.zeros(4, np.float32)
    run(static_side, x, w, out)
    np.testing.assert_array_equal(out, x * w)
    out = np.full(4, 2.0, np.float32)
    with pytest.raises(ValueError, match=r"the sides differ: N \(.*\) is 5, but 4 is 4"):
        run(static_side, np.zeros(5, np.float32), w, out)
    np.testing.assert_array_equal(out, 2.0)


@intent.kernel
def chained(a: I.In[I.i32, ("A",)], b: I.In[I.i32, ("B",)], c: I.In[I.i32, ("C",)], out: I.Out[I.i32, ("A",)],
            total: I.Out[I.i32, (1,)]):
    I.assume_equal(a.shape[0], b.shape[0])
    n = I.assume_equal(c.shape[0], b.shape[0])  # A, B and C: one class of extents
    out[:] = a[:] + c[:]

    def step(i, acc):  # a carry of shape [C] updated with values of shape [A]
        return acc + a[:] * 0 + I.full((n,), 1, I.i32)

    acc = I.loop(I.domain(0, 3), c[:], step)
    total[0] = I.reduce.sum(acc - c[:], axis=0, acc_dtype=I.i32)


def test_statements_chain_and_carry_across_the_class(run):
    a, c = RNG.integers(-9, 9, (2, 5)).astype(np.int32)
    out, total = np.zeros(5, np.int32), np.zeros(1, np.int32)
    run(chained, a, np.zeros(5, np.int32), c, out, total)
    np.testing.assert_array_equal(out, a + c)
    assert total[0] == 15
    with pytest.raises(ValueError, match=r"the sides differ: C .* is 4, but B .* is 5"):
        run(chained, a, np.zeros(5, np.int32), c[:4], out, total)


@intent.kernel
def from_a_scalar(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)], n: I.i64):
    m = I.assume_equal(I.cast(n, I.index), x.shape[0])
    out[:] = x[:] + I.cast(I.indices(I.domain(0, m)), I.f32)


def test_a_runtime_scalar_stated_equal_to_an_extent(run):
    x = RNG.standard_normal(6).astype(np.float32)
    out = np.zeros(6, np.float32)
    run(from_a_scalar, x, out, 6)
    np.testing.assert_array_equal(out, x + np.arange(6, dtype=np.float32))
    with pytest.raises(ValueError, match=r"the sides differ: n \(made at .*\) is 7, but N \(.*\) is 6"):
        run(from_a_scalar, x, out, 7)


def test_the_kir_shows_the_statement():
    text = str(interleave_twice.trace())
    assert re.search(r"(%\d+): index = mul 2:index, H", text)
    assert re.search(r"%\d+: index = assume_equal N == %\d+  # test_assume_equal\.py:\d+", text), text


def test_a_statement_already_proved_adds_nothing():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
        n = I.assume_equal(x.shape[0], y.shape[0] + 0)
        out[I.domain(0, n)] = x[:] + y[:]

    assert "= assume_equal" not in str(k.trace())


@pytest.mark.parametrize("body,match", [
    (lambda x, y, n: I.assume_equal(3, 4), "the sides are the static sizes 3 and 4, which differ"),
    (lambda x, y, n: I.assume_equal(x.shape[0], n), r"the rhs is a i32 scalar; .* I\.cast\(value, I\.index\)"),
    (lambda x, y, n: I.assume_equal(x.shape[0], 2.0), "the rhs must be an extent"),
    (lambda x, y, n: I.assume_equal(x.shape[0], -1), "negative"),
    (lambda x, y, n: [I.assume_equal(x.shape[0], y.shape[0]) for i in I.domain(0, 2)],
     "make it at the kernel's top level"),
    (lambda x, y, n: I.if_(n > 0, lambda: I.assume_equal(x.shape[0], y.shape[0]), lambda: 0),
     "make it at the kernel's top level"),
])
def test_statements_the_language_refuses_are_trace_errors(body, match):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("M",)], n: I.i32):
        body(x, y, n)

    with pytest.raises(TraceError, match=match):
        k.trace()


def test_without_the_statement_the_extents_stay_apart():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("M",)], out: I.Out[I.f32, ("N",)]):
        out[:] = x[:] + y[:]

    with pytest.raises(TraceError, match="not provably equal"):
        k.trace()


def test_a_sum_under_floor_division_is_named_with_its_parentheses():
    @intent.kernel
    def halves(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("M",)], k: I.i32):
        I.assume_equal(x.shape[0], (y.shape[0] + I.cast(k, I.index)) // 2)

    with pytest.raises(ValueError) as info:
        halves(np.zeros(3, np.float32), np.zeros(4, np.float32), np.int32(4))
    assert "((M + k) // 2)" in str(info.value) and "M + k // 2" not in str(info.value)
