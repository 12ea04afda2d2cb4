"""Encoded payloads: the single quantization point in front of every verification comparison.

Target and oracle must see the same binary32 (or int32/bool) words, so source values are rounded once,
here, and both executions decode the same immutable words. Anything that happens before that rounding
(source precision, Python float formatting) is outside the comparison boundary by construction, and the
SHA-256 of the words lets evidence prove both sides started from identical inputs.

Record constructors only freeze what they are given (the spec keeps direct construction cheap and
faithful); the ``from_*`` factories and generator functions own type, range, hash and canonical checks.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Union

import attrs
import numpy as np

from intent_trace.floatbits import int_to_f64_round_to_odd, round_int

_U32_MAX = 2**32 - 1
_F32_EXACT_INT = 2**24  # every integer of magnitude <= 2**24 is a binary32 value


# --------------------------------------------------------------------------------------------------- helpers
def json_number(x):
    """A JSON-canonical number: non-finite floats become the strings ``"inf"``, ``"-inf"``, ``"nan"``."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _check_int(name: str, value, *, minimum: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _words_hash(words: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(words, dtype="<u4").tobytes()).hexdigest()


def _integral_words(values, lo: int, hi: int, what: str) -> np.ndarray:
    """Non-Boolean integers in [lo, hi] as an int64 array (numpy integer arrays take a vectorised path)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        flat = values.reshape(-1)
        if flat.size and (int(flat.min()) < lo or int(flat.max()) > hi):
            bad = next(int(v) for v in flat.tolist() if not lo <= v <= hi)
            raise ValueError(f"{what} {bad} is outside [{lo}, {hi}]")
        return flat.astype(np.int64)
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        raise TypeError(f"{what}s must be integers, not a {values.dtype} array")
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must be a non-Boolean integer, not {type(v).__name__}: {v!r}")
        v = int(v)
        if not lo <= v <= hi:
            raise ValueError(f"{what} {v} is outside [{lo}, {hi}]")
        out.append(v)
    return np.array(out, dtype=np.int64)


def float32_words(values) -> np.ndarray:
    """Binary32 words (uint32) of ``values``, each rounded to binary32 exactly once (RNE).

    Python floats round from the double, Python ints from the exact integer (never through a rounded
    double), numpy float32 scalars and arrays keep their words bit for bit (signalling NaNs included),
    other numpy floats convert directly. A NaN keeps its payload as a hardware double->float conversion
    does. A finite value whose rounding overflows binary32 is not encodable: ValueError. Booleans and
    non-numeric values: TypeError.
    """
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        return _float32_words_array(values)
    if isinstance(values, (str, bytes)):
        raise TypeError("values must be an iterable of numbers, not a string")
    items = values.reshape(-1).tolist() if isinstance(values, np.ndarray) else list(values)
    wide = np.zeros(len(items), dtype=np.float64)
    exact: dict[int, int] = {}
    for k, v in enumerate(items):
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"value {k} is a Boolean, which is not a binary32 number")
        if isinstance(v, float):  # includes numpy float64
            wide[k] = v
        elif isinstance(v, (int, np.integer)):
            if abs(int(v)).bit_length() > 128:  # >= 2**128 overflows (and is beyond float64 round-to-odd)
                raise _overflow(k, v)
            wide[k] = int_to_f64_round_to_odd(int(v))  # exact below 2**53, rounded to odd above: one RNE later
        elif isinstance(v, np.floating):
            exact[k] = int(_float32_words_array(np.asarray(v))[0])
        else:
            raise TypeError(f"value {k} must be an int or float, not {type(v).__name__}: {v!r}")
    words = _narrow(wide, items)
    for k, w in exact.items():
        words[k] = w
    return words


def _overflow(k: int, value) -> ValueError:
    return ValueError(f"value {k} ({value!r}) overflows binary32 and is not encodable")


def _narrow(wide: np.ndarray, items) -> np.ndarray:
    """One C conversion to binary32 (RNE; a float32 source is copied bit for bit), refusing overflow."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = wide.astype(np.float32)
    overflow = np.flatnonzero(np.isinf(narrow) & np.isfinite(wide))
    if overflow.size:
        raise _overflow(int(overflow[0]), items[int(overflow[0])])
    return narrow.view(np.uint32)


def _float32_words_array(arr: np.ndarray) -> np.ndarray:
    kind = arr.dtype.kind
    if kind == "f":
        return _narrow(arr.reshape(-1), arr.reshape(-1))
    if kind in "iu":
        return np.asarray(round_int(arr.reshape(-1), np.float32), dtype=np.float32).view(np.uint32)
    raise TypeError(f"values must be ints or floats, not a {arr.dtype} array")


