"""TileLang rules for indexed access beyond views: gather, histogram, logical buffers, scatter_reduce (§13, §15).

- ``gather`` is lazy: per result element, the index elements become int64 coordinates, checked and read
  for a valid lane (``IndexError`` naming ``I.gather source``, the axis, the coordinate and the extent);
  an invalid lane takes the fill and reads nothing (its read sits in the branch that is not taken). A source
  that is costly to recompute is snapshotted once, since a gather reads it at arbitrary coordinates.
- ``histogram`` counts the active values into an int64 buffer in one serial pass (an active value outside
  ``[0, bins)`` is cpu's ``ValueError``); the counts wrap to the count dtype (T2).
- a ``buffer`` is a local buffer (.storage: the stack or the heap; one per iteration when allocated in a loop
  body) filled from its init; f16/bf16 elements are held as the float values they are everywhere else, so
  loads and stores convert nothing. ``load``/``store`` are the view ``read``/``write`` rules (structure.py),
  with the same checks (a runtime extent that is negative is cpu's ``ValueError``).
- ``masked_read``/``masked_load`` are lazy: per element, the read (and its coordinates' checks) sits in the
  branch of a valid lane, the fill in the other (``if valid: x = a[i]``); ``masked_write``/``masked_store`` are a
  loop over the access shape whose valid lanes are checked and written (with checks and a data coordinate, a mask
  of written elements checks that they are distinct, as a unique store's).
- ``scatter_reduce`` is a serial loop over the index shape (its valid lanes) that inlines the combine region per element (any
  region, with control flow: the order of collisions is unspecified, program order is one valid order).

And the run-time half of an extent equality the kernel states (``assume_equal``, not an access: it is here so that
the rule modules stay the ones :mod:`.rules` composes): the two values compared where the node stands.
"""
from __future__ import annotations

import contextlib

from ... import types as T
from ...codegen import checks as C
from ...graph.lowering import broadcast_index, extent_value, runtime_bins_text
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Lazy, Scalar, View, as_index
from .scalar_rules import cast_expr
from .views import decode, encode
from .accumulate import combine

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)

# Producers whose elements are cheap to recompute at arbitrary coordinates (a gather source stays lazy).
_CHEAP = frozenset({ops.read, ops.load, ops.broadcast, ops.full, ops.indices, ops.slice, ops.transpose, ops.reshape,
                    ops.cast})


@rule(ops.assume_equal)
def _assume_equal(em, node, args):
    a, b = (em.assign(as_index(x.expr), "n") for x in args)
    em.check(f"{a} != {b}", C.EXTENT_EQUAL, a, b, lhs=node.attr("lhs"), rhs=node.attr("rhs"))
    return Scalar(a)


def at(em, value, t: T.Type, idx: list, out: T.Type) -> str:
    """The element of ``value`` (of type ``t``) that broadcasts (right-aligned) to index ``idx`` of ``out``."""
    if isinstance(value, Scalar) or not isinstance(t, T.TensorType):
        return value.expr
    return em.elem(value, broadcast_index(t.shape, out.shape, idx))


def _producer(em, var):
    table = em.__dict__.get("_producers")
    if table is None:
        table = em.__dict__["_producers"] = {v: n.op for n in em.graph.walk() for v in n.outputs}
    return table.get(var)


# --- gather --------------------------------------------------------------------------------------

@rule(ops.gather)
def _gather(em, node, args):
    src_t = node.inputs[0].type
    source = args[0]
    if isinstance(source, Lazy) and _producer(em, node.inputs[0]) not in _CHEAP:
        source = em.materialize(source, src_t)
    rank = src_t.rank
    src_shape = em.shape(src_t)
    index, rest = args[1:1 + rank], args[1 + rank:]
    index_vars = node.inputs[1:1 + rank]
    valid = (rest[0], node.inputs[1 + rank]) if node.attr("has_valid") else None
    fill, fill_var = rest[-1], node.inputs[-1]
    out_t = node.attr("type")

    def read(idx) -> str:
        coords = []
        for axis, (ix, x, n) in enumerate(zip(index, index_vars, src_shape)):
            c = em.assign(as_index(at(em, ix, x.type, idx, out_t)), "j")
            em.check(f"{c} < T.int64(0) or {c} >= {as_index(n)}", IndexError,
                     f"I.gather source: coordinate {{0}} on axis {axis} is outside its extent {{1}}", c, as_index(n))
            coords.append(c)
        return em.elem(source, coords)

    def elem(idx):
        if valid is None:
            return em.assign(read(idx), "t")
        ok = at(em, valid[0], valid[1].type, idx, out_t)
        r = em.fresh("g")
        em.line(f"{r} = T.alloc_var({em.tir(out_t.dtype)!r})")
        with em.block(f"if {ok}:"):
            em.line(f"{r} = {read(idx)}")
        with em.block("else:"):
            em.line(f"{r} = {at(em, fill, fill_var.type, idx, out_t)}")
        return em.assign(r, "t")

    return Lazy(em.shape(out_t), elem)


