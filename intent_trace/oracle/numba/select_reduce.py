"""Floating max/min reductions as integer max/min over order keys, so that LLVM vectorises them (issue 19).

A reduce whose combine is the float ``maximum`` (or ``minimum``) of its two parameters runs, in the emitter's
general form, as eight scalar accumulators of :func:`runtime.fmax` selects. Numba leaves LLVM's SLP vectoriser
off (it miscompiled), and the loop vectoriser recognises a float max reduction only under fast-math flags, so
that loop stays scalar: 4 ms for the row maxima of a 4096 x 1024 float32 softmax, NumPy's ``max`` 0.55 ms.

Without NaNs, IEEE 754-2019 maximum is the maximum of a total order (-0 < +0), so every association and order
of the combine gives the same value: the reduction is exactly the integer maximum of the order keys
(:func:`runtime.order_key32`: the bits, the magnitude bits flipped for negative values), which LLVM vectorises
(a signed integer max reduction needs no reassociation licence). NaN is the one case where the order matters:
the combine returns the first NaN, payload included. So the keyed loop also tracks the largest magnitude bits;
when it finds a NaN (or the identity is one) the combine runs again in source order from the identity, as the
generic interpreter folds, and returns the first NaN in source order. Every result is the generic
interpreter's, bit for bit; a row with a NaN is read twice.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops

_SELECTS = {ops.maximum: "R.max2", ops.minimum: "R.min2"}  # (minmax.py: no compile of their own)
# dtype width -> (key helper, helper back from a key, magnitude-bits helper, magnitude bits of +inf)
_HELPERS = {32: ("R.order_key32", "R.from_order_key32", "R.magnitude32", 0x7F800000),
            64: ("R.order_key64", "R.from_order_key64", "R.magnitude64", 0x7FF0000000000000)}


def keyed_select(node):
    """``"R.max2"``/``"R.min2"`` (the integer max/min of the keys) when ``node`` (a reduce) combines one floating leaf by that op of its two parameters
    and nothing else, over one axis; else None."""
    (region,) = node.regions
    if len(region.nodes) != 1 or len(node.attr("axes")) != 1 or len(node.inputs) != 2:
        return None
    (inner,) = region.nodes
    which = _SELECTS.get(inner.op)
    leaves = T.leaf_types(node.attr("types")[0])
    if which is None or len(leaves) != 1 or not leaves[0].dtype.is_float:
        return None
    if len(region.params) != 2 or len(inner.inputs) != 2 or set(inner.inputs) != set(region.params):
        return None
    if tuple(region.results) != tuple(inner.outputs):
        return None
    return which


def _width(node) -> int:
    (leaf,) = T.leaf_types(node.attr("types")[0])
    return 64 if leaf.dtype.name == "f64" else 32  # f16/bf16 values are held as float32


def keyed_reduction(em, node, acc: str, count: str, element, step) -> None:
    """Reduce a :func:`keyed_select` reduce into the local ``acc`` (the identity on entry): the keyed loop over
    ``count`` positions (``element(k)`` emits position ``k``'s value and returns its expression), then, only
    where it met a NaN, the combine in source order (``step(k)`` emits ``acc = combine(acc, element k)``);
    otherwise ``acc`` becomes the value of the largest (smallest) key."""
    which = keyed_select(node)
    key, unkey, magnitude, inf_bits = _HELPERS[_width(node)]
    best = em.assign(f"{key}({acc})", "q")
    worst_magnitude = em.assign(f"{magnitude}({acc})", "q")
    k = em.fresh("k")
    with em.block(f"for {k} in range({count}):"):
        x = element(k)
        em.line(f"{best} = {which}({best}, {key}({x}))")
        em.line(f"{worst_magnitude} = R.max2({worst_magnitude}, {magnitude}({x}))")
    with em.block(f"if {worst_magnitude} > {inf_bits:#x}:"):  # a NaN: the first one in source order
        k = em.fresh("k")
        with em.block(f"for {k} in range({count}):"):
            step(k)
    with em.block("else:"):
        em.line(f"{acc} = {unkey}({best})")
