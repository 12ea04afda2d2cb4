"""What the Numba emitter holds for each KIR value while it writes source."""
from __future__ import annotations

from typing import Callable

import attrs


@attrs.frozen(slots=True)
class Scalar:
    expr: str  # a local name or a constant name


@attrs.frozen(slots=True)
class Array:
    """A materialised tensor: a NumPy array local (f16/bf16 elements held as float32)."""

    name: str
    shape: tuple  # extent expressions


@attrs.frozen(slots=True, eq=False)
class Lazy:
    """A fused tensor: ``elem(idx)`` writes statements computing one element and returns its name."""

    shape: tuple
    elem: Callable


@attrs.frozen(slots=True)
class Domain:
    start: str
    step: str
    length: str


@attrs.frozen(slots=True)
class View:
    name: str  # the array argument (f16/bf16 views arrive as uint16 bit patterns)
    shape: tuple
    dtype: object
    label: str  # the user's view name, for error messages only (never emitted)


@attrs.frozen(slots=True)
class Aggregate:
    """A tuple or record: its components, in order."""

    items: tuple
