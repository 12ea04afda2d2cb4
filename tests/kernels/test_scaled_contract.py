"""Scaled contract (spec §11, numerics T5, T6) on every executable target.

References are independent of the library: operands are decoded here with ml_dtypes directly (element code
times 2^(s - 127); a 0xFF scale makes its group NaN), products and sums are exact ``Fraction``s, and results
are held to T5's bound |computed - exact| <= gamma_n * sum|t_i| (n = K = G * group_size).
"""

import math
import re
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

ML = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn}
NP = {I.f32: np.float32, I.f64: np.float64}
UNIT = {I.f32: Fraction(1, 2 ** 24), I.f64: Fraction(1, 2 ** 53)}


def codes_of(carrier: np.ndarray, fmt, axis: int) -> np.ndarray:
    """u8 element codes along ``axis`` (e2m1: bits 3..0 first, then bits 7..4)."""
    if fmt is I.e4m3:
        return carrier
    c = np.moveaxis(carrier, axis, -1)
    out = np.empty(c.shape[:-1] + (2 * c.shape[-1],), np.uint8)
    out[..., 0::2], out[..., 1::2] = c & 15, c >> 4
    return np.moveaxis(out, -1, axis)


def scale_of(s: np.ndarray) -> np.ndarray:
    return s.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def dense_lhs(a, sa, fmt) -> np.ndarray:
    """[M, G, C] codes, [M, G] scales -> float64 [M, K]."""
    v = codes_of(a, fmt, 2).view(ML[fmt.name]).astype(np.float64) * scale_of(sa)[:, :, None]
    return v.reshape(v.shape[0], -1)


def dense_rhs(b, sb, fmt) -> np.ndarray:
    """[G, C, N] codes, [N, G] scales -> float64 [K, N]."""
    v = codes_of(b, fmt, 1).view(ML[fmt.name]).astype(np.float64) * scale_of(sb).T[:, None, :]
    return v.reshape(-1, v.shape[2])


def assert_scaled_result(got, a, sa, b, sb, fl, fr, acc):
    lhs, rhs = dense_lhs(a, sa, fl), dense_rhs(b, sb, fr)
    m, k = lhs.shape
    n = rhs.shape[1]
    got = np.asarray(got)
    assert got.shape == (m, n) and got.dtype == NP[acc]
    bound = k * UNIT[acc] / (1 - k * UNIT[acc])
    for i in range(m):
        for j in range(n):
            terms = lhs[i] * rhs[:, j]  # exact in float64 (few significant bits, moderate exponents)
            if np.isnan(terms).any():
                assert np.isnan(got[i, j]), (i, j, got[i, j])
                continue
            exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
            mag = sum((Fraction(abs(float(t))) for t in terms), Fraction(0))
            value = float(got[i, j])
            assert math.isfinite(value), (i, j, value)
            assert abs(Fraction(value) - exact) <= bound * mag, (i, j, value, float(exact))


def random_operands(rng, m, g, n, fl, fr, gs, scale_range=(100, 150)):
    cl, cr = gs // (2 if fl is I.e2m1 else 1), gs // (2 if fr is I.e2m1 else 1)

    def codes(shape, fmt):
        c = rng.integers(0, 256, shape, dtype=np.uint8)
        if fmt is I.e4m3:  # no NaN codes in the data (NaN comes from scales here)
            c[(c & 0x7F) == 0x7F] = 0x3C
        return c

    a = codes((m, g, cl), fl)
    sa = rng.integers(*scale_range, (m, g), dtype=np.uint8)
    b = codes((g, cr, n), fr)
    sb = rng.integers(*scale_range, (n, g), dtype=np.uint8)
    return a, sa, b, sb


def scaled_kernel(m, g, n, fl, fr, gs, acc):
    cl, cr = gs // (2 if fl is I.e2m1 else 1), gs // (2 if fr is I.e2m1 else 1)

    @intent.kernel
    def k(a: I.In[I.u8, (m, g, cl)], sa: I.In[I.u8, (m, g)], b: I.In[I.u8, (g, cr, n)], sb: I.In[I.u8, (n, g)],
          c: I.Out[acc, (m, n)]):
        c[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=fl, rhs_format=fr,
                                  group_size=gs, acc_dtype=acc)

    return k


