"""Generic rule for contract (spec §10, numerics T5).

Both operands are converted to the accumulator dtype first (T3 cast rules), then multiplied and
summed by ``np.einsum`` in that dtype:

- f32/f64 accumulators: einsum in the accumulator dtype (any summation order is within T5's
  bound |computed - exact| <= gamma_n * sum |t_i|);
- f16/bf16 accumulators: the converted operands are exact in float32, einsum runs in float32 and
  the result is rounded once to the accumulator (within the narrow format's gamma_n bound);
- integer accumulators: einsum over the uint64 images of the converted operands (wrap-around
  modulo 2^64) and one truncation to the accumulator, which is exact modulo 2^bits.

An empty reduction gives the accumulator's zero.
"""
from __future__ import annotations

import string

import numpy as np

from ..graph import ops
from ..graph.interpreter import rule_registrar
from . import numerics as N

RULES: dict = {}
rule = rule_registrar(RULES)


def subscripts(lhs_rank: int, rhs_rank: int, reduce: tuple, batch: tuple) -> str:
    """The einsum spelling of a contract: paired axes share a letter; result axes in contract order."""
    letters = iter(string.ascii_letters)
    lhs = [next(letters) for _ in range(lhs_rank)]
    rhs = [None] * rhs_rank
    for a, b in reduce + batch:
        rhs[b] = lhs[a]
    rhs = [c if c is not None else next(letters) for c in rhs]
    lhs_red = {a for a, _ in reduce}
    rhs_gone = {b for _, b in reduce} | {b for _, b in batch}
    out = [c for k, c in enumerate(lhs) if k not in lhs_red] + [c for k, c in enumerate(rhs) if k not in rhs_gone]
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


@rule(ops.contract)
def _contract(it, node, args):
    acc = node.attr("acc_dtype")
    lhs, rhs = (N.cast(np.asarray(x), acc) for x in args)
    return contract_arithmetic(subscripts(lhs.ndim, rhs.ndim, node.attr("reduce"), node.attr("batch")), lhs, rhs, acc)


def contract_arithmetic(spec: str, lhs: np.ndarray, rhs: np.ndarray, acc) -> np.ndarray:
    """Products and sums in ``acc`` (f16/bf16 accumulate in f32 and round once: within T5) of operands
    already converted to it; integers wrap modulo 2^bits."""
    with N.errstate():
        if acc.is_float:
            work = lhs.dtype if acc.name in ("f32", "f64") else np.dtype(np.float32)
            result = N.finish(np.einsum(spec, lhs.astype(work), rhs.astype(work)), acc.np)
        else:
            wide = np.einsum(spec, lhs.astype(np.uint64), rhs.astype(np.uint64))
            result = np.asarray(wide).astype(acc.np)
    return np.asarray(result, dtype=acc.np)
