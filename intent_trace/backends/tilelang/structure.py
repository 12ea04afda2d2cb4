"""TileLang rules for shapes, aggregates, domains, views and structured control.

Run-time checks are cpu's (:mod:`.storage`): negative extents, reshape element counts, slices, domain
steps, subregion bounds, view and buffer coordinates (``IndexError`` naming the view, the coordinate and
the extent) and the injectivity of unique stores, each defined once (:mod:`intent_trace.codegen.checks`). Domain and point coordinates
are checked once where the access is defined (a domain that starts at 0, steps by 1 and has the view
axis's own extent needs no check); data-derived coordinates are checked per element. Without checks a
domain whose step is not positive is empty. Conflicting parallel writes are not checked (generic does).
"""
from __future__ import annotations

from ... import types as T
from ...codegen import checks as C
from ...graph.lowering import (access_coords, broadcast_index, component, covers_axis, flat_index, name_extents,
                               rereads_destination, safe_point, slice_index, transpose_index, unflatten)
from ...graph.values import Literal
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Aggregate, Domain, Lazy, Scalar, View, add, as_index, mul
from .scalar_rules import call
from .views import decode, encode

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)

# --- shapes ----------------------------------------------------------------------------------------------


@rule(ops.broadcast)
def _broadcast(em, node, args):
    (x,) = args
    out = node.outputs[0].type
    shape = em.shape(out)
    if isinstance(x, Scalar):
        return Lazy(shape, lambda idx: x.expr)
    src = node.inputs[0].type.shape
    return Lazy(shape, lambda idx: em.elem(x, broadcast_index(src, out.shape, idx)))


def _fresh_extents(em, node, operands) -> tuple:
    t = node.attr("type")
    for axis, value in zip(node.attr("extents"), operands):
        n = em.assign(as_index(value.expr), "n")
        em.check(f"{n} < T.int64(0)", C.NEGATIVE_EXTENT, n, axis=axis)
        em.dim_names[t.shape[axis]] = em.assign(f"T.max(T.int64(0), {n})", "n")
    return em.shape(t)


def _product(shape) -> str:
    out = "1"
    for s in shape:
        out = mul(out, as_index(s))
    return as_index(out) if out == "1" else out


@rule(ops.full)
def _full(em, node, args):
    shape = _fresh_extents(em, node, args[1:])
    fill = args[0].expr
    return Lazy(shape, lambda idx: fill)


@rule(ops.reshape)
def _reshape(em, node, args):
    x = args[0]
    new = _fresh_extents(em, node, args[1:])
    src = node.inputs[0].type
    old = em.shape(src) if isinstance(src, T.TensorType) else ()
    if not all(s.isdigit() for s in old + new):
        before, after = em.assign(_product(old), "n"), em.assign(_product(new), "n")
        em.check(f"{before} != {after}", C.RESHAPE_COUNT, before, after)

    def elem(idx):
        f = em.assign(as_index(flat_index(idx, new, add, mul)), "f")
        return em.elem(x, unflatten(f, old, lambda v, n: em.assign(f"T.floormod({v}, {n})", "j"),
                                    lambda v, n: em.assign(f"T.floordiv({v}, {n})", "f")))

    return Lazy(new, elem)


@rule(ops.transpose)
def _transpose(em, node, args):
    (x,) = args
    perm = node.attr("perm")
    return Lazy(em.shape(node.outputs[0].type), lambda idx: em.elem(x, transpose_index(perm, idx)))


@rule(ops.slice)
def _slice(em, node, args):
    x, rest = args[0], iter(args[1:])
    src = em.shape(node.inputs[0].type)
    offsets, shape = [], []
    for axis, kind in enumerate(node.attr("axes")):
        if kind == "all":
            offsets.append(None)
            shape.append(src[axis])
        elif kind == "range":
            start, stop = em.assign(as_index(next(rest).expr), "s"), em.assign(as_index(next(rest).expr), "s")
            em.check(f"{start} < T.int64(0) or {stop} < T.int64(0) or ({stop} > {as_index(src[axis])} and "
                     f"{stop} > {start})", C.SLICE_RANGE, start, stop, as_index(src[axis]), axis=axis)
            offsets.append(("range", start))
            shape.append(em.assign(f"T.max(T.int64(0), {stop} - {start})", "n"))
        else:
            p = em.assign(as_index(next(rest).expr), "j")
            em.check(f"{p} < T.int64(0) or {p} >= {as_index(src[axis])}", C.SLICE_INDEX, p, as_index(src[axis]),
                     axis=axis)
            offsets.append(("point", p))

    return Lazy(tuple(shape), lambda idx: em.elem(x, slice_index(offsets, idx, add)))


