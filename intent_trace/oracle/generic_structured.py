"""Generic rules for the structured operations: reduce and scan (spec §7, §8).

Reduce folds the slices of the reduced axes in order (one valid association of an associative,
commutative combine); scan folds prefixes in source order. Combines run on whole accumulator
values, as the spec defines them, through the same interpreter walk as everything else.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.interpreter import rule_registrar
from .generic_base import leaves, rebuild
from .laws import check_reduce, check_scan

RULES: dict = {}
rule = rule_registrar(RULES)


def _slices(source, source_t: T.Type, axes: tuple):
    """Source leaves with the reduced axes moved last and flattened: (arrays (kept..., K), K)."""
    arrays = []
    for leaf in leaves(source, source_t):
        moved = np.moveaxis(leaf, axes, tuple(range(-len(axes), 0)))
        kept = moved.shape[:moved.ndim - len(axes)]
        count = int(np.prod(moved.shape[moved.ndim - len(axes):], dtype=np.int64))
        arrays.append(moved.reshape(kept + (count,)))  # explicit count: -1 is ambiguous for empty arrays
    return arrays, (arrays[0].shape[-1] if arrays else 0)


@rule(ops.reduce)
def _reduce(it, node, args):
    source, acc, *operands = args
    (acc_t,) = node.attr("types")
    (region,) = node.regions
    arrays, count = _slices(source, node.inputs[0].type, node.attr("axes"))
    items = [rebuild([np.asarray(a[..., k]) for a in arrays], acc_t) for k in range(count)]
    identity = acc
    for item in items:
        (acc,) = it.run_region(region, (acc, item, *operands))
    if it.check_laws:
        check_reduce(it, node, items, identity, operands, acc)
    return acc


@rule(ops.scan)
def _scan(it, node, args):
    source, acc, *operands = args
    source_t = node.inputs[0].type
    acc_t = node.inputs[1].type
    (region,) = node.regions
    axis, inclusive, reverse = node.attr("axis"), node.attr("inclusive"), node.attr("reverse")
    arrays, count = _slices(source, source_t, (axis,))
    outs = [np.empty_like(a) for a in arrays]
    order = range(count - 1, -1, -1) if reverse else range(count)
    if it.check_laws and not reverse:
        items = [rebuild([np.asarray(a[..., k]) for a in arrays], acc_t) for k in range(count)]
        prefixes, p = [], acc
        for item in items:
            (p,) = it.run_region(region, (p, item, *operands))
            prefixes.append(p)
        check_scan(it, node, items, acc, operands, prefixes)
    for k in order:
        item = rebuild([np.asarray(a[..., k]) for a in arrays], acc_t)
        if not inclusive:
            for o, v in zip(outs, leaves(acc, acc_t)):
                o[..., k] = v
        pair = (item, acc) if reverse else (acc, item)  # combine in source order
        (acc,) = it.run_region(region, (*pair, *operands))
        if inclusive:
            for o, v in zip(outs, leaves(acc, acc_t)):
                o[..., k] = v
    results = [np.moveaxis(o, -1, axis) for o in outs]
    return rebuild(results, source_t)
