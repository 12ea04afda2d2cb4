"""Encoded payloads against independent references (hashlib/struct, exact integer and Fraction arithmetic)."""
from __future__ import annotations

import hashlib
import itertools
import math
import struct
from fractions import Fraction

import attrs
import numpy as np
import pytest

from intent_trace.oracle.verification.payloads import (
    AnalyticCase, EncodedBoolPayload, EncodedFloat32Payload, EncodedInputs, EncodedInt32Payload,
    ExactStructuralPayload, adversarial_float32_payload, analytic_cases, arbitrary_float32_payload,
    exact_structural_payload, wide_exponent_float32_payload)


def sha_words(words) -> str:
    return hashlib.sha256(struct.pack(f"<{len(words)}I", *words)).hexdigest()


def f32_word(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def word_f32(w: int) -> np.float32:
    return np.array([w], dtype=np.uint32).view(np.float32)[0]


# --------------------------------------------------------------------------------------------- from_bits
def test_from_bits_hashes_little_endian_words():
    words = [0, 1, 0x3F800000, 0xFFFFFFFF, 0x80000000]
    for cls in (EncodedFloat32Payload, EncodedInt32Payload):
        p = cls.from_bits(words)
        assert p.bits == tuple(words) and type(p.bits) is tuple
        assert p.bit_hash == sha_words(words)
        assert len(p) == 5
    assert EncodedFloat32Payload.from_bits([]).bit_hash == hashlib.sha256(b"").hexdigest()


def test_from_bits_canonicalises_numpy_integers():
    p = EncodedFloat32Payload.from_bits([np.uint32(7), np.int64(2**32 - 1), np.uint8(3)])
    assert p.bits == (7, 2**32 - 1, 3) and all(type(w) is int for w in p.bits)
    q = EncodedFloat32Payload.from_bits(np.array([7, 2**32 - 1, 3], dtype=np.uint64))
    assert q == p and all(type(w) is int for w in q.bits)


@pytest.mark.parametrize("bad", [[True], [np.bool_(False)], [1.0], ["1"], [None], np.array([1.0]),
                                 np.array([True]), 5, [np.float32(1)]])
def test_from_bits_rejects_non_integral_words_with_type_error(bad):
    with pytest.raises(TypeError):
        EncodedFloat32Payload.from_bits(bad)


@pytest.mark.parametrize("bad", [[-1], [2**32], [0, 2**40], np.array([-1, 3]), np.array([2**32], dtype=np.int64)])
def test_from_bits_rejects_out_of_range_words_with_value_error(bad):
    with pytest.raises(ValueError):
        EncodedInt32Payload.from_bits(bad)


# --------------------------------------------------------------------------------------------- Float32 values
def test_float32_from_values_matches_struct_encoding():
    values = [0.0, -0.0, 1.0, -2.5, 0.1, 1e-45, -3.4028234663852886e38, 2**-149, 123456789.0, 7, -(2**31)]
    p = EncodedFloat32Payload.from_values(values)
    assert p.bits == tuple(f32_word(float(v)) for v in values)
    assert p.bit_hash == sha_words(p.bits)


def test_float32_from_values_rounds_integers_once():
    # float(v) rounds down to 2**60 + 2**36, a binary32 tie that would round to even (2**60);
    # the exact integer lies above the tie, so correct rounding gives 2**60 + 2**37.
    v = 2**60 + 2**36 + 1
    assert EncodedFloat32Payload.from_values([v]).bits == (f32_word(float(2**60 + 2**37)),)
    assert EncodedFloat32Payload.from_values([np.int64(v)]).bits == (f32_word(float(2**60 + 2**37)),)
    assert EncodedFloat32Payload.from_values([2**24 + 1]).bits == (f32_word(2.0**24),)  # tie to even
    assert EncodedFloat32Payload.from_values([2**24 + 3]).bits == (f32_word(2.0**24 + 4),)


def test_float32_from_values_keeps_nonfinite_and_nan_payloads():
    payload_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000123400000))[0]
    values = [math.inf, -math.inf, math.nan, payload_nan]
    p = EncodedFloat32Payload.from_values(values)
    assert p.bits == tuple(int(w) for w in np.array(values).astype(np.float32).view(np.uint32))
    assert p.bits[3] != p.bits[2]  # the payload survives
    snan = word_f32(0x7F800001)
    assert EncodedFloat32Payload.from_values([snan]).bits == (0x7F800001,)  # float32 scalars bit for bit
    assert EncodedFloat32Payload.from_values(np.array([snan, snan])).bits == (0x7F800001,) * 2