@rule(ops.join)
def _join(em, node, args):
    a, b = args
    d = node.outputs[0].type.dtype

    def elem(idx):
        va, vb = em.elem(a, idx[:-1]), em.elem(b, idx[:-1])
        return em.assign(call(em, "select", (d,), d, (T.bool_, d, d), f"{idx[-1]} == 0", va, vb), "t")

    return Lazy(em.shape(node.outputs[0].type), elem)


@rule(ops.tuple, ops.record)
def _aggregate(em, node, args):
    return Aggregate(tuple(args))


rule(ops.get, ops.field)(component)


# --- domains --------------------------------------------------------------------------------------------

def _is(x, value) -> bool:
    return isinstance(x, Literal) and x.value == value


@rule(ops.domain)
def _domain(em, node, args):
    b, e, s = (a.expr for a in args)
    if _is(node.inputs[0], 0) and _is(node.inputs[2], 1):
        start, step = "0", "1"
        end = node.inputs[1]
        if end.__class__ is not Literal and end.extent is not None and end in em.graph.extents:
            length = e  # a kernel extent: never negative
        else:
            length = em.assign(f"T.max(T.int64(0), {as_index(e)})", "n")
    else:
        start, step = em.assign(as_index(b), "s"), em.assign(as_index(s), "s")
        if not isinstance(node.inputs[2], Literal):
            em.check(f"{step} <= T.int64(0)", C.DOMAIN_STEP, step)
        end = as_index(e)
        # Without checks, a non-positive step makes the domain empty.
        length = em.assign(f"T.if_then_else({step} > 0, T.max(T.int64(0), T.floordiv({end} - {start} + {step} - 1, "
                           f"{step})), T.int64(0))", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, step, length)


@rule(ops.subregion)
def _subregion(em, node, args):
    parent, b, e = args[0], em.assign(as_index(args[1].expr), "s"), em.assign(as_index(args[2].expr), "s")
    em.check(f"{b} < T.int64(0) or {e} < T.int64(0)", C.SUBREGION_NEGATIVE, b, e)
    em.check(f"{e} > {b} and {e} > {as_index(parent.length)}", C.SUBREGION_PAST, b, e, as_index(parent.length))
    start = em.assign(as_index(add(parent.start, mul(b, parent.step))), "s")
    length = em.assign(f"T.max(T.int64(0), {e} - {b})", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, parent.step, length)


def coordinate(d: Domain, i: str) -> str:
    return add(d.start, mul(i, d.step))


@rule(ops.indices)
def _indices(em, node, args):
    (d,) = args
    return Lazy((d.length,), lambda idx: em.assign(as_index(coordinate(d, idx[0])), "t"))


@rule(ops.dim)
def _dim(em, node, args):
    (x,) = args
    n = x.length if isinstance(x, Domain) else x.shape[node.attr("axis")]
    return Scalar(em.assign(as_index(n), "n"))


# --- views ----------------------------------------------------------------------------------------------

_STORES = frozenset({ops.write, ops.store, ops.unique_store})  # view, value, then the index operands


def _index_plan(em, node, view: View, entries):
    """(result shape, per-entry plan) of a read or write, after the checks of its domain and point entries."""
    view_t = node.inputs[0].type
    first = 2 if node.op in _STORES else 1
    operands = iter(zip(entries, node.inputs[first:]))
    shape, plan = [], []
    for axis, kind in enumerate(node.attr("index")):
        n = as_index(view.shape[axis]) if not view.rank0 else "T.int64(1)"
        if kind == "all":
            shape.append(view.shape[axis])
            plan.append(("all", None))
            continue
        value, var = next(operands)
        extent = view_t.shape[axis]
        if kind == "domain":
            if not covers_axis(value, var, extent):
                first_c, last_c = as_index(value.start), as_index(coordinate(value, f"({value.length} - 1)"))
                em.check(f"{value.length} > 0 and ({first_c} < T.int64(0) or {last_c} >= {n})", C.VIEW_COORDINATE,
                         f"T.if_then_else({first_c} < T.int64(0), {first_c}, {last_c})", n, axis=axis, view=view.label)
            shape.append(value.length)
            plan.append(("domain", value))
        elif kind == "point":
            p = em.assign(as_index(value.expr), "j")
            static = isinstance(var, Literal) and isinstance(extent, int)  # the tracer checked it
            if not (static or safe_point(em.env, var, extent, Domain)):
                em.check(f"{p} < T.int64(0) or {p} >= {n}", C.VIEW_COORDINATE, p, n, axis=axis, view=view.label)
            plan.append(("point", p))
        else:
            shape.extend(value.shape)
            plan.append(("tensor", (value, len(var.type.shape), axis, n)))
    return tuple(shape), plan


def _coords(em, view: View, plan, idx) -> str:
    def data_coord(info, element_idx):
        value, _, axis, n = info
        c = em.assign(as_index(em.elem(value, element_idx)), "j")
        em.check(f"{c} < T.int64(0) or {c} >= {n}", C.VIEW_COORDINATE, c, n, axis=axis, view=view.label)
        return c

    out = access_coords(plan, idx, coordinate, data_coord)
    return ", ".join(out) if not view.rank0 else "0"


