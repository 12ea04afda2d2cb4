"""One exception class per phase.

`TraceError` is what users catch for mistakes made while tracing. Concrete instances are also
a `TypeError` or a `ValueError` (as the mistake is one of type or of value), so generic Python
code that catches those still works.
"""
from __future__ import annotations


class IntentTraceError(Exception):
    """Base of every error intent_trace raises on purpose."""


class TraceError(IntentTraceError):
    """A mistake in a kernel found while tracing; the message names the user's source line."""

    def __init__(self, message: str, where: str | None = None):
        self.bare_message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class TraceTypeError(TraceError, TypeError):
    """A tracing mistake about types (dtypes, ranks, schemas)."""


class TraceValueError(TraceError, ValueError):
    """A tracing mistake about values (extents, axes, options)."""


class LoweringError(IntentTraceError):
    """A graph that a backend cannot lower; names the op and the target."""


class VerifyError(IntentTraceError):
    """A verification run that could not produce trustworthy evidence."""


class LawViolation(IntentTraceError, ValueError):
    """A combine (or summarize/apply/emit) helper that breaks the algebraic law its operation relies on."""
