"""``intent.verify``: a user's whole kernel on a target against the CPU oracle, on the same encoded inputs.

Beyond the spec (DESIGN.md §4). The caller's arrays are encoded once (their bytes hashed) and both
executions decode fresh copies of those bytes, so neither can see the other's writes and the
caller's arrays are never modified. Outputs are compared bit for bit unless the caller gives a
Tolerance (a kernel with floating accumulations may legitimately differ by association).
"""
from __future__ import annotations

import hashlib

import attrs
import numpy as np

from ... import compiler
from ...kernel import Kernel
from .comparison import Comparison, Tolerance, TolerancePolicy, compare_exact, compare_float32, exact_policy
from .evidence import canonical_json

ORACLE_TARGET = "cpu"


@attrs.frozen
class OutputComparison:
    name: str
    dtype: str
    shape: tuple
    comparison: Comparison
    policy: TolerancePolicy
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


def _words(a: np.ndarray) -> list:
    if a.dtype == np.bool_:
        return a.reshape(-1).astype(np.uint32).tolist()
    return np.ascontiguousarray(a).reshape(-1).view(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64).tolist()


def verify(kernel: Kernel, target: str, *args, tolerance: Tolerance | None = None, **constexprs) -> KernelVerification:
    """Run ``kernel`` on ``target`` and on the cpu oracle with the same inputs; compare every output."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.verify takes an @intent.kernel, got {kernel!r}")
    if not isinstance(target, str):
        raise TypeError(f"target must be a str, got {type(target).__name__}")
    if tolerance is not None and not isinstance(tolerance, Tolerance):
        raise TypeError(f"tolerance must be a Tolerance or None, got {type(tolerance).__name__}")
    candidate = compiler.compile(kernel, target=target, **constexprs)
    oracle = compiler.compile(kernel, target=ORACLE_TARGET, **constexprs)
    encoded = [_encode(a) for a in args]
    runs = {}
    for name, exe in (("target", candidate), ("oracle", oracle)):
        values = [decode() for _, decode in encoded]
        exe(*values)
        sync = getattr(exe, "synchronize", None)
        if sync is not None:
            sync()
        runs[name] = values
    policy = exact_policy() if tolerance is None else TolerancePolicy(
        "user-tolerance-v1", tolerance, "caller-supplied absolute/relative/ulp tolerance")
    outputs = []
    for i, p in enumerate(candidate.graph.params):
        if getattr(p.type, "access", None) not in ("Out", "InOut") or i >= len(args):
            continue
        got, want = np.asarray(runs["target"][i]), np.asarray(runs["oracle"][i])
        if want.dtype == np.float32:
            cmp = compare_float32(want.reshape(-1), got.reshape(-1))
        else:
            cmp = compare_exact(_words(want), _words(got))
        outputs.append(OutputComparison(p.name, str(want.dtype), tuple(want.shape), cmp, policy, policy.accepts(cmp)))
    return KernelVerification(kernel.name, target, ORACLE_TARGET, tuple(h for h, _ in encoded), tuple(outputs))