@pytest.mark.parametrize("fl, fr, gs, acc", [
    (I.e2m1, I.e4m3, 32, I.f32), (I.e4m3, I.e2m1, 32, I.f32), (I.e4m3, I.e4m3, 16, I.f32),
    (I.e2m1, I.e2m1, 32, I.f64), (I.e4m3, I.e2m1, 8, I.f64),
])
def test_scaled_matmul_matches_ml_dtypes_reference(run, fl, fr, gs, acc):
    rng = np.random.default_rng(gs + len(fl.name + fr.name) + acc.bits)
    m, g, n = 3, 3, 4
    a, sa, b, sb = random_operands(rng, m, g, n, fl, fr, gs)
    c = np.full((m, n), np.nan, NP[acc])
    run(scaled_kernel(m, g, n, fl, fr, gs, acc), a, sa, b, sb, c)
    assert_scaled_result(c, a, sa, b, sb, fl, fr, acc)


def test_scaled_matmul_nan_scale_poisons_exactly_the_outputs_its_group_reaches(run):
    rng = np.random.default_rng(11)
    m, g, n, gs = 4, 2, 3, 32
    a, sa, b, sb = random_operands(rng, m, g, n, I.e2m1, I.e4m3, gs)
    a[1, 0] = 0  # a NaN scale over zero codes is still NaN
    sa[1, 0] = 0xFF  # lhs row 1, group 0: the whole output row is NaN
    sb[2, 1] = 0xFF  # rhs column 2, group 1: the whole output column is NaN
    c = np.zeros((m, n), np.float32)
    run(scaled_kernel(m, g, n, I.e2m1, I.e4m3, gs, I.f32), a, sa, b, sb, c)
    nan = np.isnan(c)
    want = np.zeros((m, n), bool)
    want[1, :] = True
    want[:, 2] = True
    assert np.array_equal(nan, want)
    assert_scaled_result(c, a, sa, b, sb, I.e2m1, I.e4m3, I.f32)


def test_scaled_matmul_extreme_scales_stay_exact(run):
    """Scales near 2^+-127 with products that are finite in f32: every term is exact, the sum within T5."""
    m, g, n, gs = 2, 1, 2, 4
    a = np.array([[[0x3C, 0x00, 0x00, 0x38]], [[0xBC, 0x38, 0x38, 0x38]]], np.uint8)  # e4m3 1.5, 0, 0, 1
    sa = np.array([[127 + 60], [127 - 60]], np.uint8)
    b = np.full((g, gs, n), 0x38, np.uint8)  # 1.0
    sb = np.array([[127 - 60], [127 + 60]], np.uint8)
    c = np.zeros((m, n), np.float32)
    run(scaled_kernel(m, g, n, I.e4m3, I.e4m3, gs, I.f32), a, sa, b, sb, c)
    assert c.tolist() == [[2.5, 2.5 * 2.0 ** 120], [1.5 * 2.0 ** -120, 1.5]]


@intent.kernel
def scaled_generic(a: I.In[I.u8, (2, 2, 16)], sa: I.In[I.u8, (2, 2)], b: I.In[I.u8, (2, 32, 3)],
                   sb: I.In[I.u8, (3, 2)], c: I.Out[I.f32, (2, 3)]):
    c[:, :] = I.scaled_contract(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                                lhs_group_size=32, rhs_group_size=32, reduce=((1, 0), (2, 1)), batch=(),
                                acc_dtype=I.f32)


def test_scaled_contract_generic_spelling_is_the_same_node(run):
    (node,) = [x for x in scaled_generic.trace().walk() if x.op.name == "scaled_contract"]
    assert node.attr("lhs_format") is I.e2m1 and node.attr("rhs_format") is I.e4m3
    assert node.attr("group_size") == 32 and node.attr("acc_dtype") is I.f32
    assert node.outputs[0].type.shape == (2, 3)
    rng = np.random.default_rng(5)
    a, sa, b, sb = random_operands(rng, 2, 2, 3, I.e2m1, I.e4m3, 32)
    c = np.zeros((2, 3), np.float32)
    run(scaled_generic, a, sa, b, sb, c)
    assert_scaled_result(c, a, sa, b, sb, I.e2m1, I.e4m3, I.f32)


@intent.kernel
def scaled_dynamic(a: I.In[I.u8, ("M", "G", 16)], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", 16, "N")],
                   sb: I.In[I.u8, ("N", "G")], c: I.Out[I.f64, ("M", "N")]):
    c[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e2m1,
                              group_size=32, acc_dtype=I.f64)


