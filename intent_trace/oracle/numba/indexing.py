"""cpu's spelling of what the shared rules (:mod:`intent_trace.codegen`) write: :data:`NUMBA`, the Numba emitter's
``dialect`` (index arithmetic in int64, Python/NumPy expressions), with the element codecs and view access the
Numba rule modules share.

Below every rule module (structure, memory, atomic use it): the view ``read``/``write`` rules are the shared
access rules (:mod:`intent_trace.codegen.access`), which are the buffer ``load``/``store`` rules too, and atomics
address their element through the same index plan, so each bounds check and its message is written once.
"""
from __future__ import annotations

from ... import types as T
from ...codegen.access import coords, index_plan, read as read_view, write as write_view  # noqa: F401  (re-exported)
from ...codegen.dialect import Dialect
from ...graph.lowering import index_add, index_mul
from .values import Domain


def shape_of(em, t) -> tuple:
    """A tensor type's extents as expressions."""
    return tuple(em.extent(e) for e in t.shape)


def _atom(x: str) -> str:
    return x if x.replace("_", "").isalnum() or x.startswith("(") and x.endswith(")") else f"({x})"


def int64(x: str) -> str:
    """An index operand as int64: a prange index may be typed unsigned, and uint64 with int64 is float64."""
    return x if x.isdigit() else f"np.int64({x})"


def mul(a: str, b: str) -> str:
    return index_mul(a, b, lambda x, y: f"{int64(_atom(x))} * {int64(_atom(y))}")


def add(a: str, b: str) -> str:
    return index_add(a, b, lambda x, y: f"({int64(x)} + {int64(y)})")


def coordinate(d: Domain, i: str) -> str:
    """The member of domain ``d`` at position ``i``."""
    return add(d.start, mul(i, d.step))


# f16/bf16 elements are held as float32 values: the runtime converts their bits on every load and store.
_DECODE = {"f16": "R.f16_value", "bf16": "R.bf16_value"}
_ENCODE = {"f16": "R.f16_bits", "bf16": "R.bf16_bits"}


def decode(d: T.DType, expr: str) -> str:
    """An element loaded from a caller's array as the value computed with (f16/bf16 bits -> float32)."""
    fn = _DECODE.get(d.name)
    return f"{fn}({expr})" if fn else expr


def encode(d: T.DType, expr: str) -> str:
    """A computed value as the element stored (float32 -> f16/bf16 bits)."""
    fn = _ENCODE.get(d.name)
    return f"{fn}({expr})" if fn else expr


NUMBA = Dialect(
    name="numba",
    zero="0",
    index=lambda x: f"np.int64({x})",
    as_index=lambda x: x,  # index expressions are int64 already (add/mul convert their operands)
    add=add,
    mul=mul,
    floordiv=lambda a, b: f"{a} // {b}",
    mod=lambda a, b: f"{a} % {b}",
    nonneg=lambda x: f"R.max2(0, {x})",
    where=lambda c, a, b: f"({a} if {c} else {b})",
    serial=lambda n: f"range({n})",
    count=lambda start, end, step: f"R.max2(0, ({end} - {start} + {step} - 1) // {step})",
    # An index value inline: an int64 copy of a prange index stops Numba vectorising the loop.
    hold=lambda em, x, hint: _atom(x),
    # A failed check always leaves the function (checks=False leaves a negative extent to T9).
    fresh_extent=lambda em, n: n,
    select=lambda em, d, c, a, b: f"{a} if {c} else {b}",
    decode=lambda em, view, expr: decode(view.dtype, expr),
    encode=lambda em, view, expr: encode(view.dtype, expr),
    subscript=lambda cs: ", ".join(cs) or "()",
    marked=lambda ref: ref,  # the mask is an array of bools
    mark="True",
)
