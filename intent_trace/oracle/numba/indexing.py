"""Index arithmetic, element encodings and view access shared by the Numba rule modules.

Below every rule module (structure, memory, atomic use it): the view ``read``/``write`` rules are the
buffer ``load``/``store`` rules too, and atomics address their element through the same index plan, so
each bounds check and its message is written once.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...codegen import checks as C
from ...graph.lowering import (access_coords, covers_axis, index_add, index_mul, rereads_destination,
                               safe_point)
from ...graph.values import Literal
from ..generic_races import READ, WRITE
from .races import note, note_region
from .values import Domain, Lazy, Scalar, View

# Ops whose index operands follow a stored value (operands: view, value, index...).
_STORES = frozenset({ops.write, ops.store, ops.unique_store})


def shape_of(em, t) -> tuple:
    """A tensor type's extents as expressions."""
    return tuple(em.extent(e) for e in t.shape)


def _atom(x: str) -> str:
    return x if x.replace("_", "").isalnum() or x.startswith("(") and x.endswith(")") else f"({x})"


def int64(x: str) -> str:
    """An index operand as int64: a prange index may be typed unsigned, and uint64 with int64 is float64."""
    return x if x.isdigit() else f"np.int64({x})"


def mul(a: str, b: str) -> str:
    return index_mul(a, b, lambda x, y: f"{int64(_atom(x))} * {int64(_atom(y))}")


def add(a: str, b: str) -> str:
    return index_add(a, b, lambda x, y: f"({int64(x)} + {int64(y)})")


def coordinate(d: Domain, i: str) -> str:
    """The member of domain ``d`` at position ``i``."""
    return add(d.start, mul(i, d.step))


# f16/bf16 elements are held as float32 values: the runtime converts their bits on every load and store.
_DECODE = {"f16": "R.f16_value", "bf16": "R.bf16_value"}
_ENCODE = {"f16": "R.f16_bits", "bf16": "R.bf16_bits"}


def decode(d: T.DType, expr: str) -> str:
    """An element loaded from a caller's array as the value computed with (f16/bf16 bits -> float32)."""
    fn = _DECODE.get(d.name)
    return f"{fn}({expr})" if fn else expr


def encode(d: T.DType, expr: str) -> str:
    """A computed value as the element stored (float32 -> f16/bf16 bits)."""
    fn = _ENCODE.get(d.name)
    return f"{fn}({expr})" if fn else expr


def index_plan(em, node, view: View, entries):
    """Hoisted bounds checks; returns (result shape, per-entry plan) for a read or write."""
    kinds = node.attr("index")
    view_t = node.inputs[0].type
    operand_vars = [x for x in node.inputs[2 if node.op in _STORES else 1:]]
    ops_iter = iter(zip(entries, operand_vars))
    shape, plan = [], []
    for axis, kind in enumerate(kinds):
        n = view.shape[axis]
        site = C.VIEW_COORDINATE.site(axis=axis, view=view.label)
        if kind == "all":
            shape.append(n)
            plan.append(("all", None))
            continue
        value, var = next(ops_iter)
        if kind == "domain":
            if not covers_axis(value, var, view_t.shape[axis]):
                last = coordinate(value, f"({value.length} - 1)")
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


def coords(em, plan, idx) -> list:
    def data_coord(info, element_idx):
        value, _, site, n = info
        c = em.assign(f"np.int64({em.elem(value, element_idx)})", "c")
        em.check(f"{c} < 0 or {c} >= {n}", site, c, n)
        return c

    return access_coords(plan, idx, coordinate, data_coord)


def read_view(em, node, args):
    """The ``read`` rule (and buffer ``load``): a scalar local, or a fused element expression."""
    view, entries = args[0], args[1:]
    shape, plan = index_plan(em, node, view, entries)
    note_region(em, node.inputs[0], view, shape, lambda idx: coords(em, plan, idx), READ)  # race check
    d = view.dtype
    if not shape:
        return Scalar(em.assign(decode(d, f"{view.name}[{', '.join(coords(em, plan, [])) or '()'}]")))

    def elem(idx):
        return em.assign(decode(d, f"{view.name}[{', '.join(coords(em, plan, idx))}]"), "t")

    return Lazy(shape, elem)


def write_view(em, node, args):
    """The ``write``/``unique_store`` rule (and buffer ``store``): one loop nest; a data-indexed store checks
    injectivity with a mask of written elements."""
    view, value, entries = args[0], args[1], args[2:]
    if isinstance(value, Lazy) and rereads_destination(node, em.reads, em.aligned):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the write would change what it reads
    shape, plan = index_plan(em, node, view, entries)
    has_tensor = any(k == "tensor" for k, _ in plan)
    mask = None
    if has_tensor and em.checks:
        mask = em.allocate(view.shape, "np.bool_", f"the written-element mask of a unique store to {view.label}",
                           fill="False", prefix="m")
    with em.loop_nest(shape, parallel=not has_tensor) as idx:
        v = em.elem(value, idx)
        element = coords(em, plan, idx)
        note(em, node.inputs[0], view, element, WRITE)  # race check
        cs = ", ".join(element) or "()"
        if mask is not None:
            em.check(f"{mask}[{cs}]", C.UNIQUE_STORE_TWICE, view=view.label)
            em.line(f"{mask}[{cs}] = True")
        em.line(f"{view.name}[{cs}] = {encode(view.dtype, v)}")
