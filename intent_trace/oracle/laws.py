"""The law checker: ``intent.compile(k, target="generic", check_laws=True)``.

reduce, scan and region fold/scan let the compiler re-associate (and, for reduce, re-order) an
author's combine; a combine that is not associative, commutative or neutral under its identity
then gives results that depend on the compiler's choices. With ``check_laws=True`` the generic
interpreter re-evaluates each such operation under other associations, orders and segmentations
and, when results differ beyond the T5 bound, raises :class:`LawViolation` naming the helper, the
law, and the smallest counterexample it finds among the operation's own inputs.
"""
from __future__ import annotations

import numpy as np

from ..errors import LawViolation
from ..graph import ops
from .generic_base import leaves, rebuild

_U = {2: 2.0 ** -11, 4: 2.0 ** -24, 8: 2.0 ** -53}  # unit roundoff by float itemsize (f16/bf16 use f32)


def _close(a_leaves, b_leaves, count: int, scale: float) -> bool:
    for a, b in zip(a_leaves, b_leaves):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind != "f" and a.dtype.kind != "V" and str(a.dtype) not in ("bfloat16",):
            if not np.array_equal(a, b):
                return False
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(a64) & np.isnan(b64)
        u = _U.get(a.dtype.itemsize, 2.0 ** -24)
        n = max(count, 2)
        gamma = n * u / (1 - n * u) if n * u < 1 else np.inf
        tol = 2 * gamma * n * scale + np.finfo(np.float64).tiny
        same_inf = np.isinf(a64) & (a64 == b64)
        ok = both_nan | same_inf | (np.abs(a64 - b64) <= tol)
        if not np.all(ok):
            return False
    return True


def _scale(values) -> float:
    finite = [np.abs(np.asarray(v, dtype=np.float64)) for v in values
              if np.asarray(v).dtype.kind in "fiu" or str(np.asarray(v).dtype) == "bfloat16"]
    finite = [f[np.isfinite(f)] for f in finite]
    return max([float(f.max()) for f in finite if f.size] + [1e-300])


def _fmt(value) -> str:
    return np.array2string(np.asarray(value), precision=9, threshold=8) if not isinstance(value, tuple) \
        else "(" + ", ".join(_fmt(v) for v in value) + ")"


def _violation(node, helper: str, law: str, example: str, rule: str):
    raise LawViolation(f"{node.op.name} helper `{helper}` breaks {law}: {example}; {rule} "
                       f"(at {node.loc!r})")


def _counterexample(it, node, region, items, identity, acc_t, operands, commutative: bool, helper: str, rule: str):
    def comb(a, b):
        (r,) = it.run_region(region, (a, b, *operands))
        return r

    def same(a, b, count=3):
        return _close(leaves(a, acc_t), leaves(b, acc_t), count, _scale(leaves(a, acc_t) + leaves(b, acc_t)))

    for x in items[:4]:
        if not same(comb(identity, x), x) or not same(comb(x, identity), x):
            _violation(node, helper, "the identity law combine(identity, x) == x == combine(x, identity)",
                       f"identity = {_fmt(identity)}, x = {_fmt(x)}, combine(identity, x) = {_fmt(comb(identity, x))}",
                       rule)
    for i in range(min(len(items) - 1, 4)):
        a, b = items[i], items[i + 1]
        if commutative and not same(comb(a, b), comb(b, a)):
            _violation(node, helper, "commutativity combine(a, b) == combine(b, a)",
                       f"a = {_fmt(a)}, b = {_fmt(b)}: {_fmt(comb(a, b))} vs {_fmt(comb(b, a))}", rule)
    for i in range(min(len(items) - 2, 4)):
        a, b, c = items[i:i + 3]
        left, right = comb(comb(a, b), c), comb(a, comb(b, c))
        if not same(left, right):
            _violation(node, helper, "associativity combine(combine(a, b), c) == combine(a, combine(b, c))",
                       f"a = {_fmt(a)}, b = {_fmt(b)}, c = {_fmt(c)}: {_fmt(left)} vs {_fmt(right)}", rule)
    return False


def _fold(it, region, items, acc, operands, order):
    for k in order:
        (acc,) = it.run_region(region, (acc, items[k], *operands))
    return acc


def check_reduce(it, node, items: list, identity, operands, result) -> None:
    """Re-order and re-associate; on disagreement find the broken law."""
    (region,) = node.regions
    acc_t = node.inputs[1].type
    helper = node.attr("helper")
    rule = "reduce needs an associative, commutative combine with a neutral identity (spec §7)"
    _counterexample(it, node, region, items, identity, acc_t, operands, True, helper, rule)
    if len(items) < 2:
        alt = _fold(it, region, items, identity, operands, range(len(items)))
        alt = _fold(it, region, [identity], alt, operands, [0])
    else:
        perm = it.rng.permutation(len(items))
        half = len(items) // 2
        left = _fold(it, region, items, identity, operands, perm[:half])
        right = _fold(it, region, items, identity, operands, perm[half:])
        (alt,) = it.run_region(region, (right, left, *operands))
    scale = _scale([x for item in items for x in leaves(item, acc_t)] + leaves(result, acc_t))
    if not _close(leaves(result, acc_t), leaves(alt, acc_t), len(items), scale):
        _counterexample(it, node, region, items, identity, acc_t, operands, True, helper, rule)
        _violation(node, helper, "re-ordering", f"folding the {len(items)} elements in another order gave "
                   f"{_fmt(alt)} instead of {_fmt(result)}", rule)


def check_scan(it, node, items: list, identity, operands, prefixes: list) -> None:
    """Re-associate each prefix as combine(fold(head), fold(tail)) at a random cut."""
    (region,) = node.regions
    acc_t = node.inputs[1].type
    helper = node.attr("helper")
    rule = "scan needs an associative combine with a neutral identity (spec §8)"
    n = len(items)
    if n == 0:
        return
    _counterexample(it, node, region, items, identity, acc_t, operands, False, helper, rule)
    cut = int(it.rng.integers(0, n))
    head = _fold(it, region, items, identity, operands, range(cut))
    scale = _scale([x for item in items for x in leaves(item, acc_t)])
    tail = identity
    for k in range(cut, n):
        (tail,) = it.run_region(region, (tail, items[k], *operands))
        (alt,) = it.run_region(region, (head, tail, *operands))
        if not _close(leaves(prefixes[k], acc_t), leaves(alt, acc_t), n, scale):
            _counterexample(it, node, region, items, identity, acc_t, operands, False, helper, rule)
            _violation(node, helper, "re-association", f"prefix {k} re-associated at {cut} gave {_fmt(alt)} "
                       f"instead of {_fmt(prefixes[k])}", rule)


def check_region(it, node, run_once, result, result_t) -> None:
    """Run the region operation again under a fresh random segmentation and compare."""
    helpers = node.attr("helpers")
    alt = run_once()
    res_leaves, alt_leaves = leaves(result, result_t), leaves(alt, result_t)
    if not _close(res_leaves, alt_leaves, 64, _scale(res_leaves + alt_leaves)):
        law = ("summarize(A ++ B) == combine(summarize(A), summarize(B)) with a neutral identity" if
               node.op is ops.region_fold else "the region-scan laws of spec §9.2 (apply/combine action, emit "
                                                  "concatenation)")
        raise LawViolation(f"{node.op.name} helpers {', '.join(f'`{h}`' for h in helpers)} break {law}: two "
                           f"segmentations of the same source gave {_fmt(rebuild(list(res_leaves), result_t))} and "
                           f"{_fmt(rebuild(list(alt_leaves), result_t))} (at {node.loc!r})")
