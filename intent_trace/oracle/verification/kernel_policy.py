"""How ``intent.verify`` accepts one output: exact, the graph-derived bound, or the caller's Tolerance.

:mod:`.kernel_bounds` says what the graph allows; this module turns that into a per-element rule,
applies it to the oracle's and the target's arrays, and names the rule and the reason in an
:class:`OutputPolicy` that ``print(result)`` shows. Every floating width is compared on its own words
(f16, bf16, f32, f64), integers by value (a signed -1 against 0 deviates by 1, not by 2**32 - 1).
"""
from __future__ import annotations

import math

import attrs
import numpy as np

from .comparison import MAX_ULP_DISTANCE, Comparison, Deviations, Tolerance, compare_exact
from .kernel_bounds import UNIT_ROUNDOFF, Bound
from .payloads import json_number

EXACT_ID, GRAPH_ID, USER_ID = "exact-bits-v1", "graph-derived-bound-v1", "user-tolerance-v2"


@attrs.frozen
class OutputPolicy:
    """The rule one output was held to. ``ulps``/``absolute`` are per-element limits (None: not used);
    an element passes when it meets either (graph-derived), or every given component (user)."""

    policy_id: str
    reason: str
    ulps: int | None = None
    absolute: float | None = None
    relative: float | None = None
    nan_payload: bool = True  # NaN payloads must match (else only NaN-ness)

    def to_json(self) -> dict:
        return {"policy_id": self.policy_id, "reason": self.reason, "ulps": self.ulps,
                "absolute": None if self.absolute is None else json_number(self.absolute),
                "relative": None if self.relative is None else json_number(self.relative),
                "nan_payload": self.nan_payload}


def _float_width(dtype: np.dtype) -> int | None:
    name = str(dtype)
    return {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}.get(name)


def _ordered(words: np.ndarray, width: int) -> np.ndarray:
    """Words -> integers ordered like their values (+0 and -0 both 0), as Python-exact int64/objects."""
    words = words.astype(np.uint64)
    magnitude = (words & np.uint64((1 << (width - 1)) - 1)).astype(np.int64)
    return np.where((words >> np.uint64(width - 1)) != 0, -magnitude, magnitude)


def _float_view(a: np.ndarray):
    width = _float_width(a.dtype)
    words = np.ascontiguousarray(a).reshape(-1).view(np.dtype(f"u{width // 8}"))
    with np.errstate(invalid="ignore"):  # signalling NaN patterns stay NaN
        values = a.reshape(-1).astype(np.float64)
    return width, words, values


def float_comparison(want: np.ndarray, got: np.ndarray):
    """(Comparison, per-element ulp distance, per-element |difference|) for one floating output."""
    width, we, e = _float_view(want)
    _, wa, a = _float_view(got)
    differ = we != wa
    nan_e, nan_a = np.isnan(e), np.isnan(a)
    ulps = np.abs(_ordered(we, width) - _ordered(wa, width)).astype(np.float64)
    ulps = np.where(differ & (nan_e | nan_a), float(MAX_ULP_DISTANCE), ulps)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(differ & ~(nan_e & nan_a), np.abs(e - a), 0.0)
    signed_zero = differ & (e == 0) & (a == 0)
    payload = differ & nan_e & nan_a
    inf_any = np.isinf(e) | np.isinf(a)
    if np.any(differ & ((nan_e ^ nan_a) | inf_any)):
        absolute = relative = None
    else:
        scale = np.maximum(np.abs(e), np.abs(a))
        rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
        absolute, relative = float(diff.max(initial=0.0)), float(rel.max(initial=0.0))
    cmp = Comparison(Deviations(absolute, relative, int(ulps.max(initial=0.0))), int(differ.sum()),
                     int(signed_zero.sum()), int(payload.sum()))
    return cmp, ulps, diff, (differ, nan_e, nan_a, signed_zero)


def integer_comparison(want: np.ndarray, got: np.ndarray) -> Comparison:
    as_int = (lambda x: x.reshape(-1).astype(np.int64).tolist()) if want.dtype != np.uint64 else \
        (lambda x: [int(v) for v in x.reshape(-1).tolist()])
    return compare_exact(as_int(want), as_int(got))


def graph_policy(name: str, bound: Bound, dtype: np.dtype, target: str) -> OutputPolicy:
    """The default rule for one output from its :class:`~.kernel_bounds.Bound`."""
    unit = UNIT_ROUNDOFF.get({"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
                             .get(str(dtype), ""))
    if bound.unbounded is not None:
        return OutputPolicy(EXACT_ID, f"no bound follows from the graph: {bound.unbounded}; compared exactly "
                                      f"(pass tolerance=Tolerance(...) if the difference is legitimate)")
    if bound.exact or unit is None:
        return OutputPolicy(EXACT_ID, f"every op feeding {name} is exact or correctly rounded on exact operands "
                                      f"(T3), so {target} and the oracle must agree bit for bit")
    ulps = max(1, math.ceil(bound.rel / unit))
    parts = "; ".join(bound.why) or "correctly rounded ops on inexact operands"
    reason = f"|target - oracle| <= {ulps} ulp (relative {bound.rel:.3g}) from: {parts}"
    absolute = None
    if bound.cancel is not None:
        absolute = bound.rel  # scaled by max |oracle output| when applied
        reason += (f"; or <= {bound.rel:.3g} * max|{name}| where the value may cancel ({bound.cancel})")
    if bound.accumulates:
        reason += "; NaN payloads of accumulations depend on the association: NaN-ness only"
    return OutputPolicy(GRAPH_ID, reason, ulps, absolute, None, not bound.accumulates)


def user_policy(tolerance: Tolerance) -> OutputPolicy:
    given = {k: v for k, v in (("absolute", tolerance.absolute), ("relative", tolerance.relative),
                               ("ulps", tolerance.ulps)) if v not in (math.inf, MAX_ULP_DISTANCE)}
    text = ", ".join(f"{k} <= {v}" for k, v in given.items())
    return OutputPolicy(USER_ID, f"caller's Tolerance: every element within {text} (others unconstrained); zero "
                                 f"signs and NaN payloads must match",
                        None if tolerance.ulps == MAX_ULP_DISTANCE else int(tolerance.ulps),
                        None if tolerance.absolute == math.inf else float(tolerance.absolute),
                        None if tolerance.relative == math.inf else float(tolerance.relative))


def accept(want: np.ndarray, got: np.ndarray, policy: OutputPolicy, tolerance: Tolerance | None):
    """(Comparison, passed) of one output under ``policy``."""
    if _float_width(want.dtype) is None:
        cmp = integer_comparison(want, got)
        return cmp, (cmp.within(tolerance) if tolerance is not None else cmp.mismatches == 0)
    cmp, ulps, diff, (differ, nan_e, nan_a, signed_zero) = float_comparison(want, got)
    if tolerance is not None:
        return cmp, cmp.within(tolerance)
    if policy.policy_id == EXACT_ID:
        return cmp, cmp.mismatches == 0
    both_nan = nan_e & nan_a
    finite = np.isfinite(want.reshape(-1).astype(np.float64))
    ok = ~differ | (both_nan & (not policy.nan_payload))
    close = ~(nan_e | nan_a) & ~signed_zero & (ulps <= policy.ulps)
    if policy.absolute is not None:
        scale = float(np.max(np.abs(want.reshape(-1).astype(np.float64)[finite]), initial=0.0))
        with np.errstate(invalid="ignore"):
            close |= ~(nan_e | nan_a) & ~signed_zero & np.isfinite(diff) & (diff <= policy.absolute * scale)
    return cmp, bool(np.all(ok | close))
