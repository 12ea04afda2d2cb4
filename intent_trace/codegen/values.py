"""What a code generator holds for each KIR value while it writes source, shared by the cpu oracle's Numba
emitter and the TileLang emitter (both mean the same thing by each class; only the text inside differs).

Every field that holds code is a source fragment in the target's own spelling (``np.int64(...)`` on cpu,
``T.Cast('int64', ...)`` in TileLang); these classes never build text. A target whose values need more (the
TileLang view's storage dtype) subclasses :class:`View` there rather than widening it here.
"""
from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen(slots=True)
class Scalar:
    expr: str  # a local, a constant or a parameter name


@attrs.frozen(slots=True)
class Array:
    """A materialised tensor: a named buffer (a NumPy array local on cpu, a local buffer in TileLang)."""

    name: str
    shape: tuple  # extent expressions


@attrs.frozen(slots=True, eq=False)
class Lazy:
    """A fused tensor computed element by element where it is consumed: ``elem(idx)`` writes the statements for
    one element at the index expressions ``idx`` and returns its expression. Compared by identity: two lazy
    values are one value only when they are the same object (emitters key memo tables on that)."""

    shape: tuple  # extent expressions
    elem: Callable
    operands: tuple = ()  # lazy values ``elem`` evaluates at its own index (an elementwise op's; TileLang's memo)


@attrs.frozen(slots=True)
class Domain:
    start: str  # index expressions; "0" and "1" for the common static unit domain
    step: str
    length: str


@attrs.frozen(slots=True)
class View:
    """A view parameter: its argument's name, extents and dtype."""

    name: str
    shape: tuple
    dtype: object
    label: str  # the user's view name, for error messages only (never emitted)


@attrs.frozen(slots=True)
class Aggregate:
    """A tuple or record: its components, in order."""

    items: tuple
