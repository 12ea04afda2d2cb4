"""The generic race detector for ``parallel`` (spec §5: conflicting effects between points are illegal).

Generic runs the points of a ``parallel`` one after another, so a racy kernel would silently give the
answer of one particular order; the reference must refuse it instead. Every run of a ``parallel`` opens a
:class:`Frame` that records, per element of every view it touches, which points accessed it and how:

- a plain **read** (``read``, buffer ``load``),
- a plain **write** (``write``, ``unique_store``, buffer ``store``),
- a **combine**: an atomic (``I.atomic_*``) or a ``scatter_reduce``, whose collisions the language defines.

Accesses of one point never conflict with each other (a point may write an element twice, or read what it
wrote). Accesses of two different points to one element conflict unless both are reads or both are
combines; a conflict is a ``RuntimeError`` naming the view, the element and both points, raised before
the second access takes effect (the executable's staging then leaves the caller's arrays unchanged).

The record of an element is a small state machine, so the check costs a few array operations per access
whatever the number of points: ``ONE(p, kinds)`` (only point ``p`` so far, with the kinds it used),
``READS(a, b)`` (two distinct points among those that only read it), ``COMBINES(a, b)`` (likewise for
combines). The second point of the pair names a partner when the accessing point is the first.

Nested ``parallel`` runs keep one frame each: an access is recorded in every open frame, under that
frame's current point, so two points of the outer loop conflict through their inner points too. A
logical buffer allocated inside a parallel body is one point's own: it is recorded only in the frames
opened after its allocation. Views the kernel only reads (``In`` parameters) are never recorded.
The cpu target's checked build uses the same state machine (:mod:`.numba.races`).
"""
from __future__ import annotations

import numpy as np

READ, WRITE, COMBINE = 1, 2, 4  # access kinds (bits of the ONE state's tag)
READS, COMBINES = 8, 9  # tags of the shared states; 0 is "not accessed", 1..7 is ONE with those kinds
_VERB = {READ: "reads", WRITE: "writes", COMBINE: "updates atomically (an atomic or scatter_reduce)"}


class Frame:
    """The accesses of one run of a ``parallel``: per view Var, (tag, a, b) arrays over its elements."""

    __slots__ = ("point", "records")

    def __init__(self):
        self.point = None  # the coordinate of the point being run
        self.records: dict = {}


def record(it, view_var, shape: tuple, flat: np.ndarray, kind: int) -> None:
    """Note that the current point(s) access the elements ``flat`` (flat indices into ``shape``) of
    ``view_var`` with ``kind``; raise the conflict with another point, if any."""
    frames = it.race_frames
    first = it.race_depth.get(view_var, 0)
    if len(frames) <= first or view_var in it.race_exempt or flat.size == 0:
        return
    if flat.size == 1:  # one element (a parallel body's point access): the same machine on Python ints
        for frame in frames[first:]:
            _record_one(frame, it.views[view_var], view_var, shape, int(flat.reshape(-1)[0]), kind)
        return
    flat = np.unique(flat)
    for frame in frames[first:]:
        _record(frame, it.views[view_var], view_var, shape, flat, kind)


def _records(frame: Frame, view_var, shape: tuple) -> tuple:
    """The frame's (tag, a, b) arrays of ``view_var``, created empty (tag 0) on its first access."""
    rec = frame.records.get(view_var)
    if rec is None:
        size = int(np.prod(shape, dtype=np.int64))
        rec = frame.records[view_var] = (np.zeros(size, np.int8), np.zeros(size, np.int64), np.zeros(size, np.int64))
    return rec


def _record_one(frame: Frame, name: str, view_var, shape: tuple, f: int, kind: int) -> None:
    """:func:`_record` of the one element ``f``, state by state (the vector form costs ~20 us an access)."""
    tag, a, b = _records(frame, view_var, shape)
    q, tg, ta = frame.point, int(tag[f]), int(a[f])
    if tg == 0:
        tag[f], a[f] = kind, q
    elif tg < READS and ta == q:
        tag[f] = tg | kind
    elif tg < READS and tg == kind and kind in (READ, COMBINE):
        tag[f], b[f] = (READS if kind == READ else COMBINES), q
    elif not ((tg == READS and kind == READ) or (tg == COMBINES and kind == COMBINE)):
        partner = ta if ta != q else int(b[f])
        kinds = tg if tg < READS else (READ if tg == READS else COMBINE)
        raise RuntimeError(conflict_message(name, _element(f, shape), partner, kinds, q, kind))


def _record(frame: Frame, name: str, view_var, shape: tuple, flat: np.ndarray, kind: int) -> None:
    tag, a, b = _records(frame, view_var, shape)
    q = frame.point
    tg, ta, tb = tag[flat], a[flat], b[flat]
    empty = tg == 0
    one = (tg > 0) & (tg < READS)
    mine = one & (ta == q)
    shared = one & ~mine & (((tg == READ) & (kind == READ)) | ((tg == COMBINE) & (kind == COMBINE)))
    compatible = ((tg == READS) & (kind == READ)) | ((tg == COMBINES) & (kind == COMBINE))
    bad = ~(empty | mine | shared | compatible)
    if np.any(bad):
        k = int(np.argmax(bad))
        partner = int(ta[k]) if int(ta[k]) != q else int(tb[k])
        kinds = int(tg[k]) if tg[k] < READS else (READ if tg[k] == READS else COMBINE)
        raise RuntimeError(conflict_message(name, _element(int(flat[k]), shape), partner, kinds, q, kind))
    tag[flat[empty]] = kind
    a[flat[empty]] = q
    tag[flat[mine]] |= kind
    tag[flat[shared]] = READS if kind == READ else COMBINES
    b[flat[shared]] = q


def _element(flat: int, shape: tuple) -> str:
    coords = np.unravel_index(flat, shape) if shape else ()
    return str(int(coords[0])) if len(coords) == 1 else "(" + ", ".join(str(int(c)) for c in coords) + ")"


def conflict_message(name: str, element: str, first: int, first_kinds: int, second: int, kind: int) -> str:
    """The race message (shared with the cpu target, which formats it from its error record)."""
    if kind == WRITE and first_kinds & WRITE:
        what = f"parallel points {first} and {second} both write element {element}"
    else:
        earlier = next(_VERB[k] for k in (WRITE, COMBINE, READ) if first_kinds & k)
        what = f"parallel point {first} {earlier} element {element} and point {second} {_VERB[kind]} it"
    return (f"{name}: {what}; parallel writes must not conflict: points may share an element only if all of "
            f"them only read it or all of them only update it atomically (spec §5)")
