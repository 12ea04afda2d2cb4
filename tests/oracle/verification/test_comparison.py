"""Comparison and tolerance policies against independent references (struct, exact integers, math)."""
from __future__ import annotations

import json
import math
import struct
from fractions import Fraction

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from intent_trace.oracle.verification.comparison import (
    MAX_ULP_DISTANCE, Comparison, Deviations, Tolerance, TolerancePolicy, compare_exact, compare_float32,
    exact_policy, float32_bits, float32_ulp_distance, gamma_bound, stage_one_two_path_policy,
    stage_two_float32_policy)
from intent_trace.oracle.verification.payloads import (
    EncodedFloat32Payload, adversarial_float32_payload, wide_exponent_float32_payload)

TINY = 2.0**-149
INF_TOL = Tolerance(math.inf, math.inf, MAX_ULP_DISTANCE)


def f32(word: int) -> np.float32:
    return np.array([word], dtype=np.uint32).view(np.float32)[0]


def struct_word(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def reference_int_word(v: int) -> int | None:
    """Correct RNE rounding of an exact integer to binary32 with integer arithmetic; None on overflow."""
    mag = abs(v)
    if mag.bit_length() > 24:
        shift = mag.bit_length() - 24
        q, r, half = mag >> shift, mag & ((1 << shift) - 1), 1 << (shift - 1)
        q += r > half or (r == half and q & 1)
        mag = q << shift
    if mag >= 2**128:
        return None
    return struct_word(math.copysign(float(mag), -1.0 if v < 0 else 1.0))


# --------------------------------------------------------------------------------------------- float32_bits
def test_float32_bits_encodes_known_values():
    assert float32_bits(1.0) == 0x3F800000 and float32_bits(-0.0) == 0x80000000 and float32_bits(0) == 0
    assert float32_bits(TINY) == 1 and float32_bits(math.inf) == 0x7F800000 and float32_bits(-math.inf) == 0xFF800000
    assert float32_bits(2**128 - 2**103 - 1) == 0x7F7FFFFF
    assert float32_bits(np.float32(1.5)) == 0x3FC00000 and float32_bits(np.int8(-2)) == 0xC0000000
    assert float32_bits(f32(0x7FA00001)) == 0x7FA00001  # a float32 signalling NaN is kept bit for bit


@pytest.mark.parametrize("bad", [True, np.bool_(False), "1.0", None, [1.0], 1j, np.array(1.0), Fraction(1, 2)])
def test_float32_bits_rejects_non_numbers_with_type_error(bad):
    with pytest.raises(TypeError):
        float32_bits(bad)


@pytest.mark.parametrize("bad", [1e39, -1e39, 2**128, -(2**128) + 2**103, 10**500, np.float64(4e38)])
def test_float32_bits_rejects_overflow_with_value_error(bad):
    with pytest.raises(ValueError):
        float32_bits(bad)


@given(st.floats(width=32, allow_nan=False))
def test_float32_bits_matches_struct_for_binary32_floats(x):
    assert float32_bits(x) == struct_word(x)


@given(st.floats(allow_nan=False))
def test_float32_bits_rounds_doubles_like_numpy(x):
    with np.errstate(over="ignore"):
        ref = np.float32(x)
    if np.isinf(ref) and math.isfinite(x):
        with pytest.raises(ValueError):
            float32_bits(x)
    else:
        assert float32_bits(x) == int(ref.view(np.uint32))


@given(st.integers(-(2**130), 2**130))
def test_float32_bits_rounds_integers_once(v):
    ref = reference_int_word(v)
    if ref is None:
        with pytest.raises(ValueError):
            float32_bits(v)
    else:
        assert float32_bits(v) == ref


@given(st.integers(0, 2**32 - 1))
def test_float32_bits_round_trips_every_word(word):
    assert float32_bits(f32(word)) == word
    quiet_or_number = (word & 0x7FFFFFFF) <= 0x7F800000 or word & 0x00400000
    if quiet_or_number:  # a Python float (double) round trip keeps every number and every quiet NaN
        assert float32_bits(float(f32(word))) == word


# --------------------------------------------------------------------------------------------- ULP distance
@pytest.mark.parametrize("a, b, distance", [
    (1.0, float(np.nextafter(np.float32(1), np.float32(2))), 1), (-0.0, 0.0, 0), (TINY, -TINY, 2), (0.0, TINY, 1),
    (-0.0, TINY, 1), (3.4028234663852886e38, math.inf, 1), (-math.inf, math.inf, 2**32 - 2**24), (1.0, 2.0, 2**23),
    (math.nan, math.nan, 0), (math.nan, 1.0, MAX_ULP_DISTANCE), (math.inf, math.nan, MAX_ULP_DISTANCE),
    (f32(0x7FC00000), f32(0x7FC00001), MAX_ULP_DISTANCE), (f32(0xFFC00000), f32(0x7FC00000), MAX_ULP_DISTANCE),
])
def test_float32_ulp_distance_hand_computed(a, b, distance):
    assert float32_ulp_distance(a, b) == float32_ulp_distance(b, a) == distance


@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.integers(0, 40))
def test_float32_ulp_distance_counts_nextafter_steps(x, steps):
    y, taken = np.float32(x), 0
    while taken < steps and not np.isinf(y):
        with np.errstate(over="ignore"):
            y, taken = np.nextafter(y, np.float32(np.inf)), taken + 1
    assert float32_ulp_distance(x, y) == taken and float32_ulp_distance(-float(y), -x) == taken