@pytest.mark.parametrize("bad", [[1e39], [-1e39], [2**128], [-(10**400)], [2**128 - 2**103],
                                 np.array([1e300]), [np.float64(1e39)]])
def test_float32_from_values_rejects_overflow_with_value_error(bad):
    with pytest.raises(ValueError, match="overflows"):
        EncodedFloat32Payload.from_values(bad)


def test_float32_from_values_accepts_the_largest_value_below_the_overflow_tie():
    assert EncodedFloat32Payload.from_values([2**128 - 2**103 - 1]).bits == (0x7F7FFFFF,)


@pytest.mark.parametrize("bad", [[True], [np.bool_(True)], ["1.0"], [None], [1j], "12", np.array([True]),
                                 np.array(["a"]), 3.0])
def test_float32_from_values_rejects_non_numbers_with_type_error(bad):
    with pytest.raises(TypeError):
        EncodedFloat32Payload.from_values(bad)


def test_float32_values_and_arrays_decode_without_mutation():
    words = (0x3F800000, 0x80000000, 0x7F800001, 0x00000001)
    p = EncodedFloat32Payload.from_bits(words)
    vals = p.values()
    assert type(vals) is tuple and all(type(v) is float for v in vals)
    assert vals[0] == 1.0 and math.copysign(1.0, vals[1]) == -1.0 and math.isnan(vals[2]) and vals[3] == 2.0**-149
    arr = p.as_array()
    assert arr.dtype == np.float32 and arr.flags.writeable
    assert tuple(arr.view(np.uint32).tolist()) == words  # exact, signalling NaN included
    arr[:] = 0
    assert p.bits == words and tuple(p.as_array().view(np.uint32).tolist()) == words


# --------------------------------------------------------------------------------------------- Int32 and Bool
def test_int32_from_values_stores_twos_complement_words():
    values = [0, 1, -1, 2**31 - 1, -(2**31), np.int16(-5)]
    p = EncodedInt32Payload.from_values(values)
    assert p.bits == struct.unpack("<6I", struct.pack("<6i", *map(int, values)))
    assert p.bit_hash == sha_words(p.bits)
    assert p.values() == tuple(map(int, values)) and all(type(v) is int for v in p.values())
    assert p.as_array().dtype == np.int32 and p.as_array().tolist() == list(map(int, values))
    assert EncodedInt32Payload.from_values(np.array(values, dtype=np.int64)) == p


@pytest.mark.parametrize("bad, error", [([2**31], ValueError), ([-(2**31) - 1], ValueError),
                                        (np.array([2**31]), ValueError), ([True], TypeError), ([1.0], TypeError),
                                        ([np.bool_(0)], TypeError), (np.array([1.5]), TypeError)])
def test_int32_from_values_rejects_bad_values(bad, error):
    with pytest.raises(error):
        EncodedInt32Payload.from_values(bad)


def test_bool_payload_encodes_booleans_only():
    p = EncodedBoolPayload.from_values([True, False, np.bool_(True)])
    assert p.bits == (1, 0, 1) and p.bit_hash == sha_words([1, 0, 1])
    assert p.values() == (True, False, True) and p.as_array().dtype == np.bool_
    assert EncodedBoolPayload.from_values(np.array([True, False, True])) == p
    assert EncodedBoolPayload.from_bits([1, 0, 1]) == p
    with pytest.raises(TypeError):
        EncodedBoolPayload.from_values([1, 0])
    with pytest.raises(ValueError):
        EncodedBoolPayload.from_bits([2])


def test_payload_classes_never_compare_equal():
    words = [1, 0]
    payloads = [EncodedFloat32Payload.from_bits(words), EncodedInt32Payload.from_bits(words),
                EncodedBoolPayload.from_bits(words)]
    assert len({p.bit_hash for p in payloads}) == 1
    for a, b in itertools.combinations(payloads, 2):
        assert a != b


