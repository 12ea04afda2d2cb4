"""``I.assume_equal(lhs, rhs)``: an extent equality the tracer cannot prove, stated by the kernel (issue 15 item 4).

The tracer proves extents equal structurally (:mod:`.extents`: the same expression is the same extent); what it
cannot see (``x.shape[0]`` is ``2 * y.shape[0]`` because the caller says so, an output's block count is the
input width over 256) the kernel states::

    n = I.assume_equal(x.shape[0], 2 * y.shape[0])

From the statement on, the two extents are one extent for shapes (:func:`..types.unite`: a value of shape
``[x.shape[0]]`` meets one of shape ``[2 * y.shape[0]]`` without a proof), and ``n`` is the value, whose extent is
that one. The statement is never trusted: it is one ``assume_equal`` node, which every target checks where it
stands; a run where the sides differ is a ValueError naming both sides distinctly (each side's expression and
the line that made it) and writes no output. A statement about two static sizes is decided while tracing.

It is a kernel-wide fact, so it is made at the kernel's top level (an ``@intent.fn`` helper called there is
fine): inside a loop, a branch or a pure helper the check would not run on every path that relies on it.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.values import Literal
from . import extents
from .build import fits_index
from .context import current, fail
from .values import ScalarProxy

WHO = "I.assume_equal"


def _operand(x, role: str):
    if isinstance(x, (bool, np.bool_)):
        fail(f"{WHO}: the {role} must be an extent (an index value or an int), got {x!r}", "type")
    if isinstance(x, (int, np.integer)):
        if x < 0:
            fail(f"{WHO}: the {role} {int(x)} is negative; extents are >= 0", "value")
        return Literal(fits_index(int(x), f"{WHO}: the {role}"), T.ScalarType(T.index))
    if isinstance(x, ScalarProxy) and x.dtype is T.index:
        return x._var
    if isinstance(x, ScalarProxy) and x.dtype.is_int:
        fail(f"{WHO}: the {role} is a {x.dtype} scalar; extents are index values: write I.cast(value, I.index)",
             "type")
    fail(f"{WHO}: the {role} must be an extent (x.shape[k], index arithmetic on extents, an index scalar or an "
         f"int), got {getattr(x, 'type', type(x).__name__)!r}", "type")


def _extent(trace, x):
    if x.__class__ is Literal:
        return x.value
    return x.extent if x.extent is not None else trace.value_dim(x)


def describe_side(trace, x) -> str:
    """A side as the run-time message names it: its expression, and the line that made it."""
    if x.__class__ is Literal:
        return str(x.value)
    if x.extent is not None and x.extent.name is not None:
        where = f" at {trace.kernel_loc!r}" if trace.kernel_loc is not None else ""
        return f"{x.extent.name} (an extent named in the signature of kernel {trace.kernel_name}{where})"
    text = extents.describe(extents.normal_form(trace, x))
    loc = extents.made_at(trace, x)
    return f"{text} (made at {loc!r})" if loc is not None else text


def assume_equal(lhs, rhs):
    """State ``lhs == rhs`` (two extents); checked when the kernel runs. Returns the value: a Python int when a
    side is static, else an index scalar whose extent is both sides' one extent."""
    trace = current()
    if trace.scope is not trace.root:
        fail(f"{WHO} states a kernel-wide equality: make it at the kernel's top level, not inside a loop, a branch "
             f"or a pure helper (the check would not run on every path that relies on it)", "value")
    a, b = _operand(lhs, "lhs"), _operand(rhs, "rhs")
    ea, eb = _extent(trace, a), _extent(trace, b)
    if isinstance(ea, int) and isinstance(eb, int):
        if ea != eb:
            fail(f"{WHO}: the sides are the static sizes {ea} and {eb}, which differ", "value")
        return ea
    if T.same_extent(ea, eb):  # already one extent: nothing to state or check
        static = ea if isinstance(ea, int) else eb if isinstance(eb, int) else None
        return static if static is not None else ScalarProxy(a)
    sides = (("lhs", describe_side(trace, a)), ("rhs", describe_side(trace, b)))
    extent = ea if isinstance(ea, T.Dim) else None
    (out,) = trace.emit(ops.assume_equal, (a, b), sides, extent=extent)
    T.unite(ea, eb)
    if isinstance(ea, int) or isinstance(eb, int):
        return ea if isinstance(ea, int) else eb
    return ScalarProxy(out)


__all__ = ["assume_equal"]
