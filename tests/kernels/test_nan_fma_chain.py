"""NaN payloads through ``I.fma`` and through flash attention written with it (T3: payloads are values; the result
of an operation with NaN operands is its first NaN operand, quieted, as x86 gives it: for fma (vfmadd) in the order
a, b, c).

The references are hand-derived bits: the first NaN of (a, b, c) with the quiet bit set. Every case runs at many
positions of a long array (NumPy's add and multiply loops kept the second operand's payload in their scalar tail and
for a broadcast scalar, which made generic's fma depend on where an element stood).

Flash attention spelled ``I.fma(s, scale, -(m * scale))`` (the score scaled and the row max subtracted in one op)
has a row of scores holding two NaN payloads once a key is NaN: the NaN score keeps its own sign (a is fma's first
NaN), every other score gets the negated max's (T3: ``-x`` flips a NaN's sign bit). The row sum, the PV contraction
and the fold's segmentation may combine them in any order (T5, T10, spec §9), so the output's NaN sign is free there;
spelled ``m * -scale`` (the same value for every non-NaN m: RNE is symmetric) the row holds one payload and every
target returns its bits.
"""
import itertools
import math

import numpy as np
import pytest

from example_modules import example
from nan_formats import FORMATS

import intent_trace as intent
from intent_trace import I

FA = example("flash_attention")

ONE_AND_HALF = 1.5  # fma(1.5, 1.5, 1.5) = 3.75 exactly in every format


def _dtype(name):
    return getattr(I, name)


def _nan_result(name, bits: int) -> int:
    """The NaN ``bits`` quieted, as an f16/bf16 result rounded from double keeps it: f16 its payload (NumPy's
    conversion), bf16 only its sign (ml_dtypes' conversion, which every target follows: README, T4 functions)."""
    quiet = FORMATS[name][1]
    return (bits & 0x8000) | 0x7FC0 if name == "bf16" else bits | quiet


def _expected(name, triple, finite: int, result: int) -> int:
    first = next((x for x in triple if x != finite), None)
    return result if first is None else _nan_result(name, first)


def _cases(name):
    """Every operand triple over {1.5, each NaN}: 125 cases, with the hand-derived result bits of each."""
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    finite = int(np.array(ONE_AND_HALF, np_dtype).view(unsigned))
    result = int(np.array(3.75, np_dtype).view(unsigned))
    triples = list(itertools.product([finite, *nans], repeat=3))
    want = [_expected(name, triple, finite, result) for triple in triples]
    return np.array(triples, unsigned), np.array(want, unsigned)


def _positions(rows: np.ndarray, shifts=(0, 7, 16, 31)) -> np.ndarray:
    """The cases again at several offsets (each case at SIMD-body and tail positions of any vector width)."""
    return np.concatenate([np.roll(rows, s, axis=0) for s in shifts])


def _fma_kernel(name):
    dt = _dtype(name)

    @intent.kernel
    def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], c: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = I.fma(a[d], b[d], c[d])
    return k


def _fma_scalar_kernel(name):
    """b a scalar operand (broadcast over the row)."""
    dt = _dtype(name)

    @intent.kernel
    def k(a: I.In[dt, ("N",)], c: I.In[dt, ("N",)], out: I.Out[dt, ("N",)], b: dt):
        d = I.domain(0, a.shape[0])
        out[d] = I.fma(a[d], b, c[d])
    return k


_KERNELS = {name: (_fma_kernel(name), _fma_scalar_kernel(name)) for name in FORMATS}


def _hexes(x):
    return [hex(int(v)) for v in x]


@pytest.mark.parametrize("name", list(FORMATS))
def test_fma_keeps_the_first_nan_operand_quieted(run, name):
    triples, want = _cases(name)
    unsigned = FORMATS[name][0]
    rows, want = _positions(triples), _positions(want)
    np_dtype = _dtype(name).np
    a, b, c = (np.ascontiguousarray(rows[:, i]).view(np_dtype) for i in range(3))
    out = np.zeros(len(rows), np_dtype)
    run(_KERNELS[name][0], a, b, c, out)
    got = out.view(unsigned)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(_hexes(rows[i]), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]


def _scalar(name, bits: int):
    """A scalar argument of these bits (bf16's is a Python float: a bf16 NaN's sign survives it, as its results')."""
    value = np.array(bits, FORMATS[name][0]).view(_dtype(name).np)[()]
    return float(value) if name == "bf16" else value