def test_records_are_frozen_and_retain_supplied_objects():
    bits, h = [1, 2], "not-validated"
    p = EncodedFloat32Payload(bits, h)
    assert p.bits is bits and p.bit_hash is h  # direct construction retains the objects it is given
    operands = (p,)
    records = [p, EncodedInt32Payload((1,), "h"), EncodedBoolPayload((1,), "h"), EncodedInputs(operands),
               ExactStructuralPayload(p, None, 1, 1, 24), AnalyticCase("c", "reduce_sum", ((1.0,),), (1.0,))]
    assert records[3].operands is operands
    for record in records:
        field = attrs.fields(type(record))[0].name
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(record, field, None)


# --------------------------------------------------------------------------------------------- EncodedInputs
def test_decode_one_payload_for_both_executions():
    x = arbitrary_float32_payload(3, 17)
    n = EncodedInt32Payload.from_values([-4, 9])
    inputs = EncodedInputs.of(x, n)
    assert inputs.operands == (x, n) and inputs.operands[0] is x
    assert inputs.target_values() == inputs.oracle_values() == (x.values(), n.values())
    assert inputs.input_hashes == (x.bit_hash, n.bit_hash) == (sha_words(x.bits), sha_words(n.bits))
    target, oracle = inputs.target_arrays(), inputs.oracle_arrays()
    for t, o in zip(target, oracle):
        assert t is not o and t.dtype == o.dtype and t.tobytes() == o.tobytes()
    target[0][:] = 0  # a target kernel scribbling on its inputs cannot reach the oracle
    assert inputs.oracle_arrays()[0].tobytes() == oracle[0].tobytes()
    assert inputs.to_json()["input_hashes"] == list(inputs.input_hashes)


def test_encoded_inputs_of_validates_operands_deeply():
    good = EncodedFloat32Payload.from_values([1.0])
    with pytest.raises(TypeError):
        EncodedInputs.of(good, (1.0,))
    with pytest.raises(TypeError):
        EncodedInputs.of(EncodedFloat32Payload([0x3F800000], good.bit_hash))  # list, not tuple
    with pytest.raises(ValueError, match="bit_hash"):
        EncodedInputs.of(EncodedFloat32Payload((0x40000000,), good.bit_hash))  # forged hash
    with pytest.raises(ValueError):
        EncodedInputs.of(EncodedBoolPayload((2,), sha_words([2])))
    assert EncodedInputs.of().input_hashes == ()


# --------------------------------------------------------------------------------------------- generators
@pytest.mark.parametrize("generate", [arbitrary_float32_payload, wide_exponent_float32_payload])
def test_generators_are_deterministic_and_finite(generate):
    a, b, c = generate(7, 500), generate(7, 500), generate(8, 500)
    assert a == b and a.bit_hash == b.bit_hash and a.bit_hash != c.bit_hash
    arr = a.as_array()
    assert len(a) == 500 and np.isfinite(arr).all() and (arr > 0).any() and (arr < 0).any()
    assert len(generate(1, 0)) == 0


@pytest.mark.parametrize("generate", [arbitrary_float32_payload, wide_exponent_float32_payload])
@pytest.mark.parametrize("seed, count, error", [(True, 3, TypeError), (1, 2.0, TypeError), ("1", 3, TypeError),
                                                (1, False, TypeError), (1, -1, ValueError), (-1, 3, ValueError)])
def test_generators_reject_bad_arguments(generate, seed, count, error):
    with pytest.raises(error):
        generate(seed, count)


def test_arbitrary_float32_payload_has_ordinary_magnitudes():
    arr = arbitrary_float32_payload(0, 2000).as_array()
    assert np.abs(arr).max() <= 4.0 and np.abs(arr).max() > 3.0


def test_wide_exponent_float32_payload_spreads_exponents_without_overflow():
    arr = wide_exponent_float32_payload(0, 10_000).as_array()
    exponents = np.frexp(arr)[1]
    assert exponents.max() - exponents.min() > 60
    assert np.isfinite(np.cumsum(np.abs(arr), dtype=np.float32)).all()
    assert np.isfinite(np.dot(np.abs(arr), np.abs(arr)))  # float32 dot products stay finite too


