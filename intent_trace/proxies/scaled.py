"""Scaled and sparse contract (spec §11, §12; numerics T6, T7).

``scaled_contract`` has one closed positional schema: lhs codes u8[M, G, C_lhs], lhs e8m0 scale codes
u8[M, G], rhs codes u8[G, C_rhs, N], rhs e8m0 scale codes u8[N, G], reduce ((1, 0), (2, 1)), batch (),
result acc_dtype[M, N]; C is group_size (e4m3) or group_size / 2 (e2m1) (a dynamic C is checked when the kernel
runs); one group size on both sides.
``scaled_matmul`` is the named entry that fills in reduce, batch and the one group size. Every schema
violation is a TraceError naming the operand, axis and extent.

``sparse_contract`` is contract with its lhs given compressed along its first reduce axis under a closed
schema (``I.sparse.two_of_four()``, ``I.sparse.one_of_two()``), with logical metadata of the compressed
tensor's shape; the rest (reduce/batch pairs, result order, accumulator) is contract's. Dynamic compression
extents are checked when the kernel runs. ``sparse_matmul``
is the rank-2 shorthand (reduce ((1, 0),), batch ()).
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from .context import current, fail
from .contract import _acc_dtype, _check_extents, _check_unique, _numeric_pair, _pairs, _tensor
from .sparse_formats import SparseFormat
from .values import wrap

_SCALED_REDUCE = ((1, 0), (2, 1))
_PER_BYTE = {"e2m1": 2, "e4m3": 1}


# --- scaled contract -----------------------------------------------------------------------------------------

def _mx_format(fmt, role: str, who: str) -> T.DType:
    if fmt is T.e8m0:
        fail(f"{who}: {role} is I.e8m0, which is the scale format; the element formats are I.e2m1 and I.e4m3",
             "type")
    if not isinstance(fmt, T.DType) or fmt.name not in _PER_BYTE:
        fail(f"{who}: {role} must be I.e2m1 or I.e4m3, got {fmt!r}", "type")
    return fmt


def _group_size(value, name: str, fmt: T.DType, who: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail(f"{who}: {name} must be a constexpr int, got {value!r}", "type")
    value = int(value)
    if value <= 0:
        fail(f"{who}: {name} must be positive, got {value}", "value")
    if value % _PER_BYTE[fmt.name]:
        fail(f"{who}: {name} {value} must be even for {fmt} (two codes per u8 carrier element)", "value")
    return value


def _u8(v, who: str, role: str, rank: int, axes: str):
    if v.type.rank != rank:
        fail(f"{who}: {role} must have rank {rank} {axes}, got {v.type!r}", "type")
    if v.type.dtype is not T.u8:
        fail(f"{who}: {role} must be u8 codes {axes}, got dtype {v.type.dtype}; carrier and scale tensors hold "
             f"the raw format codes", "type")


def _same(ea, eb, who: str, what_a: str, what_b: str) -> None:
    if not T.same_extent(ea, eb):
        fail(f"{who}: {what_a} has extent {T.extent_str(ea)} but {what_b} has extent {T.extent_str(eb)}; they "
             f"must be provably equal", "value")


def _scaled(lhs, lhs_scale, rhs, rhs_scale, lhs_format, rhs_format, gl, gr, acc_dtype, who: str):
    a = _tensor(lhs, who, "lhs")
    sa = _tensor(lhs_scale, who, "lhs_scale")
    b = _tensor(rhs, who, "rhs")
    sb = _tensor(rhs_scale, who, "rhs_scale")
    fl = _mx_format(lhs_format, "lhs_format", who)
    fr = _mx_format(rhs_format, "rhs_format", who)
    gl = _group_size(gl, "lhs group size", fl, who)
    gr = _group_size(gr, "rhs group size", fr, who)
    if gl != gr:
        fail(f"{who}: the lhs group size {gl} and the rhs group size {gr} differ; both sides share one scale-group "
             f"axis G and one group size", "value")
    acc = _acc_dtype(acc_dtype, who)
    if acc.name not in ("f32", "f64"):
        fail(f"{who}: acc_dtype must be I.f32 or I.f64 (decoded products are formed exactly in the accumulator), "
             f"got {acc}", "type")
    _u8(a, who, "lhs", 3, "[M, G, C_lhs]")
    _u8(sa, who, "lhs_scale", 2, "[M, G]")
    _u8(b, who, "rhs", 3, "[G, C_rhs, N]")
    _u8(sb, who, "rhs_scale", 2, "[N, G]")
    la, ra = a.type.shape, b.type.shape
    for role, shape, axis, fmt in (("lhs", la, 2, fl), ("rhs", ra, 1, fr)):
        want = gl // _PER_BYTE[fmt.name]  # a dynamic C is held to it when the kernel runs (a ValueError naming it)
        if isinstance(shape[axis], int) and shape[axis] != want:
            fail(f"{who}: {role} axis {axis} (C_{role}) has extent {T.extent_str(shape[axis])}, but {fmt} with group "
                 f"size {gl} needs exactly {want} carrier elements per group", "value")
    _same(la[1], ra[0], who, "lhs axis 1 (G)", "rhs axis 0 (G)")
    _same(la[0], sa.type.shape[0], who, "lhs axis 0 (M)", "lhs_scale axis 0 (M)")
    _same(la[1], sa.type.shape[1], who, "lhs axis 1 (G)", "lhs_scale axis 1 (G)")
    _same(ra[2], sb.type.shape[0], who, "rhs axis 2 (N)", "rhs_scale axis 0 (N)")
    _same(ra[0], sb.type.shape[1], who, "rhs axis 0 (G)", "rhs_scale axis 1 (G)")
    attrs = (("lhs_format", fl), ("rhs_format", fr), ("group_size", gl), ("acc_dtype", acc))
    (out,) = current().emit(ops.scaled_contract, (a, sa, b, sb), attrs)
    return wrap(out)


def scaled_matmul(lhs, lhs_scale, rhs, rhs_scale, *, lhs_format, rhs_format, group_size, acc_dtype):
    """[M, G, C_lhs] x [G, C_rhs, N] MX codes with e8m0 scales [M, G] and [N, G] -> acc_dtype[M, N]."""
    return _scaled(lhs, lhs_scale, rhs, rhs_scale, lhs_format, rhs_format, group_size, group_size, acc_dtype,
                   "I.scaled_matmul")


def scaled_contract(lhs, lhs_scale, rhs, rhs_scale, *, lhs_format, rhs_format, lhs_group_size, rhs_group_size,
                    reduce, batch=(), acc_dtype):
    """The generic spelling: the same closed schema, reduce ((1, 0), (2, 1)) and batch () stated explicitly."""
    who = "I.scaled_contract"
    norm = _pairs(reduce, "reduce", (3, 3), who) if isinstance(reduce, (tuple, list)) else reduce
    if norm != _SCALED_REDUCE:
        fail(f"{who}: reduce must be ((1, 0), (2, 1)) (the closed schema [M, G, C] x [G, C, N]), got {reduce!r}; "
             f"bring other layouts to it with I.transpose / I.reshape first", "value")
    if not isinstance(batch, (tuple, list)) or len(batch):
        fail(f"{who}: batch must be () (the closed schema has no batch axes), got {batch!r}; loop over batches "
             f"in the kernel instead", "value")
    return _scaled(lhs, lhs_scale, rhs, rhs_scale, lhs_format, rhs_format, lhs_group_size, rhs_group_size,
                   acc_dtype, who)


# --- sparse contract -----------------------------------------------------------------------------------------

def _format(fmt, who: str) -> SparseFormat:
    if not isinstance(fmt, SparseFormat):
        hint = " (call it: I.sparse.two_of_four())" if callable(fmt) else ""
        fail(f"{who}: format must be a sparse schema such as I.sparse.two_of_four() or I.sparse.one_of_two(), "
             f"got {fmt!r}{hint}", "type")
    return fmt


def sparse_contract(compressed, metadata, dense_rhs, *, format, reduce, batch=(), acc_dtype):  # noqa: A002
    """contract(dense(compressed, metadata), dense_rhs) with the lhs compressed along its first reduce axis."""
    return _sparse(compressed, metadata, dense_rhs, format, reduce, batch, acc_dtype, "I.sparse_contract")


def sparse_matmul(compressed, metadata, rhs, *, format, acc_dtype):  # noqa: A002
    """[M, K * kept / group] (compressed) with metadata of that shape, x [K, N] -> acc_dtype[M, N]."""
    who = "I.sparse_matmul"
    c, r = _tensor(compressed, who, "compressed"), _tensor(rhs, who, "rhs")
    for v, role in ((c, "compressed"), (r, "rhs")):
        if v.type.rank != 2:
            fail(f"{who} takes rank-2 data operands ([M, K/2] compressed, [K, N] rhs); {role} is {v.type!r}; use "
                 f"I.sparse_contract for other ranks", "type")
    return _sparse(compressed, metadata, rhs, format, ((1, 0),), (), acc_dtype, who)


def _sparse(compressed, metadata, rhs, fmt, reduce, batch, acc_dtype, who: str):
    c = _tensor(compressed, who, "compressed")
    m = _tensor(metadata, who, "metadata")
    r = _tensor(rhs, who, "rhs")
    fmt = _format(fmt, who)
    _numeric_pair(c, r, who, ("compressed", "rhs"))
    acc = _acc_dtype(acc_dtype, who)
    md = m.type.dtype
    if md.kind not in ("int", "uint"):
        fail(f"{who}: metadata must be a logical integer tensor (positions 0..{fmt.group - 1}), got dtype {md}",
             "type")
    if m.type.rank != c.type.rank:
        fail(f"{who}: metadata must have the compressed tensor's shape; metadata has rank {m.type.rank}, "
             f"compressed rank {c.type.rank}", "value")
    for k, (ea, eb) in enumerate(zip(c.type.shape, m.type.shape)):
        _same(eb, ea, who, f"metadata axis {k}", f"compressed axis {k}")
    ranks = (c.type.rank, r.type.rank)
    red = _pairs(reduce, "reduce", ranks, who)
    if not red:
        fail(f"{who}: reduce must list at least one (lhs_axis, rhs_axis) pair; its first pair names the "
             f"compression axis", "value")
    bat = _pairs(batch, "batch", ranks, who)
    _check_unique(red, bat, who)
    (ca, rb), rest = red[0], red[1:]
    kc, k = c.type.shape[ca], r.type.shape[rb]
    # Static extents are decided here; a dynamic one is held to the same relations when the kernel runs
    # (K % group == 0, kc == K * keep / group: a ValueError naming the extent and its value).
    if isinstance(k, int) and k % fmt.group:
        fail(f"{who}: the logical reduction extent K = {k} (rhs axis {rb}) is not a multiple of the "
             f"{fmt!r} group size {fmt.group}", "value")
    if isinstance(k, int) and isinstance(kc, int) and kc != fmt.compressed_extent(k):
        fail(f"{who}: compressed axis {ca} has extent {kc}, but {fmt!r} with K = {k} (rhs axis {rb}) needs "
             f"{fmt.compressed_extent(k)} (K * {fmt.keep} / {fmt.group})", "value")
    _check_extents(c, r, rest, "reduce", who)
    _check_extents(c, r, bat, "batch", who)
    attrs = (("format", fmt), ("reduce", red), ("batch", bat), ("acc_dtype", acc))
    (out,) = current().emit(ops.sparse_contract, (c, m, r), attrs)
    return wrap(out)


__all__ = ["scaled_matmul", "scaled_contract", "sparse_contract", "sparse_matmul"]
