"""Indexed access beyond views: gather, histogram, logical buffers, scatter_reduce (spec §13, §15).

Numba rules:

- ``gather`` is a fused element expression: per result element, the index elements become int64
  coordinates, valid lanes are bounds-checked and read, invalid lanes take the fill (and read nothing);
- ``histogram`` counts active values into an int64 array in one serial pass (an active value outside
  ``[0, bins)`` is a ``ValueError`` with checks on), then converts the counts to the count dtype (T2 wrap);
- a ``buffer`` is a local array (``np.empty``/``np.full``, or filled from its init); f16/bf16 elements
  are held as float32 values, so loads and stores need no bit conversion. ``load``/``store`` are the view
  ``read``/``write`` rules on that array; a buffer allocated in a loop body is allocated per iteration;
- ``masked_read``/``masked_load`` are fused element expressions whose read (its coordinates' checks and its
  race record) sits in the branch of a valid lane, the fill in the other; ``masked_write``/``masked_store``
  are a loop over the access shape that checks, records and writes only the valid lanes (serial when a
  coordinate is data, ``data_indexed``: then a mask of written elements checks that they are distinct, with
  checks on);
- ``scatter_reduce`` is a serial loop over the index shape (its valid lanes) that inlines the combine region per
  element. A ``parallel`` body that scatters into a destination it does not allocate runs serially
  (the ``parallel`` rule of :mod:`.structure`): its read-modify-write combines would race across threads.

And the run-time half of an extent equality the kernel states (``assume_equal``, not an access: it is here so that
the rule modules stay the ones :mod:`.emitter` composes): the two values compared where the node stands.
"""
from __future__ import annotations

import contextlib

from ... import types as T
from ...codegen import checks as C
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.lowering import ErrorSite, extent_value, runtime_bins_text
from .base import shape_text
from .indexing import decode, encode, read_view, write_view
from ..generic_races import COMBINE, READ, WRITE
from .inline import inline_combine
from .races import note
from .scalar_rules import NARROW, cast_expr, np_type
from .values import Array, Lazy, Scalar, View

RULES: dict = {}
rule = rule_registrar(RULES)


# --- assume_equal --------------------------------------------------------------------------------

@rule(ops.assume_equal)
def _assume_equal(em, node, args):
    a, b = (em.assign(f"np.int64({x.expr})", "n") for x in args)
    em.check(f"{a} != {b}", C.EXTENT_EQUAL, a, b, lhs=node.attr("lhs"), rhs=node.attr("rhs"))
    return Scalar(a)


# --- gather --------------------------------------------------------------------------------------

@rule(ops.gather)
def _gather(em, node, args):
    src_t = node.inputs[0].type
    source = em.materialize(args[0], src_t)  # read at arbitrary coordinates: an array
    rank = src_t.rank
    index, rest = args[1:1 + rank], args[1 + rank:]
    valid = rest[0] if node.attr("has_valid") else None
    fill = rest[-1]
    extents = [f"{source.name}.shape[{k}]" for k in range(rank)]
    shape = tuple(em.extent(e) for e in node.attr("type").shape)

    def elem(idx):
        ok = em.elem(valid, idx) if valid is not None else None
        coords = []
        for axis, (ix, n) in enumerate(zip(index, extents)):
            c = em.assign(f"np.int64({em.elem(ix, idx)})", "c")
            bad = f"{c} < 0 or {c} >= {n}"
            em.check(bad if ok is None else f"{ok} and ({bad})",
                     ErrorSite(IndexError, f"I.gather source: coordinate {{0}} on axis {axis} is outside its extent "
                                           f"{{1}}"), c, n)
            coords.append(c)
        read = f"{source.name}[{', '.join(coords)}]"
        if ok is None:
            return em.assign(read, "t")
        f = em.elem(fill, idx)
        return em.assign(f"{read} if {ok} else {f}", "t")

    return Lazy(shape, elem)