# --------------------------------------------------------------------------------------------------- payloads
@attrs.frozen(slots=True)
class _Payload:
    """Shared decoding for the three word payloads; equality also compares the concrete class."""

    bits: tuple[int, ...]
    bit_hash: str

    @classmethod
    def _of_words(cls, words: np.ndarray):
        words = np.ascontiguousarray(words, dtype=np.uint32)
        return cls(tuple(words.tolist()), _words_hash(words))

    @classmethod
    def from_bits(cls, bits: Iterable[int]):
        """Canonical words from non-Boolean integers in [0, 2**32 - 1]; TypeError / ValueError otherwise."""
        return cls._of_words(_integral_words(bits, 0, _U32_MAX, "word"))

    def _words(self) -> np.ndarray:
        return np.array(self.bits, dtype=np.uint32)

    def __len__(self) -> int:
        return len(self.bits)

    def to_json(self) -> dict:
        return {"kind": self.kind, "bits": list(self.bits), "bit_hash": self.bit_hash}


@attrs.frozen(slots=True)
class EncodedFloat32Payload(_Payload):
    """Binary32 words of one operand."""

    kind = "float32"

    @classmethod
    def from_values(cls, values: Iterable[Union[int, float]]) -> EncodedFloat32Payload:
        """Round each value to binary32 exactly once (see ``float32_words``)."""
        return cls._of_words(float32_words(values))

    def values(self) -> tuple[float, ...]:
        with np.errstate(invalid="ignore"):
            return tuple(self.as_array().astype(np.float64).tolist())

    def as_array(self) -> np.ndarray:
        """A fresh float32 array viewed from the words, so every encoding (signalling NaNs too) is exact."""
        return self._words().view(np.float32)


@attrs.frozen(slots=True)
class EncodedInt32Payload(_Payload):
    """Two's-complement words of one int32 operand."""

    kind = "int32"

    @classmethod
    def from_values(cls, values: Iterable[int]) -> EncodedInt32Payload:
        """Non-Boolean integers in [-2**31, 2**31 - 1]; words are ``value & 0xFFFFFFFF``."""
        return cls._of_words(_integral_words(values, -2**31, 2**31 - 1, "int32 value") & _U32_MAX)

    def values(self) -> tuple[int, ...]:
        return tuple(self.as_array().tolist())

    def as_array(self) -> np.ndarray:
        return self._words().view(np.int32)


@attrs.frozen(slots=True)
class EncodedBoolPayload(_Payload):
    """Boolean operands (words 0 and 1), produced by the staged verifier."""

    kind = "bool"

    @classmethod
    def from_bits(cls, bits: Iterable[int]) -> EncodedBoolPayload:
        return cls._of_words(_integral_words(bits, 0, 1, "Boolean word"))

    @classmethod
    def from_values(cls, values: Iterable[bool]) -> EncodedBoolPayload:
        """Python or numpy Booleans only: an integer 0/1 is not a Boolean and raises TypeError."""
        if isinstance(values, np.ndarray) and values.dtype == np.bool_:
            return cls._of_words(values.reshape(-1).astype(np.uint32))
        items = values.reshape(-1).tolist() if isinstance(values, np.ndarray) else list(values)
        for v in items:
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"Boolean payload values must be bool, not {type(v).__name__}: {v!r}")
        return cls._of_words(np.array([bool(v) for v in items], dtype=np.uint32))

    def values(self) -> tuple[bool, ...]:
        return tuple(bool(w) for w in self.bits)

    def as_array(self) -> np.ndarray:
        return self._words().astype(np.bool_)


PAYLOAD_TYPES = (EncodedFloat32Payload, EncodedInt32Payload, EncodedBoolPayload)
Payload = Union[EncodedFloat32Payload, EncodedInt32Payload, EncodedBoolPayload]


def check_payload(payload) -> None:
    """Deep validation of a possibly directly constructed payload: type, canonical words, and hash."""
    if type(payload) not in PAYLOAD_TYPES:
        raise TypeError(f"operand must be a Float32, Int32 or Boolean payload, not {type(payload).__name__}")
    if type(payload.bits) is not tuple or type(payload.bit_hash) is not str:
        raise TypeError(f"{type(payload).__name__} needs a tuple of int words and a str hash")
    if any(type(w) is not int for w in payload.bits):
        raise TypeError(f"{type(payload).__name__} words must be plain ints")
    hi = 1 if type(payload) is EncodedBoolPayload else _U32_MAX
    if any(not 0 <= w <= hi for w in payload.bits):
        raise ValueError(f"{type(payload).__name__} has a word outside [0, {hi}]")
    if _words_hash(np.array(payload.bits, dtype=np.uint32)) != payload.bit_hash:
        raise ValueError(f"{type(payload).__name__} bit_hash does not match its words")