# --------------------------------------------------------------------------------------------- adversarial
def test_preserve_adversarial_float32_identity():
    p = adversarial_float32_payload()
    again = EncodedFloat32Payload.from_values(p.values())
    assert again.bits == p.bits and again.bit_hash == p.bit_hash
    arr = p.as_array()
    words = set(p.bits)
    assert {0x00000000, 0x80000000} <= words  # both zero signs
    tiny = np.finfo(np.float32).tiny
    subnormal = (arr != 0) & (np.abs(arr) < tiny)
    assert (subnormal & (arr > 0)).any() and (subnormal & (arr < 0)).any()
    assert np.float32(np.finfo(np.float32).max) in arr and -np.finfo(np.float32).max in arr
    assert np.isposinf(arr).any() and np.isneginf(arr).any()
    nans = [w for w in p.bits if (w & 0x7FFFFFFF) > 0x7F800000]
    assert len(set(nans)) >= 4 and {w >> 31 for w in nans} == {0, 1}
    assert all(w & 0x00400000 for w in nans)  # quiet NaNs only
    assert adversarial_float32_payload() == p


# --------------------------------------------------------------------------------------------- analytic cases
def _exact_result(case: AnalyticCase) -> list[Fraction]:
    seqs = [[Fraction(v) for v in seq] for seq in case.inputs]
    if case.operation == "reduce_sum":
        return [sum(seqs[0], Fraction(0))]
    n = math.isqrt(len(seqs[0]))
    a, b = seqs
    return [sum((a[i * n + k] * b[k * n + j] for k in range(n)), Fraction(0)) for i in range(n) for j in range(n)]


def _terms(case: AnalyticCase) -> list[list[float]]:
    if case.operation == "reduce_sum":
        return [list(case.inputs[0])]
    n = math.isqrt(len(case.inputs[0]))
    a, b = case.inputs
    return [[a[i * n + k] * b[k * n + j] for k in range(n)] for i in range(n) for j in range(n)]


def _f32_exact(x: Fraction) -> bool:
    return Fraction(float(np.float32(float(x)))) == x


def test_analytic_cases_are_named_deterministic_and_immutable():
    cases = analytic_cases()
    assert type(cases) is tuple and cases == analytic_cases()
    assert len({c.case_id for c in cases}) == len(cases)
    assert {c.operation for c in cases} == {"reduce_sum", "matmul"}
    for c in cases:
        assert type(c.inputs) is tuple and all(type(s) is tuple for s in c.inputs) and type(c.expected) is tuple
        assert all(type(v) is float for s in c.inputs for v in s) and all(type(v) is float for v in c.expected)
        if c.operation == "reduce_sum":
            assert len(c.inputs) == 1 and len(c.expected) == 1
        else:
            n = math.isqrt(len(c.inputs[0]))
            assert len(c.inputs) == 2 and n * n == len(c.inputs[0]) == len(c.inputs[1]) == len(c.expected)


def test_analytic_cases_expect_the_exact_result():
    for c in analytic_cases():
        assert [Fraction(v) for v in c.expected] == _exact_result(c), c.case_id


def test_analytic_cases_are_exact_for_every_association():
    rng = np.random.default_rng(0)
    for c in analytic_cases():
        for terms, expected in zip(_terms(c), c.expected):
            fr = [Fraction(t) for t in terms]
            assert all(_f32_exact(t) for t in fr), c.case_id  # products exact too
            if len(fr) <= 12:  # every subset sum is a possible partial result of some association
                for r in range(1, len(fr) + 1):
                    for subset in itertools.combinations(fr, r):
                        assert _f32_exact(sum(subset, Fraction(0))), c.case_id
            orders = [list(range(len(terms))), list(range(len(terms)))[::-1]]
            orders += [list(rng.permutation(len(terms))) for _ in range(5)]
            for dtype in (np.float32, np.float64):
                arr = np.array(terms, dtype=dtype)
                for order in orders:
                    acc = dtype(0)
                    for k in order:
                        acc = dtype(acc + arr[k])
                    assert np.float32(acc).view(np.uint32) == np.float32(expected).view(np.uint32), c.case_id
                assert np.float32(np.sum(arr)).view(np.uint32) == np.float32(expected).view(np.uint32)