# --- histogram -----------------------------------------------------------------------------------

@rule(ops.histogram)
def _histogram(em, node, args):
    values = args[0]
    valid = args[1] if node.attr("has_valid") else None
    bins = node.attr("bins")
    count = node.attr("type").dtype
    vshape = tuple(em.extent(e) for e in node.inputs[0].type.shape)
    if bins is None:  # a runtime bin count: positive (checked before anything counts), the result's extent
        given = em.assign(f"np.int64({args[-1].expr})", "n")
        em.check(f"{given} <= 0", C.HISTOGRAM_BINS, given, bins=runtime_bins_text(node))
        bins = em.extent(node.attr("type").shape[0])
        site, operands = C.HISTOGRAM_RUNTIME_BIN.site(), (bins,)
    else:
        site, operands = C.HISTOGRAM_BIN.site(bins=bins), ()
    counts = em.allocate((str(bins),), "np.int64", f"the {bins} counts of `histogram`", fill="0")
    with em.loop_nest(vshape, parallel=False) as idx:
        with em.block(f"if {em.elem(valid, idx)}:") if valid is not None else contextlib.nullcontext():
            x = em.assign(f"np.int64({em.elem(values, idx)})", "x")
            em.check(f"{x} < 0 or {x} >= {bins}", site, x, *operands)
            em.line(f"{counts}[{x}] += 1")
    if count.kind == "int" and count.bits == 64:
        return Array(counts, (str(bins),))
    return Lazy((str(bins),), lambda idx: em.assign(cast_expr(T.i64, count, f"{counts}[{idx[0]}]"), "t"))


# --- logical buffers -----------------------------------------------------------------------------

def _buffer_extent(em, e, label: str, axis: int) -> str:
    value = extent_value(e, em.env, Scalar)
    if value is None:
        return em.extent(e)
    n = em.assign(f"np.int64({value.expr})", "n")  # an extent given by a runtime value: negative is an error
    em.check(f"{n} < 0", ErrorSite(ValueError, f"{{label}}: extent {{0}} (axis {axis}) is negative", label=label), n)
    return n


@rule(ops.buffer)
def _buffer(em, node, args):
    t = node.attr("type")
    label = f"buffer@{node.loc!r}"
    shape = tuple(_buffer_extent(em, e, label, k) for k, e in enumerate(t.shape))
    dtype = np_type(t.dtype)
    init = args[0] if args else None
    what = f"{label} of shape {shape_text(t)}"
    name = em.allocate(shape, dtype, what, fill=init.expr if isinstance(init, Scalar) else None, prefix="b")
    if init is not None and not isinstance(init, Scalar):
        with em.loop_nest(shape, parallel=True) as idx:
            em.line(f"{name}[{', '.join(idx)}] = {em.elem(init, idx)}")
    held = T.f32 if t.dtype.name in NARROW else t.dtype  # f16/bf16 elements are float32 values here
    return View(name, tuple(f"{name}.shape[{k}]" for k in range(t.rank)), held, label)


rule(ops.load)(read_view)


rule(ops.store)(write_view)


# --- masked access --------------------------------------------------------------------------------

def _masked_element(em, node, view: View, coords, idx, kind: int) -> str:
    """The element expression of the access at ``idx`` (inside the branch of a valid lane): its coordinates as
    int64, each bounds-checked, and the race record of the element."""
    cs = []
    for axis, ix in enumerate(coords):
        n = view.shape[axis]
        c = em.assign(f"np.int64({em.elem(ix, idx)})", "c")
        em.check(f"{c} < 0 or {c} >= {n}",
                 ErrorSite(IndexError, f"{{label}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}",
                           label=view.label), c, n)
        cs.append(c)
    note(em, node.inputs[0], view, cs, kind)  # race check: only a valid lane accesses the element
    return f"{view.name}[{', '.join(cs) or '()'}]"


