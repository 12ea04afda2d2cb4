"""The elementwise rule and the constant rule, written once for every code generator: a scalar result is a local
bound once; a tensor result is lazy, each element the target's spelling of the op (``em.scalar_op``: the scalar rule
tables of :mod:`intent_trace.oracle.numba.scalar_rules` and :mod:`intent_trace.backends.tilelang.scalar_rules`) on
the operand elements at its own index. The operands are recorded (:class:`.values.Lazy`), so a long chain can be
evaluated bottom-up rather than recursively (TileLang's memo does)."""
from __future__ import annotations

from .. import types as T
from .values import Lazy, Scalar


def elementwise(em, node, args, spell=None):
    """``spell``: the op's spelling on operand expressions, where a backend's rule picks one (else ``em.scalar_op``)."""
    spell = spell or em.scalar_op(node, node.inputs[-1].type.dtype)
    out_t = node.outputs[0].type
    if isinstance(out_t, T.ScalarType):
        return Scalar(em.assign(spell(*(a.expr for a in args))))

    def elem(idx):
        seen: dict = {}  # an operand used twice (``c * c``) is evaluated once: its value is the same
        for a in args:
            if id(a) not in seen:
                seen[id(a)] = em.elem(a, idx)
        return em.assign(spell(*(seen[id(a)] for a in args)), "t")

    return Lazy(em.shape(out_t), elem, tuple(a for a in args if isinstance(a, Lazy)))


def constant(em, node, args):
    return Scalar(em.constant(node.attr("value"), node.attr("type").dtype))


def rules(ops_spelled) -> dict:
    """A backend's elementwise table: :func:`elementwise` for each op its scalar rule table spells."""
    return {op: elementwise for op in ops_spelled}
