"""Helpers with pointer operands: an element's address (atomics) or a block's buffers (k-quant blocks).

The elementwise helpers of :mod:`.scalar_rules` take values; a few operations need memory instead: an atomic
acts on one element of a view, and a k-quant super-block is computed by one routine that reads 256 values
and fills the record's fields. Those helpers take the element's address (``T.access_ptr``); TVM declares the
callee from the call (a pointer to the buffer's storage dtype for an address), and the target module writes
the definition with ``extern_source`` (:mod:`.c`). The vocabulary (family names, operands) is the same on
every target: on ``tilelang-c`` an atomic is a plain read-modify-write, a GPU target would write a real one.
"""
from __future__ import annotations

from ... import types as T
from .scalar_rules import tir_dtype


def helper(em, family: str, dtypes: tuple, ret: T.DType, args: tuple, combine: str | None = None) -> str:
    """The name of the helper ``family`` specialised to ``dtypes``; ``args`` are DTypes (values) or TIR storage
    dtype names (pointers to elements stored as that dtype). Raises the emitter's LoweringError when the
    target cannot provide it."""
    name = "it_" + "_".join((family, *(d.name for d in dtypes)))
    if name not in em.helpers:
        source_of = em.target.extern_source
        source = source_of(name, family, dtypes, ret, args, combine) if source_of is not None else None
        if source is None:
            raise em.reject(f"{family} on {', '.join(d.name for d in dtypes) or 'its operands'} is not supported on "
                            f"this target")
        em.helpers[name] = source
    return name


def call(em, family: str, dtypes: tuple, ret: T.DType, args: tuple, *exprs: str, combine: str | None = None) -> str:
    """``T.call_extern`` of a helper with pointer operands."""
    name = helper(em, family, dtypes, ret, args, combine)
    return f"T.call_extern({tir_dtype(ret)!r}, {name!r}, {', '.join(exprs)})"


def address(buffer: str, coords) -> str:
    """The address of one element of a buffer (a view's parameter or a local buffer). ``T.access_ptr`` rather
    than ``T.address_of``: TileLang's loop unswitching rejects an ``address_of`` in a loop that also holds a
    run-time check; both become ``&buffer[i]`` in C."""
    return f"T.access_ptr({buffer}[{', '.join(coords) or '0'}], 'rw')"

