"""Named multiplication (spec §10): dot, matvec, vecmat, matmul, outer and the generic contract.

Every spelling except ``outer`` builds exactly one canonical ``contract`` node: a paired-axis
multiply-add with ``reduce`` and ``batch`` pairs and an explicit accumulator dtype. The shorthands
check their ranks and inner extents, broadcast the leading batch axes with explicit ``broadcast``
nodes (right-aligned, size-one axes stretch, dynamic extents by identity), and express the
``transpose`` flags as the choice of paired axes (the contract pairs the matrix's other core axis;
no data moves). ``outer`` is not a contraction: a size-one reshape, then a broadcast ``mul``.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.type_rules_structured import contract_shape
from .build import binary, broadcast_shapes, broadcast_to, reshape, shape_values
from .context import current, fail
from .values import Proxy, TensorProxy, ValueProxy, wrap

# --- operands --------------------------------------------------------------------------------------


def _tensor(x, who: str, role: str):
    """The Var of a ranked tensor operand."""
    if isinstance(x, ValueProxy) and isinstance(x.type, T.TensorType):
        return x._var
    if isinstance(x, ValueProxy):
        fail(f"{who}: {role} must be a ranked tensor, got the scalar {x.type!r}; I.reshape(x, (1,)) or I.full "
             f"makes a tensor", "type")
    if isinstance(x, Proxy) and isinstance(getattr(x, "type", None), T.ViewType):
        name = getattr(x, "name", "x")
        fail(f"{who}: {role} is the view {name} ({x.type!r}); read it into a tensor first, e.g. "
             f"{name}[{', '.join(':' * x.type.rank)}]", "type")
    fail(f"{who}: {role} must be a ranked tensor, got {type(x).__name__}", "type")


def _numeric_pair(a, b, who: str, roles: tuple) -> T.DType:
    """lhs and rhs share one numeric dtype (§10: mixed operands are cast by the author)."""
    da, db = a.type.dtype, b.type.dtype
    for d, role in ((da, roles[0]), (db, roles[1])):
        if not d.is_numeric:
            hint = "I.cast it to a numeric dtype first" if d.is_bool else \
                "it is a microscaling format (see scaled_contract)"
            fail(f"{who}: {role} has dtype {d}, which has no multiplication here; {hint}", "type")
    if da is not db:
        fail(f"{who}: {roles[0]} is {da} and {roles[1]} is {db}; the operands need one dtype (the accumulator is "
             f"chosen separately by acc_dtype): write I.cast({roles[1]}, I.{da}) or I.cast({roles[0]}, I.{db})",
             "type")
    return da


def _acc_dtype(acc_dtype, who: str) -> T.DType:
    if acc_dtype is None:
        fail(f"{who}: acc_dtype must be given explicitly (e.g. acc_dtype=I.f32); contractions have no default "
             f"accumulator", "type")
    if not isinstance(acc_dtype, T.DType) or not acc_dtype.is_numeric:
        fail(f"{who}: acc_dtype must be a numeric intent dtype such as I.f32 or I.i32, got {acc_dtype!r}", "type")
    return acc_dtype


def _flag(value, name: str, who: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        fail(f"{who}: {name} must be a constexpr bool (True/False), got {value!r}", "type")
    return bool(value)


# --- the generic contract ----------------------------------------------------------------------------

def _pairs(value, what: str, ranks: tuple, who: str) -> tuple:
    """((lhs_axis, rhs_axis), ...) with negative axes normalised."""
    if not isinstance(value, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in value):
        fail(f"{who}: {what} must be a tuple of (lhs_axis, rhs_axis) pairs, e.g. (({ranks[0] - 1}, 0),); "
             f"got {value!r}", "type")
    out = []
    for pair in value:
        axes = []
        for side, a, rank in zip(("lhs", "rhs"), pair, ranks):
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
                fail(f"{who}: {what} pair {tuple(pair)!r}: the {side} axis must be an int, got {a!r}", "type")
            a = int(a)
            if not -rank <= a < rank:
                fail(f"{who}: {what} pair {tuple(pair)!r}: {side} axis {a} is out of range for the {side} rank "
                     f"{rank}", "value")
            axes.append(a % rank)
        out.append(tuple(axes))
    return tuple(out)


def _check_unique(reduce: tuple, batch: tuple, who: str) -> None:
    seen: dict = {}
    for what, pairs in (("reduce", reduce), ("batch", batch)):
        for pair in pairs:
            for side, a in zip(("lhs", "rhs"), pair):
                first = seen.get((side, a))
                if first is not None:
                    if first == what:
                        fail(f"{who}: {side} axis {a} appears twice in {what}", "value")
                    fail(f"{who}: {side} axis {a} is both reduced and batched; a batch pair may not overlap the "
                         f"reduction", "value")
                seen[(side, a)] = what


def _check_extents(lhs, rhs, pairs: tuple, what: str, who: str) -> None:
    for a, b in pairs:
        ea, eb = lhs.type.shape[a], rhs.type.shape[b]
        if not T.same_extent(ea, eb):
            fail(f"{who}: {what} pair ({a}, {b}) pairs lhs axis {a} of extent {T.extent_str(ea)} with rhs axis {b} "
                 f"of extent {T.extent_str(eb)}; paired extents must be provably equal (dynamic extents are equal "
                 f"only when they are the same named extent or come from the same value)", "value")


result_shape = contract_shape  # the registry's rule (graph/type_rules.py); the name others import


def _emit(lhs, rhs, reduce: tuple, batch: tuple, acc: T.DType):
    attrs = (("reduce", reduce), ("batch", batch), ("acc_dtype", acc))
    (out,) = current().emit(ops.contract, (lhs, rhs), attrs)
    return wrap(out)


def contract(lhs, rhs, *, reduce, batch=(), acc_dtype):
    """Paired-axis multiply-add: ``reduce``/``batch`` are ((lhs_axis, rhs_axis), ...) pairs (spec §10.2)."""
    who = "I.contract"
    a, b = _tensor(lhs, who, "lhs"), _tensor(rhs, who, "rhs")
    _numeric_pair(a, b, who, ("lhs", "rhs"))
    acc = _acc_dtype(acc_dtype, who)
    ranks = (a.type.rank, b.type.rank)
    red = _pairs(reduce, "reduce", ranks, who)
    if not red:
        fail(f"{who}: reduce must list at least one (lhs_axis, rhs_axis) pair; a product without reduction is an "
             f"explicit broadcast multiply (I.outer or `*`)", "value")
    bat = _pairs(batch, "batch", ranks, who)
    _check_unique(red, bat, who)
    _check_extents(a, b, red, "reduce", who)
    _check_extents(a, b, bat, "batch", who)
    return _emit(a, b, red, bat, acc)


# --- shorthands ----------------------------------------------------------------------------------------

def dot(lhs, rhs, *, acc_dtype):
    """[K] . [K] -> a rank-0 tensor."""
    who = "I.dot"
    a, b = _tensor(lhs, who, "lhs"), _tensor(rhs, who, "rhs")
    for v, role in ((a, "lhs"), (b, "rhs")):
        if v.type.rank != 1:
            fail(f"{who} takes two rank-1 tensors [K]; {role} has rank {v.type.rank} ({v.type!r}); use I.matvec, "
                 f"I.vecmat, I.matmul or I.contract for other ranks", "type")
    _numeric_pair(a, b, who, ("lhs", "rhs"))
    acc = _acc_dtype(acc_dtype, who)
    _check_inner(a, 0, b, 0, who, ("lhs", "rhs"), ("", ""))
    return _emit(a, b, ((0, 0),), (), acc)


def _check_inner(a, ka: int, b, kb: int, who: str, roles: tuple, notes: tuple) -> None:
    ea, eb = a.type.shape[ka], b.type.shape[kb]
    if not T.same_extent(ea, eb):
        fail(f"{who}: the inner (K) extents differ: {roles[0]} axis {ka}{notes[0]} has extent {T.extent_str(ea)}, "
             f"{roles[1]} axis {kb}{notes[1]} has extent {T.extent_str(eb)}; K must be provably equal and never "
             f"broadcasts (dynamic extents are equal only when they are the same named extent or come from the "
             f"same value)", "value")


def _batch(a, core_a: int, b, core_b: int, who: str):
    """Broadcast the leading (batch) axes of both operands to one shape; returns (a, b, batch rank)."""
    sa, sb = a.type.shape, b.type.shape
    ba, bb = sa[:len(sa) - core_a], sb[:len(sb) - core_b]
    if not ba and not bb:
        return a, b, 0
    shape = broadcast_shapes([ba, bb], f"{who} batch axes")
    a = broadcast_to(a, shape + sa[len(sa) - core_a:])
    b = broadcast_to(b, shape + sb[len(sb) - core_b:])
    return a, b, len(shape)


def _need_rank(v, least: int, who: str, role: str, hint: str) -> None:
    if v.type.rank < least:
        fail(f"{who}: {role} must have rank >= {least}, got {v.type!r}{hint}", "type")


def matvec(matrix, vector, *, acc_dtype, transpose=False):
    """[..., M, K] x [..., K] -> [..., M] (``transpose``: the matrix is given as [..., K, M])."""
    who = "I.matvec"
    m, v = _tensor(matrix, who, "matrix"), _tensor(vector, who, "vector")
    transpose = _flag(transpose, "transpose", who)
    _need_rank(m, 2, who, "matrix", "")
    _need_rank(v, 1, who, "vector", "")
    _numeric_pair(m, v, who, ("matrix", "vector"))
    acc = _acc_dtype(acc_dtype, who)
    km = m.type.rank - 2 if transpose else m.type.rank - 1
    _check_inner(m, km, v, v.type.rank - 1, who, ("matrix", "vector"),
                 (" (after transpose=True)" if transpose else "", ""))
    m, v, nb = _batch(m, 2, v, 1, who)
    return _emit(m, v, ((nb + (0 if transpose else 1), nb),), tuple((i, i) for i in range(nb)), acc)


def vecmat(vector, matrix, *, acc_dtype, transpose=False):
    """[..., K] x [..., K, N] -> [..., N] (``transpose``: the matrix is given as [..., N, K])."""
    who = "I.vecmat"
    v, m = _tensor(vector, who, "vector"), _tensor(matrix, who, "matrix")
    transpose = _flag(transpose, "transpose", who)
    _need_rank(v, 1, who, "vector", "")
    _need_rank(m, 2, who, "matrix", "")
    _numeric_pair(v, m, who, ("vector", "matrix"))
    acc = _acc_dtype(acc_dtype, who)
    km = m.type.rank - 1 if transpose else m.type.rank - 2
    _check_inner(v, v.type.rank - 1, m, km, who, ("vector", "matrix"),
                 ("", " (after transpose=True)" if transpose else ""))
    v, m, nb = _batch(v, 1, m, 2, who)
    return _emit(v, m, ((nb, nb + (1 if transpose else 0)),), tuple((i, i) for i in range(nb)), acc)


def matmul(lhs, rhs, *, acc_dtype, transpose_lhs=False, transpose_rhs=False):
    """[..., M, K] x [..., K, N] -> [..., M, N]; the flags say an operand is given with its last two axes swapped."""
    who = "I.matmul"
    a, b = _tensor(lhs, who, "lhs"), _tensor(rhs, who, "rhs")
    transpose_lhs = _flag(transpose_lhs, "transpose_lhs", who)
    transpose_rhs = _flag(transpose_rhs, "transpose_rhs", who)
    never = " (I.matmul never promotes a vector: use I.matvec / I.vecmat / I.dot)"
    _need_rank(a, 2, who, "lhs", never)
    _need_rank(b, 2, who, "rhs", never)
    _numeric_pair(a, b, who, ("lhs", "rhs"))
    acc = _acc_dtype(acc_dtype, who)
    ka = a.type.rank - 2 if transpose_lhs else a.type.rank - 1
    kb = b.type.rank - 1 if transpose_rhs else b.type.rank - 2
    _check_inner(a, ka, b, kb, who, ("lhs", "rhs"), (" (after transpose_lhs=True)" if transpose_lhs else "",
                                                      " (after transpose_rhs=True)" if transpose_rhs else ""))
    a, b, nb = _batch(a, 2, b, 2, who)
    ka = nb + (0 if transpose_lhs else 1)
    kb = nb + (1 if transpose_rhs else 0)
    return _emit(a, b, ((ka, kb),), tuple((i, i) for i in range(nb)), acc)


def outer(lhs, rhs):
    """[M] x [N] -> [M, N]: a size-one reshape and a broadcast multiply in the input dtype (no accumulator)."""
    who = "I.outer"
    a, b = _tensor(lhs, who, "lhs"), _tensor(rhs, who, "rhs")
    for v, role in ((a, "lhs"), (b, "rhs")):
        if v.type.rank != 1:
            fail(f"{who} takes two rank-1 tensors [M] and [N]; {role} has rank {v.type.rank} ({v.type!r}); write "
                 f"other products as an explicit broadcast multiply", "type")
    _numeric_pair(a, b, who, ("lhs", "rhs"))
    (m,) = shape_values(a, a.type.shape)
    column = reshape(TensorProxy(a), (m, 1))
    return binary("mul", column, TensorProxy(b))


__all__ = ["contract", "dot", "matvec", "vecmat", "matmul", "outer", "result_shape"]
