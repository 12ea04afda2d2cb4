"""Indexed access beyond views: gather, histogram, logical buffers, scatter_reduce (spec §13, §15).

Generic rules, slow and obvious:

- ``gather`` reads only the valid lanes (after checking their coordinates) and fills the rest;
- ``histogram`` counts the active values in int64 and wraps the counts to the count dtype;
- a ``buffer`` is a NumPy array in the environment; ``load``/``store`` are the view ``read``/``write``
  rules (same index relation, bounds checks and unique-store check);
- ``masked_read``/``masked_load`` check and read only the valid lanes and fill the rest; ``masked_write``/
  ``masked_store`` check and write only the valid lanes (whose coordinates must be distinct: a unique store;
  checked whatever ``data_indexed`` says);
  the race detector records only the valid lanes (a masked-off lane is no access);
- ``scatter_reduce`` drops its invalid lanes, then checks every coordinate first, then combines the values in a random order (the
  order of collisions is unspecified, so the reference does not pick a convenient one), one element
  at a time through the combine region, or, when the region is pointwise, in rounds that each
  combine at most one value into every destination element.
"""
from __future__ import annotations

import numpy as np

from ..codegen import checks as C
from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..graph.lowering import runtime_bins_text
from ..graph.traits import POINTWISE
from ..limits import check_allocation
from .generic_base import DomainValue, read_view, write_view
from .generic_races import COMBINE, READ, WRITE, record

RULES: dict = {}
rule = rule_registrar(RULES)


def _coordinates(name: str, index: list, extents: tuple) -> list:
    """Integer coordinate arrays (int64), after checking each against its axis extent (T9)."""
    out = []
    for axis, (c, n) in enumerate(zip(index, extents)):
        c = np.asarray(c)
        bad = (c < 0) | (c >= n)
        if np.any(bad):
            raise IndexError(f"{name}: coordinate {int(c[bad].reshape(-1)[0])} on axis {axis} is outside its extent "
                             f"{n}")
        out.append(c.astype(np.int64))
    return out


# --- gather --------------------------------------------------------------------------------------

@rule(ops.gather)
def _gather(it, node, args):
    source = args[0]
    rank = source.ndim
    index, rest = args[1:1 + rank], args[1 + rank:]
    valid = rest[0] if node.attr("has_valid") else None
    fill = rest[-1]
    shape = np.broadcast_shapes(*(np.shape(i) for i in index))
    out = np.array(np.broadcast_to(np.asarray(fill, dtype=source.dtype), shape))
    active = np.ones(shape, bool) if valid is None else np.broadcast_to(valid, shape)
    coords = _coordinates("I.gather source", [np.broadcast_to(i, shape)[active] for i in index], source.shape)
    out[active] = source[tuple(coords)]
    return out


# --- histogram -----------------------------------------------------------------------------------

@rule(ops.histogram)
def _histogram(it, node, args):
    values = np.asarray(args[0])
    bins = node.attr("bins")
    if bins is None:  # a runtime bin count (spec §13: a positive logical index), checked before anything counts
        bins = int(args[-1])
        if bins <= 0:
            raise C.HISTOGRAM_BINS.error(bins, bins=runtime_bins_text(node))
        check_allocation(f"the {bins} counts of I.histogram at {node.loc!r}", (bins,), 8)
    active = values if not node.attr("has_valid") else values[np.broadcast_to(args[1], values.shape)]
    active = active.reshape(-1)
    bad = (active < 0) | (active >= bins)
    if np.any(bad):
        raise C.HISTOGRAM_RUNTIME_BIN.error(int(active[bad][0]), bins)
    counts = np.zeros(bins, np.int64)
    np.add.at(counts, active.astype(np.int64), 1)
    return counts.astype(node.attr("type").dtype.np)  # wraps modulo 2^bits (T2)


# --- logical buffers -----------------------------------------------------------------------------

def _state(it) -> dict:
    """Per-run buffer bookkeeping: labels (for messages)."""
    state = it.__dict__.get("_buffers")
    if state is None:
        state = it.__dict__["_buffers"] = {"labels": {}}
    return state


def _extent(it, e) -> int:
    if isinstance(e, int):
        return e
    origin = e.origin
    if origin is not None and origin in it.env:  # an extent given by a runtime value (or a domain's length)
        value = it.env[origin]
        n = len(value) if isinstance(value, DomainValue) else int(value)
        it.dims[e] = max(n, 0)
        return n
    return it.dims[e]


