"""Numba rules for shapes, aggregates, domains, views and structured control."""
from __future__ import annotations

from ... import types as T
from ...graph.lowering import (access_coords, broadcast_index, component, covers_axis, flat_index, index_add,
                               index_mul, name_extents, rereads_destination, safe_point, slice_index,
                               transpose_index, unflatten)
from ...graph.values import Literal, walk_region
from .emitter import ErrorSite, rule
from .values import Aggregate, Domain, Lazy, Scalar, View


def _shape(em, t) -> tuple:
    return tuple(em.extent(e) for e in t.shape)


def _atom(x: str) -> str:
    return x if x.replace("_", "").isalnum() or x.startswith("(") and x.endswith(")") else f"({x})"


def _int(x: str) -> str:
    """An index operand as int64: a prange index may be typed unsigned, and uint64 with int64 is float64."""
    return x if x.isdigit() else f"np.int64({x})"


def _mul(a: str, b: str) -> str:
    return index_mul(a, b, lambda x, y: f"{_int(_atom(x))} * {_int(_atom(y))}")


def _add(a: str, b: str) -> str:
    return index_add(a, b, lambda x, y: f"({_int(x)} + {_int(y)})")


# --- shapes -----------------------------------------------------------------------------------------

@rule("broadcast")
def _broadcast(em, node, args):
    (x,) = args
    out = node.outputs[0].type
    shape = _shape(em, out)
    if isinstance(x, Scalar):
        return Lazy(shape, lambda idx: x.expr)
    src = node.inputs[0].type.shape
    return Lazy(shape, lambda idx: em.elem(x, broadcast_index(src, out.shape, idx)))


def _fresh_extents(em, node, operands):
    t = node.attr("type")
    for axis, value in zip(node.attr("extents"), operands):
        n = em.assign(f"np.int64({value.expr})", "n")
        em.check(f"{n} < 0", ErrorSite(ValueError, f"extent {{0}} (axis {axis}) is negative"), n)
        em.dim_names[t.shape[axis]] = n
    return _shape(em, t)


@rule("full")
def _full(em, node, args):
    shape = _fresh_extents(em, node, args[1:])
    fill = args[0].expr
    return Lazy(shape, lambda idx: fill)


def _product(shape) -> str:
    out = "1"
    for s in shape:
        out = _mul(out, s)
    return out


@rule("reshape")
def _reshape(em, node, args):
    x = args[0]
    new = _fresh_extents(em, node, args[1:])
    src = node.inputs[0].type
    old = _shape(em, src) if isinstance(src, T.TensorType) else ()
    if not all(s.isdigit() for s in old + new):
        em.check(f"{_product(old)} != {_product(new)}",
                 ErrorSite(ValueError, "reshape of {0} elements into a shape of {1} elements"),
                 _product(old), _product(new))

    def elem(idx):
        f = em.assign(flat_index(idx, new, _add, _mul), "f")
        return em.elem(x, unflatten(f, old, lambda v, n: em.assign(f"{v} % {n}", "j"),
                                    lambda v, n: em.assign(f"{v} // {n}", "f")))

    return Lazy(new, elem)


@rule("transpose")
def _transpose(em, node, args):
    (x,) = args
    perm = node.attr("perm")
    return Lazy(_shape(em, node.outputs[0].type), lambda idx: em.elem(x, transpose_index(perm, idx)))


@rule("slice")
def _slice(em, node, args):
    x, rest = args[0], iter(args[1:])
    src = _shape(em, node.inputs[0].type)
    offsets, shape = [], []
    for axis, kind in enumerate(node.attr("axes")):
        n = src[axis]
        if kind == "all":
            offsets.append(None)
            shape.append(n)
        elif kind == "range":
            start, stop = next(rest).expr, next(rest).expr
            em.check(f"{start} < 0 or {stop} < 0 or ({stop} > {n} and {stop} > {start})",
                     ErrorSite(IndexError, f"slice [{{0}}:{{1}}] is outside axis {axis} of its tensor "
                                           f"(no clamping)"), start, stop)
            length = em.assign(f"max(0, {stop} - {start})", "n")
            offsets.append(("range", start))
            shape.append(length)
        else:
            p = next(rest).expr
            em.check(f"{p} < 0 or {p} >= {n}", ErrorSite(IndexError, f"index {{0}} is outside axis {axis} of "
                                                                     f"extent {{1}}"), p, n)
            offsets.append(("point", p))

    return Lazy(tuple(shape), lambda idx: em.elem(x, slice_index(offsets, idx, _add)))


