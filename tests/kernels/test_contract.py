"""Named multiplication and the generic contract (spec §10, numerics T5) on every executable target: I.matmul
(transposed operands, batch axes), I.matvec, I.vecmat, I.dot, I.outer, I.contract's reduce and batch pairs and
result axis order, contraction inside a loop, operand views overwritten by the result, and the trace errors.

References are independent of the library (contract_support.py): exact sums by explicit loops, held to T5's
bound for float accumulators and equal modulo 2^bits for integer ones. The errors must name this file, the
user's line.
"""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

import intent_trace as intent
from contract_support import MATMUL, assert_exact_mod, assert_within_gamma, floats
from float_reference import wrap_int
from intent_trace import I
from intent_trace.errors import TraceError


# --- matmul ---------------------------------------------------------------------------------------------------

@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)


def test_contract_matmul_f32_within_gamma_bound(run):
    rng = np.random.default_rng(1)
    a, b = floats(rng, (5, 37)), floats(rng, (37, 7))
    c = np.full((5, 7), np.nan, np.float32)
    run(matmul_f32, a, b, c)
    assert_within_gamma(c, a, b, *MATMUL, I.f32)


def test_contract_matmul_is_not_reduced_precision(run):
    """1 + 2^-20 survives an f32 accumulator; TF32 (10 mantissa bits) or f16 products would lose it."""
    a = np.array([[1 + 2.0 ** -20, 2.0 ** -20]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    c = np.zeros((1, 1), np.float32)
    run(matmul_f32, a, b, c)
    assert c[0, 0] == np.float32(1 + 2.0 ** -19)


@intent.kernel
def matmul_f64(a: I.In[I.f64, ("M", "K")], b: I.In[I.f64, ("K", "N")], c: I.Out[I.f64, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f64)


def test_contract_matmul_f64_within_gamma_bound(run):
    rng = np.random.default_rng(2)
    a, b = floats(rng, (4, 29), np.float64) / 3, floats(rng, (29, 6), np.float64) / 7
    c = np.zeros((4, 6))
    run(matmul_f64, a, b, c)
    assert_within_gamma(c, a, b, *MATMUL, I.f64)


def _matmul_t(tl: bool, tr: bool):
    @intent.kernel
    def k(a: I.In[I.f32, ("K", "M") if tl else ("M", "K")], b: I.In[I.f32, ("N", "K") if tr else ("K", "N")],
          c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32, transpose_lhs=tl, transpose_rhs=tr)

    return k


@pytest.mark.parametrize("tl, tr", [(False, False), (True, False), (False, True), (True, True)])
def test_contract_matmul_transposed_operands(run, tl, tr):
    rng = np.random.default_rng(3)
    m, k, n = 3, 9, 5
    a = floats(rng, (k, m) if tl else (m, k))
    b = floats(rng, (n, k) if tr else (k, n))
    c = np.zeros((m, n), np.float32)
    run(_matmul_t(tl, tr), a, b, c)
    assert_within_gamma(c, a.T if tl else a, b.T if tr else b, *MATMUL, I.f32)


def test_contract_matmul_transpose_flag_is_applied_before_the_inner_check():
    @intent.kernel
    def k(a: I.In[I.f32, (64, 32)], b: I.In[I.f32, (64, 16)], c: I.Out[I.f32, (32, 16)]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32, transpose_lhs=True)

    (node,) = [n for n in k.trace().walk() if n.op.name == "contract"]
    assert node.outputs[0].type.shape == (32, 16)
    assert node.attr("reduce") == ((0, 0),) and node.attr("batch") == ()


def _matmul_batched(tr: bool):
    @intent.kernel
    def k(a: I.In[I.f32, (2, 1, 3, 4)], b: I.In[I.f32, (5, 6, 4) if tr else (5, 4, 6)], c: I.Out[I.f32, (2, 5, 3, 6)]):
        c[:, :, :, :] = I.matmul(a[:, :, :, :], b[:, :, :], acc_dtype=I.f32, transpose_rhs=tr)

    return k


@pytest.mark.parametrize("tr", [False, True])
def test_contract_matmul_batch_axes_broadcast_size_one_and_rank(run, tr):
    rng = np.random.default_rng(4)
    a = floats(rng, (2, 1, 3, 4))  # batch [2, 1] against [5]: size one stretches, the missing axis is added
    b = floats(rng, (5, 4, 6))
    c = np.zeros((2, 5, 3, 6), np.float32)
    run(_matmul_batched(tr), a, np.ascontiguousarray(np.swapaxes(b, 1, 2)) if tr else b, c)
    wide_a = np.broadcast_to(a, (2, 5, 3, 4))
    wide_b = np.broadcast_to(b, (2, 5, 4, 6))
    assert_within_gamma(c, wide_a, wide_b, ((3, 2),), ((0, 0), (1, 1)), I.f32)


def test_contract_matmul_normalises_to_one_contract_with_explicit_broadcasts():
    @intent.kernel
    def k(a: I.In[I.f32, (2, 1, 3, 4)], b: I.In[I.f32, (5, 4, 6)], c: I.Out[I.f32, (2, 5, 3, 6)]):
        c[:, :, :, :] = I.matmul(a[:, :, :, :], b[:, :, :], acc_dtype=I.f32)

    g = k.trace()
    names = [n.op.name for n in g.walk()]
    assert names.count("contract") == 1 and names.count("broadcast") == 2
    (node,) = [n for n in g.walk() if n.op.name == "contract"]
    assert node.attr("reduce") == ((3, 2),) and node.attr("batch") == ((0, 0), (1, 1))
    assert node.attr("acc_dtype") is I.f32
    assert [x.type.shape for x in node.inputs] == [(2, 5, 3, 4), (2, 5, 4, 6)]
    assert "contract" in str(g) and "acc_dtype=f32" in str(g)


# --- matvec, vecmat, dot, outer ---------------------------------------------------------------------------------

def _matvec_k(transpose: bool):
    @intent.kernel
    def k(m: I.In[I.f32, (3, "K", "M") if transpose else (3, "M", "K")], v: I.In[I.f32, (2, 1, "K")],
          y: I.Out[I.f32, (2, 3, "M")]):
        y[:, :, :] = I.matvec(m[:, :, :], v[:, :, :], acc_dtype=I.f32, transpose=transpose)

    return k


@pytest.mark.parametrize("transpose", [False, True])
def test_contract_matvec_batch_broadcast_and_transpose(run, transpose):
    rng = np.random.default_rng(5)
    mm, kk = 5, 7
    logical = floats(rng, (3, mm, kk))
    m = np.ascontiguousarray(np.swapaxes(logical, 1, 2)) if transpose else logical
    v = floats(rng, (2, 1, kk))
    y = np.zeros((2, 3, mm), np.float32)
    run(_matvec_k(transpose), m, v, y)
    assert_within_gamma(y, np.broadcast_to(logical, (2, 3, mm, kk)), np.broadcast_to(v, (2, 3, kk)),
                        ((3, 2),), ((0, 0), (1, 1)), I.f32)


def _vecmat_k(transpose: bool):
    @intent.kernel
    def k(v: I.In[I.f32, (3, "K")], m: I.In[I.f32, (2, 1, "N", "K") if transpose else (2, 1, "K", "N")],
          y: I.Out[I.f32, (2, 3, "N")]):
        y[:, :, :] = I.vecmat(v[:, :], m[:, :, :, :], acc_dtype=I.f32, transpose=transpose)

    return k


@pytest.mark.parametrize("transpose", [False, True])
def test_contract_vecmat_batch_broadcast_and_transpose(run, transpose):
    rng = np.random.default_rng(6)
    kk, nn = 6, 4
    v = floats(rng, (3, kk))
    logical = floats(rng, (2, 1, kk, nn))
    m = np.ascontiguousarray(np.swapaxes(logical, 2, 3)) if transpose else logical
    y = np.zeros((2, 3, nn), np.float32)
    run(_vecmat_k(transpose), v, m, y)
    assert_within_gamma(y, np.broadcast_to(v, (2, 3, kk)), np.broadcast_to(logical, (2, 3, kk, nn)),
                        ((2, 2),), ((0, 0), (1, 1)), I.f32)


def test_contract_matvec_transpose_changes_the_required_vector_length():
    @intent.kernel
    def k(m: I.In[I.f32, (64, 32)], v: I.In[I.f32, (64,)], y: I.Out[I.f32, (32,)]):
        y[:] = I.matvec(m[:, :], v[:], acc_dtype=I.f32, transpose=True)

    (node,) = [n for n in k.trace().walk() if n.op.name == "contract"]
    assert node.outputs[0].type.shape == (32,)


@intent.kernel
def dot_k(a: I.In[I.f32, ("K",)], b: I.In[I.f32, ("K",)], y: I.Out[I.f32, (1,)]):
    d = I.dot(a[:], b[:], acc_dtype=I.f32)
    y[0] = d


def test_contract_dot_gives_a_rank0_tensor(run):
    rng = np.random.default_rng(7)
    a, b = floats(rng, (41,)), floats(rng, (41,))
    y = np.zeros(1, np.float32)
    run(dot_k, a, b, y)
    assert_within_gamma(y.reshape(()), a, b, ((0, 0),), (), I.f32)
    (node,) = [n for n in dot_k.trace().walk() if n.op.name == "contract"]
    t = node.outputs[0].type
    assert type(t).__name__ == "TensorType" and t.shape == ()


@intent.kernel
def outer_k(a: I.In[I.i8, ("M",)], b: I.In[I.i8, ("N",)], y: I.Out[I.i8, ("M", "N")]):
    y[:, :] = I.outer(a[:], b[:])


def test_contract_outer_is_a_broadcast_multiply_in_the_input_dtype(run):
    a = np.array([127, -128, 3], np.int8)
    b = np.array([2, -1, 5, 0], np.int8)
    y = np.zeros((3, 4), np.int8)
    run(outer_k, a, b, y)
    want = np.array([[wrap_int(int(x) * int(z), np.int8) for z in b] for x in a], np.int8)
    assert np.array_equal(y, want)  # 127 * 2 wraps in i8: no accumulator, no widening
    names = [n.op.name for n in outer_k.trace().walk()]
    assert "contract" not in names and names.count("mul") == 1 and "reshape" in names


@intent.kernel
def outer_f32(a: I.In[I.f32, ("M",)], b: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = I.outer(a[:], b[:])


def test_contract_outer_f32_rounds_each_product_once(run):
    rng = np.random.default_rng(8)
    a, b = floats(rng, (4,)), floats(rng, (6,))
    y = np.zeros((4, 6), np.float32)
    run(outer_f32, a, b, y)
    want = np.array([[float(Fraction(float(x)) * Fraction(float(z))) for z in b] for x in a]).astype(np.float32)
    assert np.array_equal(y, want)


# --- the generic contract -------------------------------------------------------------------------------------

@intent.kernel
def multi(a: I.In[I.f32, (2, 3, 4, 5)], b: I.In[I.f32, (5, 4, 6, 3)], y: I.Out[I.f32, (2, 4, 6)]):
    # lhs [A, K1, B, K2], rhs [K2, B, N, K1]: two reduce pairs, one batch pair that is not leading.
    y[:, :, :] = I.contract(a[:, :, :, :], b[:, :, :, :], reduce=((-3, -1), (3, 0)), batch=((2, 1),),
                            acc_dtype=I.f32)


def test_contract_generic_multiple_reduce_pairs_and_a_non_leading_batch(run):
    rng = np.random.default_rng(9)
    a, b = floats(rng, (2, 3, 4, 5)), floats(rng, (5, 4, 6, 3))
    y = np.zeros((2, 4, 6), np.float32)
    run(multi, a, b, y)
    assert_within_gamma(y, a, b, ((1, 3), (3, 0)), ((2, 1),), I.f32)
    (node,) = [n for n in multi.trace().walk() if n.op.name == "contract"]
    assert node.attr("reduce") == ((1, 3), (3, 0))  # negative axes normalised
    assert node.outputs[0].type.shape == (2, 4, 6)


@intent.kernel
def ordering(a: I.In[I.i32, (3, 2)], b: I.In[I.i32, (4, 3, 5)], y: I.Out[I.i32, (2, 4, 5)]):
    # lhs [K, M], rhs [N, K, P] -> [M, N, P]: lhs free axes first, then the rhs free axes in rhs order.
    y[:, :, :] = I.contract(a[:, :], b[:, :, :], reduce=((0, 1),), acc_dtype=I.i32)


def test_contract_generic_result_axis_order(run):
    rng = np.random.default_rng(10)
    a = rng.integers(-50, 50, (3, 2)).astype(np.int32)
    b = rng.integers(-50, 50, (4, 3, 5)).astype(np.int32)
    y = np.zeros((2, 4, 5), np.int32)
    run(ordering, a, b, y)
    assert np.array_equal(y, np.einsum("km,nkp->mnp", a.astype(np.int64), b.astype(np.int64)))
    assert_exact_mod(y, a, b, ((0, 1),), (), I.i32)


@intent.kernel
def batched_dynamic(a: I.In[I.f64, ("B", "M", "K")], b: I.In[I.f64, ("K", "B")], y: I.Out[I.f64, ("B", "M")]):
    y[:, :] = I.contract(a[:, :, :], b[:, :], reduce=((2, 0),), batch=((0, 1),), acc_dtype=I.f64)


def test_contract_generic_batch_with_dynamic_extents(run):
    rng = np.random.default_rng(11)
    a, b = floats(rng, (3, 4, 10), np.float64), floats(rng, (10, 3), np.float64)
    y = np.zeros((3, 4))
    run(batched_dynamic, a, b, y)
    assert_within_gamma(y, a, b, ((2, 0),), ((0, 1),), I.f64)


# --- inside control flow -----------------------------------------------------------------------------------------

@intent.kernel
def in_loop(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "M")], y: I.Out[I.f32, ("M", "M")], n: I.index):
    def body(i, acc):
        return acc + I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    y[:, :] = I.loop(I.domain(0, n), I.zeros((a.shape[0], a.shape[0]), I.f32), body)


def test_contract_inside_a_loop_body(run):
    rng = np.random.default_rng(16)
    a = np.round(floats(rng, (3, 4)) * 8) / 8
    b = np.round(floats(rng, (4, 3)) * 8) / 8
    y = np.zeros((3, 3), np.float32)
    run(in_loop, a.astype(np.float32), b.astype(np.float32), y, 3)
    assert np.array_equal(y, 3 * (a.astype(np.float64) @ b.astype(np.float64)))  # dyadic inputs: exact


# --- dynamic extents and errors -----------------------------------------------------------------------------------

@intent.kernel
def _errors(m: I.In[I.f32, ("M", "K")], n: I.In[I.f32, ("K", "N")], j: I.In[I.f32, ("J", "N")],
            v: I.In[I.f32, ("K",)], w: I.In[I.f32, ("J",)], h: I.In[I.f16, ("K", "N")], p: I.In[I.bool, ("K",)],
            b3: I.In[I.f32, (3, "M", "K")], b2: I.In[I.f32, (2, "K", "N")], k1: I.In[I.f32, ("M", 1)],
            k4: I.In[I.f32, (4, "N")], s: I.f32, CASE: I.Constexpr[int] = 0):
    views = dict(m=m[:, :], n=n[:, :], j=j[:, :], v=v[:], w=w[:], h=h[:, :], p=p[:], b3=b3[:, :, :],
                 b2=b2[:, :, :], k1=k1[:, :], k4=k4[:, :], s=s, view=m)
    ERRORS[CASE][0](views)


ERRORS = [
    # (builder, exception type, message pattern)
    (lambda t: I.matmul(t["m"], t["j"], acc_dtype=I.f32), ValueError, r"inner \(K\) extents differ.*K.*J"),
    (lambda t: I.contract(t["m"], t["j"], reduce=((1, 0),), acc_dtype=I.f32), ValueError,
     r"reduce pair \(1, 0\).*extent K.*extent J"),
    (lambda t: I.dot(t["v"], t["w"], acc_dtype=I.f32), ValueError, r"extent K.*extent J"),
    (lambda t: I.matmul(t["m"], t["h"], acc_dtype=I.f32), TypeError,
     r"lhs is f32 and rhs is f16.*I\.cast\(rhs, I\.f32\)"),
    (lambda t: I.dot(t["p"], t["p"], acc_dtype=I.i32), TypeError, r"lhs has dtype bool"),
    (lambda t: I.matmul(t["m"], t["n"], acc_dtype=I.bool), TypeError, r"acc_dtype must be a numeric"),
    (lambda t: I.matmul(t["m"], t["n"], acc_dtype=None), TypeError, r"acc_dtype must be given explicitly"),
    (lambda t: I.matmul(t["m"], t["v"], acc_dtype=I.f32), TypeError, r"rhs must have rank >= 2.*never promotes"),
    (lambda t: I.matvec(t["v"], t["v"], acc_dtype=I.f32), TypeError, r"matrix must have rank >= 2"),
    (lambda t: I.dot(t["m"], t["v"], acc_dtype=I.f32), TypeError, r"two rank-1 tensors.*lhs has rank 2"),
    (lambda t: I.outer(t["v"], t["m"]), TypeError, r"I\.outer takes two rank-1.*rhs has rank 2"),
    (lambda t: I.outer(t["v"], t["h"][0, :]), TypeError, r"I\.outer.*lhs is f32 and rhs is f16"),
    (lambda t: I.matmul(t["s"], t["n"], acc_dtype=I.f32), TypeError, r"lhs must be a ranked tensor.*scalar"),
    (lambda t: I.matmul(t["view"], t["n"], acc_dtype=I.f32), TypeError, r"lhs is the view m.*m\[:, :\]"),
    (lambda t: I.matmul(t["m"], t["n"], acc_dtype=I.f32, transpose_lhs=1), TypeError, r"transpose_lhs must be"),
    (lambda t: I.matmul(t["m"], t["n"], acc_dtype=I.f32, transpose_rhs=True), ValueError,
     r"rhs axis 1 \(after transpose_rhs=True\) has extent N"),
    (lambda t: I.matvec(t["m"], t["v"], acc_dtype=I.f32, transpose=True), ValueError,
     r"matrix axis 0 \(after transpose=True\) has extent M.*vector axis 0 has extent K"),
    (lambda t: I.matmul(t["k1"], t["k4"], acc_dtype=I.f32), ValueError, r"extent 1.*extent 4.*never broadcasts"),
    (lambda t: I.matmul(t["b3"], t["b2"], acc_dtype=I.f32), ValueError, r"batch axes: extents 3 and 2"),
    (lambda t: I.contract(t["m"], t["n"], reduce=(), acc_dtype=I.f32), ValueError, r"at least one"),
    (lambda t: I.contract(t["m"], t["n"], reduce=(1, 0), acc_dtype=I.f32), TypeError,
     r"tuple of \(lhs_axis, rhs_axis\)"),
    (lambda t: I.contract(t["m"], t["n"], reduce=((2, 0),), acc_dtype=I.f32), ValueError,
     r"lhs axis 2 is out of range for the lhs rank 2"),
    (lambda t: I.contract(t["m"], t["n"], reduce=((1, -3),), acc_dtype=I.f32), ValueError,
     r"rhs axis -3 is out of range"),
    (lambda t: I.contract(t["m"], t["n"], reduce=((1, 0.5),), acc_dtype=I.f32), TypeError, r"rhs axis must be an int"),
    (lambda t: I.contract(t["m"], t["m"], reduce=((1, 1), (-1, 0)), acc_dtype=I.f32), ValueError,
     r"lhs axis 1 appears twice in reduce"),
    (lambda t: I.contract(t["b3"], t["b3"], reduce=((2, 2),), batch=((0, 0), (1, 0)), acc_dtype=I.f32), ValueError,
     r"rhs axis 0 appears twice in batch"),
    (lambda t: I.contract(t["m"], t["m"], reduce=((1, 1),), batch=((1, 0),), acc_dtype=I.f32), ValueError,
     r"lhs axis 1 is both reduced and batched"),
    (lambda t: I.contract(t["b3"], t["b2"], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32), ValueError,
     r"batch pair \(0, 0\) pairs lhs axis 0 of extent 3 with rhs axis 0 of extent 2"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_contract_errors_name_the_culprit(case):
    _, exc, pattern = ERRORS[case]
    with pytest.raises(TraceError) as info:
        _errors.trace(CASE=case)
    assert isinstance(info.value, exc)
    assert re.search(pattern, str(info.value)), str(info.value)
    assert "test_contract.py" in str(info.value)  # located at the user's line


def test_contract_same_named_extents_are_provably_equal(run):
    # M and K are one extent each across the two views: no error, and the run checks the sizes agree.
    rng = np.random.default_rng(17)
    a, b = floats(rng, (2, 3)), floats(rng, (3, 2))
    c = np.zeros((2, 2), np.float32)
    run(matmul_f32, a, b, c)
    assert_within_gamma(c, a, b, *MATMUL, I.f32)
    with pytest.raises(ValueError, match="K"):
        run(matmul_f32, a, floats(rng, (4, 2)), c)


@intent.kernel
def self_update(y: I.InOut[I.f64, ("N", "N")], w: I.In[I.f64, ("N", "N")]):
    y[:, :] = I.matmul(y[:, :], w[:, :], acc_dtype=I.f64)


def test_contract_result_may_overwrite_an_operand_view(run):
    y = np.arange(9, dtype=np.float64).reshape(3, 3)
    w = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], np.float64)  # a column rotation: exact
    want = y @ w
    run(self_update, y, w)
    assert np.array_equal(y, want)
