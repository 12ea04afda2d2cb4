"""``intent.verify``: a user's whole kernel on a target against the CPU oracle, on the same encoded inputs.

Beyond the spec (DESIGN.md §4). The caller's arrays are encoded once (their bytes hashed) and every
execution decodes fresh copies of those bytes, so no run can see another's writes and the caller's
arrays are never modified. Out parameters start as poison, twice (``cases.poisoned_run``): an element
that keeps each run's own fill was not written, and a target that leaves more elements unwritten than
the oracle fails (an element the oracle leaves alone too compares equal: both hold the first fill).

Acceptance is per output, by default derived from the graph (:mod:`.kernel_bounds`): exact where every
op feeding the output is exact or correctly rounded, a bound that adds up vendor-math and accumulation
error where the language lets targets differ. A caller's ``Tolerance`` replaces it; give one component
(``Tolerance(ulps=4)``, ``Tolerance(relative=1e-5)``) and the others are unconstrained.
"""
from __future__ import annotations

import hashlib
import math

import attrs
import numpy as np

from ... import compiler
from ...display import KernelVerificationDisplay
from ...kernel import Kernel
from .comparison import MAX_ULP_DISTANCE, Comparison, Tolerance
from .cases import poisoned_run
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
class KernelVerification(KernelVerificationDisplay):
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


def _check_tolerance(tolerance) -> None:
    if tolerance is None:
        return
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"tolerance must be a Tolerance or None, got {type(tolerance).__name__}")
    # its fields are validated when it is built (comparison.Tolerance); one constraint at least is needed here
    if (tolerance.absolute, tolerance.relative, tolerance.ulps) == (math.inf, math.inf, MAX_ULP_DISTANCE):
        raise ValueError("a Tolerance must constrain at least one of absolute, relative, ulps")


def _runs(exe, encoded, poison: list) -> tuple:
    """(arguments of the first of two runs, unwritten count per poisoned output) under the two-fill rule
    (``cases.poisoned_run``): fresh decoded inputs each run, the Out parameters ``poison`` poisoned."""
    specs = []
    for i in poison:
        a = np.asarray(encoded[i][1]())
        specs.append((a.shape, a.dtype))
    runs = []

    def call(outputs):
        values = [decode() for _, decode in encoded]
        for i, o in zip(poison, outputs):
            values[i] = o
        exe(*values)
        sync = getattr(exe, "synchronize", None)
        if sync is not None:
            sync()
        runs.append(values)

    _, unwritten = poisoned_run(call, specs)
    return runs[0], dict(zip(poison, unwritten))


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
    (got, got_unwritten), (want, want_unwritten) = _runs(candidate, encoded, poison), _runs(oracle, encoded, poison)
    bounds = output_bounds(graph, [decode() for _, decode in encoded], target)
    outputs = []
    for i, p in written.items():
        w = np.asarray(want[i])
        policy = user_policy(tolerance) if tolerance is not None else graph_policy(p.name, bounds[p.name],
                                                                                    w.dtype, target)
        cmp, ok = accept(w, np.asarray(got[i]), policy, tolerance)
        unwritten = got_unwritten.get(i, 0) - want_unwritten.get(i, 0)  # the oracle may leave elements alone too
        if unwritten:
            policy = attrs.evolve(policy, reason=f"{policy.reason}; the target left {unwritten} more element(s) "
                                                 f"unwritten than the oracle")
        outputs.append(OutputComparison(p.name, str(w.dtype), tuple(w.shape), cmp, policy, ok and not unwritten))
    return KernelVerification(kernel.name, target, ORACLE_TARGET, tuple(h for h, _ in encoded), tuple(outputs))