def test_float32_ulp_distance_rejects_bad_inputs():
    with pytest.raises(TypeError):
        float32_ulp_distance(True, 1.0)
    with pytest.raises(ValueError):
        float32_ulp_distance(1.0, 1e40)


# --------------------------------------------------------------------------------------------- compare_float32
def test_compare_float32_identical_inputs_are_exact():
    adv = adversarial_float32_payload()
    c = compare_float32(adv.as_array(), adv.values())
    assert c == Comparison(Deviations(0.0, 0.0, 0), 0, 0, 0) and c.exact
    assert compare_float32([], []).within(Tolerance(0.0, 0.0, 0))


def test_compare_float32_records_deviations():
    up = float(np.nextafter(np.float32(2), np.float32(3)))
    c = compare_float32([1.0, 2.0, -8.0], [1.0, up, -8.0 + 2.0**-20])
    assert c.mismatches == 2 and c.signed_zero_mismatches == 0 and c.nan_payload_mismatches == 0
    assert c.deviations.absolute == 2.0**-20
    assert c.deviations.relative == max(2.0**-22 / up, 2.0**-20 / 8.0)
    assert c.deviations.ulps == 2  # 2**-20 at magnitude 8 is two float32 steps of 2**-21
    assert not c.exact


def test_compare_float32_counts_signed_zeros_and_nan_payloads():
    c = compare_float32(np.array([0.0, -0.0, f32(0x7FC00000), f32(0xFFC00000), 0.0], dtype=np.float32),
                        np.array([-0.0, -0.0, f32(0x7FC00001), f32(0xFFC00000), 0.0], dtype=np.float32))
    assert (c.mismatches, c.signed_zero_mismatches, c.nan_payload_mismatches) == (2, 1, 1)
    assert c.deviations == Deviations(0.0, 0.0, MAX_ULP_DISTANCE)


@pytest.mark.parametrize("e, a", [([math.nan], [1.0]), ([1.0], [math.nan]), ([math.inf], [3.0]),
                                  ([math.inf], [-math.inf]), ([-3.0], [-math.inf]), ([math.inf], [math.nan])])
def test_compare_float32_undefined_deviations_are_absent(e, a):
    c = compare_float32(e, a)
    assert c.deviations.absolute is None and c.deviations.relative is None and c.mismatches == 1
    assert not c.within(INF_TOL)


def test_compare_float32_identical_infinities_and_nans_contribute_nothing():
    c = compare_float32([math.inf, -math.inf, math.nan, 1.0], [math.inf, -math.inf, math.nan, 1.0])
    assert c.exact and c.deviations == Deviations(0.0, 0.0, 0)


def test_compare_float32_rejects_unequal_lengths_and_bad_values():
    with pytest.raises(ValueError):
        compare_float32([1.0, 2.0], [1.0])
    with pytest.raises(TypeError):
        compare_float32([True], [1.0])
    with pytest.raises(TypeError):
        compare_float32(1.0, 1.0)
    with pytest.raises(ValueError):
        compare_float32([1e39], [1.0])


