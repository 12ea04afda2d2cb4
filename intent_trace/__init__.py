"""intent_trace: trace logical kernels into a typed graph (KIR) and run them on every target.

Public API: ``kernel``, ``fn``, ``compile``, ``trace``, ``verify``, ``bench``, ``I``, ``TraceError``.
"""
from . import language as I  # noqa: E741
from .bench import bench  # intent.bench (the name shadows the submodule; "from intent_trace.bench import" works)
from .compiler import compile, runnable_targets, targets
from .errors import IntentTraceError, LoweringError, TraceError, VerifyError
from .kernel import Helper, Kernel, fn, kernel


def verify(k: Kernel, target: str, *args, tolerance=None, **constexprs):
    """Run ``k`` on ``target`` and on the cpu oracle with the same encoded inputs and compare every output.

    Returns a ``KernelVerification`` (``.passed``, per-output comparisons); the caller's arrays are not
    modified. Outputs are compared bit for bit unless ``tolerance`` (an ``intent_trace.oracle.Tolerance``)
    is given.
    """
    from .oracle.verification.kernels import verify as _verify

    return _verify(k, target, *args, tolerance=tolerance, **constexprs)


def trace(k: Kernel, **constexprs):
    """The KIR graph of ``k`` for these constexprs (same as ``k.trace(**constexprs)``)."""
    if not isinstance(k, Kernel):
        raise TypeError(f"intent.trace takes an @intent.kernel, got {k!r}")
    return k.trace(**constexprs)


__all__ = ["kernel", "fn", "compile", "trace", "verify", "bench", "targets", "runnable_targets", "I", "TraceError", "IntentTraceError",
           "LoweringError", "VerifyError", "Kernel", "Helper"]
