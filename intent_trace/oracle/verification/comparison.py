"""Result comparison: exact bit identity and numerical envelopes kept as separate, versioned policies.

A numerical tolerance must never hide a representational difference: a zero of the wrong sign or a NaN
with another payload is a different result, not a small error. So every comparison counts those apart
and ``Comparison.within`` fails on them whatever the tolerance. Deviations are always recorded, even
when acceptance is the absolute gamma-K envelope of the accumulation, so evidence shows how close a
passing case came. Policies carry a version in their id so a report names exactly which rule it used.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from fractions import Fraction

import attrs
import numpy as np

from intent_trace.oracle.verification.payloads import float32_words, json_number

MAX_ULP_DISTANCE = 2**32 - 1  # above every distance between two non-NaN binary32 values (at most 2**32 - 2**24)

_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)


def _scalar_words(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be an int or float encodable as binary32, not {type(value).__name__}")
    return int(float32_words([value])[0])


def float32_bits(value: int | float) -> int:
    """The unsigned binary32 word of ``value``, rounded once to nearest-even."""
    return _scalar_words(value, "value")


def _ordered(words: np.ndarray) -> np.ndarray:
    """Words -> integers ordered like their values; +0 and -0 both map to 0."""
    magnitude = (words & _ABS).astype(np.int64)
    return np.where((words >> np.uint32(31)) != 0, -magnitude, magnitude)


def _is_nan(words: np.ndarray) -> np.ndarray:
    return (words & _ABS) > _INF


def _ulp_distances(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    distance = np.abs(_ordered(expected) - _ordered(actual))
    return np.where((expected != actual) & (_is_nan(expected) | _is_nan(actual)), MAX_ULP_DISTANCE, distance)


def float32_ulp_distance(expected: int | float, actual: int | float) -> int:
    """Ordered binary32 ULP distance; 0 for identical NaN words and for +0 vs -0, ``MAX_ULP_DISTANCE`` for
    any other pair involving a NaN."""
    e = np.array([_scalar_words(expected, "expected")], dtype=np.uint32)
    a = np.array([_scalar_words(actual, "actual")], dtype=np.uint32)
    return int(_ulp_distances(e, a)[0])


def _non_negative_real(instance, attribute, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"Tolerance.{attribute.name} must be a real number, not {type(value).__name__}")
    if math.isnan(value) or value < 0:
        raise ValueError(f"Tolerance.{attribute.name} must be a non-negative number (inf allowed), got {value!r}")


def _ulp_count(instance, attribute, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Tolerance.ulps must be an integer, not {type(value).__name__}")
    if not 0 <= value <= MAX_ULP_DISTANCE:
        raise ValueError(f"Tolerance.ulps must be in [0, {MAX_ULP_DISTANCE}], got {value}")


@attrs.frozen(slots=True)
class Tolerance:
    """Acceptance bounds of ``Comparison.within``, per component; a component left out is unconstrained
    (``Tolerance(ulps=4)``). Validated, since a NaN bound would accept nothing silently and a negative one
    nothing at all."""

    absolute: float = attrs.field(default=math.inf, validator=_non_negative_real)
    relative: float = attrs.field(default=math.inf, validator=_non_negative_real)
    ulps: int = attrs.field(default=MAX_ULP_DISTANCE, validator=_ulp_count)

    def to_json(self) -> dict:
        return {"absolute": json_number(self.absolute), "relative": json_number(self.relative),
                "ulps": json_number(self.ulps)}


@attrs.frozen(slots=True)
class Deviations:
    """Maximum deviations over all positions; None where a deviation is undefined (absent)."""

    absolute: float | None
    relative: float | None
    ulps: int | None

    def to_json(self) -> dict:
        return {k: None if v is None else json_number(v)
                for k, v in (("absolute", self.absolute), ("relative", self.relative), ("ulps", self.ulps))}


@attrs.frozen(slots=True)
class ElementEnvelope:
    """The worst element of a comparison judged against per-element envelopes: ``ratio`` is
    max_i |expected_i - actual_i| / envelope_i (``inf`` where no envelope covers the pair), at ``index``
    (flat, over the outputs in order), whose own envelope is ``bound``."""

    ratio: float
    index: int | None
    bound: float | None

    def to_json(self) -> dict:
        return {"ratio": json_number(self.ratio), "index": self.index,
                "bound": None if self.bound is None else json_number(self.bound)}


@attrs.frozen(slots=True)
class Comparison:
    deviations: Deviations
    mismatches: int
    signed_zero_mismatches: int
    nan_payload_mismatches: int
    envelope: ElementEnvelope | None = None  # set when the results were judged element by element

    @property
    def exact(self) -> bool:
        return self.mismatches == 0

    def within(self, tolerance: Tolerance) -> bool:
        """False on any signed-zero or NaN-payload mismatch or absent deviation; True when exact or when
        every deviation is at most its tolerance; False otherwise."""
        if not isinstance(tolerance, Tolerance):
            raise TypeError(f"tolerance must be a Tolerance, not {type(tolerance).__name__}")
        d = self.deviations
        if self.signed_zero_mismatches or self.nan_payload_mismatches:
            return False
        if d.absolute is None or d.relative is None or d.ulps is None:
            return False
        if self.mismatches == 0:
            return True
        return d.absolute <= tolerance.absolute and d.relative <= tolerance.relative and d.ulps <= tolerance.ulps

    def to_json(self) -> dict:
        out = {"deviations": self.deviations.to_json(), "mismatches": self.mismatches,
               "signed_zero_mismatches": self.signed_zero_mismatches,
               "nan_payload_mismatches": self.nan_payload_mismatches}
        if self.envelope is not None:
            out["envelope"] = self.envelope.to_json()
        return out


def compare_float32(expected: Iterable, actual: Iterable) -> Comparison:
    """Compare binary32 encodings position by position (vectorised over the words).

    ``mismatches`` counts positions whose words differ; ``signed_zero_mismatches`` those where one side is
    +0 and the other -0; ``nan_payload_mismatches`` those where both are NaNs with different words.
    Deviations are maxima over positions, in float64: absolute ``|e - a|``; symmetric-relative
    ``|e - a| / max(|e|, |a|)`` (0 when both are zero), symmetric so neither side is privileged; ULPs as
    ``float32_ulp_distance``. Identical words and two NaNs contribute 0 to absolute and relative; a NaN
    against a non-NaN, or an infinity against a different value, makes both absent (None).
    """
    e, a = float32_words(expected), float32_words(actual)
    if e.shape != a.shape:
        raise ValueError(f"expected has {e.size} values but actual has {a.size}")
    differ = e != a
    nan_e, nan_a = _is_nan(e), _is_nan(a)
    signed_zero = differ & (((e | a) & _ABS) == 0)
    nan_payload = differ & nan_e & nan_a
    ulps = int(_ulp_distances(e, a).max(initial=0))
    inf_any = ((e & _ABS) == _INF) | ((a & _ABS) == _INF)
    if np.any(differ & ((nan_e ^ nan_a) | inf_any)):
        absolute = relative = None
    else:
        live = differ & ~(nan_e & nan_a)
        ef = e[live].view(np.float32).astype(np.float64)
        af = a[live].view(np.float32).astype(np.float64)
        diff = np.abs(ef - af)
        scale = np.maximum(np.abs(ef), np.abs(af))
        rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
        absolute, relative = float(diff.max(initial=0.0)), float(rel.max(initial=0.0))
    return Comparison(Deviations(absolute, relative, ulps), int(differ.sum()), int(signed_zero.sum()),
                      int(nan_payload.sum()))


def _exact_words(values, name: str) -> list[int]:
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "biu":
            raise TypeError(f"{name} must hold integers or Booleans, not {values.dtype}")
        return [int(v) for v in values.reshape(-1).tolist()]
    out = []
    for v in values:
        if not isinstance(v, (int, np.integer, np.bool_)):
            raise TypeError(f"{name} must hold integers or Booleans, not {type(v).__name__}: {v!r}")
        out.append(int(v))
    return out


def compare_exact(expected_words: Iterable[int], actual_words: Iterable[int]) -> Comparison:
    """Compare integer or Boolean results value by value (Booleans count as 0/1).

    Integers have no signed zeros or NaNs. Deviations: absolute is ``max |e - a|`` (an int); relative is
    ``max |e - a| / max(|e|, |a|)``; ulps equals absolute, one integer step being one unit in the last place.
    """
    e, a = _exact_words(expected_words, "expected_words"), _exact_words(actual_words, "actual_words")
    if len(e) != len(a):
        raise ValueError(f"expected_words has {len(e)} values but actual_words has {len(a)}")
    absolute, relative, mismatches = 0, 0.0, 0
    for x, y in zip(e, a):
        if x != y:
            mismatches += 1
            absolute = max(absolute, abs(x - y))
            relative = max(relative, float(Fraction(abs(x - y), max(abs(x), abs(y)))))
    return Comparison(Deviations(absolute, relative, absolute), mismatches, 0, 0)


# --------------------------------------------------------------------------------------------------- policies
def _real(name: str, value) -> Fraction:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
    if isinstance(value, numbers.Rational):  # ints and Fractions are finite (and may exceed the float range)
        return Fraction(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return Fraction(float(value))


def gamma_bound(unit_roundoff: float, terms: int, sum_absolute_terms: float) -> float:
    """``gamma_K * S`` with ``gamma_K = K u / (1 - K u)``, the worst-case error of any K-term accumulation.

    Evaluated exactly and rounded upward, so the returned envelope is never tighter than the analytic one
    (``inf`` if it exceeds the float range).
    """
    u = _real("unit_roundoff", unit_roundoff)
    if u <= 0:
        raise ValueError(f"unit_roundoff must be positive, got {unit_roundoff!r}")
    if isinstance(terms, (bool, np.bool_)) or not isinstance(terms, (int, np.integer)):
        raise TypeError(f"terms must be an integer, not {type(terms).__name__}")
    if terms < 0:
        raise ValueError(f"terms must be non-negative, got {terms}")
    s = _real("sum_absolute_terms", sum_absolute_terms)
    if s < 0:
        raise ValueError(f"sum_absolute_terms must be non-negative, got {sum_absolute_terms!r}")
    ku = int(terms) * u
    if ku >= 1:
        raise ValueError(f"terms * unit_roundoff = {float(ku)!r} must be below 1")
    exact = ku / (1 - ku) * s
    try:
        bound = float(exact)
    except OverflowError:
        return math.inf
    return math.nextafter(bound, math.inf) if Fraction(bound) < exact else bound


@attrs.frozen(slots=True)
class TolerancePolicy:
    """A versioned acceptance rule; ``tolerance`` None means bit-for-bit identity.

    ``envelope_digest`` set: the rule is per element (``bounds.path_envelope``): every element must lie
    within its own envelope (the comparison's ``envelope.ratio <= 1``) as well as within ``tolerance``,
    whose absolute field is then the largest element envelope. The digest names those envelopes, so a
    record's policy can be checked against the case generator that produced it.
    """

    policy_id: str
    tolerance: Tolerance | None
    description: str
    envelope_digest: str | None = None
    nan_payloads_free: bool = False  # exact rule: a NaN against a NaN of another payload still matches


    def accepts(self, comparison: Comparison) -> bool:
        if not isinstance(comparison, Comparison):
            raise TypeError(f"comparison must be a Comparison, not {type(comparison).__name__}")
        if self.tolerance is None:
            free = comparison.nan_payload_mismatches if self.nan_payloads_free else 0
            return comparison.mismatches - free == 0
        if self.envelope_digest is not None and comparison.mismatches:
            if comparison.envelope is None or not comparison.envelope.ratio <= 1.0:
                return False
        return comparison.within(self.tolerance)

    def to_json(self) -> dict:
        out = {"policy_id": self.policy_id,
               "tolerance": None if self.tolerance is None else self.tolerance.to_json(),
               "description": self.description}
        if self.envelope_digest is not None:
            out["envelope_digest"] = self.envelope_digest
        if self.nan_payloads_free:
            out["nan_payloads_free"] = True
        return out


def exact_policy() -> TolerancePolicy:
    return TolerancePolicy("exact-bits-v1", None, "encoded results must be identical bit for bit")


def nan_ness_policy() -> TolerancePolicy:
    """Exact bits, except that a NaN matches any NaN: for fibres holding several NaN payloads, of which the
    association may return any (IEEE 754 §6.2.3). A NaN against a non-NaN still fails."""
    return TolerancePolicy("exact-bits-nan-ness-v1", None,
                           "encoded results identical bit for bit, except that NaN results need only be NaN: "
                           "their fibres hold several NaN payloads and the association may return any of them",
                           nan_payloads_free=True)


def _envelope(absolute: float) -> Tolerance:
    # Acceptance is the absolute envelope alone; relative and ULP deviations are recorded, not gated.
    return Tolerance(absolute, math.inf, MAX_ULP_DISTANCE)


def stage_one_two_path_policy(unit_roundoff: float, terms: int, sum_absolute_terms: float) -> TolerancePolicy:
    """Two independently associated paths may each err by gamma_K * S, so they may differ by twice that."""
    bound = 2 * gamma_bound(unit_roundoff, terms, sum_absolute_terms)
    return TolerancePolicy("stage-one-two-path-gamma-v1", _envelope(bound),
                           f"|generic - cpu| <= 2 * gamma_K * S with u={float(unit_roundoff)!r}, K={int(terms)}, "
                           f"S={float(sum_absolute_terms)!r}; zero signs and NaN payloads must match")


def stage_two_float32_policy(terms: int, sum_absolute_terms: float) -> TolerancePolicy:
    """A Float32 target against an exact-enough oracle: one path of binary32 accumulation error."""
    bound = gamma_bound(2.0**-24, terms, sum_absolute_terms)
    return TolerancePolicy("stage-two-float32-gamma-v1", _envelope(bound),
                           f"|oracle - target| <= gamma_K * S with u=2**-24, K={int(terms)}, "
                           f"S={float(sum_absolute_terms)!r}; zero signs and NaN payloads must match")


def element_envelope_policy(policy_id: str, envelopes: tuple, description: str) -> TolerancePolicy:
    """A per-element rule over ``envelopes`` (one float64 array per floating output, None for exact ones).

    The tolerance's absolute field is the largest element envelope (a necessary condition, kept so the
    record reads like a case-wide bound); acceptance also needs every element within its own envelope.
    """
    from .bounds import envelope_digest

    largest = max((float(e.max(initial=0.0)) for e in envelopes if e is not None), default=0.0)
    return TolerancePolicy(policy_id, _envelope(largest), description, envelope_digest(envelopes))
