"""The cpu race detector's per-element record, updated by one compare-exchange (see :mod:`.races`).

Generated kernels call :func:`record` (as ``RS.record``) for every access a ``parallel`` point makes to a
view some point writes. The record of an element is one int64 word holding generic's state machine
(:mod:`intent_trace.oracle.generic_races`): a 4-bit tag (0 untouched; 1..7 one point with those access
kinds; 8 two or more points, all reading; 9 two or more points, all combining) and two 29-bit point
ordinals. Every update is a compare-exchange loop on that one word, so concurrent points of a ``prange``
update it as if one after another in some order: a conflict between two points is found whichever runs
first, by whichever comes second, and the checked parallel build and the serial build agree with generic
on which kernels race.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .atomic import HELPERS
from .races import MAX_POINTS
_MASK = np.int64(MAX_POINTS - 1)
_LOAD = HELPERS["load_relaxed"]
_CAS = HELPERS["cas_acq_rel_acquire"]


@njit(cache=True, nogil=True, error_model="numpy")
def record(state, flat, point, kind):
    """Record access ``kind`` (1 read, 2 write, 4 combine) of point ordinal ``point`` to element ``flat``.

    -1 when it conflicts with no other point; else ``partner << 4 | partner's kinds`` for a partner point
    whose access conflicts with it (the element's record is left as it was)."""
    at = (np.int64(flat),)
    p = np.int64(point)
    k = np.int64(kind)
    old = _LOAD(state, at)
    while True:
        tag = old & np.int64(15)
        a = (old >> np.int64(4)) & _MASK
        b = (old >> np.int64(34)) & _MASK
        if tag == 0:
            new = k | (p << np.int64(4))
        elif tag < 8:
            if a == p:
                new = old | k
            elif tag == k and (k == 1 or k == 4):
                new = (np.int64(8) if k == 1 else np.int64(9)) | (a << np.int64(4)) | (p << np.int64(34))
            else:
                return (a << np.int64(4)) | tag
        else:
            if (tag == 8 and k == 1) or (tag == 9 and k == 4):
                return np.int64(-1)
            partner = a if a != p else b
            return (partner << np.int64(4)) | (np.int64(1) if tag == 8 else np.int64(4))
        if new == old:
            return np.int64(-1)
        seen, ok = _CAS(state, at, old, new)
        if ok:
            return np.int64(-1)
        old = seen
