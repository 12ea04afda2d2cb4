"""``intent.verify``: a user's whole kernel on a target against the CPU oracle, on the same encoded inputs.

Beyond the spec (DESIGN.md §4). The caller's arrays are encoded once (their bytes hashed) and every
execution decodes fresh copies of those bytes, so no run can see another's writes and the caller's
arrays are never modified. Out parameters start as poison, twice (a NaN pattern, then a finite one;
for integers two complementary words), and each target run is compared with the oracle run of the
same fill: an element the target leaves unwritten equals at most one of the fills, so it always fails,
while an element that the oracle leaves unwritten too compares equal.

Acceptance is per output, by default derived from the graph (:mod:`.kernel_bounds`): exact where every
op feeding the output is exact or correctly rounded, a bound that adds up vendor-math and accumulation
error where the language lets targets differ. A caller's ``Tolerance`` replaces it; give one component
(``Tolerance(ulps=4)``, ``Tolerance(relative=1e-5)``) and the others are unconstrained.
"""
from __future__ import annotations

import hashlib
import math
import numbers

import attrs
import numpy as np

from ... import compiler
from ...kernel import Kernel
from .comparison import MAX_ULP_DISTANCE, Comparison, Tolerance
from .evidence import canonical_json
from .kernel_bounds import output_bounds
from .kernel_policy import OutputPolicy, accept, graph_policy, user_policy

ORACLE_TARGET = "cpu"


@attrs.frozen
class OutputComparison:
    name: str
    dtype: str
    shape: tuple
    comparison: Comparison  # the worse of the two fills' comparisons
    policy: OutputPolicy
    passed: bool

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape),
                "comparison": self.comparison.to_json(), "policy": self.policy.to_json(), "passed": self.passed}


@attrs.frozen
class KernelVerification:
    kernel: str
    target: str
    oracle_target: str
    input_hashes: tuple
    outputs: tuple  # OutputComparison, ... in parameter order

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "oracle_target": self.oracle_target,
                "input_hashes": list(self.input_hashes), "outputs": [o.to_json() for o in self.outputs],
                "passed": self.passed}

    def __str__(self) -> str:
        rows = [f"verify {self.kernel}: {self.target} vs {self.oracle_target} oracle -> "
                f"{'PASSED' if self.passed else 'FAILED'}"]
        for o in self.outputs:
            d = o.comparison.deviations
            rows.append(f"  {o.name}: {o.dtype}{list(o.shape)} {'ok ' if o.passed else 'BAD'} "
                        f"mismatches={o.comparison.mismatches} max_abs={d.absolute} max_ulps={d.ulps} "
                        f"[{o.policy.policy_id}]")
            rows.append(f"      policy: {o.policy.reason}")
        return "\n".join(rows)


def _encode(value):
    """(hash, decode) for one argument: arrays by dtype, shape and bytes; scalars by their repr."""
    if hasattr(value, "__array__") and not np.isscalar(value):
        a = np.ascontiguousarray(np.asarray(value))
        data = a.tobytes()
        digest = hashlib.sha256(canonical_json([str(a.dtype), list(a.shape)]).encode() + data).hexdigest()
        return digest, (lambda: np.frombuffer(bytearray(data), dtype=a.dtype).reshape(a.shape))
    digest = hashlib.sha256(repr((type(value).__name__, value)).encode()).hexdigest()
    return digest, (lambda: value)


# Two fills per dtype kind that no single result can equal both of (floats: a NaN pattern, a finite word).
_FILLS = {"f": (0x7FBADBAD7FBADBAD, 0x3BADF00D3BADF00D), "i": (0x5A5A5A5A5A5A5A5B, -0x5A5A5A5A5A5A5A5C),
          "u": (0x5A5A5A5A5A5A5A5B, 0xA5A5A5A5A5A5A5A4), "b": (0, 1)}