@pytest.mark.parametrize("name", list(FORMATS))
def test_fma_with_a_scalar_operand_keeps_the_first_nan(run, name):
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    triples, _ = _cases(name)
    rows = _positions(triples)
    a, c = (np.ascontiguousarray(rows[:, i]).view(np_dtype) for i in (0, 2))
    finite = int(np.array(ONE_AND_HALF, np_dtype).view(unsigned))
    result = int(np.array(3.75, np_dtype).view(unsigned))
    for b in (finite, *nans):
        out = np.zeros(len(rows), np_dtype)
        run(_KERNELS[name][1], a, c, out, _scalar(name, b))
        want = np.array([_expected(name, (int(x), b, int(z)), finite, result) for x, z in rows[:, [0, 2]]], unsigned)
        got = out.view(unsigned)
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, (hex(b), [(_hexes(rows[i]), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]])


# --- flash attention written with I.fma -----------------------------------------------------------------------

def _summarize(k, v, q, scale_log2, negate_after: bool):
    """``summarize_fast`` with the scale applied and the max subtracted by one fma; the fold's max is in log2 units
    as ``combine_fast`` wants. ``negate_after``: the subtrahend spelled ``-(m * scale)``, else ``m * -scale``."""
    s = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    m = I.reduce.max(s, axis=1)
    shift = -(FA.rows(m, s) * scale_log2) if negate_after else FA.rows(m, s) * -scale_log2
    p = I.exp2(I.fma(s, scale_log2, shift), approximate=True)
    return m * scale_log2, I.reduce.sum(p, axis=1), I.matmul(I.cast(p, I.f16), v, acc_dtype=I.f32)


@intent.fn
def _summarize_negated(k, v, q, scale_log2):
    return _summarize(k, v, q, scale_log2, True)


@intent.fn
def _summarize_negative_scale(k, v, q, scale_log2):
    return _summarize(k, v, q, scale_log2, False)


def _attention(summarize):
    @intent.kernel
    def attention_fma(q: I.In[I.f16, ("B", "L", "D")], k: I.In[I.f16, ("B", "S", "D")],
                      v: I.In[I.f16, ("B", "S", "D")], out: I.Out[I.f16, ("B", "L", "D")], scale: I.f32):
        scale_log2 = scale * FA.LOG2E
        for b in I.parallel(I.domain(0, q.shape[0])):
            queries = q[b, :, :]
            L, D = queries.shape
            identity = (I.full((L,), FA.NEG_INF, I.f32), I.zeros((L,), I.f32), I.zeros((L, D), I.f32))
            m, l, acc = I.region_fold(source=(k[b, :, :], v[b, :, :]), axis=0, summarize=summarize,
                                      combine=FA.combine_fast, identity=identity, operands=(queries, scale_log2))
            out[b, :, :] = I.cast(acc / FA.rows(l, acc), I.f16)
    return attention_fma


ATTENTION_NEGATED = _attention(_summarize_negated)
ATTENTION_NEGATIVE_SCALE = _attention(_summarize_negative_scale)


@intent.kernel
def fma_scores(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("S", "D")], t: I.Out[I.f32, ("L", "S")], scale: I.f32):
    """The fused step alone: t = fma(s, scale, -(max(s) * scale)) for each row of scores s = q k^T."""
    s = I.matmul(q[:, :], k[:, :], transpose_rhs=True, acc_dtype=I.f32)
    m = I.reshape(I.reduce.max(s, axis=1), (s.shape[0], 1))
    t[:, :] = I.fma(s, scale, -(m * scale))


S_NAN_F16 = 0x7C01  # a signalling f16 NaN, payload 1 (the shared NaN test's key)
NAN_F32 = 0x7FC0_2000  # it widened to f32 (payload shifted by 13) and quieted
NAN_F16 = 0x7E01  # that NaN rounded back to f16
B, L, S, D = 2, 3, 5, 4  # S = 5: a shape where generic's and cpu's fold combined the row's two NaNs differently


def _operands(seed=21):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(shape).astype(np.float16) for shape in ((B, L, D), (B, S, D), (B, S, D)))
    k[1, 0, 2] = np.array(S_NAN_F16, np.uint16).view(np.float16)
    return q, k, v, 1.0 / math.sqrt(D)