@rule("join")
def _join(em, node, args):
    a, b = args
    shape = _shape(em, node.outputs[0].type)

    def elem(idx):
        va, vb = em.elem(a, idx[:-1]), em.elem(b, idx[:-1])
        return em.assign(f"{va} if {idx[-1]} == 0 else {vb}", "t")

    return Lazy(shape, elem)


@rule("tuple", "record")
def _aggregate(em, node, args):
    return Aggregate(tuple(args))


rule("get", "field")(component)


# --- domains --------------------------------------------------------------------------------------

@rule("domain")
def _domain(em, node, args):
    b, e, s = (a.expr for a in args)
    static_unit = isinstance(node.inputs[0], Literal) and node.inputs[0].value == 0 and \
        isinstance(node.inputs[2], Literal) and node.inputs[2].value == 1
    if static_unit:
        start, step = "0", "1"
    else:
        start, step = em.assign(f"np.int64({b})", "s"), em.assign(f"np.int64({s})", "s")
        if not isinstance(node.inputs[2], Literal):
            em.check(f"{step} <= 0", ErrorSite(ValueError, "domain step must be positive, got {0}"), step)
    end = f"np.int64({e})"
    length = em.assign(f"max(0, {end})" if static_unit else f"max(0, ({end} - {start} + {step} - 1) // {step})", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, step, length)


@rule("subregion")
def _subregion(em, node, args):
    parent, b, e = args[0], args[1].expr, args[2].expr
    em.check(f"{b} < 0 or {e} < 0", ErrorSite(IndexError, "subregion [{0}:{1}] has a negative bound"), b, e)
    em.check(f"{e} > {b} and {e} > {parent.length}",
             ErrorSite(IndexError, "subregion [{0}:{1}] ends past its parent's extent {2} (subregions never "
                                   "clamp)"), b, e, parent.length)
    start = em.assign(_add(parent.start, _mul(f"np.int64({b})", parent.step)), "s")
    length = em.assign(f"max(0, np.int64({e}) - np.int64({b}))", "n")
    name_extents(em.dim_names, (node.outputs[0].type.extent,), (length,))
    return Domain(start, parent.step, length)


def _coordinate(d: Domain, i: str) -> str:
    return _add(d.start, _mul(i, d.step))


@rule("indices")
def _indices(em, node, args):
    (d,) = args
    return Lazy((d.length,), lambda idx: f"({_coordinate(d, idx[0])})")


@rule("dim")
def _dim(em, node, args):
    (x,) = args
    axis = node.attr("axis")
    if isinstance(x, Domain):
        return Scalar(x.length)
    return Scalar(em.assign(f"np.int64({x.shape[axis]})", "n"))


# --- views ----------------------------------------------------------------------------------------

def _decode(d: T.DType, expr: str) -> str:
    if d.name == "f16":
        return f"R.f16_value({expr})"
    if d.name == "bf16":
        return f"R.bf16_value({expr})"
    return expr


def _encode(d: T.DType, expr: str) -> str:
    if d.name == "f16":
        return f"R.f16_bits({expr})"
    if d.name == "bf16":
        return f"R.bf16_bits({expr})"
    return expr


