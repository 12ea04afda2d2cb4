"""What the CUDA recognisers share: the specialisation record and the whole-axis access tests.

A recognised graph is built from full unit-step domains and reads of whole axes; :func:`view_access` and
:func:`full_axes` say which nodes are those, with the patterns of :mod:`intent_trace.graph.patterns`. The
recognisers (:mod:`.cuda_kernels`' nests and grids, :mod:`.cuda_matmul`, :mod:`.cuda_attention`) import this
module, and :mod:`.cuda_kernels` gathers their specialisations, so none of them imports another.
"""
from __future__ import annotations

import math

import attrs

from ...graph import ops
from ...graph.patterns import any_, lit, match, pat


@attrs.frozen
class Specialization:
    """A tiled program for the calls whose extents satisfy ``divides``: {extent index: tile}, and ``equals``:
    {extent index: the size the program is written for}.

    It takes the graph's own arguments only (no error record, no workspaces): a recogniser returns one only for
    graphs whose general program cannot fail a run-time check wherever the specialisation applies (full unit-step
    domains, whole views, reshapes whose sizes agree by construction)."""

    name: str
    program: str
    divides: tuple  # ((graph extent index, tile), ...)
    equals: tuple = ()  # ((graph extent index, size), ...)
    # the extent indices of each operand's axes: every operand stays under 2**31 elements (int32 indices);
    # by default a matmul's, whose operands are the consecutive pairs of ``divides`` (C, B, A)
    operands: tuple | None = None

    def applies(self, extents: dict) -> bool:
        operands = self.operands
        if operands is None:
            operands = tuple((a, b) for (a, _), (b, _) in zip(self.divides, self.divides[1:] + self.divides[:1]))
        if any(math.prod(extents[k] for k in axes) >= 2**31 for axes in operands):
            return False
        if any(extents[k] != size for k, size in self.equals):
            return False
        return all(extents[k] > 0 and extents[k] % tile == 0 for k, tile in self.divides)


#: ``domain(0, E, 1)``: a full unit-step domain (``E`` a kernel extent when :func:`_unit_domain` says so).
UNIT_DOMAIN = pat(ops.domain, lit(0), any_("end"), lit(1))
#: ``domain(begin, E, 1)`` from a literal ``begin >= 0``: the loops :func:`parallel_grid` maps onto threads.
FROM_DOMAIN = pat(ops.domain, lit(lambda begin: begin >= 0, name="begin"), any_("end"), lit(1))
#: A division that may round differently from IEEE's (the element code would not be the serial program's).
APPROXIMATE_DIV = pat(ops.div, where=lambda node: bool(node.attr("approximate") or node.attr("flush_to_zero")))


def _unit_domain(node, extents) -> int | None:
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
        k = _unit_domain(node, extents)
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
