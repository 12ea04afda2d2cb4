"""intent_trace: trace logical kernels into a typed graph (KIR) and run them on every target.

Public API: ``kernel``, ``fn``, ``compile``, ``trace``, ``verify``, ``I``, ``TraceError``.
"""
from . import language as I  # noqa: E741
from .compiler import compile, targets
from .errors import IntentTraceError, LoweringError, TraceError, VerifyError
from .kernel import Helper, Kernel, fn, kernel


def trace(k: Kernel, **constexprs):
    """The KIR graph of ``k`` for these constexprs (same as ``k.trace(**constexprs)``)."""
    if not isinstance(k, Kernel):
        raise TypeError(f"intent.trace takes an @intent.kernel, got {k!r}")
    return k.trace(**constexprs)


__all__ = ["kernel", "fn", "compile", "trace", "targets", "I", "TraceError", "IntentTraceError", "LoweringError",
           "VerifyError", "Kernel", "Helper"]
