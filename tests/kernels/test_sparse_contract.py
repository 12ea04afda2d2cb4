"""Sparse contract (spec §12, numerics T5, T7) on every executable target.

References are independent of the library: the compressed operand is expanded here into its dense logical
matrix by explicit loops (the kept value whose metadata is p at group position p, else 0), the dense product
is exact (``Fraction`` or Python ints), and results are held to T5's bound (floats) or exact modulo 2^bits
(integers). Ill-formed metadata must raise ValueError with the Out arrays untouched.
"""
import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

NP = {I.f32: np.float32, I.f64: np.float64, I.i32: np.int32, I.i8: np.int8}
UNIT = {I.f32: Fraction(1, 2 ** 24), I.f64: Fraction(1, 2 ** 53)}
SCHEMAS = {"two_of_four": (4, 2), "one_of_two": (2, 1)}


def expand(comp: np.ndarray, meta: np.ndarray, axis: int, group: int, keep: int) -> np.ndarray:
    """Dense logical tensor: along ``axis``, kept value j of group g sits at g * group + meta."""
    c, m = np.moveaxis(comp, axis, -1), np.moveaxis(meta, axis, -1)
    dense = np.zeros(c.shape[:-1] + (c.shape[-1] // keep * group,), comp.dtype)
    for pos in np.ndindex(*c.shape[:-1]):
        for q in range(c.shape[-1]):
            dense[pos + ((q // keep) * group + int(m[pos + (q,)]),)] = c[pos + (q,)]
    return np.moveaxis(dense, -1, axis)


def random_meta(rng, shape, axis, group, keep) -> np.ndarray:
    """Valid metadata: per group a sorted choice of ``keep`` distinct positions."""
    moved = list(shape)
    moved.append(moved.pop(axis))
    m = np.empty(moved, np.int64)
    for pos in np.ndindex(*moved[:-1]):
        for g in range(moved[-1] // keep):
            m[pos + (slice(g * keep, (g + 1) * keep),)] = np.sort(rng.choice(group, keep, replace=False))
    return np.moveaxis(m, -1, axis)


def exact_matmul_check(got, lhs, rhs, acc):
    got = np.asarray(got)
    m, k = lhs.shape
    n = rhs.shape[1]
    assert got.shape == (m, n) and got.dtype == NP[acc]
    for i, j in itertools.product(range(m), range(n)):
        if acc.is_int:
            exact = sum(int(lhs[i, t]) * int(rhs[t, j]) for t in range(k))
            bits = np.iinfo(NP[acc]).bits
            exact &= (1 << bits) - 1
            exact -= (1 << bits) if exact >= 1 << (bits - 1) else 0
            assert int(got[i, j]) == exact
            continue
        terms = [Fraction(float(lhs[i, t])) * Fraction(float(rhs[t, j])) for t in range(k)]
        bound = k * UNIT[acc] / (1 - k * UNIT[acc]) * sum(abs(t) for t in terms)
        assert abs(Fraction(float(got[i, j])) - sum(terms)) <= bound, (i, j)


def matmul_kernel(fmt_name, m, k, n, dtype, meta_dtype, acc):
    group, keep = SCHEMAS[fmt_name]
    kc = k // group * keep

    @intent.kernel
    def kern(a: I.In[dtype, (m, kc)], meta: I.In[meta_dtype, (m, kc)], b: I.In[dtype, (k, n)],
             c: I.Out[acc, (m, n)]):
        c[:, :] = I.sparse_matmul(a[:, :], meta[:, :], b[:, :], format=getattr(I.sparse, fmt_name)(), acc_dtype=acc)

    return kern


@pytest.mark.parametrize("fmt_name, dtype, meta_dtype, acc", [
    ("two_of_four", I.f32, I.i32, I.f32), ("two_of_four", I.f64, I.u8, I.f64), ("one_of_two", I.f32, I.i64, I.f32),
    ("two_of_four", I.i8, I.i8, I.i32), ("one_of_two", I.i8, I.u16, I.i8),
])
def test_sparse_matmul_matches_the_dense_product_of_the_expanded_matrix(run, fmt_name, dtype, meta_dtype, acc):
    group, keep = SCHEMAS[fmt_name]
    rng = np.random.default_rng(group + acc.bits)
    m, k, n = 5, 16, 3
    kc = k // group * keep
    if dtype.is_int:
        a = rng.integers(-128, 128, (m, kc)).astype(NP[dtype])
        b = rng.integers(-128, 128, (k, n)).astype(NP[dtype])
    else:
        a = (rng.standard_normal((m, kc)) * 8).astype(NP[dtype])
        b = (rng.standard_normal((k, n)) / 3).astype(NP[dtype])
    meta = random_meta(rng, (m, kc), 1, group, keep).astype(dtype_np(meta_dtype))
    c = np.zeros((m, n), NP[acc]) if acc.is_int else np.full((m, n), np.nan, NP[acc])
    run(matmul_kernel(fmt_name, m, k, n, dtype, meta_dtype, acc), a, meta, b, c)
    dense = expand(a, meta, 1, group, keep)
    assert np.count_nonzero(dense) == np.count_nonzero(a)
    exact_matmul_check(c, dense.astype(np.float64) if dtype.is_float else dense.astype(np.int64), b, acc)


def dtype_np(d):
    return {I.i32: np.int32, I.u8: np.uint8, I.i64: np.int64, I.i8: np.int8, I.u16: np.uint16}[d]


@intent.kernel
def batched(a: I.In[I.f32, (2, 4, 3)], meta: I.In[I.i32, (2, 4, 3)], b: I.In[I.f32, (2, 5, 8)],
            c: I.Out[I.f32, (2, 3, 5)]):
    # compressed [B, K/2, M] with K on lhs axis 1, rhs [B, N, K]: reduce ((1, 2),), batch ((0, 0),)
    c[:, :, :] = I.sparse_contract(a[:, :, :], meta[:, :, :], b[:, :, :], format=I.sparse.two_of_four(),
                                   reduce=((1, 2),), batch=((0, 0),), acc_dtype=I.f32)


def test_sparse_contract_batched_with_the_compression_axis_in_the_middle(run):
    rng = np.random.default_rng(21)
    a = rng.standard_normal((2, 4, 3)).astype(np.float32)
    meta = random_meta(rng, (2, 4, 3), 1, 4, 2).astype(np.int32)
    b = rng.standard_normal((2, 5, 8)).astype(np.float32)
    c = np.full((2, 3, 5), np.nan, np.float32)
    run(batched, a, meta, b, c)
    dense = expand(a, meta, 1, 4, 2)  # [2, 8, 3]
    for z in range(2):
        exact_matmul_check(c[z], dense[z].T.astype(np.float64), b[z].T.astype(np.float64), I.f32)


@intent.kernel
def dynamic_m(a: I.In[I.f32, ("M", 2)], meta: I.In[I.i32, ("M", 2)], b: I.In[I.f32, (4, "N")],
              c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.sparse_matmul(a[:, :], meta[:, :], b[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)


def test_sparse_matmul_hand_checked_and_dynamic_free_extents(run):
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    meta = np.array([[0, 3], [1, 2]], np.int32)  # dense rows [1, 0, 0, 2] and [0, 3, 4, 0]
    b = np.array([[1.0], [10.0], [100.0], [1000.0]], np.float32)
    c = np.zeros((2, 1), np.float32)
    run(dynamic_m, a, meta, b, c)
    assert c.tolist() == [[2001.0], [430.0]]


@pytest.mark.parametrize("fmt_name, bad", [
    ("two_of_four", (0, 4)), ("two_of_four", (-1, 2)), ("two_of_four", (2, 2)), ("two_of_four", (3, 1)),
    ("one_of_two", (2, 0)), ("one_of_two", (0, -1)),
])
def test_ill_formed_metadata_raises_value_error_before_writing(run, fmt_name, bad):
    group, keep = SCHEMAS[fmt_name]
    m, k, n = 3, 8, 2
    kc = k // group * keep
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, kc)).astype(np.float32)
    meta = random_meta(rng, (m, kc), 1, group, keep).astype(np.int32)
    meta[2, 2:4] = bad  # one group (2:4) or two groups (1:2) of the last row
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), 7.0, np.float32)
    with pytest.raises(ValueError, match="metadata"):
        run(matmul_kernel(fmt_name, m, k, n, I.f32, I.i32, I.f32), a, meta, b, c)
    assert (c == 7.0).all()


# --- schema errors --------------------------------------------------------------------------------------------

def _trace(a_shape, meta_shape, b_shape, meta_dtype=I.i32, fmt=None, reduce=None):
    fmt = I.sparse.two_of_four() if fmt is None else fmt

    @intent.kernel
    def k(a: I.In[I.f32, a_shape], meta: I.In[meta_dtype, meta_shape], b: I.In[I.f32, b_shape]):
        if reduce is None:
            I.sparse_matmul(a[...], meta[...], b[...], format=fmt, acc_dtype=I.f32)
        else:
            I.sparse_contract(a[...], meta[...], b[...], format=fmt, reduce=reduce, acc_dtype=I.f32)

    return k.trace()


ERRORS = [
    (((3, 3), (3, 3), (6, 2)), {}, r"K = 6 \(rhs axis 0\) is not a multiple of the I\.sparse\.two_of_four\(\) group "
                                   r"size 4"),
    (((3, 4), (3, 4), (4, 2)), {}, r"compressed axis 1 has extent 4.*K = 4.*needs 2"),
    (((3, 2), (3, 3), (4, 2)), {}, r"metadata axis 1 has extent 3 but compressed axis 1 has extent 2"),
    (((3, 2), (3, 2), (4, 2)), dict(meta_dtype=I.f32), r"metadata must be a logical integer tensor"),
    (((3, 2), (3, 2), (4, 2)), dict(fmt="2:4"), r"format must be a sparse schema"),
    (((3, 2), (3, 2), (4, 2)), dict(fmt=I.sparse.two_of_four), r"call it"),
    (((3, 2), (3, 2, 1), (4, 2)), {}, r"metadata must have the compressed tensor's shape"),
    (((3, 2, 1), (3, 2, 1), (4, 2)), {}, r"rank-2 data operands"),
    (((3, 2), (3, 2), (2, 4)), dict(reduce=((1, 0),)), r"K = 2 \(rhs axis 0\) is not a multiple"),
    (((3, 2), (3, 2), (4, 2)), dict(reduce=()), r"at least one"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_sparse_schema_errors_name_the_axis(case):
    shapes, kw, pattern = ERRORS[case]
    with pytest.raises(TraceError) as info:
        _trace(*shapes, **kw)
    assert re.search(pattern, str(info.value)), str(info.value)
