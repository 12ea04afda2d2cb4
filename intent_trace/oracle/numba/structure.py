"""Numba rules for shapes, aggregates, domains, views and structured control.

Index arithmetic and view access live in :mod:`.indexing` (shared with memory and atomic)."""
from __future__ import annotations

import contextlib

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...codegen import checks as C
from ...graph.lowering import (broadcast_index, component, flat_index, name_extents, slice_index,
                               transpose_index, unflatten)
from ...graph.values import Literal, walk_region
from .indexing import add, coordinate, mul, read_view, shape_of, write_view
from .races import parallel_frame
from .values import Aggregate, Domain, Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)


# --- shapes -----------------------------------------------------------------------------------------

@rule(ops.broadcast)
def _broadcast(em, node, args):
    (x,) = args
    out = node.outputs[0].type
    shape = shape_of(em, out)
    if isinstance(x, Scalar):
        return Lazy(shape, lambda idx: x.expr)
    src = node.inputs[0].type.shape
    return Lazy(shape, lambda idx: em.elem(x, broadcast_index(src, out.shape, idx)))


def _fresh_extents(em, node, operands):
    t = node.attr("type")
    for axis, value in zip(node.attr("extents"), operands):
        n = em.assign(f"np.int64({value.expr})", "n")
        em.check(f"{n} < 0", C.NEGATIVE_EXTENT, n, axis=axis)
        em.dim_names[t.shape[axis]] = n
    return shape_of(em, t)


@rule(ops.full)
def _full(em, node, args):
    shape = _fresh_extents(em, node, args[1:])
    fill = args[0].expr
    return Lazy(shape, lambda idx: fill)


def _product(shape) -> str:
    out = "1"
    for s in shape:
        out = mul(out, s)
    return out


@rule(ops.reshape)
def _reshape(em, node, args):
    x = args[0]
    new = _fresh_extents(em, node, args[1:])
    src = node.inputs[0].type
    old = shape_of(em, src) if isinstance(src, T.TensorType) else ()
    if not all(s.isdigit() for s in old + new) and _product(old) != _product(new):
        # (the same product expression on both sides, as for [M] -> [M, 1], cannot differ: no check, so no
        # error site, and a kernel without other error sites writes the caller's arrays without staging)
        em.check(f"{_product(old)} != {_product(new)}", C.RESHAPE_COUNT, _product(old), _product(new))

    def elem(idx):
        f = em.assign(flat_index(idx, new, add, mul), "f")
        return em.elem(x, unflatten(f, old, lambda v, n: em.assign(f"{v} % {n}", "j"),
                                    lambda v, n: em.assign(f"{v} // {n}", "f")))

    return Lazy(new, elem)


@rule(ops.transpose)
def _transpose(em, node, args):
    (x,) = args
    perm = node.attr("perm")
    return Lazy(shape_of(em, node.outputs[0].type), lambda idx: em.elem(x, transpose_index(perm, idx)))


@rule(ops.slice)
def _slice(em, node, args):
    x, rest = args[0], iter(args[1:])
    src = shape_of(em, node.inputs[0].type)
    offsets, shape = [], []
    for axis, kind in enumerate(node.attr("axes")):
        n = src[axis]
        if kind == "all":
            offsets.append(None)
            shape.append(n)
        elif kind == "range":
            start, stop = next(rest).expr, next(rest).expr
            em.check(f"{start} < 0 or {stop} < 0 or ({stop} > {n} and {stop} > {start})", C.SLICE_RANGE,
                     start, stop, n, axis=axis)
            length = em.assign(f"max(0, {stop} - {start})", "n")
            offsets.append(("range", start))
            shape.append(length)
        else:
            p = next(rest).expr
            em.check(f"{p} < 0 or {p} >= {n}", C.SLICE_INDEX, p, n, axis=axis)
            offsets.append(("point", p))

    return Lazy(tuple(shape), lambda idx: em.elem(x, slice_index(offsets, idx, add)))


@rule(ops.join)
def _join(em, node, args):
    a, b = args
    shape = shape_of(em, node.outputs[0].type)

    def elem(idx):
        va, vb = em.elem(a, idx[:-1]), em.elem(b, idx[:-1])
        return em.assign(f"{va} if {idx[-1]} == 0 else {vb}", "t")

    return Lazy(shape, elem)


@rule(ops.tuple, ops.record)
def _aggregate(em, node, args):
    return Aggregate(tuple(args))


rule(ops.get, ops.field)(component)


# --- domains --------------------------------------------------------------------------------------

@rule(ops.domain)
def _domain(em, node, args):
    b, e, s = (a.expr for a in args)
    static_unit = isinstance(node.inputs[0], Literal) and node.inputs[0].value == 0 and \
        isinstance(node.inputs[2], Literal) and node.inputs[2].value == 1
    if static_unit:
        start, step = "0", "1"
    else:
        start, step = em.assign(f"np.int64({b})", "s"), em.assign(f"np.int64({s})", "s")
        if not isinstance(node.inputs[2], Literal):
            em.check(f"{step} <= 0", C.DOMAIN_STEP, step)
    end = f"np.int64({e})"
    length = em.assign(f"max(0, {end})" if static_unit else f"max(0, ({end} - {start} + {step} - 1) // {step})", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, step, length)


