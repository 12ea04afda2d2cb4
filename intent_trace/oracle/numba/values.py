"""What the Numba emitter holds for each KIR value while it writes source: the shared value classes
(:mod:`intent_trace.codegen.values`; on cpu an :class:`Array` is a NumPy array local, f16/bf16 elements held as
float32, and a :class:`View`'s f16/bf16 argument arrives as uint16 bit patterns)."""
from __future__ import annotations

from ...codegen.values import Aggregate, Array, Domain, Lazy, Scalar, View

__all__ = ["Aggregate", "Array", "Domain", "Lazy", "Scalar", "View"]