def test_compare_float32_vectorised_matches_elementwise_reference():
    rng = np.random.default_rng(0)
    words = np.concatenate([rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32),
                            np.array(adversarial_float32_payload().bits, dtype=np.uint32)])
    e = words.view(np.float32)
    flips = rng.integers(0, 3, words.size)  # keep, one ULP up, or a random word
    a_words = np.where(flips == 0, words, np.where(flips == 1, words + np.uint32(1), rng.permutation(words)))
    a = a_words.view(np.float32)
    finite = np.isfinite(e) & np.isfinite(a)
    c = compare_float32(e[finite], a[finite])
    ew, aw = [int(w) for w in words[finite]], [int(w) for w in a_words[finite]]
    assert c.mismatches == sum(x != y for x, y in zip(ew, aw))
    assert c.signed_zero_mismatches == sum(x != y and (x | y) & 0x7FFFFFFF == 0 for x, y in zip(ew, aw))
    assert c.deviations.ulps == max(float32_ulp_distance(f32(x), f32(y)) for x, y in zip(ew, aw))
    diffs = [abs(float(f32(x)) - float(f32(y))) for x, y in zip(ew, aw)]
    assert c.deviations.absolute == max(diffs)
    assert c.deviations.relative == max(d / max(abs(float(f32(x))), abs(float(f32(y)))) if d else 0.0
                                        for d, x, y in zip(diffs, ew, aw))
    big = np.tile(e[finite], 40)  # ~10**5 elements, vectorised
    assert compare_float32(big, big.copy()).exact


# --------------------------------------------------------------------------------------------- within
def _comparison(absolute=1.0, relative=0.5, ulps=3, mismatches=1, signed_zero=0, nan_payload=0) -> Comparison:
    return Comparison(Deviations(absolute, relative, ulps), mismatches, signed_zero, nan_payload)


@pytest.mark.parametrize("comparison, expected", [
    (_comparison(0.0, 0.0, 0, mismatches=0), True),
    (_comparison(), True),
    (_comparison(absolute=1.0, relative=0.5, ulps=3), True),  # boundaries are inclusive
    (_comparison(absolute=1.5), False),
    (_comparison(relative=0.75), False),
    (_comparison(ulps=4), False),
    (_comparison(signed_zero=1), False),
    (_comparison(nan_payload=1), False),
    (_comparison(absolute=None), False),
    (_comparison(relative=None), False),
    (_comparison(ulps=None), False),
    (_comparison(0.0, 0.0, 0, mismatches=1, signed_zero=1), False),
])
def test_comparison_within_truth_table(comparison, expected):
    assert comparison.within(Tolerance(1.0, 0.5, 3)) is expected


def test_comparison_within_requires_a_tolerance():
    with pytest.raises(TypeError):
        _comparison().within((1.0, 1.0, 1))


def test_refuse_tolerance_masking_of_representational_differences():
    cases = [([0.0, 1.0], [-0.0, 1.0]), ([f32(0x7FC00000)], [f32(0x7FC00123)]),
             ([-0.0, f32(0xFFC00000)], [0.0, f32(0x7FC00000)])]
    policies = [stage_one_two_path_policy(2.0**-53, 10, 1e300), stage_two_float32_policy(10, 1e30)]
    for e, a in cases:
        c = compare_float32(np.array(e, dtype=np.float32), np.array(a, dtype=np.float32))
        assert c.mismatches >= 1 and c.signed_zero_mismatches + c.nan_payload_mismatches == c.mismatches
        assert not exact_policy().accepts(c)
        for tolerance in (INF_TOL, Tolerance(0.0, 0.0, 0), Tolerance(1e30, 1.0, 2**31)):
            assert not c.within(tolerance)
        assert not any(policy.accepts(c) for policy in policies)


# --------------------------------------------------------------------------------------------- compare_exact
def test_compare_exact_counts_and_measures_integer_differences():
    assert compare_exact([1, -2, 3], np.array([1, -2, 3], dtype=np.int32)) == Comparison(Deviations(0, 0.0, 0), 0, 0, 0)
    c = compare_exact([1, 5, -3], [1, 7, 3])
    assert (c.mismatches, c.deviations) == (2, Deviations(6, 2.0, 6))
    b = compare_exact(np.array([True, False]), [True, True])
    assert b.mismatches == 1 and b.deviations == Deviations(1, 1.0, 1)
    assert compare_exact([2**31 - 1], [-(2**31)]).deviations.absolute == 2**32 - 1


def test_compare_exact_rejects_bad_inputs():
    with pytest.raises(ValueError):
        compare_exact([1, 2], [1])
    with pytest.raises(TypeError):
        compare_exact([1.0], [1])
    with pytest.raises(TypeError):
        compare_exact(np.array([1.0]), [1])


# --------------------------------------------------------------------------------------------- gamma and policies
@pytest.mark.parametrize("u, k, s", [(2.0**-24, 1, 1.0), (2.0**-24, 4096, 123.25), (2.0**-53, 10**6, 1e10),
                                     (2.0**-24, 0, 5.0), (2.0**-24, 7, 0), (0.25, 3, 2)])
