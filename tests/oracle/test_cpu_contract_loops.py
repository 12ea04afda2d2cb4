"""The cpu target's contraction loop nests (oracle/numba/contract.py ``_loops``, issue 19).

Contractions inside a parallel loop (attention's two matmuls per batch), and those with integer or f16/bf16
accumulators anywhere, run as loop nests over operands packed and converted once, each output row accumulating
``x * rhs[k, :]`` in reduction order. Checked against float64 NumPy within T5's bound (gamma_K of the sum of
|products|, plus the one final rounding of a narrow accumulator) or exactly modulo 2^32 for integers, on every
target, over shapes with a reduction of length 0 and 1, transposed operands, a batch, and once above the
parallel threshold.
"""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

U32, U16 = 2.0**-24, 2.0**-11


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def _assert_within(got, lhs, rhs, u_acc: float, u_out: float = 0.0):
    """|got - exact| <= g + u_out * (|exact| + g), g = gamma_K(u_acc) * sum|products|, per element: the sum's bound,
    then one rounding to the output (float64 stands in for exact: its own error is 2^-29 of the f32 bound)."""
    lhs, rhs = lhs.astype(np.float64), rhs.astype(np.float64)
    exact = lhs @ rhs
    g = _gamma(lhs.shape[-1], u_acc) * (np.abs(lhs) @ np.abs(rhs))
    bound = g + u_out * (np.abs(exact) + g) + 1e-300
    err = np.abs(np.asarray(got, np.float64) - exact)
    assert (err <= bound * (1 + 2.0**-20)).all(), float((err / bound).max())


@intent.kernel
def attention_scores(q: I.In[I.f32, ("B", "L", "D")], k: I.In[I.f32, ("B", "S", "D")],
                     v: I.In[I.f32, ("B", "S", "E")], s: I.Out[I.f32, ("B", "L", "S")],
                     o: I.Out[I.f32, ("B", "L", "E")]):
    for b in I.parallel(I.domain(0, q.shape[0])):
        t = I.matmul(q[b, :, :], k[b, :, :], transpose_rhs=True, acc_dtype=I.f32)
        s[b, :, :] = t
        o[b, :, :] = I.matmul(t, v[b, :, :], acc_dtype=I.f32)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 3, 5, 7, 2), (3, 17, 9, 33, 4), (2, 4, 3, 0, 5)],
                         ids=lambda s: "B{}L{}S{}D{}E{}".format(*s))
def test_contractions_inside_a_parallel_loop(run, shape):
    b, l, s_, d, e = shape
    rng = np.random.default_rng(sum(shape))
    q, k = (rng.standard_normal((b, n, d)).astype(np.float32) for n in (l, s_))
    v = rng.standard_normal((b, s_, e)).astype(np.float32)
    s, o = np.full((b, l, s_), np.nan, np.float32), np.full((b, l, e), np.nan, np.float32)
    run(attention_scores, q, k, v, s, o)
    for j in range(b):
        _assert_within(s[j], q[j], k[j].T, U32)
        _assert_within(o[j], s[j], v[j], U32)  # of the scores as computed: each contraction's own bound
    if d == 0:
        assert (s == 0).all() and not np.signbit(s).any()


@intent.kernel
def matmul_f16_acc(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f16)


@intent.kernel
def batched_i8(a: I.In[I.i8, ("B", "M", "K")], b: I.In[I.i8, ("B", "K", "N")], c: I.Out[I.i32, ("B", "M", "N")]):
    for j in I.parallel(I.domain(0, a.shape[0])):
        c[j, :, :] = I.matmul(a[j, :, :], b[j, :, :], acc_dtype=I.i32)


@pytest.mark.parametrize("mkn", [(1, 1, 1), (5, 9, 3), (7, 40, 17)], ids=str)
def test_f16_accumulator_and_integers_inside_a_parallel_loop(run, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(m * k * n)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
    c = np.full((m, n), np.nan, np.float16)
    run(matmul_f16_acc, a, b, c)
    _assert_within(c, a, b, U32, U16)  # summed in float32, rounded once to f16
    ai = rng.integers(-128, 128, (2, m, k)).astype(np.int8)
    bi = rng.integers(-128, 128, (2, k, n)).astype(np.int8)
    ci = np.zeros((2, m, n), np.int32)
    run(batched_i8, ai, bi, ci)
    assert np.array_equal(ci, (ai.astype(np.int64) @ bi.astype(np.int64)).astype(np.int32))


def test_contraction_loops_above_the_parallel_threshold():
    rng = np.random.default_rng(9)
    m = 160  # three 160 x 160 arrays: 76,800 elements
    a, b = (rng.standard_normal((m, m)).astype(np.float16) for _ in range(2))
    c = np.zeros((m, m), np.float16)
    assert a.size + b.size + c.size >= cpu_target.PARALLEL_THRESHOLD
    exe = intent.compile(matmul_f16_acc, target="cpu")
    exe(a, b, c)
    assert exe._pick([a, b, c]) is exe.module.kernel_parallel
    _assert_within(c, a, b, U32, U16)
    bb, ll, dd = 4, 64, 64  # attention: 5 arrays of 16,384 elements
    q, kk, v = (rng.standard_normal((bb, ll, dd)).astype(np.float32) for _ in range(3))
    s, o = np.zeros((bb, ll, ll), np.float32), np.zeros((bb, ll, dd), np.float32)
    exe = intent.compile(attention_scores, target="cpu")
    exe(q, kk, v, s, o)
    assert exe._pick([q, kk, v, s, o]) is exe.module.kernel_parallel
    for j in range(bb):
        _assert_within(s[j], q[j], kk[j].T, U32)
        _assert_within(o[j], s[j], v[j], U32)