@rule(ops.read, ops.load)
def _read(em, node, args):
    view, entries = args[0], args[1:]
    shape, plan = _index_plan(em, node, view, entries)
    if not shape:
        return Scalar(em.assign(decode(em, view, f"{view.name}[{_coords(em, view, plan, [])}]")))

    def elem(idx):
        return em.assign(decode(em, view, f"{view.name}[{_coords(em, view, plan, idx)}]"), "t")

    return Lazy(shape, elem)


@rule(ops.write, ops.unique_store, ops.store)
def _write(em, node, args):
    view, value, entries = args[0], args[1], args[2:]
    if isinstance(value, Lazy) and rereads_destination(node, em.reads, em.aligned):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the write would change what it reads
    shape, plan = _index_plan(em, node, view, entries)
    mask = None
    if em.checks and any(kind == "tensor" for kind, _ in plan):
        # Data-derived coordinates: the relation must be injective (a mask of the elements written so far).
        mask = em.allocate(view.shape, "uint8", zero=True)
    with em.loop_nest(shape) as idx:
        v = em.elem(value, idx)
        at = _coords(em, view, plan, idx)
        if mask is not None:
            em.check(f"{mask}[{at}] != T.uint8(0)", C.UNIQUE_STORE_TWICE, view=view.label)
            em.line(f"{mask}[{at}] = T.uint8(1)")
        em.line(f"{view.name}[{at}] = {encode(em, view, v)}")


# --- control --------------------------------------------------------------------------------------------

def _point(em, d: Domain, o: str) -> Scalar:
    return Scalar(em.assign(as_index(coordinate(d, o)), "q"))


@rule(ops.parallel, ops.for_)
def _iterate(em, node, args):
    # A serial program runs a parallel domain as a serial loop (any order is a valid one); the graph's one
    # top-level parallel loop may be mapped onto threads instead (em.grid: cuda_kernels.ParallelGrid).
    (d,) = args
    (region,) = node.regions
    if em.grid is not None and node is em.grid.node:
        with em.grid_iteration(em.grid, d.length) as o:
            em.run_region(region, (_point(em, d, o),))
        return
    o = em.fresh("o")
    with em.block(f"for {o} in T.serial({d.length}):"):
        em.loop_stack.append(("for", [], None, em.depth))
        em.run_region(region, (_point(em, d, o),))
        em.loop_stack.pop()


@rule(ops.loop)
def _loop(em, node, args):
    d, init = args
    (t,) = node.attr("types")
    (region,) = node.regions
    names = em.mutable(t, init)
    o = em.fresh("o")
    with em.block(f"for {o} in T.serial({d.length}):"):
        em.loop_stack.append(("loop", names, t, em.depth))
        (new,) = em.run_region(region, (_point(em, d, o), em.current(names, t)))
        em.store(names, new, t)
        em.loop_stack.pop()
    return em.current(names, t)


@rule(ops.while_)
def _while(em, node, args):
    (init,) = args
    (t,) = node.attr("types")
    cond, body = node.regions
    names = em.mutable(t, init)
    # TileLang's `while` takes one expression; the condition region is statements, so the loop runs on a
    # guard that never changes and leaves through `break`.
    guard = em.fresh("g")
    em.line(f"{guard} = T.alloc_var('bool', init=T.bool(True))")
    with em.block(f"while {guard}:"):
        depth = em.depth
        (p,) = em.run_region(cond, (em.current(names, t),))
        with em.block(f"if not {em.flag(p.expr)}:"):
            em.free_from(depth)  # the heap buffers of the condition
            em.line("break")
        em.loop_stack.append(("while", names, t, em.depth))
        (new,) = em.run_region(body, (em.current(names, t),))
        em.store(names, new, t)
        em.loop_stack.pop()
    return em.current(names, t)


@rule(ops.if_)
def _if(em, node, args):
    types = node.attr("types")
    then_r, else_r = node.regions
    names = em.mutable(types[0], scratch=False) if types else []
    for header, region in ((f"if {args[0].expr}:", then_r), ("else:", else_r)):
        with em.block(header):
            results = em.run_region(region)
            if types:
                em.store(names, results[0], types[0])
    return em.current(names, types[0]) if types else None


_EXITS = {ops.break_: "break", ops.continue_: "continue"}  # TileLang's own statements


@rule(ops.break_, ops.continue_)
def _exit(em, node, args):
    _, names, t, depth = em.loop_stack[-1]
    with em.block(f"if {em.flag(args[0].expr)}:"):
        if len(args) > 1:
            em.store(names, args[1], t)
        em.free_from(depth)  # the heap buffers of this iteration
        em.line(_EXITS[node.op])
