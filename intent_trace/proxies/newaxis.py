"""Size-one axes: ``None`` in a subscript (``x[:, None]``), ``I.expand_dims`` and ``keepdims=True``.

None of these is an op of its own. A subscript with ``None`` entries is the subscript without them followed by
a ``reshape`` that puts a size-one axis where each ``None`` stood; ``keepdims`` is the reduction followed by a
``reshape`` that puts one back where each reduced axis was. So the printed graph shows the reshape, every
target already lowers it, and provenance passes through it as through any reshape.

This module holds only the position arithmetic (it sits below :mod:`.build`, whose ``reshape`` the callers use).
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from .context import fail
from .values import Proxy


def split_new_axes(key, rank: int, who: str) -> tuple:
    """(the key's entries without its ``None`` entries, ``...`` expanded; for each ``None``, how many of those
    entries precede it). ``...`` stands for the axes no other entry names; a ``None`` names none."""
    key = key if isinstance(key, tuple) else (key,)
    if not any(k is None for k in key):
        return key, ()
    named = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        fail(f"{who}: at most one `...`", "value")
    entries, slots = [], []
    for k in key:
        if k is None:
            slots.append(len(entries))
        elif k is Ellipsis:
            entries.extend([slice(None)] * max(0, rank - named))
        else:
            entries.append(k)
    return tuple(entries), tuple(slots)


def result_axes(entry) -> int:
    """How many result axes one (outer-indexing) subscript entry contributes."""
    if isinstance(entry, slice):
        return 1
    if isinstance(entry, Proxy):
        t = entry._var.type
        if isinstance(t, T.DomainType):
            return 1
        if isinstance(t, T.TensorType):
            return t.rank
    return 0


def new_axis_positions(entries, slots) -> tuple:
    """The positions, in the final result, of the axes the ``None`` entries insert."""
    before = [0]
    for e in entries:
        before.append(before[-1] + result_axes(e))
    return tuple(before[s] + j for j, s in enumerate(slots))


def with_ones(shape: tuple, positions) -> tuple:
    """``shape`` (ints or traced extents) with a 1 at each of the (sorted, final-rank) ``positions``."""
    rest = iter(shape)
    return tuple(1 if k in positions else next(rest) for k in range(len(shape) + len(positions)))


def normalize_axes(axis, rank: int, who: str, single: bool = False) -> tuple:
    """``axis`` (an int or, unless ``single``, a non-empty tuple of ints; negative from the end) as sorted axis
    numbers of a value of rank ``rank``."""
    if isinstance(axis, (bool, np.bool_)) or axis is None:
        fail(f"{who}: axis must be an int{'' if single else ' or a non-empty tuple of ints'}, got {axis!r}", "type")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    if not isinstance(axes, tuple) or not axes or (single and len(axes) != 1) or \
            not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes):
        fail(f"{who}: axis must be {'one int' if single else 'an int or a non-empty tuple of ints'}, got {axis!r}",
             "type")
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            fail(f"{who}: axis {a} is out of range for rank {rank}", "value")
        a %= rank
        if a in out:
            fail(f"{who}: axis {a} is listed twice", "value")
        out.append(a)
    return tuple(sorted(out))


def insert_positions(axis, rank: int, who: str) -> tuple:
    """``I.expand_dims``'s ``axis`` as the sorted positions of the new axes in the result, whose rank is ``rank``
    plus one per new axis (negative positions count from the result's end, as NumPy's)."""
    count = len(axis) if isinstance(axis, tuple) else 1
    return normalize_axes(axis, rank + count, who)


def check_keepdims(keepdims, who: str) -> bool:
    if not isinstance(keepdims, (bool, np.bool_)):
        fail(f"{who}: keepdims must be a Python bool (a constexpr), got {keepdims!r}", "type")
    return bool(keepdims)
