"""TileLang rules for shapes, aggregates, domains, views and structured control.

TileLang targets do not check at run time (T9): out-of-range coordinates, slices and subregions,
negative extents and conflicting parallel writes are the author's responsibility, as on GPUs. A
domain whose step is not positive is empty (generic raises ValueError for it).
"""
from __future__ import annotations

from ... import types as T
from ...graph.values import Literal
from .emitter import Aggregate, Domain, Lazy, Scalar, View, add, as_index, mul, rule
from .scalar_rules import call

# --- shapes ----------------------------------------------------------------------------------------------


@rule("broadcast")
def _broadcast(em, node, args):
    (x,) = args
    out = node.outputs[0].type
    shape = em.shape(out)
    if isinstance(x, Scalar):
        return Lazy(shape, lambda idx: x.expr)
    src = node.inputs[0].type.shape
    offset = len(shape) - len(src)

    def elem(idx):
        mapped = [("0" if isinstance(e, int) and e == 1 and not (isinstance(t, int) and t == 1) else idx[k + offset])
                  for k, (e, t) in enumerate(zip(src, out.shape[offset:]))]
        return em.elem(x, mapped)

    return Lazy(shape, elem)


def _fresh_extents(em, node, operands) -> tuple:
    t = node.attr("type")
    for axis, value in zip(node.attr("extents"), operands):
        em.dim_names[t.shape[axis]] = em.assign(f"T.max(T.int64(0), {as_index(value.expr)})", "n")
    return em.shape(t)


@rule("full")
def _full(em, node, args):
    shape = _fresh_extents(em, node, args[1:])
    fill = args[0].expr
    return Lazy(shape, lambda idx: fill)


@rule("reshape")
def _reshape(em, node, args):
    x = args[0]
    new = _fresh_extents(em, node, args[1:])
    src = node.inputs[0].type
    old = em.shape(src) if isinstance(src, T.TensorType) else ()

    def elem(idx):
        flat = "0"
        for i, n in zip(idx, new):
            flat = add(mul(flat, n), i)
        f = em.assign(as_index(flat), "f")
        old_idx = []
        for k in range(len(old) - 1, -1, -1):
            if k == 0:
                old_idx.append(f)
            else:
                old_idx.append(em.assign(f"T.floormod({f}, {old[k]})", "j"))
                f = em.assign(f"T.floordiv({f}, {old[k]})", "f")
        return em.elem(x, list(reversed(old_idx)))

    return Lazy(new, elem)


@rule("transpose")
def _transpose(em, node, args):
    (x,) = args
    perm = node.attr("perm")

    def elem(idx):
        old = [None] * len(perm)
        for i, p in enumerate(perm):
            old[p] = idx[i]
        return em.elem(x, old)

    return Lazy(em.shape(node.outputs[0].type), elem)


@rule("slice")
def _slice(em, node, args):
    x, rest = args[0], iter(args[1:])
    src = em.shape(node.inputs[0].type)
    offsets, shape = [], []
    for axis, kind in enumerate(node.attr("axes")):
        if kind == "all":
            offsets.append(None)
            shape.append(src[axis])
        elif kind == "range":
            start, stop = as_index(next(rest).expr), as_index(next(rest).expr)
            offsets.append(("range", em.assign(start, "s")))
            shape.append(em.assign(f"T.max(T.int64(0), {stop} - {start})", "n"))
        else:
            offsets.append(("point", next(rest).expr))

    def elem(idx):
        it = iter(idx)
        mapped = []
        for off in offsets:
            if off is None:
                mapped.append(next(it))
            elif off[0] == "range":
                mapped.append(add(next(it), off[1]))
            else:
                mapped.append(off[1])
        return em.elem(x, mapped)

    return Lazy(tuple(shape), elem)


@rule("join")
def _join(em, node, args):
    a, b = args
    d = node.outputs[0].type.dtype

    def elem(idx):
        va, vb = em.elem(a, idx[:-1]), em.elem(b, idx[:-1])
        return em.assign(call(em, "select", (d,), d, (T.bool_, d, d), f"{idx[-1]} == 0", va, vb), "t")

    return Lazy(em.shape(node.outputs[0].type), elem)


@rule("tuple", "record")
def _aggregate(em, node, args):
    return Aggregate(tuple(args))


@rule("get")
def _get(em, node, args):
    return args[0].items[node.attr("index")]


@rule("field")
def _field(em, node, args):
    return args[0].items[node.inputs[0].type.names.index(node.attr("name"))]


# --- domains --------------------------------------------------------------------------------------------

def _is(x, value) -> bool:
    return isinstance(x, Literal) and x.value == value


@rule("domain")
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
        end = as_index(e)
        # A non-positive step makes the domain empty here (generic raises ValueError; TileLang targets do not check).
        length = em.assign(f"T.if_then_else({step} > 0, T.max(T.int64(0), T.floordiv({end} - {start} + {step} - 1, "
                           f"{step})), T.int64(0))", "n")
    ext = node.outputs[0].type.extent
    if not isinstance(ext, int):
        em.dim_names.setdefault(ext, length)
    return Domain(start, step, length)


@rule("subregion")
def _subregion(em, node, args):
    parent, b, e = args[0], as_index(args[1].expr), as_index(args[2].expr)
    start = em.assign(as_index(add(parent.start, mul(b, parent.step))), "s")
    length = em.assign(f"T.max(T.int64(0), {e} - {b})", "n")
    ext = node.outputs[0].type.extent
    if not isinstance(ext, int):
        em.dim_names.setdefault(ext, length)
    return Domain(start, parent.step, length)