def poisoned(like: np.ndarray, fill: int) -> np.ndarray:
    """An array shaped and typed like ``like``, every element the ``fill``-th poison word of its dtype."""
    kind = like.dtype.kind
    word = _FILLS.get(kind, _FILLS["u"])[fill]
    if kind == "b":
        return np.full(like.shape, bool(word))
    width = like.dtype.itemsize * 8
    bits = np.full(like.shape, word & ((1 << width) - 1), np.dtype(f"u{like.dtype.itemsize}"))
    if kind == "f" and width == 16 and like.dtype != np.float16:  # bfloat16 (ml_dtypes): the upper half's pattern
        bits = np.full(like.shape, (word >> 16) & 0xFFFF, np.uint16)
    return bits.view(like.dtype)


def _check_tolerance(tolerance) -> None:
    if tolerance is None:
        return
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"tolerance must be a Tolerance or None, got {type(tolerance).__name__}")
    for name in ("absolute", "relative", "ulps"):
        v = getattr(tolerance, name)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"Tolerance.{name} must be a real number, got {type(v).__name__}")
        if math.isnan(v) or v < 0:
            raise ValueError(f"Tolerance.{name} must be a non-negative number, got {v!r}")
    if not (isinstance(tolerance.ulps, (int, np.integer)) or tolerance.ulps == math.inf):
        raise TypeError(f"Tolerance.ulps must be an integer, got {tolerance.ulps!r}")
    if (tolerance.absolute, tolerance.relative, tolerance.ulps) == (math.inf, math.inf, MAX_ULP_DISTANCE):
        raise ValueError("a Tolerance must constrain at least one of absolute, relative, ulps")


def _runs(exe, encoded, outputs: dict) -> list:
    """The argument lists of two runs of ``exe``: fresh decoded inputs, Out parameters poisoned per fill."""
    runs = []
    for fill in (0, 1):
        values = [decode() for _, decode in encoded]
        for i in outputs:
            values[i] = poisoned(np.asarray(values[i]), fill)
        exe(*values)
        sync = getattr(exe, "synchronize", None)
        if sync is not None:
            sync()
        runs.append(values)
    return runs


def verify(kernel: Kernel, target: str, *args, tolerance: Tolerance | None = None, **constexprs) -> KernelVerification:
    """Run ``kernel`` on ``target`` and on the cpu oracle with the same inputs; compare every output.

    Without ``tolerance`` each output is held to the bound its graph implies (see the module docstring);
    ``print(result)`` says, per output, which rule applied and why.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.verify takes an @intent.kernel, got {kernel!r}")
    if not isinstance(target, str):
        raise TypeError(f"target must be a str, got {type(target).__name__}")
    _check_tolerance(tolerance)
    candidate = compiler.compile(kernel, target=target, **constexprs)
    oracle = compiler.compile(kernel, target=ORACLE_TARGET, **constexprs)
    graph = candidate.graph
    encoded = [_encode(a) for a in args]
    written = {i: p for i, p in enumerate(graph.params)
               if getattr(p.type, "access", None) in ("Out", "InOut") and i < len(args)}
    poison = [i for i, p in written.items() if p.type.access == "Out"]
    target_runs, oracle_runs = _runs(candidate, encoded, poison), _runs(oracle, encoded, poison)
    bounds = output_bounds(graph, [decode() for _, decode in encoded], target)
    outputs = []
    for i, p in written.items():
        want0 = np.asarray(oracle_runs[0][i])
        policy = user_policy(tolerance) if tolerance is not None else graph_policy(p.name, bounds[p.name],
                                                                                    want0.dtype, target)
        results = [accept(np.asarray(o[i]), np.asarray(t[i]), policy, tolerance)
                   for o, t in zip(oracle_runs, target_runs)]
        worst = max(results, key=lambda r: (not r[1], r[0].mismatches))
        outputs.append(OutputComparison(p.name, str(want0.dtype), tuple(want0.shape), worst[0], policy,
                                        all(ok for _, ok in results)))
    return KernelVerification(kernel.name, target, ORACLE_TARGET, tuple(h for h, _ in encoded), tuple(outputs))
