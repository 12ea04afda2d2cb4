"""Accumulators shared by the folding rules (reduce and contract in :mod:`.structured`, the shared scan and folds
through the emitter, scatter_reduce in :mod:`.memory`, sparse_contract in :mod:`.sparse`, the CUDA reductions): a
combine region inlined for one element, mutable scalar accumulators, lazy leaves sharing one computation, and the
dense contraction itself. Below the emitter (it imports only the shared values).

A contract forms each product in the accumulator dtype and adds it to the accumulator in index order, without
fusing (T5); a sparse contraction is a dense one over its expanded operand.
"""
from __future__ import annotations

from ... import types as T
from ...graph.lowering import leaf_values, scalar_param
from ...codegen.values import Aggregate, Lazy, Scalar
from .scalar_rules import call, cast_expr


def combine(em, node, acc_t: T.Type, lhs: list, rhs: list, captures: list, pos) -> list:
    """The combine region inlined for one element: the expressions of the result's leaves. Tensor captures
    have the accumulator's shape and are read at ``pos``."""
    def param(names):
        return scalar_param(acc_t, names, scalar=Scalar, lazy=Lazy, aggregate=Aggregate)

    (result,) = em.run_region(node.regions[0], (param(lhs), param(rhs), *captures))
    return [em.assign(em.elem(leaf, pos), "r") for leaf in leaf_values(result, Aggregate)]


def accumulators(em, types: list, inits: list) -> list:
    names = []
    for t, v in zip(types, inits):
        name = em.fresh("c")
        em.line(f"{name} = T.alloc_var({em.tir(t.dtype)!r}, init={v})")
        names.append(name)
    return names


def lazy_leaves(em, shape: tuple, compute, types: list) -> list:
    """One lazy value per leaf, sharing one memoised computation of all leaves per element."""
    group = Lazy(shape, compute)
    return [Lazy(shape, lambda idx, k=k: em.elem(group, idx)[k]) for k in range(len(types))]


def contract(em, node, args):
    lhs, rhs = args
    acc = node.attr("acc_dtype")
    em.tir(acc)
    reduce, batch = node.attr("reduce"), node.attr("batch")
    lt, rt = node.inputs[0].type, node.inputs[1].type
    lhs_shape, rhs_shape = em.shape(lt), em.shape(rt)
    lhs_red = [a for a, _ in reduce]
    rhs_red = [b for _, b in reduce]
    rhs_batch = {b: a for a, b in batch}
    lhs_kept = [a for a in range(lt.rank) if a not in lhs_red]
    rhs_kept = [b for b in range(rt.rank) if b not in rhs_red and b not in rhs_batch]
    shape = tuple([lhs_shape[a] for a in lhs_kept] + [rhs_shape[b] for b in rhs_kept])
    red = [lhs_shape[a] for a in lhs_red]
    # f16/bf16 accumulators: the converted operands are exact in f32, which accumulates; one rounding at the end
    # (as generic computes them, within the format's T5 bound).
    work = T.f32 if acc.name in ("f16", "bf16") else acc
    zero = em.constant(0, work)

    def compute(pos):
        where = {a: pos[k] for k, a in enumerate(lhs_kept)}
        (total,) = accumulators(em, [T.ScalarType(work)], [zero])
        with em.loop_nest(red) as ridx:
            li = [ridx[lhs_red.index(a)] if a in lhs_red else where[a] for a in range(lt.rank)]
            ri = []
            for b in range(rt.rank):
                if b in rhs_red:
                    ri.append(ridx[rhs_red.index(b)])
                elif b in rhs_batch:
                    ri.append(where[rhs_batch[b]])
                else:
                    ri.append(pos[len(lhs_kept) + rhs_kept.index(b)])
            x = em.assign(cast_expr(em, acc, work, cast_expr(em, lt.dtype, acc, em.elem(lhs, li))), "x")
            y = em.assign(cast_expr(em, acc, work, cast_expr(em, rt.dtype, acc, em.elem(rhs, ri))), "x")
            product = em.assign(call(em, "mul", (work,), work, (work, work), x, y), "x")
            em.line(f"{total} = {call(em, 'add', (work,), work, (work, work), total, product)}")
        return [em.assign(cast_expr(em, work, acc, total), "r")]

    if not shape:
        return Scalar(compute([])[0])
    (leaf,) = lazy_leaves(em, shape, compute, [acc])
    return leaf