def test_fused_scores_hold_two_nan_payloads(run):
    # by hand: the NaN key makes every score of its column NaN (one NaN term in each dot product: its payload,
    # quieted) and so every row max; fma(NaN score, scale, -(NaN max)) is its first NaN operand, a, and
    # fma(finite score, scale, -(NaN max)) its c, the max's NaN with the sign flipped by the negation
    q, k, _, scale = _operands()
    t = np.zeros((L, S), np.float32)
    run(fma_scores, q[1], k[1], t, scale * FA.LOG2E)
    want = np.full((L, S), NAN_F32 | 0x8000_0000, np.uint32)
    want[:, 0] = NAN_F32
    assert np.array_equal(t.view(np.uint32), want), [_hexes(row) for row in t.view(np.uint32)]


def _check_attention(out, q, k, v, scale, nan_bits):
    """Batch 0 (no NaN) within the example's bound of the float64 reference; batch 1 NaN everywhere, each element's
    bits in ``nan_bits``."""
    want = FA.reference_f16(q[:1], k[:1], v[:1], scale)
    bound = 2.0**-9 * float(np.abs(v[0]).max())
    assert float(np.abs(out[:1].astype(np.float64) - want).max()) < bound
    got = out[1].view(np.uint16)
    assert np.isin(got, list(nan_bits)).all(), sorted({hex(int(x)) for x in got.reshape(-1)})


def test_fma_attention_with_one_payload_gives_its_bits(run):
    # m * -scale keeps the max's NaN as it is (a multiplication does not flip a NaN's sign, T3), so each score of the
    # NaN row is the same NaN and so are l, acc and acc / l: exactly the key's payload, quieted, on every target
    q, k, v, scale = _operands()
    out = np.zeros((B, L, D), np.float16)
    run(ATTENTION_NEGATIVE_SCALE, q, k, v, out, scale)
    _check_attention(out, q, k, v, scale, {NAN_F16})


def test_fma_attention_with_two_payloads_gives_either(run):
    # -(m * scale): the row holds +NaN (the NaN key's score) and -NaN (every other score); the sum, the contraction
    # and the fold's segmentation combine them in an order T5/T10/§9 leave free, so either sign is right
    q, k, v, scale = _operands()
    out = np.zeros((B, L, D), np.float16)
    run(ATTENTION_NEGATED, q, k, v, out, scale)
    _check_attention(out, q, k, v, scale, {NAN_F16, NAN_F16 | 0x8000})


def test_generic_segmentations_agree_on_the_one_payload_spelling():
    # generic segments each fold at random (seeded): every segmentation gives the one payload's bits
    q, k, v, scale = _operands()
    for seed in range(12):
        out = np.zeros((B, L, D), np.float16)
        intent.compile(ATTENTION_NEGATIVE_SCALE, target="generic", seed=seed)(q, k, v, out, scale)
        assert (out[1].view(np.uint16) == NAN_F16).all(), seed


# --- add and mul: commutative, so a compiler may swap their operands ------------------------------------------

def _binary_kernel(name, op):
    dt = _dtype(name)

    @intent.kernel
    def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] + b[d] if op == "add" else a[d] * b[d]
    return k


_BINARY = {(name, op): _binary_kernel(name, op) for name in FORMATS for op in ("add", "mul")}


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_add_and_mul_keep_the_first_nan_operand_quieted(run, name, op):
    # by hand: 1.5 + 1.5 = 3, 1.5 * 1.5 = 2.25 exactly; a NaN operand gives the first NaN operand, quieted (x86)
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    finite = int(np.array(ONE_AND_HALF, np_dtype).view(unsigned))
    result = int(np.array(3.0 if op == "add" else 2.25, np_dtype).view(unsigned))
    pairs = list(itertools.product([finite, *nans], repeat=2))
    rows = _positions(np.array(pairs, unsigned))
    want = np.array([_expected(name, tuple(int(x) for x in row), finite, result) for row in rows], unsigned)
    a, b = (np.ascontiguousarray(rows[:, i]).view(np_dtype) for i in range(2))
    out = np.zeros(len(rows), np_dtype)
    run(_BINARY[name, op], a, b, out)
    got = out.view(unsigned)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(_hexes(rows[i]), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]
