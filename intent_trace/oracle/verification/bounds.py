"""Per-output-element numerical envelopes: each floating result is judged by the terms that feed *it*.

T5 bounds one accumulation, |computed - exact| <= gamma_K * sum |t_i|, over the K exact terms t_i of
that one result. A case-wide envelope (the largest sum over all outputs) lets a small output hide
any error below the largest output's bound: a sign flip of a -5e14 matmul entry passed under a case
bound of 5e18 whose own bound was 1e10. So a :class:`Case` carries, for every floating output, one
:class:`OutputBound`: per element its term count K_i and its sum S_i of |exact terms|, plus the
accumulator's unit roundoff and the final rounding to the output dtype. A stage's policy turns that
into one envelope per element (:func:`path_envelope`) and a comparison records the worst element's
deviation relative to its own envelope (:func:`envelope_ratio`).

How a case for a new accumulating op fills it: compute the exact terms of each output element in
float64 (products of two f32 values are exact there), then ``OutputBound.of(terms_per_element,
sum_abs_per_element, accumulation_dtype, output_dtype)`` with arrays in the output's C order (or use
:func:`fibre_sums`, :func:`prefix_sums`, :func:`product_sums`, which already do it for a reduction, a
scan and a contraction). ``sum_abs`` must be computed in float64 and inflated past its own rounding
(:func:`inflate`), so the envelope is never tighter than the analytic one. Nothing else is needed: the
stages derive every element's envelope from this record.
"""
from __future__ import annotations

import hashlib
import math

import attrs
import numpy as np

# dtype -> (unit roundoff u, underflow unit eta: the largest absolute error of one rounding below the
# normal range, half the smallest subnormal). Subnormal results are not within u*|x|, hence eta.
FLOAT_ROUNDING = {"f64": (2.0 ** -53, 2.0 ** -1075), "f32": (2.0 ** -24, 2.0 ** -150),
                  "f16": (2.0 ** -11, 2.0 ** -25), "bf16": (2.0 ** -8, 2.0 ** -134)}

_F64_EPS = 2.0 ** -52


def unit_roundoff(dtype: str) -> float:
    """The unit roundoff of a floating dtype (f32: 2^-24, f64: 2^-53)."""
    try:
        return FLOAT_ROUNDING[dtype][0]
    except KeyError:
        raise ValueError(f"{dtype!r} is not a floating accumulator dtype ({', '.join(FLOAT_ROUNDING)})") from None


def inflate(values: np.ndarray, operations: np.ndarray | int) -> np.ndarray:
    """Raise non-negative float64 values computed with ``operations`` roundings past their own rounding error
    (relative, plus one subnormal step per rounding for results below float64's normal range)."""
    ops = np.asarray(operations, np.float64) + 1.0
    return np.asarray(values, np.float64) * (1.0 + 2.0 * ops * 2.0 ** -53) + ops * 2.0 ** -1074


def _frozen_array(value, dtype) -> np.ndarray:
    a = np.array(value, dtype=dtype).reshape(-1)
    a.setflags(write=False)
    return a