def test_gamma_bound_matches_the_formula_and_never_undershoots(u, k, s):
    got = gamma_bound(u, k, s)
    assert math.isclose(got, k * u / (1 - k * u) * s, rel_tol=1e-15, abs_tol=0.0)
    assert Fraction(got) >= Fraction(k) * Fraction(u) / (1 - Fraction(k) * Fraction(u)) * Fraction(s)
    assert gamma_bound(np.float64(u), np.int64(k), np.float32(s)) == got


@pytest.mark.parametrize("args, error", [
    ((True, 1, 1.0), TypeError), (("2e-24", 1, 1.0), TypeError), ((None, 1, 1.0), TypeError),
    ((2.0**-24, 1.0, 1.0), TypeError), ((2.0**-24, True, 1.0), TypeError), ((2.0**-24, 1, False), TypeError),
    ((2.0**-24, 1, "1"), TypeError),
    ((0.0, 1, 1.0), ValueError), ((-1e-8, 1, 1.0), ValueError), ((math.inf, 1, 1.0), ValueError),
    ((math.nan, 1, 1.0), ValueError), ((2.0**-24, -1, 1.0), ValueError), ((2.0**-24, 1, -1.0), ValueError),
    ((2.0**-24, 1, math.inf), ValueError), ((2.0**-24, 1, math.nan), ValueError),
    ((2.0**-24, 2**24, 1.0), ValueError), ((0.5, 3, 1.0), ValueError),
])
def test_gamma_bound_rejects_bad_arguments(args, error):
    with pytest.raises(error):
        gamma_bound(*args)


def test_policies_carry_versioned_ids_and_envelopes():
    exact = exact_policy()
    assert (exact.policy_id, exact.tolerance) == ("exact-bits-v1", None)
    one = stage_one_two_path_policy(2.0**-53, 1000, 50.0)
    assert one.policy_id == "stage-one-two-path-gamma-v1"
    assert one.tolerance == Tolerance(2 * gamma_bound(2.0**-53, 1000, 50.0), math.inf, MAX_ULP_DISTANCE)
    two = stage_two_float32_policy(1000, 50.0)
    assert two.policy_id == "stage-two-float32-gamma-v1"
    assert two.tolerance == Tolerance(gamma_bound(2.0**-24, 1000, 50.0), math.inf, MAX_ULP_DISTANCE)
    with pytest.raises(ValueError):
        stage_two_float32_policy(2**24, 1.0)


def test_policies_accept_by_their_own_rule():
    near = compare_float32([1.0], [float(np.nextafter(np.float32(1), np.float32(2)))])
    assert not exact_policy().accepts(near) and exact_policy().accepts(compare_float32([1.0], [1.0]))
    assert stage_two_float32_policy(2, 1.0).accepts(near)  # 2**-23 <= gamma_2 * 1 ~ 2**-23 * (1 + 2**-23)
    assert not stage_two_float32_policy(1, 1.0).accepts(near)  # gamma_1 ~ 2**-24
    with pytest.raises(TypeError):
        exact_policy().accepts(near.deviations)


def test_compare_two_independently_associated_sums():
    terms = wide_exponent_float32_payload(4, 4096).as_array()
    forward = np.cumsum(terms, dtype=np.float32)[-1]
    backward = np.cumsum(terms[::-1], dtype=np.float32)[-1]
    s = float(np.sum(np.abs(terms.astype(np.float64))))
    policy = stage_one_two_path_policy(2.0**-24, len(terms), s)
    c = compare_float32([forward], [backward])
    assert policy.policy_id == "stage-one-two-path-gamma-v1"
    assert policy.tolerance.absolute == 2 * gamma_bound(2.0**-24, len(terms), s)
    assert c.deviations.absolute is not None and policy.accepts(c)


def test_records_are_frozen_and_serialise_canonically():
    c = compare_float32([math.nan, 1.0], [1.0, 1.0])
    records = [c, c.deviations, INF_TOL, stage_one_two_path_policy(2.0**-53, 3, 1.0), exact_policy(),
               EncodedFloat32Payload.from_values([math.inf])]
    for record in records:
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(record, attrs.fields(type(record))[0].name, None)
        text = json.dumps(record.to_json(), sort_keys=True, allow_nan=False)
        assert json.loads(text) == record.to_json()
    assert INF_TOL.to_json() == {"absolute": "inf", "relative": "inf", "ulps": MAX_ULP_DISTANCE}
    assert c.to_json()["deviations"] == {"absolute": None, "relative": None, "ulps": MAX_ULP_DISTANCE}
    assert TolerancePolicy("p", None, "d").to_json() == {"policy_id": "p", "tolerance": None, "description": "d"}
