"""Whole-axis accesses: the unit-step domains, reads and writes every recogniser of the schedule pass (and the CUDA
target's tiled specialisations, :mod:`intent_trace.backends.tilelang.cuda_access`) is built from, as patterns of
:mod:`intent_trace.graph.patterns`. A read of whole axes needs no bounds check, so a program built from these cannot
fail one.
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from ..graph.patterns import any_, lit, match, pat

#: ``domain(0, E, 1)``: a full unit-step domain (``E`` a kernel extent when :func:`unit_domain` says so).
UNIT_DOMAIN = pat(ops.domain, lit(0), any_("end"), lit(1))
#: ``domain(begin, E, 1)`` from a literal ``begin >= 0``: the loops a grid of threads may run (the CUDA target's
#: ``parallel_grid``).
FROM_DOMAIN = pat(ops.domain, lit(lambda begin: begin >= 0, name="begin"), any_("end"), lit(1))


def unit_domain(node, extents) -> int | None:
    """The extent index of a full ``domain(0, E, 1)``, else None."""
    caps = match(UNIT_DOMAIN, node, {})
    return None if caps is None else extents.get(caps["end"])


REJECT = object()


def full_axes(node, view_type, extents: dict, domains: dict) -> tuple | None:
    """The graph extent index of each axis a read or write covers whole: a full unit-step domain, or ``:`` over
    a view axis that is a kernel extent; None when any index entry is something else (a point, a partial
    domain, a static axis)."""
    axes, operands = [], iter(node.inputs[2:] if node.op is ops.write else node.inputs[1:])
    by_dim = {ev.extent: k for ev, k in extents.items()}
    for axis, kind in enumerate(node.attr("index")):
        if kind == "all":
            k = by_dim.get(view_type.shape[axis])
        elif kind == "domain":
            k = domains.get(next(operands))
        else:
            return None
        if k is None:
            return None
        axes.append(k)
    return tuple(axes)


def view_access(node, extents: dict, views, domains: dict):
    """Domains and reads, the two ops every recognised graph is built from: a full unit-step domain is
    recorded in ``domains`` ("domain"); a read of whole axes (:func:`full_axes`) gives (view, extent
    indices); any other domain or read gives ``REJECT``; other ops give None. ``views`` maps a view's
    variable to its parameter (or to (index, parameter))."""
    if node.op is ops.domain:
        k = unit_domain(node, extents)
        if k is None:
            return REJECT
        domains[node.outputs[0]] = k
        return "domain"
    if node.op is ops.read:
        view = node.inputs[0]
        p = views.get(view)
        p = p[1] if isinstance(p, tuple) else p
        axes = full_axes(node, p.type, extents, domains) if p is not None else None
        return REJECT if axes is None else (view, axes)
    return None


def _unit(s) -> bool:
    return isinstance(s, int) and s == 1


def unit_reshape(node) -> str | None:
    """Why a reshape is not one that only adds or drops unit axes (its sizes then agree by the types: no run-time
    check, and an element keeps its index on the other axes), or None when it is one."""
    at = f" at {node.loc!r}" if node.loc is not None else ""
    if len(node.inputs) != 1:
        return f"the reshape{at} takes extents computed in the kernel"
    # extents stated equal (I.assume_equal, a prologue check) compare by their class
    old = tuple(T.representative(s) for s in getattr(node.inputs[0].type, "shape", ()) if not _unit(s))
    new = tuple(T.representative(s) for s in node.outputs[0].type.shape if not _unit(s))
    if len(old) != len(new) or any(a is not b for a, b in zip(old, new)):
        return f"the reshape{at} moves elements between axes (only unit axes may be added or dropped)"
    return None
