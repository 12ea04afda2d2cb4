"""Extent equalities the tracer proves structurally (issue 15 item 4), on every executable target.

``I.domain(half, 2*half)`` has the extent of ``I.domain(0, half)``; two computations of ``M*N`` (or of
``(a + b) * 2`` and ``2*a + 2*b``) are one extent; extents that are not structurally equal stay unequal, and
the message names both sides distinctly, even when they are made on one line. References: NumPy.
"""
import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(15)


@intent.kernel
def halves(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], half: I.index):
    upper = I.domain(half, 2 * half)
    lower = I.domain(0, half)
    y[lower] = x[upper] + x[lower]


@pytest.mark.parametrize("n,half", [(8, 4), (9, 4), (2, 1), (6, 0), (1, 0)])
def test_domain_from_half_to_twice_half_is_the_extent_half(run, n, half):
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, -7.0, np.float32)
    run(halves, x, y, half)
    expected = np.full(n, -7.0, np.float32)
    expected[:half] = x[half:2 * half] + x[:half]
    np.testing.assert_array_equal(y, expected)


def test_a_domain_past_the_view_is_still_an_index_error(run):
    x = np.zeros(5, np.float32)
    y = np.full(5, 3.0, np.float32)
    with pytest.raises(IndexError):
        run(halves, x, y, 3)  # [3, 6) reads past x
    np.testing.assert_array_equal(y, 3.0)


@intent.kernel
def flat_twice(a: I.In[I.f32, ("M", "N")], b: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("P",)]):
    m, n = a.shape
    fa = I.reshape(a[:, :], (m * n,))
    fb = I.reshape(b[:, :], (n * m,))  # another computation (and order) of the same product
    y[I.domain(0, m * n)] = fa + fb * 2.0


@pytest.mark.parametrize("m,n", [(3, 5), (1, 7), (0, 4), (4, 0)])
def test_two_computations_of_m_times_n_are_one_extent(run, m, n):
    a = RNG.standard_normal((m, n)).astype(np.float32)
    b = RNG.standard_normal((m, n)).astype(np.float32)
    y = np.full(m * n + 2, 5.0, np.float32)
    run(flat_twice, a, b, y)
    expected = np.full(m * n + 2, 5.0, np.float32)
    expected[:m * n] = a.reshape(-1) + b.reshape(-1) * np.float32(2.0)
    np.testing.assert_array_equal(y, expected)


def test_the_kir_shows_one_extent_for_both_products():
    text = str(flat_twice.trace())
    shapes = re.findall(r"f32\[(%\d+)\] = reshape", text)
    assert len(shapes) == 2 and shapes[0] == shapes[1]


@intent.kernel
def affine(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], z: I.Out[I.f32, ("N",)], a: I.index, b: I.index):
    s = I.reshape(x[I.domain(0, (a + b) * 2)], ((a + b) * 2,))
    t = x[I.domain(b, b + 2 * a + 2 * b)]  # length 2a + 2b: the same polynomial
    u = x[I.domain(0, (b * 4) // 2 - b + b)]  # an opaque floor division, computed twice
    v = x[I.domain(0, (4 * b) // 2)]
    y[I.domain(0, 2 * b + 2 * a)] = s + t
    z[I.domain(0, (b * 4) // 2)] = u * v


@pytest.mark.parametrize("a,b", [(1, 2), (0, 3), (2, 0), (0, 0)])
def test_affine_expressions_with_one_normal_form_are_one_extent(run, a, b):
    n = max(2 * a + 3 * b, 2 * b) + 1
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, 0.5, np.float32)
    z = np.full(n, 0.25, np.float32)
    run(affine, x, y, z, a, b)
    k = 2 * (a + b)
    expected = np.full(n, 0.5, np.float32)
    expected[:k] = x[:k] + x[b:b + k]
    np.testing.assert_array_equal(y, expected)
    expected_z = np.full(n, 0.25, np.float32)
    expected_z[:2 * b] = x[:2 * b] * x[:2 * b]
    np.testing.assert_array_equal(z, expected_z)


def test_a_product_computed_in_a_loop_body_and_again_after_it():
    @intent.kernel
    def scoped(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("P",)]):
        m, n = x.shape
        for _ in I.domain(0, 1):
            y[I.domain(0, m * n)] = I.reshape(x[:, :], (m * n,))
        y[I.domain(0, m * n)] = I.reshape(x[:, :], (m * n,)) * 3.0

    for target in ("generic", "cpu", "tilelang-c"):
        x = RNG.standard_normal((2, 3)).astype(np.float32)
        y = np.zeros(7, np.float32)
        intent.compile(scoped, target=target)(x, y)
        np.testing.assert_array_equal(y[:6], x.reshape(-1) * np.float32(3.0))
        assert y[6] == 0.0


def test_extents_that_are_not_structurally_equal_are_named_distinctly():
    @intent.kernel
    def unequal(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], a: I.index, b: I.index, c: I.index):
        y[I.domain(0, a)] = x[I.domain(a, a + b * c)] + x[I.domain(c, c + b * a)]

    with pytest.raises(TraceError) as e:
        unequal.trace()
    message = str(e.value)
    assert "not provably equal" in message
    first, second = re.findall(r"the length \(([^)]*)\) of the domain at (\S+)", message)
    assert first[0] != second[0] and first[1] != second[1]  # both the expressions and the columns differ
    assert {first[0], second[0]} == {"b*c", "a*b"}


def test_distinct_products_stay_distinct():
    @intent.kernel
    def products(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("P",)]):
        m, n = x.shape
        y[I.domain(0, m * n)] = I.reshape(x[:, :], (m * m,))

    with pytest.raises(TraceError, match="not provably equal"):
        products.trace()