@rule(ops.subregion)
def _subregion(em, node, args):
    parent, b, e = args[0], args[1].expr, args[2].expr
    em.check(f"{b} < 0 or {e} < 0", C.SUBREGION_NEGATIVE, b, e)
    em.check(f"{e} > {b} and {e} > {parent.length}", C.SUBREGION_PAST, b, e, parent.length)
    start = em.assign(add(parent.start, mul(f"np.int64({b})", parent.step)), "s")
    length = em.assign(f"max(0, np.int64({e}) - np.int64({b}))", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, parent.step, length)


@rule(ops.indices)
def _indices(em, node, args):
    (d,) = args
    return Lazy((d.length,), lambda idx: f"({coordinate(d, idx[0])})")


@rule(ops.dim)
def _dim(em, node, args):
    (x,) = args
    axis = node.attr("axis")
    if isinstance(x, Domain):
        return Scalar(x.length)
    return Scalar(em.assign(f"np.int64({x.shape[axis]})", "n"))


# --- views ----------------------------------------------------------------------------------------

rule(ops.read)(read_view)
rule(ops.write, ops.unique_store)(write_view)


# --- control --------------------------------------------------------------------------------------

def _point(em, d: Domain, p: str) -> Scalar:
    return Scalar(em.assign(coordinate(d, p) if d.start != "0" or d.step != "1" else p, "p"))


def _updates_shared_state(region) -> bool:
    """A scatter_reduce into a destination the region does not allocate (threads would race on it)."""
    nodes = list(walk_region(region))
    local = {v for n in nodes for v in n.outputs}
    return any(n.op is ops.scatter_reduce and n.inputs[0] not in local for n in nodes)


@rule(ops.parallel, ops.for_)
def _iterate(em, node, args):
    (d,) = args
    (region,) = node.regions
    parallel = node.op is ops.parallel and em.prange_depth == 0 and em.loop_depth == 0 and \
        not _updates_shared_state(region)
    p = em.fresh("o")
    hoisted = em.staging.parallel_loop(em, d.length) if parallel else contextlib.nullcontext()
    with parallel_frame(em, region, d, p, node.op is ops.parallel), hoisted, \
            em.block(f"for {p} in {'prange' if parallel else 'range'}({d.length}):"):
        if parallel:
            em.uses_prange = True
            em.prange_depth += 1
        em.loop_depth += 1
        em.loop_stack.append(("for", [], None))
        em.run_region(region, (_point(em, d, p),))
        em.loop_stack.pop()
        em.loop_depth -= 1
        if parallel:
            em.prange_depth -= 1


@rule(ops.loop)
def _loop(em, node, args):
    d, init = args
    (t,) = node.attr("types")
    (region,) = node.regions
    names = em.carry_names(t)
    em.assign_leaves(names, init, t)
    p = em.fresh("o")
    with em.block(f"for {p} in range({d.length}):"):
        em.loop_depth += 1
        em.loop_stack.append(("loop", names, t))
        (new,) = em.run_region(region, (_point(em, d, p), em.rebuild(list(names), t)))
        em.assign_leaves(names, new, t)
        em.loop_stack.pop()
        em.loop_depth -= 1
    return em.rebuild(list(names), t)


@rule(ops.while_)
def _while(em, node, args):
    (init,) = args
    (t,) = node.attr("types")
    cond, body = node.regions
    names = em.carry_names(t)
    em.assign_leaves(names, init, t)
    with em.block("while True:"):
        em.loop_depth += 1
        (p,) = em.run_region(cond, (em.rebuild(list(names), t),))
        stop = f"not {p.expr} or err[0] != 0"  # a failed check (allocation checks are made without checks too)
        with em.block(f"if {stop}:"):
            em.line("break")
        em.loop_stack.append(("while", names, t))
        (new,) = em.run_region(body, (em.rebuild(list(names), t),))
        em.assign_leaves(names, new, t)
        em.loop_stack.pop()
        em.loop_depth -= 1
    return em.rebuild(list(names), t)


@rule(ops.if_)
def _if(em, node, args):
    types = node.attr("types")
    then_r, else_r = node.regions
    names = em.carry_names(types[0]) if types else []
    for header, region in ((f"if {args[0].expr}:", then_r), ("else:", else_r)):
        with em.block(header):
            results = em.run_region(region)
            if types:
                em.assign_leaves(names, results[0], types[0])
    return em.rebuild(list(names), types[0]) if types else None


@rule(ops.break_, ops.continue_)
def _exit(em, node, args):
    kind, names, t = em.loop_stack[-1]
    with em.block(f"if {args[0].expr}:"):
        if len(args) > 1:
            em.assign_leaves(names, args[1], t)
        em.line(node.op.name)

