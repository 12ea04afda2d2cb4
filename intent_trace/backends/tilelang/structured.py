"""TileLang rules for reduce and contract: serial loops around a mutable accumulator per output element.

A reduce whose combine is *pointwise* (elementwise ops, constants, broadcasts and aggregate plumbing
on one kept shape, with scalar captures) commutes with indexing, so it is inlined per output
element as scalar code and folds the reduced positions in source order: exactly generic's fold.
The result is lazy like every tensor (each output element is computed where it is consumed); a
reduction to a scalar runs where it is defined. A contract forms each product in the accumulator
dtype and adds it to the accumulator in index order, without fusing (T5).
"""
from __future__ import annotations

from ... import types as T
from .emitter import Aggregate, Lazy, Scalar, rule
from .scalar_rules import call, cast_expr

_POINTWISE_OPS = frozenset({
    "add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum", "and_", "or_", "xor", "shl", "shr",
    "eq", "ne", "lt", "le", "gt", "ge", "neg", "invert", "select", "fma", "cast", "bitcast", "broadcast", "constant",
    "tuple", "get", "record", "field", "full",
    "exp", "log", "log1p", "lgamma", "sin", "asin", "cos", "floor", "erf", "erfc", "i0", "rsqrt", "sqrt", "sigmoid",
    "abs", "exp2", "tanh",
})


def _leaf_values(value) -> list:
    if isinstance(value, Aggregate):
        return [x for it in value.items for x in _leaf_values(it)]
    return [value]


def _assemble(t: T.Type, leaves: list):
    if isinstance(t, (T.TupleType, T.RecordType)):
        items = t.items if isinstance(t, T.TupleType) else [ft for _, ft in t.fields]
        return Aggregate(tuple(_assemble(it, leaves) for it in items))
    return leaves.pop(0)


def _pointwise(node) -> bool:
    (region,) = node.regions
    ok = all(n.op.name in _POINTWISE_OPS and not n.regions for n in region.nodes)
    shapes = {tuple(getattr(t, "shape", ())) for t in T.leaf_types(node.inputs[1].type)}
    return ok and len(shapes) == 1 and all(isinstance(c.type, T.ScalarType) for c in node.inputs[2:])


def _scalar_param(t: T.Type, names: list):
    """A region parameter whose every element is the local of its leaf (tensor leaves ignore the index)."""
    if isinstance(t, (T.TupleType, T.RecordType)):
        items = t.items if isinstance(t, T.TupleType) else [ft for _, ft in t.fields]
        return Aggregate(tuple(_scalar_param(it, names) for it in items))
    name = names.pop(0)
    if isinstance(t, T.TensorType):
        return Lazy(tuple("1" for _ in t.shape), lambda idx, name=name: name)
    return Scalar(name)


def _combine(em, node, acc_t: T.Type, lhs: list, rhs: list, captures: list, pos) -> list:
    """The combine region inlined for one element: the expressions of the result's leaves."""
    (region,) = node.regions
    (result,) = em.run_region(region, (_scalar_param(acc_t, list(lhs)), _scalar_param(acc_t, list(rhs)), *captures))
    return [em.assign(em.elem(leaf, pos), "r") for leaf in _leaf_values(result)]


def _merge(pos: list, red: list, axes: tuple, rank: int) -> list:
    pos, red = iter(pos), iter(red)
    return [next(red) if k in axes else next(pos) for k in range(rank)]


def _accumulators(em, types: list, inits: list) -> list:
    names = []
    for t, v in zip(types, inits):
        name = em.fresh("c")
        em.line(f"{name} = T.alloc_var({em.tir(t.dtype)!r}, init={v})")
        names.append(name)
    return names


def _lazy_leaves(em, shape: tuple, compute, types: list) -> list:
    """One lazy value per leaf, sharing one memoised computation of all leaves per element."""
    group = Lazy(shape, compute)
    return [Lazy(shape, lambda idx, k=k: em.elem(group, idx)[k]) for k in range(len(types))]


@rule("reduce")
def _reduce(em, node, args):
    if not _pointwise(node):
        raise em.reject("a reduce whose combine is not elementwise (or captures tensors) is not lowered yet")
    source, identity, *captures = args
    (acc_t,) = node.attr("types")
    axes = node.attr("axes")
    src_types = T.leaf_types(node.inputs[0].type)
    rank = src_types[0].rank
    src_shape = em.shape(src_types[0])
    kept = tuple(s for k, s in enumerate(src_shape) if k not in axes)
    red = [src_shape[a] for a in axes]
    acc_types = T.leaf_types(acc_t)

    def compute(pos):
        accs = _accumulators(em, acc_types, [em.elem(v, pos) for v in _leaf_values(identity)])
        with em.loop_nest(red) as ridx:
            full = _merge(pos, ridx, axes, rank)
            items = [em.elem(v, full) for v in _leaf_values(source)]
            current = [em.assign(a, "x") for a in accs]
            for name, value in zip(accs, _combine(em, node, acc_t, current, items, captures, pos)):
                em.line(f"{name} = {value}")
        return [em.assign(a, "r") for a in accs]

    if not kept:
        return _assemble(acc_t, [Scalar(v) for v in compute([])])
    return _assemble(acc_t, _lazy_leaves(em, kept, compute, acc_types))


@rule("contract")
def _contract(em, node, args):
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
        (total,) = _accumulators(em, [T.ScalarType(work)], [zero])
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
    (leaf,) = _lazy_leaves(em, shape, compute, [acc])
    return leaf
