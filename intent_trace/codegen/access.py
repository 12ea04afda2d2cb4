"""View access, written once for every code generator: the ``read`` rule (a buffer's ``load`` too) and the
``write``/``unique_store`` rule (a buffer's ``store`` too), and the index plan that atomics address their element
through, so each bounds check and its message exists once.

Domain and point coordinates are checked once, where the access is defined (a domain that starts at 0, steps by 1
and has the view axis's own extent needs no check, nor does a point of such a domain); data-derived coordinates
(integer tensors) are checked per element, and a store through them checks that it writes no element twice (a mask
of the elements written so far). The checks are :data:`.checks.VIEW_COORDINATE` and
:data:`.checks.UNIQUE_STORE_TWICE`, naming the view.

:data:`RULES` holds ``read``, ``write`` and ``unique_store``; which module of a backend owns ``load`` and
``store`` is the backend's choice (they use :func:`read` and :func:`write`).
"""
from __future__ import annotations

from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..graph.lowering import access_coords, covers_axis, rereads_destination, safe_point
from ..graph.values import Literal
from . import checks as C
from .values import Domain, Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

# Ops whose index operands follow a stored value (operands: view, value, index...).
STORES = frozenset({ops.write, ops.store, ops.unique_store})


def index_plan(em, node, view, entries) -> tuple:
    """(result shape, per-entry plan) of a read or write (or an atomic's address, seen as the read it replaced),
    after the checks of its domain and point entries. A plan entry is ``("all", None)``, ``("domain", Domain)``,
    ``("point", coordinate)`` or ``("tensor", (value, rank, axis, extent, view label))``
    (:func:`~intent_trace.graph.lowering.access_coords` reads it)."""
    d = em.dialect
    view_t = node.inputs[0].type
    operands = iter(zip(entries, node.inputs[2 if node.op in STORES else 1:]))
    shape, plan = [], []
    for axis, kind in enumerate(node.attr("index")):
        n = d.as_index(view.shape[axis])
        if kind == "all":
            shape.append(view.shape[axis])
            plan.append(("all", None))
            continue
        value, var = next(operands)
        extent = view_t.shape[axis]
        if kind == "domain":
            if not covers_axis(value, var, extent):
                first = d.as_index(value.start)
                last = d.as_index(d.coordinate(value.start, value.step, f"({value.length} - 1)"))
                em.check(f"{value.length} > 0 and ({first} < {d.zero} or {last} >= {n})", C.VIEW_COORDINATE,
                         d.where(f"{first} < {d.zero}", first, last), n, axis=axis, view=view.label)
            shape.append(value.length)
            plan.append(("domain", value))
        elif kind == "point":
            p = d.hold(em, value.expr, "j")
            static = isinstance(var, Literal) and isinstance(extent, int)  # the tracer checked it
            if not (static or safe_point(em.env, var, extent, Domain)):
                em.check(f"{p} < {d.zero} or {p} >= {n}", C.VIEW_COORDINATE, p, n, axis=axis, view=view.label)
            plan.append(("point", p))
        else:
            shape.extend(value.shape)
            plan.append(("tensor", (value, len(var.type.shape), axis, n, view.label)))
    return tuple(shape), plan


def coords(em, plan, idx) -> list:
    """The coordinates of one element of an access (its ``plan``) at result index ``idx``: a data-derived
    coordinate is read from its tensor at its own index and checked here."""
    d = em.dialect

    def data_coord(info, element_idx):
        value, _, axis, n, label = info
        c = em.assign(d.index(em.elem(value, element_idx)), "j")
        em.check(f"{c} < {d.zero} or {c} >= {n}", C.VIEW_COORDINATE, c, n, axis=axis, view=label)
        return c

    return access_coords(plan, idx, lambda dom, i: d.coordinate(dom.start, dom.step, i), data_coord)


@rule(ops.read)
def read(em, node, args):
    """A scalar local, or a lazy element read (decoded from the view's storage)."""
    d = em.dialect
    view, entries = args[0], args[1:]
    shape, plan = index_plan(em, node, view, entries)
    em.race_read(node.inputs[0], view, shape, lambda idx: coords(em, plan, idx))
    if not shape:
        return Scalar(em.assign(d.decode(em, view, f"{view.name}[{d.subscript(coords(em, plan, []))}]")))

    def elem(idx):
        return em.assign(d.decode(em, view, f"{view.name}[{d.subscript(coords(em, plan, idx))}]"), "t")

    return Lazy(shape, elem)


@rule(ops.write, ops.unique_store)
def write(em, node, args):
    """One loop nest storing each element (encoded to the view's storage), parallel unless its coordinates are
    data (their injectivity is checked against a mask of the elements written so far)."""
    d = em.dialect
    view, value, entries = args[0], args[1], args[2:]
    if isinstance(value, Lazy) and rereads_destination(node, em.reads, em.aligned):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the write would change what it reads
    shape, plan = index_plan(em, node, view, entries)
    data = any(kind == "tensor" for kind, _ in plan)
    mask = em.written_mask(view) if data and em.checks else None
    with em.nest(shape, parallel=not data) as idx:
        v = em.elem(value, idx)
        element = coords(em, plan, idx)
        em.race_write(node.inputs[0], view, element)
        at = d.subscript(element)
        if mask is not None:
            em.check(d.marked(f"{mask}[{at}]"), C.UNIQUE_STORE_TWICE, view=view.label)
            em.line(f"{mask}[{at}] = {d.mark}")
        em.line(f"{view.name}[{at}] = {d.encode(em, view, v)}")