@attrs.frozen(slots=True)
class EncodedInputs:
    """The ordered operands of one case; target and oracle decode the very same payload objects."""

    operands: tuple

    @classmethod
    def of(cls, *operands: Payload) -> EncodedInputs:
        """Validate every operand deeply (type, words, hash) and freeze their order."""
        for op in operands:
            check_payload(op)
        return cls(tuple(operands))

    def target_values(self) -> tuple[tuple, ...]:
        return tuple(op.values() for op in self.operands)

    def oracle_values(self) -> tuple[tuple, ...]:
        return tuple(op.values() for op in self.operands)

    def target_arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(op.as_array() for op in self.operands)

    def oracle_arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(op.as_array() for op in self.operands)

    @property
    def input_hashes(self) -> tuple[str, ...]:
        return tuple(op.bit_hash for op in self.operands)

    def to_json(self) -> dict:
        return {"operands": [op.to_json() for op in self.operands], "input_hashes": list(self.input_hashes)}


# --------------------------------------------------------------------------------------------------- witnesses
@attrs.frozen(slots=True)
class ExactStructuralPayload:
    """Integer-valued operands whose every partial sum (or sum of products) over a fiber is exact.

    ``lhs`` (and ``rhs`` in product mode) hold ``rows`` row-major fibers of ``contraction_length`` integers
    in ``[-operand_bound, operand_bound]``. Sum mode: ``L * B <= 2**mantissa_bits``; product mode:
    ``L * B**2 <= 2**mantissa_bits``. Every partial result is then an integer of magnitude at most
    ``2**mantissa_bits``, exactly representable in any accumulator with that many significand bits, so
    every association and order of the fiber yields the same bits.
    """

    lhs: EncodedFloat32Payload
    rhs: EncodedFloat32Payload | None
    contraction_length: int
    operand_bound: int
    mantissa_bits: int

    def to_json(self) -> dict:
        return {"lhs": self.lhs.to_json(), "rhs": None if self.rhs is None else self.rhs.to_json(),
                "contraction_length": self.contraction_length, "operand_bound": self.operand_bound,
                "mantissa_bits": self.mantissa_bits}


@attrs.frozen(slots=True)
class AnalyticCase:
    """One witness with an independently known result (see ``analytic_cases`` for the conventions)."""

    case_id: str
    operation: str
    inputs: tuple[tuple[float, ...], ...]
    expected: tuple[float, ...]

    def to_json(self) -> dict:
        return {"case_id": self.case_id, "operation": self.operation,
                "inputs": [[json_number(v) for v in seq] for seq in self.inputs],
                "expected": [json_number(v) for v in self.expected]}


def _rng(seed, count) -> tuple[np.random.Generator, int]:
    seed = _check_int("seed", seed, minimum=0)
    count = _check_int("count", count, minimum=0)
    return np.random.Generator(np.random.PCG64(seed)), count


def arbitrary_float32_payload(seed: int, count: int) -> EncodedFloat32Payload:
    """``count`` finite binary32 values drawn uniformly from [-4, 4), deterministic in ``seed`` (>= 0)."""
    rng, count = _rng(seed, count)
    return EncodedFloat32Payload._of_words(rng.uniform(-4.0, 4.0, count).astype(np.float32).view(np.uint32))


# Binades 2**-40 .. 2**40: 81 binades of spread, while products stay normal and sums or dot products of
# up to 10**6 terms stay far below binary32 overflow (2**82 * 10**6 < 2**102).
_WIDE_EXPONENTS = (-40, 40)


def wide_exponent_float32_payload(seed: int, count: int) -> EncodedFloat32Payload:
    """``count`` finite binary32 values of random sign with exponents spread over 2**-40 .. 2**41."""
    rng, count = _rng(seed, count)
    mantissa = rng.uniform(1.0, 2.0, count)
    exponent = rng.integers(_WIDE_EXPONENTS[0], _WIDE_EXPONENTS[1], endpoint=True, size=count)
    sign = np.where(rng.integers(0, 2, size=count) == 1, -1.0, 1.0)
    values = sign * np.ldexp(mantissa, exponent)
    return EncodedFloat32Payload._of_words(values.astype(np.float32).view(np.uint32))