def test_analytic_cases_zero_results_are_positive_zero():
    zeros = [v for c in analytic_cases() for v in c.expected if v == 0]
    assert zeros and all(math.copysign(1.0, v) == 1.0 for v in zeros)


# --------------------------------------------------------------------------------------------- exact structural
@pytest.mark.parametrize("length, rows, mantissa_bits", [(1, 1, 24), (7, 3, 24), (1000, 2, 24), (4096, 1, 24),
                                                         (5, 4, 12), (3, 2, 53)])
@pytest.mark.parametrize("product", [False, True])
def test_exact_structural_payload_bounds_every_partial_result(length, rows, mantissa_bits, product):
    s = exact_structural_payload(11, length, product=product, rows=rows, mantissa_bits=mantissa_bits)
    budget = 2**mantissa_bits // length
    expected_bound = min(math.isqrt(budget) if product else budget, 2**24)
    assert (s.contraction_length, s.operand_bound, s.mantissa_bits) == (length, expected_bound, mantissa_bits)
    assert len(s.lhs) == rows * length and (s.rhs is None) == (not product)
    lhs = np.array(s.lhs.values()).reshape(rows, length)
    rhs = np.array(s.rhs.values()).reshape(rows, length) if product else None
    for side in (lhs,) if rhs is None else (lhs, rhs):
        assert (side == np.round(side)).all() and np.abs(side).max() <= s.operand_bound
    rng = np.random.default_rng(1)
    for r in range(rows):
        terms = [int(v) for v in lhs[r]] if rhs is None else [int(a) * int(b) for a, b in zip(lhs[r], rhs[r])]
        assert sum(abs(t) for t in terms) <= 2**mantissa_bits  # bounds every partial sum in any order
        prefix = list(itertools.accumulate(terms))
        assert all(abs(p) <= 2**mantissa_bits for p in prefix)
        if mantissa_bits <= 24:
            f32 = np.array(terms, dtype=np.float32)
            for order in (slice(None), slice(None, None, -1), rng.permutation(length)):
                assert int(np.cumsum(f32[order], dtype=np.float32)[-1]) == prefix[-1]
            assert int(np.sum(f32, dtype=np.float32)) == prefix[-1]


def test_exact_structural_payload_is_deterministic():
    a = exact_structural_payload(5, 64, product=True, rows=2)
    assert a == exact_structural_payload(5, 64, product=True, rows=2)
    assert a.lhs.bit_hash != exact_structural_payload(6, 64, product=True, rows=2).lhs.bit_hash
    assert a.lhs.bit_hash != a.rhs.bit_hash
    assert a.to_json()["rhs"]["bit_hash"] == a.rhs.bit_hash


@pytest.mark.parametrize("kwargs, error", [
    (dict(seed=True, contraction_length=4, product=False), TypeError),
    (dict(seed=1.0, contraction_length=4, product=False), TypeError),
    (dict(seed=1, contraction_length=4.0, product=False), TypeError),
    (dict(seed=1, contraction_length=True, product=False), TypeError),
    (dict(seed=1, contraction_length=4, product=1), TypeError),
    (dict(seed=1, contraction_length=4, product=None), TypeError),
    (dict(seed=1, contraction_length=4, product=False, rows=False), TypeError),
    (dict(seed=1, contraction_length=4, product=False, mantissa_bits="24"), TypeError),
    (dict(seed=1, contraction_length=0, product=False), ValueError),
    (dict(seed=1, contraction_length=-3, product=True), ValueError),
    (dict(seed=1, contraction_length=4, product=False, rows=0), ValueError),
    (dict(seed=1, contraction_length=4, product=False, mantissa_bits=0), ValueError),
    (dict(seed=-1, contraction_length=4, product=False), ValueError),
])
def test_exact_structural_payload_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error):
        exact_structural_payload(**kwargs)


@pytest.mark.parametrize("length, product, mantissa_bits", [(2**24 + 1, False, 24), (17, False, 4),
                                                            (17, True, 4), (5, True, 2)])
def test_exact_structural_payload_rejects_lengths_without_an_operand_bound(length, product, mantissa_bits):
    with pytest.raises(ValueError, match=str(length)):
        exact_structural_payload(0, length, product=product, mantissa_bits=mantissa_bits)