@rule(ops.masked_read, ops.masked_load)
def _masked_read(em, node, args):
    view, coords, valid, fill = args[0], args[1:-2], args[-2], args[-1]
    out_t = node.outputs[0].type
    shape = tuple(em.extent(e) for e in out_t.shape) if isinstance(out_t, T.TensorType) else ()

    def elem(idx):
        r = em.fresh("t")
        with em.block(f"if {em.elem(valid, idx)}:"):  # an invalid lane reads nothing and checks nothing
            em.line(f"{r} = {decode(view.dtype, _masked_element(em, node, view, coords, idx, READ))}")
        with em.block("else:"):
            em.line(f"{r} = {em.elem(fill, idx)}")
        return r

    return Lazy(shape, elem) if shape else Scalar(elem([]))


@rule(ops.masked_write, ops.masked_store)
def _masked_write(em, node, args):
    view, value, coords, valid = args[0], args[1], args[2:-1], args[-1]
    dvar = node.inputs[0]
    if isinstance(value, Lazy) and dvar in em.reads.get(node.inputs[1], ()):
        value = em.materialize(value, node.inputs[1].type)  # a snapshot: the store would change what it reads
    vt = node.inputs[1].type
    shape = tuple(em.extent(e) for e in vt.shape) if isinstance(vt, T.TensorType) else ()
    data = bool(node.attr("data_indexed"))  # else domains, points and whole axes: distinct lanes, distinct elements
    mask = None
    if em.checks and data:
        mask = em.allocate(view.shape, "np.bool_", f"the written-element mask of a masked store to {view.label}",
                           fill="False", prefix="m")
    with em.loop_nest(shape, parallel=not data) as idx:
        with em.block(f"if {em.elem(valid, idx)}:"):  # an invalid lane writes nothing and checks nothing
            v = em.assign(em.elem(value, idx), "x")  # first: the reads the value makes are checked before the store
            at = _masked_element(em, node, view, coords, idx, WRITE)
            if mask is not None:
                cell = f"{mask}{at[len(view.name):]}"
                em.check(cell, ErrorSite(RuntimeError, "{label}: a masked store writes one element twice (its valid "
                                                       "lanes' coordinates are not distinct); use scatter_reduce to "
                                                       "combine collisions", label=view.label))
                em.line(f"{cell} = True")
            em.line(f"{at} = {encode(view.dtype, v)}")


# --- scatter_reduce -------------------------------------------------------------------------------

@rule(ops.scatter_reduce)
def _scatter_reduce(em, node, args):
    dest, *operands = args
    dvar = node.inputs[0]
    # Values and indices are read while the destination changes: a fused operand that reads the
    # destination must be snapshot first.
    values, *index = (em.materialize(v, x.type) if isinstance(v, Lazy) and dvar in em.reads.get(x, ()) else v
                      for v, x in zip(operands, node.inputs[1:]))
    valid = index.pop() if node.attr("has_valid") else None
    elem_t = T.ScalarType(node.inputs[1].type.dtype)
    shape = tuple(em.extent(e) for e in node.attr("type").shape)
    with em.loop_nest(shape, parallel=False) as idx, \
            em.block(f"if {em.elem(valid, idx)}:") if valid is not None else contextlib.nullcontext():
        coords = []
        for axis, ix in enumerate(index):
            n = dest.shape[axis]
            c = em.assign(f"np.int64({em.elem(ix, idx)})", "c")
            em.check(f"{c} < 0 or {c} >= {n}",
                     ErrorSite(IndexError, f"{{label}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}",
                               label=dest.label), c, n)
            coords.append(c)
        note(em, dvar, dest, coords, COMBINE)  # race check
        at = f"{dest.name}[{', '.join(coords)}]"
        old = em.assign(decode(dest.dtype, at), "x")
        new = em.assign(em.elem(values, idx), "x")
        (combined,) = inline_combine(em, node, elem_t, [old], [new], [], idx)
        em.line(f"{at} = {encode(dest.dtype, combined)}")