@pytest.mark.parametrize("g", [0, 2])
def test_scaled_matmul_dynamic_extents_and_empty_reduction(run, g):
    rng = np.random.default_rng(9)
    a, sa, b, sb = random_operands(rng, 3, g, 2, I.e2m1, I.e2m1, 32)
    c = np.full((3, 2), np.nan)
    run(scaled_dynamic, a, sa, b, sb, c)
    if g == 0:
        assert (c == 0).all()
    else:
        assert_scaled_result(c, a, sa, b, sb, I.e2m1, I.e2m1, I.f64)


# --- schema errors --------------------------------------------------------------------------------------------

def _trace(shapes, dtypes=(I.u8,) * 4, **kw):
    opts = dict(lhs_format=I.e2m1, rhs_format=I.e4m3, group_size=32, acc_dtype=I.f32)
    opts.update(kw)
    generic = opts.pop("generic", None)

    @intent.kernel
    def k(a: I.In[dtypes[0], shapes[0]], sa: I.In[dtypes[1], shapes[1]], b: I.In[dtypes[2], shapes[2]],
          sb: I.In[dtypes[3], shapes[3]], c: I.Out[I.f32, (2, 3)]):
        views = (a[...], sa[...], b[...], sb[...])
        if generic is None:
            c[:, :] = I.scaled_matmul(*views, **opts)
        else:
            gs = opts.pop("group_size")
            c[:, :] = I.scaled_contract(*views, lhs_group_size=gs, rhs_group_size=generic.get("rhs_gs", gs),
                                        reduce=generic.get("reduce", ((1, 0), (2, 1))), batch=generic.get("batch", ()),
                                        **opts)

    return k.trace()


GOOD = ((2, 4, 16), (2, 4), (4, 32, 3), (3, 4))
ERRORS = [
    (dict(shapes=((2, 4, 32),) + GOOD[1:]), r"lhs axis 2 \(C_lhs\) has extent 32.*e2m1.*group size 32.*16"),
    (dict(shapes=GOOD[:2] + ((4, 16, 3), GOOD[3])), r"rhs axis 1 \(C_rhs\) has extent 16.*e4m3.*32"),
    (dict(shapes=GOOD[:2] + ((5, 32, 3), (3, 5))), r"lhs axis 1 \(G\) has extent 4 but rhs axis 0 \(G\) has extent 5"),
    (dict(shapes=(GOOD[0], (3, 4)) + GOOD[2:]), r"lhs axis 0 \(M\) has extent 2 but lhs_scale axis 0 \(M\) has "
                                                 r"extent 3"),
    (dict(shapes=(GOOD[0], (2, 5)) + GOOD[2:]), r"lhs_scale axis 1 \(G\) has extent 5"),
    (dict(shapes=GOOD[:3] + ((4, 4),)), r"rhs axis 2 \(N\) has extent 3 but rhs_scale axis 0 \(N\) has extent 4"),
    (dict(shapes=GOOD[:3] + ((3, 2),)), r"rhs axis 0 \(G\) has extent 4 but rhs_scale axis 1 \(G\) has extent 2"),
    (dict(shapes=GOOD[:3] + ((3, 4, 1),)), r"rhs_scale must have rank 2 \[N, G\]"),
    (dict(shapes=GOOD, dtypes=(I.u8, I.i8, I.u8, I.u8)), r"lhs_scale must be u8 codes.*got dtype i8"),
    (dict(shapes=GOOD, acc_dtype=I.f16), r"acc_dtype must be I\.f32 or I\.f64"),
    (dict(shapes=GOOD, lhs_format=I.e8m0), r"lhs_format is I\.e8m0"),
    (dict(shapes=GOOD, rhs_format=I.f32), r"rhs_format must be I\.e2m1 or I\.e4m3"),
    (dict(shapes=((2, 4, 15),) + GOOD[1:], group_size=31), r"lhs group size 31 must be even for e2m1"),
    (dict(shapes=GOOD, generic=dict(rhs_gs=16)), r"lhs group size 32 and the rhs group size 16 differ"),
    (dict(shapes=GOOD, generic=dict(reduce=((1, 0),))), r"reduce must be \(\(1, 0\), \(2, 1\)\)"),
    (dict(shapes=GOOD, generic=dict(batch=((0, 2),))), r"batch must be \(\)"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_scaled_schema_errors_name_the_axis(case):
    kw, pattern = ERRORS[case]
    with pytest.raises(TraceError) as info:
        _trace(**kw)
    assert re.search(pattern, str(info.value)), str(info.value)
