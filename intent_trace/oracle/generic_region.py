"""Generic rules for region_fold and region_scan (spec §9).

Generic picks a random segmentation on every run (seeded per executable) and combines summaries
under a random parenthesization, so any helper that breaks the §9 laws shows up as results that
change from run to run (and ``check_laws=True`` names it).
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.interpreter import rule_registrar
from .generic_base import leaves, rebuild
from .laws import check_region

RULES: dict = {}
rule = rule_registrar(RULES)


def segmentation(rng, n: int) -> list:
    """Random contiguous, non-empty, order-preserving slices covering [0, n)."""
    if n == 0:
        return []
    cuts = rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 5))), replace=False) if n > 1 else []
    bounds = [0, *sorted(int(c) for c in cuts), n]
    return list(zip(bounds[:-1], bounds[1:]))


def tree_fold(it, region, values: list, identity):
    """Combine summaries in order under a random parenthesization."""
    if not values:
        return identity
    if len(values) == 1:
        return values[0]
    cut = int(it.rng.integers(1, len(values)))
    left = tree_fold(it, region, values[:cut], identity)
    right = tree_fold(it, region, values[cut:], identity)
    (out,) = it.run_region(region, (left, right))
    return out


def _slices(it, node, region, source, start: int, stop: int):
    axis = node.attr("axis")
    parts = [np.take(leaf, np.arange(start, stop), axis=axis) for leaf in leaves(source, node.inputs[0].type)]
    slice_dim = region.params[0].type.shape[axis]
    it.dims[slice_dim] = stop - start
    return parts


def _extent(node, source) -> int:
    return leaves(source, node.inputs[0].type)[0].shape[node.attr("axis")]


def _checked(fn):
    """With check_laws, run once more under a fresh segmentation and compare (oracle.laws)."""
    def rule_fn(it, node, args):
        result = fn(it, node, args)
        if it.check_laws:
            types = node.attr("types")
            t = types[0] if len(types) == 1 else T.TupleType(types)
            check_region(it, node, lambda: fn(it, node, args), result, t)
        return result
    return rule_fn


@rule(ops.region_fold)
@_checked
def _region_fold(it, node, args):
    source, identity, *operands = args
    summarize, combine = node.regions
    summaries = []
    for start, stop in segmentation(it.rng, _extent(node, source)):
        (s,) = it.run_region(summarize, (*_slices(it, node, summarize, source, start, stop), *operands))
        summaries.append(s)
    return tree_fold(it, combine, summaries, identity)


@rule(ops.region_scan)
@_checked
def _region_scan(it, node, args):
    source, identity, initial, *operands = args
    summarize, combine, apply, emit = node.regions
    axis = node.attr("axis")
    out_t, _ = node.attr("types")
    n = _extent(node, source)
    segments = segmentation(it.rng, n) or [(0, 0)]  # an empty source still gives correctly shaped outputs
    prefix, pieces = identity, []
    for start, stop in segments:
        slices = _slices(it, node, summarize, source, start, stop)
        (incoming,) = it.run_region(apply, (prefix, initial))
        (out,) = it.run_region(emit, (*slices, incoming, *operands))
        pieces.append(leaves(out, out_t))
        if stop > start:
            (s,) = it.run_region(summarize, (*slices, *operands))
            (prefix,) = it.run_region(combine, (prefix, s))
    (final,) = it.run_region(apply, (prefix, initial))
    outputs = [np.concatenate([p[k] for p in pieces], axis=axis) for k in range(len(pieces[0]))]
    return rebuild(outputs, out_t), final
