"""The shape, aggregate and domain rules, written once for every code generator (cpu's Numba emitter, the
TileLang emitter) against the emitter's methods (:mod:`.protocol`) and its spelling (``em.dialect``,
:class:`.dialect.Dialect`).

A tensor result is lazy (:class:`.values.Lazy`): its element at an index is computed where it is consumed; the
emitter materialises it where fusion stops. Run-time checks are :mod:`.checks`' (negative extents, reshape element
counts, slice bounds, domain steps, subregion bounds); a user's integer operand of a check is bound to an int64
local first, so the check and the arithmetic after it agree on its value whatever its dtype (a u64 bound compares
as the int64 the index arithmetic uses).

:data:`RULES` maps each op to its rule; a backend's structure module enters them in its own table.
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..graph.lowering import (broadcast_index, component, flat_index, name_extents, slice_index, transpose_index,
                              unflatten)
from ..graph.values import Literal
from . import checks as C
from .values import Aggregate, Domain, Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)


# --- shapes ------------------------------------------------------------------------------------------------------

@rule(ops.broadcast)
def broadcast(em, node, args):
    (x,) = args
    out = node.outputs[0].type
    shape = em.shape(out)
    if isinstance(x, Scalar):
        return Lazy(shape, lambda idx: x.expr)
    src = node.inputs[0].type.shape
    return Lazy(shape, lambda idx: em.elem(x, broadcast_index(src, out.shape, idx)))


def fresh_extents(em, node, operands) -> tuple:
    """The shape of ``full``/``reshape``'s result type, after the negative-extent check of each run-time extent
    (``operands``), which then names its extent."""
    d = em.dialect
    t = node.attr("type")
    for axis, value in zip(node.attr("extents"), operands):
        n = em.assign(d.index(value.expr), "n")
        em.check(f"{n} < {d.zero}", C.NEGATIVE_EXTENT, n, axis=axis)
        em.dim_names[t.shape[axis]] = d.fresh_extent(em, n)
    return em.shape(t)


@rule(ops.full)
def full(em, node, args):
    shape = fresh_extents(em, node, args[1:])
    fill = args[0].expr
    return Lazy(shape, lambda idx: fill)


@rule(ops.reshape)
def reshape(em, node, args):
    d = em.dialect
    x = args[0]
    new = fresh_extents(em, node, args[1:])
    src = node.inputs[0].type
    old = em.shape(src) if isinstance(src, T.TensorType) else ()
    before, after = d.product(old), d.product(new)
    if not all(s.isdigit() for s in old + new) and before != after:
        # (the same product expression on both sides, as for [M] -> [M, 1], cannot differ: no check, so no
        # error site, and a cpu kernel without other error sites writes the caller's arrays without staging)
        before, after = em.assign(before, "n"), em.assign(after, "n")
        em.check(f"{before} != {after}", C.RESHAPE_COUNT, before, after)

    def elem(idx):
        f = em.assign(d.as_index(flat_index(idx, new, d.add, d.mul)), "f")
        return em.elem(x, unflatten(f, old, lambda v, n: em.assign(d.mod(v, n), "j"),
                                    lambda v, n: em.assign(d.floordiv(v, n), "f")))

    return Lazy(new, elem)


@rule(ops.transpose)
def transpose(em, node, args):
    (x,) = args
    perm = node.attr("perm")
    return Lazy(em.shape(node.outputs[0].type), lambda idx: em.elem(x, transpose_index(perm, idx)))


@rule(ops.slice)
def slice_(em, node, args):
    d = em.dialect
    x, rest = args[0], iter(args[1:])
    src = em.shape(node.inputs[0].type)
    offsets, shape = [], []
    for axis, kind in enumerate(node.attr("axes")):
        n = d.as_index(src[axis])
        if kind == "all":
            offsets.append(None)
            shape.append(src[axis])
        elif kind == "range":
            start, stop = d.operand(em, next(rest).expr, "s"), d.operand(em, next(rest).expr, "s")
            em.check(f"{start} < {d.zero} or {stop} < {d.zero} or ({stop} > {n} and {stop} > {start})",
                     C.SLICE_RANGE, start, stop, n, axis=axis)
            offsets.append(("range", start))
            shape.append(em.assign(d.nonneg(f"{stop} - {start}"), "n"))
        else:
            p = d.operand(em, next(rest).expr, "j")
            em.check(f"{p} < {d.zero} or {p} >= {n}", C.SLICE_INDEX, p, n, axis=axis)
            offsets.append(("point", p))

    return Lazy(tuple(shape), lambda idx: em.elem(x, slice_index(offsets, idx, d.add)))


@rule(ops.join)
def join(em, node, args):
    a, b = args
    dtype = node.outputs[0].type.dtype

    def elem(idx):
        va, vb = em.elem(a, idx[:-1]), em.elem(b, idx[:-1])
        return em.assign(em.dialect.select(em, dtype, f"{idx[-1]} == 0", va, vb), "t")

    return Lazy(em.shape(node.outputs[0].type), elem)


@rule(ops.tuple, ops.record)
def aggregate(em, node, args):
    return Aggregate(tuple(args))


rule(ops.get, ops.field)(component)


# --- domains -----------------------------------------------------------------------------------------------------

def _is(x, value) -> bool:
    return isinstance(x, Literal) and x.value == value


@rule(ops.domain)
def domain(em, node, args):
    d = em.dialect
    b, e, s = (a.expr for a in args)
    if _is(node.inputs[0], 0) and _is(node.inputs[2], 1):
        start, step = "0", "1"
        end = node.inputs[1]
        kernel = _kernel_extent(em, end) if d.extent_lengths else None
        if kernel is not None:
            length = em.env[kernel].expr  # a kernel extent (or a value stated equal to one): never negative
        else:
            length = em.assign(d.nonneg(d.index(e)), "n")
    else:
        start, step = d.operand(em, b, "s"), d.operand(em, s, "s")
        if not isinstance(node.inputs[2], Literal):
            em.check(f"{step} <= {d.zero}", C.DOMAIN_STEP, step)
        length = em.assign(d.count(start, d.index(e), step), "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, step, length)


def _kernel_extent(em, end):
    """The kernel extent a domain's end is: the extent itself, or a prologue value stated equal to one
    (``n = I.assume_equal(x.shape[0], 2 * h.shape[0])``, checked before this point runs), so the domain's loop is
    named by the extent as a grid planned over it expects; None otherwise."""
    if end.__class__ is Literal:
        return None
    if end.extent is not None and end in em.graph.extents:
        return end
    k = em.stated_extents.get(end)
    return None if k is None else em.graph.extents[k]


@rule(ops.subregion)
def subregion(em, node, args):
    d = em.dialect
    parent, b, e = args[0], d.operand(em, args[1].expr, "s"), d.operand(em, args[2].expr, "s")
    em.check(f"{b} < {d.zero} or {e} < {d.zero}", C.SUBREGION_NEGATIVE, b, e)
    n = d.as_index(parent.length)
    em.check(f"{e} > {b} and {e} > {n}", C.SUBREGION_PAST, b, e, n)
    start = em.assign(d.as_index(d.add(parent.start, d.mul(b, parent.step))), "s")
    length = em.assign(d.nonneg(f"{e} - {b}"), "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, parent.step, length)


@rule(ops.indices)
def indices(em, node, args):
    (x,) = args
    d = em.dialect
    return Lazy((x.length,), lambda idx: d.hold(em, d.coordinate(x.start, x.step, idx[0]), "t"))


@rule(ops.dim)
def dim(em, node, args):
    (x,) = args
    n = x.length if isinstance(x, Domain) else x.shape[node.attr("axis")]
    return Scalar(em.assign(em.dialect.index(n), "n"))
