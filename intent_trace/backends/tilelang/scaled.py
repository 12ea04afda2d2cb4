"""TileLang rule for ``scaled_contract`` (spec §11, numerics T5, T6): microscaling codes times e8m0 scales.

Operands: lhs codes u8[M, G, C_lhs] with scales u8[M, G], rhs codes u8[G, C_rhs, N] with scales u8[N, G];
k = g * group_size + e runs over the reduction. Each output element is a serial loop over (g, e) in index
order around one accumulator (as contract's rule): both decoded values come from one helper call each,
``mx_e2m1`` / ``mx_e4m3`` (carrier byte, position e, scale code) -> accumulator, which picks the code (e2m1:
the low nibble for even e, the high one for odd e; T6), multiplies the format's value by 2^(s - 127) in
double (exact; a 0xFF scale or an e4m3 NaN code is NaN) and converts once to the accumulator (f32 or f64:
exact unless it overflows or underflows, as generic converts). The code and scale tables are generated
from ml_dtypes (:mod:`intent_trace._format_mx`). The product of two decoded values is exact in the
accumulator and the sum is within T5's bound. A dynamic carrier extent C is checked first against the group size
(the loops run over the group size, not C).
"""
from __future__ import annotations

from ... import types as T
from ...codegen import checks as C
from ...graph import ops
from ...graph.lowering import dynamic_carriers
from ...graph.interpreter import rule_registrar
from .emitter import Lazy, as_index
from .scalar_rules import call

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)


def _decoded(em, fmt, acc, codes, scale, coords, e: str) -> str:
    return em.assign(call(em, f"mx_{fmt.name}", (acc,), acc, (T.u8, T.index, T.u8), em.elem(codes, coords),
                          as_index(e), scale), "x")


def _carrier(fmt, e: str) -> str:
    """The carrier position of element e of a group: two e2m1 codes per byte."""
    return f"T.floordiv({e}, 2)" if fmt.name == "e2m1" else e


@rule(ops.scaled_contract)
def _scaled_contract(em, node, args):
    a, sa, b, sb = args
    acc = node.attr("acc_dtype")
    gs = node.attr("group_size")
    fl, fr = node.attr("lhs_format"), node.attr("rhs_format")
    m, g, _ = em.shape(node.inputs[0].type)
    n = em.shape(node.inputs[2].type)[2]
    for operand, axis, role, fmt, want, e in dynamic_carriers(node):  # C held to the group size (spec §11)
        c = em.extent(e)
        em.check(f"{c} != T.int64({want})", C.SCALED_CARRIER, c, axis=axis, group=gs, want=want, role=role,
                 extent=T.extent_str(e), fmt=str(fmt))
    zero = em.constant(0, acc)

    def compute(pos):
        i, j = pos
        total = em.fresh("c")
        em.line(f"{total} = T.alloc_var({em.tir(acc)!r}, init={zero})")
        with em.loop_nest((g, str(gs))) as (q, e):
            x = _decoded(em, fl, acc, a, em.elem(sa, [i, q]), [i, q, _carrier(fl, e)], e)
            y = _decoded(em, fr, acc, b, em.elem(sb, [j, q]), [q, _carrier(fr, e), j], e)
            product = em.assign(call(em, "mul", (acc,), acc, (acc, acc), x, y), "x")
            em.line(f"{total} = {call(em, 'add', (acc,), acc, (acc, acc), total, product)}")
        return em.assign(total, "r")

    return Lazy((m, n), compute)