def _index_plan(em, node, view: View, entries):
    """Hoisted bounds checks; returns (result shape, per-entry plan) for a read or write."""
    kinds = node.attr("index")
    view_t = node.inputs[0].type
    operand_vars = [x for x in node.inputs[2 if node.op.name in ("write", "store", "unique_store") else 1:]]
    ops_iter = iter(zip(entries, operand_vars))
    shape, plan = [], []
    for axis, kind in enumerate(kinds):
        n = view.shape[axis]
        site = ErrorSite(IndexError, f"{{label}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}",
                         label=view.label)
        if kind == "all":
            shape.append(n)
            plan.append(("all", None))
            continue
        value, var = next(ops_iter)
        if kind == "domain":
            if not covers_axis(value, var, view_t.shape[axis]):
                last = _coordinate(value, f"({value.length} - 1)")
                em.check(f"{value.length} > 0 and ({value.start} < 0 or {last} >= {n})", site,
                         f"({value.start} if {value.start} < 0 else {last})", n)
            shape.append(value.length)
            plan.append(("domain", value))
        elif kind == "point":
            static = isinstance(var, Literal) and isinstance(view_t.shape[axis], int)  # the tracer checked it
            if not (static or safe_point(em.env, var, view_t.shape[axis], Domain)):
                em.check(f"{value.expr} < 0 or {value.expr} >= {n}", site, value.expr, n)
            plan.append(("point", value.expr))
        else:
            shape.extend(value.shape)
            plan.append(("tensor", (value, len(var.type.shape), site, n)))
    return tuple(shape), plan


def _coords(em, plan, idx) -> list:
    def data_coord(info, element_idx):
        value, _, site, n = info
        c = em.assign(f"np.int64({em.elem(value, element_idx)})", "c")
        em.check(f"{c} < 0 or {c} >= {n}", site, c, n)
        return c

    return access_coords(plan, idx, _coordinate, data_coord)


@rule("read")
def _read(em, node, args):
    view, entries = args[0], args[1:]
    shape, plan = _index_plan(em, node, view, entries)
    d = view.dtype
    if not shape:
        return Scalar(em.assign(_decode(d, f"{view.name}[{', '.join(_coords(em, plan, [])) or '()'}]")))

    def elem(idx):
        return em.assign(_decode(d, f"{view.name}[{', '.join(_coords(em, plan, idx))}]"), "t")

    return Lazy(shape, elem)


@rule("write", "unique_store")
def _write(em, node, args):
    view, value, entries = args[0], args[1], args[2:]
    if isinstance(value, Lazy) and rereads_destination(node, em.reads, em.aligned):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the write would change what it reads
    shape, plan = _index_plan(em, node, view, entries)
    has_tensor = any(k == "tensor" for k, _ in plan)
    mask = None
    if has_tensor and em.checks:
        mask = em.allocate(view.shape, "np.bool_", f"the written-element mask of a unique store to {view.label}",
                           fill="False", prefix="m")
    with em.loop_nest(shape, parallel=not has_tensor) as idx:
        v = em.elem(value, idx)
        cs = ", ".join(_coords(em, plan, idx)) or "()"
        if mask is not None:
            em.check(f"{mask}[{cs}]", ErrorSite(RuntimeError, "{label}: a unique store writes one element twice (its "
                                                              "index relation is not injective); use scatter_reduce "
                                                              "to combine collisions", label=view.label))
            em.line(f"{mask}[{cs}] = True")
        em.line(f"{view.name}[{cs}] = {_encode(view.dtype, v)}")


# --- control --------------------------------------------------------------------------------------

def _point(em, d: Domain, p: str) -> Scalar:
    return Scalar(em.assign(_coordinate(d, p) if d.start != "0" or d.step != "1" else p, "p"))


def _updates_shared_state(region) -> bool:
    """A scatter_reduce into a destination the region does not allocate (threads would race on it)."""
    nodes = list(walk_region(region))
    local = {v for n in nodes for v in n.outputs}
    return any(n.op.name == "scatter_reduce" and n.inputs[0] not in local for n in nodes)


@rule("parallel", "for")
def _iterate(em, node, args):
    (d,) = args
    (region,) = node.regions
    parallel = node.op.name == "parallel" and em.prange_depth == 0 and em.loop_depth == 0 and \
        not _updates_shared_state(region)
    p = em.fresh("o")
    with em.block(f"for {p} in {'prange' if parallel else 'range'}({d.length}):"):
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


@rule("loop")
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


@rule("while")
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


@rule("if")
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


@rule("break", "continue")
def _exit(em, node, args):
    kind, names, t = em.loop_stack[-1]
    with em.block(f"if {args[0].expr}:"):
        if len(args) > 1:
            em.assign_leaves(names, args[1], t)
        em.line(node.op.name)

