"""The trusted side: the reference interpreter (``generic``), the CPU oracle (``numba``) and the verifier.

The verification names (``verification_profiles``, ``run_oracle_stage``, ``verify_backend``, ...) are
exported here lazily from ``intent_trace.oracle.verification``.
"""
from __future__ import annotations

import importlib


def _verification():
    return importlib.import_module(f"{__name__}.verification")


def __getattr__(name: str):
    verification = _verification()
    if name in verification.EXPORTS:
        return getattr(verification, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_verification().EXPORTS))