@attrs.frozen(eq=False)
class OutputBound:
    """The gamma-K data of one floating output, element by element (C order of the output).

    ``terms[i]`` is K_i and ``sum_absolute_terms[i]`` is S_i (float64, already inflated) of element i;
    ``accumulation_dtype`` gives the accumulator's unit roundoff u, ``output_dtype`` the final rounding
    (none when it equals the accumulator). ``magnitude[i]`` (optional, default S_i) bounds |exact result|
    of element i from above: the final rounding errs by at most u_out times the rounded value, which for
    a cancelling sum is far below u_out * S_i, so a float64 accumulator that really accumulated in
    binary32 is caught. Arrays are read-only; equality and the digest are by value.
    """

    terms: np.ndarray = attrs.field(converter=lambda v: _frozen_array(v, np.int64))
    sum_absolute_terms: np.ndarray = attrs.field(converter=lambda v: _frozen_array(v, np.float64))
    accumulation_dtype: str = "f32"
    output_dtype: str = "f32"
    magnitude: np.ndarray | None = attrs.field(default=None, converter=attrs.converters.optional(
        lambda v: _frozen_array(v, np.float64)))

    def __attrs_post_init__(self) -> None:
        if self.terms.shape != self.sum_absolute_terms.shape:
            raise ValueError(f"OutputBound: {self.terms.size} term counts for {self.sum_absolute_terms.size} sums")
        unit_roundoff(self.accumulation_dtype), unit_roundoff(self.output_dtype)
        if self.terms.size and (self.terms.min() < 0 or not np.all(np.isfinite(self.sum_absolute_terms))
                                or self.sum_absolute_terms.min() < 0):
            raise ValueError("OutputBound: term counts and sums of |terms| must be non-negative and finite")
        if self.magnitude is None:
            object.__setattr__(self, "magnitude", self.sum_absolute_terms)
        elif self.magnitude.shape != self.terms.shape or not np.all(np.isfinite(self.magnitude)) or \
                np.any(self.magnitude < 0):
            raise ValueError("OutputBound: magnitude needs one finite non-negative bound per element")

    @classmethod
    def of(cls, terms, sum_absolute_terms, accumulation_dtype: str, output_dtype: str,
           magnitude=None) -> "OutputBound":
        terms = np.broadcast_to(np.asarray(terms, np.int64), np.shape(sum_absolute_terms))
        return cls(terms, sum_absolute_terms, accumulation_dtype, output_dtype, magnitude)

    @property
    def unit_roundoff(self) -> float:
        return unit_roundoff(self.accumulation_dtype)

    @property
    def output_unit_roundoff(self) -> float:
        """u of the final rounding from the accumulator to the output dtype; 0 when there is none."""
        return 0.0 if self.output_dtype == self.accumulation_dtype else unit_roundoff(self.output_dtype)

    @property
    def max_terms(self) -> int:
        return int(self.terms.max(initial=0))

    @property
    def max_sum_absolute_terms(self) -> float:
        return float(self.sum_absolute_terms.max(initial=0.0))

    def digest(self) -> str:
        """SHA-256 of the per-element data and dtypes: a policy names exactly the envelopes it used."""
        h = hashlib.sha256(f"{self.accumulation_dtype}->{self.output_dtype}:".encode())
        h.update(self.terms.astype("<i8").tobytes())
        h.update(self.sum_absolute_terms.astype("<f8").tobytes())
        h.update(self.magnitude.astype("<f8").tobytes())
        return h.hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, OutputBound) and self.digest() == other.digest()

    def __hash__(self) -> int:
        return hash(self.digest())


def path_envelope(bound: OutputBound) -> np.ndarray:
    """Per element, the worst error of one accumulation path against the exact result.

    gamma_K(u) * S (T5) for the accumulation, plus the final rounding to the output dtype,
    u_out * (M + gamma_K * S) (the accumulated value is within gamma_K * S of the exact one, whose
    magnitude is at most M), plus one underflow unit per rounding (K in the accumulator, one at the
    output), for subnormal results.
    Evaluated in float64 and inflated past its own rounding, so it is never below the analytic value.
    """
    k = bound.terms.astype(np.float64)
    u, eta = FLOAT_ROUNDING[bound.accumulation_dtype]
    ku = k * u
    if np.any(ku >= 1):
        raise ValueError(f"an output element has K * u >= 1 (K = {bound.max_terms}, u = {u!r})")
    gamma = ku / (1.0 - ku)
    s = bound.sum_absolute_terms
    envelope = gamma * s + k * eta
    if bound.output_dtype != bound.accumulation_dtype:
        u_out, eta_out = FLOAT_ROUNDING[bound.output_dtype]
        envelope = envelope + u_out * (bound.magnitude + gamma * s) + eta_out
    return inflate(envelope, 8)