_ADVERSARIAL_WORDS = (
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00400000,  # +-0, smallest subnormals, a mid subnormal
    0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000,  # largest subnormals, tiny normals, +-1
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,  # largest finite, +-inf
    0x7FC00000, 0x7FC00001, 0xFFC00123, 0x7FFFFFFF, 0xFFC00000,  # distinct quiet NaN payloads, both signs
)


def adversarial_float32_payload() -> EncodedFloat32Payload:
    """Fixed representational edge cases. Only quiet NaNs, so a trip through Python floats keeps every word."""
    return EncodedFloat32Payload._of_words(np.array(_ADVERSARIAL_WORDS, dtype=np.uint32))


def _matmul_case(case_id: str, a: tuple, b: tuple, expected: tuple) -> AnalyticCase:
    return AnalyticCase(case_id, "matmul", (tuple(map(float, a)), tuple(map(float, b))), tuple(map(float, expected)))


_ANALYTIC_CASES = (
    AnalyticCase("reduce_sum/ones-1024", "reduce_sum", ((1.0,) * 1024,), (1024.0,)),
    AnalyticCase("reduce_sum/alternating-threes", "reduce_sum", ((3.0, -3.0) * 64,), (0.0,)),
    AnalyticCase("reduce_sum/powers-of-two", "reduce_sum", (tuple(2.0**k for k in range(24)),), (16777215.0,)),
    AnalyticCase("reduce_sum/dyadic-cancellation", "reduce_sum",
                 ((524288.0, 0.25, -262144.0, 1.5, -524288.0, 0.0625, 262144.0, -0.8125),), (1.0,)),
    AnalyticCase("reduce_sum/single", "reduce_sum", ((-2.5,),), (-2.5,)),
    _matmul_case("matmul/scalar", (3,), (-0.5,), (-1.5,)),
    _matmul_case("matmul/identity-4", (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1),
                 (1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16),
                 (1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16)),
    _matmul_case("matmul/integer-3", (1, 2, 3, 4, 5, 6, 7, 8, 9), (9, -8, 7, -6, 5, -4, 3, -2, 1),
                 (6, -4, 2, 24, -19, 14, 42, -34, 26)),
    _matmul_case("matmul/dyadic-2", (0.5, -1.25, 2, 0.75), (4, 0.5, -2, 8), (4.5, -9.75, 6.5, 7)),
)


def analytic_cases() -> tuple[AnalyticCase, ...]:
    """Named witnesses whose expected bits hold for every association and for f32 or f64 accumulators.

    Every partial result of every case is exactly representable in binary32, so no rounding ever occurs.
    ``reduce_sum`` cases carry one input sequence reduced entirely to one value; an exact zero result is
    +0 (no operand is zero, so any association produces +0 under round-to-nearest). ``matmul`` cases
    carry two row-major square ``n x n`` matrices (``n = isqrt(len)``) and expect their row-major product.
    """
    return _ANALYTIC_CASES


def exact_structural_payload(seed: int, contraction_length: int, *, product: bool, rows: int = 1,
                             mantissa_bits: int = 24) -> ExactStructuralPayload:
    """Random integer fibers whose partial sums (or sums of products) are exact under ``mantissa_bits``.

    Sum mode: ``B = 2**m // L``; product mode: ``B = isqrt(2**m // L)``; both capped at ``2**24`` so the
    operands themselves stay exact binary32 values. Operands are uniform integers in ``[-B, B]``
    (deterministic in ``seed``); ``rhs`` is drawn after ``lhs`` from the same generator.
    """
    if type(product) is not bool:
        raise TypeError(f"product must be a bool, not {type(product).__name__}")
    seed = _check_int("seed", seed, minimum=0)
    length = _check_int("contraction_length", contraction_length)
    rows = _check_int("rows", rows)
    mantissa_bits = _check_int("mantissa_bits", mantissa_bits)
    for name, value in (("contraction_length", length), ("rows", rows), ("mantissa_bits", mantissa_bits)):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    budget = 2**mantissa_bits // length
    bound = min(math.isqrt(budget) if product else budget, _F32_EXACT_INT)
    if bound < 1:
        raise ValueError(f"contraction_length {length} leaves an operand bound below 1 under a "
                         f"{mantissa_bits}-bit mantissa budget ({'product' if product else 'sum'} mode)")
    rng = np.random.Generator(np.random.PCG64(seed))
    size = rows * length

    def draw() -> EncodedFloat32Payload:
        ints = rng.integers(-bound, bound, endpoint=True, size=size, dtype=np.int64)
        return EncodedFloat32Payload._of_words(ints.astype(np.float32).view(np.uint32))

    lhs = draw()
    rhs = draw() if product else None
    return ExactStructuralPayload(lhs, rhs, length, bound, mantissa_bits)
