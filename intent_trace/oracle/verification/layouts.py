"""Non-compact operand layouts: the caller's array is a real strided, transposed or offset NumPy view.

A case names a layout per operand and per output (``Case.layouts``); ``place`` builds the view from the
case's decoded (compact) values, inside a larger backing buffer, so the kernel sees the same logical
values through a non-trivial stride, a swapped stride order or a non-zero offset. For outputs the view
is filled with the poison of the run and read back after it, so the two-fill rule still sees every
element the kernel left alone.

What each target does with a view is recorded in the evidence (``effective``): Generic indexes the
view itself; the CPU oracle passes it to numba with its strides (outputs through staging copies that
are committed on success, T9); TileLang targets make a C-contiguous staging copy of every view
(``np.ascontiguousarray`` for In, a copy committed back with ``np.copyto`` for Out/InOut), so on them
the layout is a host-side obligation: the copy and the commit must honour the caller's strides.
"""
from __future__ import annotations

import numpy as np

COMPACT, STRIDED, TRANSPOSED, OFFSET = "compact", "strided", "transposed", "offset"
LAYOUTS = (COMPACT, STRIDED, TRANSPOSED, OFFSET)

# subject -> layout per operand then output (cases.subject_case): the non-compact subjects pass real views
SUBJECT_LAYOUTS = {
    "strided-read": (STRIDED, STRIDED),
    "strided-view": (STRIDED, COMPACT, STRIDED),
    "transposed-view": (TRANSPOSED, COMPACT, TRANSPOSED),
    "offset-view": (OFFSET, COMPACT, OFFSET),
}

_EFFECTIVE = {
    "generic": "the caller's view itself (NumPy indexing through its strides)",
    "cpu": "the caller's view itself (a numba array with its strides; outputs staged and committed on success)",
}
_TILELANG = "a C-contiguous staging copy (In: np.ascontiguousarray; Out/InOut: committed back with np.copyto)"


def place(values: np.ndarray, layout: str) -> np.ndarray:
    """A view with ``values``' shape and contents in ``layout`` (a fresh backing buffer each call)."""
    values = np.asarray(values)
    if layout == COMPACT or values.ndim == 0:
        return np.array(values, copy=True)
    if layout == STRIDED:  # every other element along every axis, the last axis with step 3
        steps = (2,) * (values.ndim - 1) + (3,)
        backing = np.zeros(tuple(n * s for n, s in zip(values.shape, steps)), values.dtype)
        view = backing[tuple(slice(None, None, s) for s in steps)]
    elif layout == TRANSPOSED:  # stored with the axis order reversed: Fortran order for a matrix
        backing = np.zeros(values.shape[::-1], values.dtype)
        view = backing.transpose(tuple(range(values.ndim))[::-1])
    elif layout == OFFSET:  # one leading element (or row) before the data along every axis
        backing = np.zeros(tuple(n + 1 for n in values.shape), values.dtype)
        view = backing[tuple(slice(1, None) for _ in values.shape)]
    else:
        raise ValueError(f"unknown operand layout {layout!r} (one of {', '.join(LAYOUTS)})")
    view[...] = values
    return view


def describe(view: np.ndarray) -> str:
    """The caller-side layout of one array: its byte strides, byte offset in its buffer, contiguity."""
    base = view.base if view.base is not None else view
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    kind = "C-contiguous" if view.flags.c_contiguous else ("F-contiguous" if view.flags.f_contiguous else "strided")
    return f"shape {list(view.shape)} strides {list(view.strides)} offset {offset} bytes ({kind})"


def effective(target: str) -> str:
    """What ``target`` does with a caller's view (see the module docstring)."""
    return _EFFECTIVE.get(target, _TILELANG if target.startswith("tilelang") else "unknown")


def evidence_layouts(case, reference_target: str, candidate_target: str) -> tuple:
    """Per operand then output, (role, layout, caller-side description, reference handling, candidate
    handling): what the evidence records for a case with non-compact operands (empty otherwise)."""
    if not getattr(case, "layouts", None):
        return ()
    shapes = tuple(case.shapes) + tuple(case.output_shapes)
    roles = [f"in{i}" for i in range(len(case.shapes))] + [f"out{i}" for i in range(len(case.output_shapes))]
    out = []
    for role, shape, layout in zip(roles, shapes, case.layouts):
        sample = place(np.zeros(shape, np.float32), layout)
        out.append((role, layout, describe(sample), effective(reference_target), effective(candidate_target)))
    return tuple(out)