# --- histogram -----------------------------------------------------------------------------------

@rule(ops.histogram)
def _histogram(em, node, args):
    values, vt = args[0], node.inputs[0].type
    valid = (args[1], node.inputs[1]) if node.attr("has_valid") else None
    bins = node.attr("bins")
    count = node.attr("type").dtype
    if bins is None:  # a runtime bin count: positive (checked before anything counts), the result's extent
        given = em.assign(as_index(args[-1].expr), "n")
        em.check(f"{given} <= T.int64(0)", C.HISTOGRAM_BINS, given, bins=runtime_bins_text(node))
        bins = em.extent(node.attr("type").shape[0])
        site, operands = C.HISTOGRAM_RUNTIME_BIN, (bins,)
    else:
        site, operands = C.HISTOGRAM_BIN, ()
    counts = em.allocate((str(bins),), "int64", zero=True)
    with em.loop_nest(em.shape(vt)) as idx:
        active = em.block(f"if {at(em, valid[0], valid[1].type, idx, vt)}:") if valid is not None else \
            contextlib.nullcontext()
        with active:
            x = em.assign(as_index(em.elem(values, idx)), "x")
            inside = f"{x} >= T.int64(0) and {x} < {as_index(str(bins))}"
            fields = {} if operands else {"bins": bins}
            em.check(f"not ({inside})", site, x, *operands, **fields)
            with em.block(f"if {inside}:") if not em.checks else contextlib.nullcontext():
                em.line(f"{counts}[{x}] = {counts}[{x}] + T.int64(1)")
    return Lazy((str(bins),), lambda idx: em.assign(cast_expr(em, T.i64, count, f"{counts}[{idx[0]}]"), "t"))


# --- logical buffers -----------------------------------------------------------------------------

def _buffer_extent(em, e, label: str, axis: int) -> str:
    value = extent_value(e, em.env, Scalar)
    if value is None:
        return em.extent(e)
    n = em.assign(as_index(value.expr), "n")  # an extent given by a runtime value: negative is an error
    em.check(f"{n} < T.int64(0)", ValueError, f"{{view}}: extent {{0}} (axis {axis}) is negative", n, view=label)
    n = em.assign(f"T.max(T.int64(0), {n})", "n")
    em.sized_by(n, value.expr)
    em.dim_names.setdefault(e, n)
    return n


@rule(ops.buffer)
def _buffer(em, node, args):
    t = node.attr("type")
    label = f"buffer@{node.loc!r}"
    shape = tuple(_buffer_extent(em, e, label, k) for k, e in enumerate(t.shape))
    name = em.allocate(shape, em.tir(t.dtype))
    if args:
        init, init_t = args[0], node.inputs[0].type
        with em.loop_nest(shape) as idx:
            em.line(f"{name}[{', '.join(idx) or '0'}] = {at(em, init, init_t, idx, t)}")
    held = T.f32 if t.dtype.name in ("f16", "bf16") else t.dtype  # held as floats: no bit conversion
    return View(name, shape, held, label, rank0=not shape)


# load and store are the view rules (structure._read, structure._write).


# --- masked access --------------------------------------------------------------------------------

