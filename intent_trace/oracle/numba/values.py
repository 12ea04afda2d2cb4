"""What the Numba emitter holds for each KIR value while it writes source: the shared value classes
(:mod:`intent_trace.codegen.values`; on cpu an :class:`Array` is a NumPy array local, f16/bf16 elements held as
float32, and a :class:`View`'s f16/bf16 argument arrives as uint16 bit patterns)."""
from __future__ import annotations

from ... import types as T
from ...codegen.values import Aggregate, Array, Domain, Lazy, Scalar, View

__all__ = ["Aggregate", "Array", "Domain", "Lazy", "Scalar", "View", "shape_text"]


def shape_text(t: T.Type) -> str:
    """A tensor type's shape as the user wrote it (extent names, numbers), for allocation messages."""
    return "(" + ", ".join(str(e) for e in t.shape) + ("," if len(t.shape) == 1 else "") + ")"