def envelope_digest(envelopes: tuple) -> str:
    """SHA-256 of a case's per-element envelopes (one float64 array per floating output, None otherwise)."""
    h = hashlib.sha256()
    for e in envelopes:
        h.update(b"-" if e is None else np.ascontiguousarray(e, "<f8").tobytes())
        h.update(b"|")
    return h.hexdigest()


def envelope_ratio(expected: np.ndarray, actual: np.ndarray, envelope: np.ndarray) -> tuple:
    """(worst |expected - actual| / envelope over elements, its index), both float32 outputs.

    Identical words (including the same NaN or infinity) deviate by 0. A pair whose difference is not a
    finite number (NaN against a value, an infinity against another value) has ratio ``inf``: no
    envelope covers it. A non-zero deviation against a zero envelope is ``inf`` as well.
    """
    e = np.ascontiguousarray(expected, np.float32).reshape(-1)
    a = np.ascontiguousarray(actual, np.float32).reshape(-1)
    envelope = np.asarray(envelope, np.float64).reshape(-1)
    if not (e.shape == a.shape == envelope.shape):
        raise ValueError(f"envelope of {envelope.size} elements for results of {e.size} and {a.size}")
    if not e.size:
        return 0.0, None
    same = e.view(np.uint32) == a.view(np.uint32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
        diff = np.where(same, 0.0, np.where(np.isfinite(diff), diff, math.inf))
        ratio = np.where(diff == 0, 0.0, np.where(envelope > 0, diff / np.where(envelope > 0, envelope, 1.0),
                                                  math.inf))
    i = int(np.argmax(ratio))
    return float(ratio[i]), i


# --- the bounds of the shipped accumulation shapes ------------------------------------------------

def magnitude_of(total: np.ndarray, sum_absolute: np.ndarray, counts) -> np.ndarray:
    """An upper bound on |exact sum| from its float64 value ``total`` computed with ``counts`` additions: the
    float64 sum errs by at most gamma_K(2^-53) * S (S = ``sum_absolute``, already inflated)."""
    k = np.asarray(counts, np.float64)
    return inflate(np.abs(total) + (k * 2.0 ** -53 / (1.0 - k * 2.0 ** -53)) * sum_absolute, 4)


def fibre_sums(terms: np.ndarray, acc: str, out: str) -> OutputBound:
    """A reduction over the last axis: every output element sums one whole fibre."""
    k = terms.shape[-1]
    t = terms.astype(np.float64)
    s = inflate(np.sum(np.abs(t), axis=-1), k)
    return OutputBound.of(k, s, acc, out, magnitude_of(np.sum(t, axis=-1), s, k))


def prefix_sums(terms: np.ndarray, acc: str, out: str) -> OutputBound:
    """An inclusive scan over the last axis: element j of a fibre sums its first j + 1 terms."""
    k = terms.shape[-1]
    t = terms.astype(np.float64)
    counts = np.broadcast_to(np.arange(1, k + 1, dtype=np.int64), terms.shape)
    s = inflate(np.cumsum(np.abs(t), axis=-1), counts)
    return OutputBound.of(counts, s, acc, out, magnitude_of(np.cumsum(t, axis=-1), s, counts))


def product_sums(lhs: np.ndarray, rhs: np.ndarray, acc: str, out: str) -> OutputBound:
    """A contraction ``lhs (m, k) @ rhs (k, n)``: element (i, j) sums the k products lhs[i, :] * rhs[:, j]
    (exact in float64 for binary32 operands)."""
    k = lhs.shape[1]
    a, b = lhs.astype(np.float64), rhs.astype(np.float64)
    s = inflate(np.abs(a) @ np.abs(b), k)
    return OutputBound.of(k, s, acc, out, magnitude_of(a @ b, s, k))