@rule(ops.buffer)
def _buffer(it, node, args):
    t = node.attr("type")
    var = node.outputs[0]
    state = _state(it)
    label = state["labels"].get(var)
    if label is None:
        base = label = f"buffer@{node.loc!r}"
        taken = set(state["labels"].values())
        k = 1
        while label in taken:
            k += 1
            label = f"{base}#{k}"
        state["labels"][var] = label
    shape = tuple(_extent(it, e) for e in t.shape)
    for axis, n in enumerate(shape):
        if n < 0:
            raise ValueError(f"{label}: extent {n} (axis {axis}) is negative")
    dtype = t.dtype.np
    check_allocation(f"{label} (shape {shape})", shape, dtype.itemsize)
    it.views[var] = label
    it.race_depth[var] = len(it.race_frames)  # a buffer allocated in a parallel body is that point's own
    if args:
        return np.array(np.broadcast_to(np.asarray(args[0], dtype=dtype), shape))
    # No init: the contents are unspecified until stored; NaN makes a stray read of a float buffer visible.
    return np.full(shape, np.nan if t.dtype.is_float else 0, dtype=dtype)


rule(ops.load)(read_view)
rule(ops.store)(write_view)


# --- masked access --------------------------------------------------------------------------------

def _masked_lanes(it, node, array, coords, valid, shape: tuple) -> tuple:
    """(the valid lanes as a bool array of the access shape, their coordinates, their flat indices): only the valid
    lanes' coordinates are checked (an invalid lane may address anything: it touches nothing)."""
    active = np.broadcast_to(np.asarray(valid, bool), shape)
    cs = tuple(_coordinates(it.views[node.inputs[0]], [np.broadcast_to(c, shape)[active] for c in coords],
                            array.shape))
    flat = np.ravel_multi_index(cs, array.shape) if array.ndim else np.zeros(int(np.count_nonzero(active)), np.int64)
    return active, cs, flat


def _access_shape(coords, extra) -> tuple:
    return np.broadcast_shapes(*(np.shape(c) for c in coords), *(np.shape(x) for x in extra))


@rule(ops.masked_read, ops.masked_load)
def _masked_read(it, node, args):
    array, coords, valid, fill = args[0], args[1:-2], args[-2], args[-1]
    shape = _access_shape(coords, (valid, fill))
    active, cs, flat = _masked_lanes(it, node, array, coords, valid, shape)
    if it.race_frames:
        record(it, node.inputs[0], array.shape, flat, READ)
    out = np.array(np.broadcast_to(np.asarray(fill, dtype=array.dtype), shape))
    out[active] = array[cs] if cs else array[()]
    return out


@rule(ops.masked_write, ops.masked_store)
def _masked_write(it, node, args):
    array, value, coords, valid = args[0], args[1], args[2:-1], args[-1]
    view_var = node.inputs[0]
    shape = _access_shape(coords, (value, valid))
    active, cs, flat = _masked_lanes(it, node, array, coords, valid, shape)
    if len(np.unique(flat)) != flat.size:
        raise RuntimeError(f"{it.views[view_var]}: a masked store writes one element twice (its valid lanes' "
                           f"coordinates are not distinct); use scatter_reduce to combine collisions")
    if it.race_frames:
        record(it, view_var, array.shape, flat, WRITE)
    incoming = np.broadcast_to(np.asarray(value, dtype=array.dtype), shape)[active]
    if cs:
        array[cs] = incoming
    elif incoming.size:
        array[()] = incoming[0]


# --- scatter_reduce -------------------------------------------------------------------------------



def _pointwise(region) -> bool:
    return all(n.op in POINTWISE and not n.regions for n in region.nodes)


@rule(ops.scatter_reduce)
def _scatter_reduce(it, node, args):
    dest, values, *index = args
    valid = index.pop() if node.attr("has_valid") else True
    (region,) = node.regions
    name = it.views[node.inputs[0]]
    shape = np.broadcast_shapes(np.shape(values), *(np.shape(i) for i in index))
    active = np.broadcast_to(np.asarray(valid, bool), shape).reshape(-1)  # an invalid lane combines nothing
    coords = _coordinates(name, [np.broadcast_to(i, shape).reshape(-1)[active] for i in index], dest.shape)
    if it.race_frames:  # collisions combine (spec §13): only plain accesses of other points conflict
        record(it, node.inputs[0], dest.shape, np.ravel_multi_index(coords, dest.shape) if dest.ndim else
               np.zeros(min(1, int(np.count_nonzero(active))), np.int64), COMBINE)
    incoming = np.broadcast_to(values, shape).reshape(-1)[active]
    order = it.rng.permutation(incoming.size)  # collisions combine in unspecified order
    if not _pointwise(region):
        for lane in order:
            at = tuple(int(c[lane]) for c in coords)
            (dest[at],) = it.run_region(region, (np.asarray(dest[at]), np.asarray(incoming[lane])))
        return
    flat = np.ravel_multi_index(coords, dest.shape) if dest.ndim else np.zeros(incoming.size, np.int64)
    remaining = order
    while remaining.size:
        _, first = np.unique(flat[remaining], return_index=True)  # one lane per destination element
        lanes = remaining[first]
        at = tuple(c[lanes] for c in coords)
        (combined,) = it.run_region(region, (np.asarray(dest[at]), np.asarray(incoming[lanes])))
        dest[at] = combined
        remaining = np.delete(remaining, first)

