"""Domains, source-derived subregions, ``I.indices`` and iteration (spec §3, §5, §6).

A domain value's provenance records its *root* domain and the member offset within it, so a
subregion of a subregion still names the original iteration space, and every coordinate a user
derives from it (points, ``I.indices``) says which source axis and member it stands for.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.provenance import AxisPos, IndexRelation, Ordinal, bounded, simplify_add, substitute
from ..graph.values import Literal, Var
from . import extents
from .build import _operand_expr, fits_index, index_operand, shape_values
from .context import BrokenLoop, current, fail
from .values import Proxy, ScalarProxy, TensorProxy, register_proxy


class DomainProxy(Proxy):
    """A half-open integer sequence. Iterate it (``for i in dom``), slice it (``dom[a:b]``)."""

    __slots__ = ()

    def __iter__(self):
        return iterate("for", self)

    def __getitem__(self, key):
        if not isinstance(key, slice):
            fail("a domain is sliced with [begin:end] into a subregion; to read data at a point, index the view",
                 "type")
        return subregion(self, key.start, key.stop, key.step)

    def __repr__(self) -> str:
        return f"<domain {T.extent_str(self._var.type.extent)}>"


register_proxy(T.DomainType, DomainProxy)


def root_of(var: Var):
    """(root domain Var, member expression of a position along ``var``)."""
    rel = var.provenance
    if rel is None:
        return var, AxisPos(0)
    return rel.source, rel.member


def _static(x):
    return x.value if x.__class__ is Literal else None


def domain(begin, end=None, step=1) -> DomainProxy:
    if end is None:
        begin, end = 0, begin
    b = index_operand(begin, "I.domain begin")
    e = index_operand(end, "I.domain end")
    if isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step <= 0:
        fail(f"I.domain step must be positive, got {step}; to go backwards, count forward and compute the "
             f"coordinate (i = n - 1 - ordinal)", "value")
    s = index_operand(step, "I.domain step")
    sb, se, ss = _static(b), _static(e), _static(s)
    if sb is not None and se is not None and ss is not None:
        # (len(range(...)) is limited to a C ssize_t; the member count must be an index value anyway)
        extent = fits_index(max(0, -(-(se - sb) // ss)), f"I.domain({sb}, {se}, {ss}) has a member count that")
    elif sb == 0 and ss == 1 and e.__class__ is Var:
        extent = e.extent if e.extent is not None else current().value_dim(e)
    elif ss == 1:
        extent = _unit_step_extent(b, e, "domain")
    else:
        extent = T.Dim(label=f"the length of the domain at {extents.position(current())}")
    t = T.DomainType(extent)
    (out,) = current().emit(ops.domain, (b, e, s), (("type", t),))
    if isinstance(extent, T.Dim) and extent.origin is None and extent.name is None:
        extent.origin = out
    return DomainProxy(out)


def _unit_step_extent(b, e, what: str) -> T.Dim:
    """``[b, e)``'s extent: the one its structural length ``e - b`` already has (``I.domain(half, 2*half)``
    is ``I.domain(0, half)``'s), else a fresh one that later equal lengths share (:mod:`.extents`)."""
    trace = current()
    extent, poly, label = extents.unit_step_extent(trace, b, e, what)
    if extent is None:
        extent = T.Dim(label=label)
        extents.register(trace, poly, extent)
    return extent


def subregion(parent: DomainProxy, begin, end, step=None) -> DomainProxy:
    if step not in (None, 1):
        fail("subregions are contiguous: [begin:end] takes no step", "value")
    pvar = parent._var
    pext = pvar.type.extent
    b = index_operand(0 if begin is None else begin, "subregion begin")
    if end is None:
        e = Literal(pext, T.ScalarType(T.index)) if isinstance(pext, int) else shape_values(pvar, (pext,))[0]._var
    else:
        e = index_operand(end, "subregion end")
    sb, se = _static(b), _static(e)
    if (sb is not None and sb < 0) or (se is not None and se < 0):
        fail("subregion bounds are member positions >= 0 (no negative wrap-around)", "value")
    if isinstance(pext, int) and se is not None and se > pext and (sb is None or se > sb):
        fail(f"subregion end {se} is past the parent's extent {pext} (subregions never clamp)", "value")
    if sb is not None and se is not None:
        extent = max(0, se - sb)
    elif sb == 0 and e.__class__ is Var:
        extent = e.extent if e.extent is not None else current().value_dim(e)
    else:
        extent = _unit_step_extent(b, e, "subregion")
    root, member = root_of(pvar)
    shifted = substitute(member, lambda x: simplify_add(AxisPos(0), _operand_expr(b)) if isinstance(x, AxisPos) else None)
    rel = bounded(IndexRelation("subregion", root, 0, shifted))
    t = T.DomainType(extent)
    (out,) = current().emit(ops.subregion, (pvar, b, e), (("type", t),), provenance=rel)
    if isinstance(extent, T.Dim) and extent.origin is None:
        extent.origin = out
    return DomainProxy(out)


def as_domain(d, who: str) -> DomainProxy:
    if not isinstance(d, DomainProxy):
        fail(f"{who} takes a domain (I.domain(...) or a subregion of one), got {type(d).__name__}", "type")
    return d


def indices(d) -> TensorProxy:
    """The source coordinates of a domain's members, as a rank-1 index tensor that keeps its relation."""
    d = as_domain(d, "I.indices")
    root, member = root_of(d._var)
    rel = IndexRelation("indices", root, 0, member)
    (out,) = current().emit(ops.indices, (d._var,), provenance=rel)
    return TensorProxy(out)


def point_var(d: DomainProxy) -> Var:
    root, member = root_of(d._var)
    rel = IndexRelation("point", root, 0, member).map_member(lambda e: Ordinal() if isinstance(e, AxisPos) else None)
    return Var(T.ScalarType(T.index), rel)


def iterate(kind: str, d: DomainProxy):
    """Trace a Python ``for`` body once into a region of a ``for``/``parallel`` node."""
    trace = current()
    point = point_var(d)
    scope = trace.open(kind, params=(point,), point=point if kind == "parallel" else None)
    completed = False
    try:
        yield ScalarProxy(point)
        completed = True
    finally:
        if completed:
            region = trace.close(scope)
            trace.emit(ops.REGISTRY[kind], (d._var,), regions=(region,))
        elif scope.active:
            trace.abandon(scope)
            trace.pending_error = BrokenLoop(scope.opened_at)


class ParallelDomain:
    """``I.parallel(dom)``: iterate it with a Python ``for`` to trace an unordered forall body."""

    __slots__ = ("domain",)

    def __init__(self, d: DomainProxy):
        self.domain = d

    def __iter__(self):
        return iterate("parallel", self.domain)


def parallel(d) -> ParallelDomain:
    return ParallelDomain(as_domain(d, "I.parallel"))
