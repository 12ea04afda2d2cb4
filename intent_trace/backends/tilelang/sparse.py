"""TileLang rule for ``sparse_contract`` (spec §12, numerics T5, T7): 2:4 and 1:2 structured sparsity.

Dynamic compression extents are checked first (K % group == 0, kc == K * keep / group: ValueErrors naming the
extent and its value); then the metadata, where the node stands and so before any output is computed: two serial
loops over the compressed shape, positions inside the group, then strictly increasing within a group
(generic's order of checks); a violation is generic's ``ValueError`` (the executable raises it after the
call and commits no output). The dense logical lhs is then a lazy tensor: element k of the compression
axis is, in group k // group, the kept value whose metadata is k % group, else 0 (a select over the
``keep`` candidates, so even ill-formed metadata never addresses memory outside the operands). contract's
rule (:mod:`.structured`) multiplies it with the rhs, unchanged: the products and the accumulation are
exactly those of a dense contract of the logical lhs, which is generic's definition.
"""
from __future__ import annotations

from ... import types as T
from ...codegen import checks as C
from ...graph.lowering import DenseContract, compression_extents, named_extent
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Lazy, as_index
from .scalar_rules import call, cast_expr
from .accumulate import contract

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)


def _position(em, meta, idx) -> str:
    """The metadata entry at ``idx`` as an int64 (any integer dtype holds positions)."""
    value, dtype = meta
    return em.assign(cast_expr(em, dtype, T.i64, em.elem(value, idx)), "x")


def _check_metadata(em, meta, cshape, axis: int, fmt) -> None:
    if not em.checks:
        return
    group, keep = fmt.group, fmt.keep
    with em.loop_nest(cshape) as idx:
        x = _position(em, meta, idx)
        em.check(f"{x} < T.int64(0) or {x} >= T.int64({group})", ValueError,
                 f"I.sparse_contract {{fmt}}: metadata position {{0}} is outside 0..{group - 1}", x, fmt=repr(fmt))
    if keep == 1:
        return
    with em.loop_nest(cshape) as idx:
        with em.block(f"if T.floormod({idx[axis]}, {keep}) != 0:"):
            x = _position(em, meta, idx)
            before = list(idx)
            before[axis] = f"({idx[axis]} - 1)"
            p = _position(em, meta, before)
            em.check(f"{x} <= {p}", ValueError, "I.sparse_contract {fmt}: metadata positions {0} then {1} "
                                                 "within one group are not strictly increasing", p, x, fmt=repr(fmt))


@rule(ops.sparse_contract)
def _sparse_contract(em, node, args):
    comp, meta, rhs = args
    fmt = node.attr("format")
    group, keep = fmt.group, fmt.keep
    axis, rhs_axis, ekc, k = compression_extents(node)
    ct = node.inputs[0].type
    cshape = em.shape(ct)
    kx = str(k)
    if not (isinstance(k, int) and isinstance(ekc, int)):  # dynamic: held to the static relations (spec §12)
        kx = em.extent(k)
        if not isinstance(k, int):
            em.check(f"T.floormod({kx}, T.int64({group})) != T.int64(0)", C.SPARSE_REDUCTION, kx, axis=rhs_axis,
                     group=group, fmt=repr(fmt), extent=T.extent_str(k))
        em.check(f"{cshape[axis]} * T.int64({group}) != {kx} * T.int64({keep})", C.SPARSE_COMPRESSED, cshape[axis],
                 kx, f"T.floordiv({kx} * T.int64({keep}), T.int64({group}))", axis=axis, rhs_axis=rhs_axis,
                 keep=keep, group=group, fmt=repr(fmt), extent=named_extent(ekc))
    meta = (meta, node.inputs[1].type.dtype)
    _check_metadata(em, meta, cshape, axis, fmt)
    src = ct.dtype
    zero = em.constant(0, src)

    def dense(idx):
        g = em.assign(f"T.floordiv({as_index(idx[axis])}, T.int64({group}))", "j")
        p = em.assign(f"T.floormod({as_index(idx[axis])}, T.int64({group}))", "j")
        value = zero
        for j in range(keep):
            at = list(idx)
            at[axis] = f"({g} * T.int64({keep}) + T.int64({j}))"
            hit = f"{_position(em, meta, at)} == {p}"
            value = em.assign(call(em, "select", (src,), src, (T.bool_, src, src), hit, em.elem(comp, at), value), "t")
        return value

    dshape = list(cshape)
    dshape[axis] = kx
    tshape = list(ct.shape)
    tshape[axis] = k
    lhs_type = T.TensorType(src, tuple(tshape))
    return contract(em, DenseContract(node, lhs_type), [Lazy(tuple(dshape), dense), rhs])
