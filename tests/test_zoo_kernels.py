"""The GPU zoo's kernels (benchmarks/zoo_kernels.py) on every executable target at small shapes, against NumPy
references: the benchmark times only kernels the suite checks. Shapes are small and odd (tails no tile or
block divides); float results are held to a T5-style bound (sums in any order, T10), integer results exactly."""
from __future__ import annotations

import numpy as np
import pytest

from example_modules import benchmark_module

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(20261202)
F32 = 2.0 ** -24


def _close(got, want, n_terms: int, scale=None):
    """|got - want| <= (n_terms + 8) * eps32 * scale, scale = the magnitude of the terms that were summed."""
    scale = np.abs(want) + 1.0 if scale is None else scale
    bound = (n_terms + 8) * F32 * scale
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound), np.max(np.abs(got - want) / scale)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 257), (5, 33)])
@pytest.mark.parametrize("name", ["softmax_whole", "log_softmax"])
def test_row_softmax_kernels(run, name, m, n):
    x = (RNG.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    run(getattr(zoo, name), x, y)
    want = zoo.REFERENCES[getattr(zoo, name)](x)
    _close(y, want, 2 * n, scale=np.abs(want) + (1.0 if name == "log_softmax" else 0.0) + F32)


@pytest.mark.parametrize("m,n", [(2, 1), (3, 257)])
def test_layer_norm(run, m, n):
    x = RNG.standard_normal((m, n)).astype(np.float32)
    g, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    y = np.zeros_like(x)
    run(zoo.layer_norm, x, g, b, y)
    _close(y, zoo.REFERENCES[zoo.layer_norm](x, g, b), 4 * n, scale=np.abs(g) * 8 + np.abs(b) + 1)


@pytest.mark.parametrize("m,n", [(2, 1), (3, 130)])
def test_rms_norm_f16(run, m, n):
    x = RNG.standard_normal((m, n)).astype(np.float16)
    w = RNG.standard_normal(n).astype(np.float16)
    y = np.zeros_like(x)
    run(zoo.rms_norm_f16, x, w, y)
    want = zoo.REFERENCES[zoo.rms_norm_f16](x, w)
    # the f32 pipeline is far inside f16's rounding: the result is within one f16 ulp of the exact value
    assert np.all(np.abs(y.astype(np.float64) - want) <= 2.0 ** -10 * np.abs(want) + 2.0 ** -24)


@pytest.mark.parametrize("m,n", [(1, 1), (4, 1000)])
def test_row_and_full_sums(run, m, n):
    x = RNG.standard_normal((m, n)).astype(np.float32)
    y = np.zeros(m, np.float32)
    run(zoo.row_sum, x, y)
    _close(y, zoo.REFERENCES[zoo.row_sum](x), n, scale=np.abs(x).sum(axis=1))
    flat, total = x.reshape(-1), np.zeros(1, np.float32)
    run(zoo.full_sum, flat, total)
    _close(total, zoo.REFERENCES[zoo.full_sum](flat), flat.size, scale=np.abs(flat).sum())


def test_argmax_rows_takes_the_first_maximum_at_every_position(run):
    n = 37
    x = np.zeros((n, n), np.float32)
    x[np.arange(n), np.arange(n)] = 1.0  # row r's maximum at r: first, middle, last
    x[np.arange(n - 1), np.arange(1, n)] = 1.0  # a tie one place later: the lowest position wins
    y = np.zeros(n, np.int64)
    run(zoo.argmax_rows, x, y)
    np.testing.assert_array_equal(y, np.arange(n))


def test_cumsum_and_gelu(run):
    x = RNG.standard_normal(1001).astype(np.float32)
    y = np.zeros_like(x)
    run(zoo.cumsum, x, y)
    _close(y, zoo.REFERENCES[zoo.cumsum](x), x.size, scale=np.cumsum(np.abs(x.astype(np.float64))))
    run(zoo.gelu, x, y)
    _close(y, zoo.REFERENCES[zoo.gelu](x), 8)


def test_histogram_embedding_and_scatter_add(run):
    v = RNG.integers(0, 256, 3001).astype(np.uint8)
    counts = np.zeros(256, np.int64)
    run(zoo.histogram256, v, counts)
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=256))
    table = RNG.standard_normal((11, 7)).astype(np.float16)
    ids = RNG.integers(0, 11, 19).astype(np.int64)
    out = np.zeros((19, 7), np.float16)
    run(zoo.embedding_f16, table, ids, out)
    np.testing.assert_array_equal(out, table[ids])
    idx = RNG.integers(0, 9, 50).astype(np.int64)
    vals = RNG.integers(-8, 8, 50).astype(np.float32)  # small integers: every order of the sums is exact
    dest = RNG.integers(-8, 8, 9).astype(np.float32)
    want = dest.copy()
    np.add.at(want, idx, vals)
    run(zoo.scatter_add, idx, vals, dest)
    np.testing.assert_array_equal(dest, want)


@pytest.mark.parametrize("m,k,n", [(3, 5, 7), (17, 33, 9)])
def test_matmuls(run, m, k, n):
    a, b = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    c = np.zeros((m, n), np.float16)
    run(zoo.matmul_f16, a.astype(np.float16), b.astype(np.float16), c)
    want = zoo.REFERENCES[zoo.matmul_f16](a.astype(np.float16), b.astype(np.float16))
    assert np.all(np.abs(c - want) <= 2.0 ** -10 * np.abs(want) + k * F32 * 64)
    bias = RNG.standard_normal(n).astype(np.float16)
    run(zoo.matmul_bias_relu_f16, a.astype(np.float16), b.astype(np.float16), bias, c)
    want = zoo.REFERENCES[zoo.matmul_bias_relu_f16](a.astype(np.float16), b.astype(np.float16), bias)
    assert np.all(np.abs(c - want) <= 2.0 ** -10 * np.abs(want) + k * F32 * 64)
    c32 = np.zeros((m, n), np.float32)
    run(zoo.matmul_f32, a.astype(np.float32), b.astype(np.float32), c32)
    _close(c32, zoo.REFERENCES[zoo.matmul_f32](a.astype(np.float32), b.astype(np.float32)), k,
           scale=np.abs(a) @ np.abs(b))
    a3 = RNG.standard_normal((2, m, k)).astype(np.float16)
    b3 = RNG.standard_normal((2, k, n)).astype(np.float16)
    c3 = np.zeros((2, m, n), np.float16)
    run(zoo.batched_matmul_f16, a3, b3, c3)
    want = zoo.REFERENCES[zoo.batched_matmul_f16](a3, b3)
    assert np.all(np.abs(c3 - want) <= 2.0 ** -10 * np.abs(want) + k * F32 * 64)