def _masked_cell(em, view: View, coords, idx) -> str:
    """The element of the access at ``idx`` (inside the branch of a valid lane): its coordinates as int64, each
    bounds-checked (cpu's IndexError naming the target, the axis, the coordinate and the extent)."""
    cs = []
    for axis, ix in enumerate(coords):
        n = as_index(view.shape[axis])
        c = em.assign(as_index(em.elem(ix, idx)), "j")
        em.check(f"{c} < T.int64(0) or {c} >= {n}", IndexError,
                 f"{{view}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}", c, n, view=view.label)
        cs.append(c)
    return f"{view.name}[{', '.join(cs) if not view.rank0 else '0'}]"


@rule(ops.masked_read, ops.masked_load)
def _masked_read(em, node, args):
    view, coords, valid, fill = args[0], args[1:-2], args[-2], args[-1]
    out_t = node.outputs[0].type

    def elem(idx):
        r = em.fresh("g")
        em.line(f"{r} = T.alloc_var({em.tir(out_t.dtype)!r})")
        with em.block(f"if {em.elem(valid, idx)}:"):  # an invalid lane reads nothing and checks nothing
            em.line(f"{r} = {decode(em, view, _masked_cell(em, view, coords, idx))}")
        with em.block("else:"):
            em.line(f"{r} = {em.elem(fill, idx)}")
        return em.assign(r, "t")

    if isinstance(out_t, T.TensorType):
        return Lazy(em.shape(out_t), elem)
    return Scalar(elem([]))


@rule(ops.masked_write, ops.masked_store)
def _masked_write(em, node, args):
    view, value, coords, valid = args[0], args[1], args[2:-1], args[-1]
    if isinstance(value, Lazy) and node.inputs[0] in em.reads.get(node.inputs[1], ()):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the store would change what it reads
    vt = node.inputs[1].type
    # Data coordinates (data_indexed): with checks, a mask of the elements written so far (the lanes are distinct).
    mask = em.allocate(view.shape, "uint8", zero=True) if em.checks and node.attr("data_indexed") else None
    with em.loop_nest(em.shape(vt) if isinstance(vt, T.TensorType) else ()) as idx:
        with em.block(f"if {em.elem(valid, idx)}:"):  # an invalid lane writes nothing and checks nothing
            v = em.assign(em.elem(value, idx), "x")  # first: the reads the value makes are checked before the store
            cell = _masked_cell(em, view, coords, idx)
            if mask is not None:
                at = f"{mask}{cell[len(view.name):]}"
                em.check(f"{at} != T.uint8(0)", RuntimeError,
                         "{view}: a masked store writes one element twice (its valid lanes' coordinates are not "
                         "distinct); use scatter_reduce to combine collisions", view=view.label)
                em.line(f"{at} = T.uint8(1)")
            em.line(f"{cell} = {encode(em, view, v)}")


# --- scatter_reduce -------------------------------------------------------------------------------

@rule(ops.scatter_reduce)
def _scatter_reduce(em, node, args):
    dest, *operands = args
    dvar = node.inputs[0]
    # Values and indices are read while the destination changes: a lazy operand that reads it is snapshotted.
    values, *index = (em.materialize(v, x.type) if isinstance(v, Lazy) and dvar in em.reads.get(x, ()) else v
                      for v, x in zip(operands, node.inputs[1:]))
    valid = (index.pop(), node.inputs[-1]) if node.attr("has_valid") else None
    elem_t = T.ScalarType(node.inputs[1].type.dtype)
    out_t = node.attr("type")
    with em.loop_nest(em.shape(out_t)) as idx, \
            em.block(f"if {at(em, valid[0], valid[1].type, idx, out_t)}:") if valid else contextlib.nullcontext():
        coords = []
        for axis, (ix, x) in enumerate(zip(index, node.inputs[2:])):
            n = as_index(dest.shape[axis])
            c = em.assign(as_index(at(em, ix, x.type, idx, out_t)), "j")
            em.check(f"{c} < T.int64(0) or {c} >= {n}", IndexError,
                     f"{{view}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}", c, n, view=dest.label)
            coords.append(c)
        cell = f"{dest.name}[{', '.join(coords) if not dest.rank0 else '0'}]"
        old = em.assign(decode(em, dest, cell), "x")
        new = em.assign(at(em, values, node.inputs[1].type, idx, out_t), "x")
        (combined,) = combine(em, node, elem_t, [old], [new], [], idx)
        em.line(f"{cell} = {encode(em, dest, combined)}")
