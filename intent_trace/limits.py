"""How much memory one allocation of a kernel call may ask for, decided in one place for every target.

A call whose buffers, staging copies or materialised temporaries cannot fit is refused with a
ValueError that names what was being allocated, its extent and its size, before the allocation is
attempted: a bare ``MemoryError`` (or NumPy's "array is too big", or a failed ``malloc``) says neither
what nor why, and may come after outputs were written. The limit is the machine's physical memory
(an allocation larger than that can only fail or thrash); ``INTENT_TRACE_MAX_ALLOCATION`` (bytes)
lowers it, e.g. for tests.

Backends check with :func:`check_allocation` on the host, or compare against
:func:`allocation_limit` in generated code (a compiled kernel reports the site through its error
record, and the executable raises :func:`allocation_error`'s exception).
"""
from __future__ import annotations

import functools
import os

# Above any allocation a 64-bit process can make: used when the machine does not say its memory size.
_ADDRESS_SPACE = 1 << 47


@functools.cache
def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return _ADDRESS_SPACE


def allocation_limit() -> int:
    """The largest allocation, in bytes, one kernel call may make."""
    limit = _physical_memory()
    override = os.environ.get("INTENT_TRACE_MAX_ALLOCATION")
    if override:
        try:
            limit = min(limit, int(override))
        except ValueError:
            raise ValueError(f"INTENT_TRACE_MAX_ALLOCATION must be a number of bytes, got {override!r}") from None
    return limit


def allocation_error(what: str, elements: int, itemsize: int) -> ValueError:
    """The error for an allocation of ``elements`` items of ``itemsize`` bytes that cannot fit."""
    return ValueError(f"{what} needs {elements} elements ({elements * itemsize} bytes), more than the "
                      f"{allocation_limit()} bytes one allocation may take on this machine")


def check_allocation(what: str, shape, itemsize: int) -> int:
    """The element count of ``shape``; a ValueError naming ``what`` when it cannot fit (or an extent is negative).

    ``what`` names the allocation as the user knows it (``"buffer tmp of shape (N, 4)"``, ``"staging copy of
    y"``, ``"domain rows"``). Python integers do not overflow, so the product is exact however large.
    """
    elements = 1
    for n in shape:
        n = int(n)
        if n < 0:
            raise ValueError(f"{what} has a negative extent {n}")
        elements *= n
    if elements * itemsize > allocation_limit():
        raise allocation_error(what, elements, itemsize)
    return elements
