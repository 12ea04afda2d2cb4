"""TileLang rule for ``random_bits`` (spec §17, numerics T8): Philox4x32-10, as generic computes it.

``random_bits`` is elementwise in its counter: each element is one call of the helper ``random_bits``
(seed u64, counter u64) -> u32, whose body (:mod:`.c`) splits the counter into block ``counter // 4`` and
word ``counter % 4`` and runs the ten Philox rounds on 32-bit words (the high half of each 64-bit
product, the key bumped by the Weyl constants before rounds 2..10). A counter of a signed dtype is
checked first: a negative one is generic's ``ValueError``. ``uniform`` has no rule of its own: it is
``shr``, ``cast`` and ``mul`` nodes.

The block function on arbitrary words (the known-answer seam) is :func:`.philox.philox4x32_10`.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Lazy, Scalar
from .scalar_rules import call, cast_expr

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)


@rule(ops.random_bits)
def _random_bits(em, node, args):
    seed, counter = args
    t = node.inputs[1].type
    d = t.dtype
    em.tir(T.u64)

    def bits(x: str) -> str:
        if d.kind == "int":
            em.check(call(em, "lt", (d,), T.bool_, (d, d), x, em.constant(0, d)), ValueError,
                     "I.random.bits: counter {0} is negative; Philox counters are non-negative (T8)",
                     f"T.Cast('int64', {x})")
        c = cast_expr(em, d, T.u64, x)
        return em.assign(call(em, "random_bits", (T.u64,), T.u32, (T.u64, T.u64), seed.expr, c), "t")

    if isinstance(t, T.ScalarType):
        return Scalar(bits(counter.expr))
    return Lazy(em.shape(t), lambda idx: bits(em.elem(counter, idx)))