def coordinate(d: Domain, i: str) -> str:
    return add(d.start, mul(i, d.step))


@rule("indices")
def _indices(em, node, args):
    (d,) = args
    return Lazy((d.length,), lambda idx: em.assign(as_index(coordinate(d, idx[0])), "t"))


@rule("dim")
def _dim(em, node, args):
    (x,) = args
    n = x.length if isinstance(x, Domain) else x.shape[node.attr("axis")]
    return Scalar(em.assign(as_index(n), "n"))


# --- views ----------------------------------------------------------------------------------------------

def _decode(em, view: View, expr: str) -> str:
    d = view.dtype
    if d.name in ("f16", "bf16"):  # stored as bit patterns, held as floats
        return call(em, "decode", (d,), d, (T.u16,), expr)
    return f"T.Cast({em.tir(d)!r}, {expr})" if view.storage else expr


def _encode(em, view: View, expr: str) -> str:
    d = view.dtype
    if d.name in ("f16", "bf16"):
        return call(em, "encode", (d,), T.u16, (d,), expr)
    return f"T.Cast({view.storage!r}, {expr})" if view.storage else expr


def _index_plan(em, node, view: View, entries):
    """(result shape, per-entry plan) of a read or write."""
    shape, plan = [], []
    entries = iter(entries)
    for axis, kind in enumerate(node.attr("index")):
        if kind == "all":
            shape.append(view.shape[axis])
            plan.append(("all", None))
            continue
        value = next(entries)
        if kind == "domain":
            shape.append(value.length)
            plan.append(("domain", value))
        elif kind == "point":
            plan.append(("point", value.expr))
        else:
            rank = len(value.shape)
            shape.extend(value.shape)
            plan.append(("tensor", (value, rank)))
    return tuple(shape), plan


def _coords(em, view: View, plan, idx) -> str:
    k = 0
    out = []
    for kind, info in plan:
        if kind == "all":
            out.append(idx[k])
            k += 1
        elif kind == "domain":
            out.append(coordinate(info, idx[k]))
            k += 1
        elif kind == "point":
            out.append(info)
        else:
            value, rank = info
            out.append(em.elem(value, idx[k:k + rank]))
            k += rank
    return ", ".join(out) if not view.rank0 else "0"


@rule("read")
def _read(em, node, args):
    view, entries = args[0], args[1:]
    shape, plan = _index_plan(em, node, view, entries)
    if not shape:
        return Scalar(em.assign(_decode(em, view, f"{view.name}[{_coords(em, view, plan, [])}]")))

    def elem(idx):
        return em.assign(_decode(em, view, f"{view.name}[{_coords(em, view, plan, idx)}]"), "t")

    return Lazy(shape, elem)


@rule("write", "unique_store")
def _write(em, node, args):
    view, value, entries = args[0], args[1], args[2:]
    value_var, dest = node.inputs[1], node.inputs[0]
    if isinstance(value, Lazy) and dest in em.reads.get(value_var, ()):
        own = (node.attr("index"), tuple(node.inputs[2:]))
        if any(v is dest and sig != own for v, sig in em.aligned.get(value_var, ())):
            # The value reads the view it overwrites at other elements: snapshot it first.
            value = em.materialize(value, value_var.type)
    shape, plan = _index_plan(em, node, view, entries)
    with em.loop_nest(shape) as idx:
        v = em.elem(value, idx)
        em.line(f"{view.name}[{_coords(em, view, plan, idx)}] = {_encode(em, view, v)}")


# --- control --------------------------------------------------------------------------------------------

def _point(em, d: Domain, o: str) -> Scalar:
    return Scalar(em.assign(as_index(coordinate(d, o)), "q"))


@rule("parallel", "for")
def _iterate(em, node, args):
    # The C target runs one serial program: a parallel domain is a serial loop (any order is a valid one).
    (d,) = args
    (region,) = node.regions
    o = em.fresh("o")
    with em.block(f"for {o} in T.serial({d.length}):"):
        em.loop_stack.append(("for", [], None))
        em.run_region(region, (_point(em, d, o),))
        em.loop_stack.pop()


@rule("loop")
def _loop(em, node, args):
    d, init = args
    (t,) = node.attr("types")
    (region,) = node.regions
    names = em.mutable(t, init)
    o = em.fresh("o")
    with em.block(f"for {o} in T.serial({d.length}):"):
        em.loop_stack.append(("loop", names, t))
        (new,) = em.run_region(region, (_point(em, d, o), em.current(names, t)))
        em.store(names, new, t)
        em.loop_stack.pop()
    return em.current(names, t)


@rule("while")
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
        (p,) = em.run_region(cond, (em.current(names, t),))
        with em.block(f"if not {p.expr}:"):
            em.line("break")
        em.loop_stack.append(("while", names, t))
        (new,) = em.run_region(body, (em.current(names, t),))
        em.store(names, new, t)
        em.loop_stack.pop()
    return em.current(names, t)


@rule("if")
def _if(em, node, args):
    types = node.attr("types")
    then_r, else_r = node.regions
    names = em.mutable(types[0]) if types else []
    for header, region in ((f"if {args[0].expr}:", then_r), ("else:", else_r)):
        with em.block(header):
            results = em.run_region(region)
            if types:
                em.store(names, results[0], types[0])
    return em.current(names, types[0]) if types else None


@rule("break", "continue")
def _exit(em, node, args):
    _, names, t = em.loop_stack[-1]
    with em.block(f"if {args[0].expr}:"):
        if len(args) > 1:
            em.store(names, args[1], t)
        em.line(node.op.name)
