"""Generic rules for scaled and sparse contract (spec §11, §12; numerics T6, T7).

scaled_contract: both operands are decoded with ml_dtypes in float64 (element code times 2^(s - 127), a NaN
scale making its whole group NaN; exact in float64), converted to the accumulator (f32/f64: the decoded
values are exact there unless they overflow or underflow), and multiplied and summed as ``[M, K] x [K, N]``
in the accumulator (products of decoded values are exact; the sum is within T5's gamma_n bound).

Dynamic extents the tracer could not hold to the schemas are checked first (a carrier extent C against the group
size, the compression pair kc against K), ValueErrors naming the extent and its value.

sparse_contract: the metadata is checked first (positions inside the group, strictly increasing within a
group; ValueError before any output exists), the compressed operand is scattered into its dense logical
form, and the rest is contract's rule.
"""
from __future__ import annotations

import numpy as np

from .. import _format_mx as MX
from .. import types as T
from ..codegen import checks as C
from ..graph import ops
from ..graph.interpreter import rule_registrar
from ..graph.lowering import compression_extents, dynamic_carriers, named_extent
from ..limits import check_allocation
from . import numerics as N
from .generic_contract import contract_arithmetic, subscripts

RULES: dict = {}
rule = rule_registrar(RULES)


def _finish(spec: str, lhs: np.ndarray, rhs: np.ndarray, acc) -> np.ndarray:
    """contract's arithmetic on operands already converted to ``acc``."""
    return contract_arithmetic(spec, lhs, rhs, acc)


def decode_lhs(codes, scales, fmt) -> np.ndarray:
    """u8[M, G, C] codes, u8[M, G] scales -> float64[M, G * group]."""
    v = MX.decode_elements(np.asarray(codes), fmt, axis=2) * MX.decode_scales(scales)[:, :, None]
    return v.reshape(v.shape[0], v.shape[1] * v.shape[2])


def decode_rhs(codes, scales, fmt) -> np.ndarray:
    """u8[G, C, N] codes, u8[N, G] scales -> float64[G * group, N]."""
    v = MX.decode_elements(np.asarray(codes), fmt, axis=1) * MX.decode_scales(scales).T[:, None, :]
    return v.reshape(v.shape[0] * v.shape[1], v.shape[2])


def _check_decoded(what: str, codes, fmt) -> None:
    """The float64 decoding of ``codes`` must fit (limits.py): one value per element code, and a carrier
    byte holds 2 // carrier_extent(fmt, 2) codes (e2m1: 2, e4m3: 1)."""
    codes = np.asarray(codes)
    check_allocation(what, (codes.size * (2 // MX.carrier_extent(fmt, 2)),), 8)


def check_carriers(node, args) -> None:
    """A dynamic carrier extent must be the format's carrier count for the group size (spec §11)."""
    for operand, axis, role, fmt, want, e in dynamic_carriers(node):
        got = np.shape(args[operand])[axis]
        if got != want:
            raise C.SCALED_CARRIER.error(got, axis=axis, group=node.attr("group_size"), want=want, role=role,
                                         extent=T.extent_str(e), fmt=str(fmt))


def check_compression(node, args) -> None:
    """Dynamic compression extents must be related as static ones are (spec §12): K % group == 0 and kc == K *
    keep / group."""
    fmt = node.attr("format")
    ca, rb, ekc, ek = compression_extents(node)
    kc, k = np.shape(args[0])[ca], np.shape(args[2])[rb]
    if not isinstance(ek, int) and k % fmt.group:
        raise C.SPARSE_REDUCTION.error(k, axis=rb, group=fmt.group, fmt=repr(fmt), extent=T.extent_str(ek))
    if kc * fmt.group != k * fmt.keep:
        raise C.SPARSE_COMPRESSED.error(kc, k, k * fmt.keep // fmt.group, axis=ca, rhs_axis=rb, keep=fmt.keep,
                                        group=fmt.group, fmt=repr(fmt), extent=named_extent(ekc))


@rule(ops.scaled_contract)
def _scaled_contract(it, node, args):
    check_carriers(node, args)
    acc = node.attr("acc_dtype")
    _check_decoded(f"the decoded lhs of scaled_contract at {node.loc!r}", args[0], node.attr("lhs_format"))
    _check_decoded(f"the decoded rhs of scaled_contract at {node.loc!r}", args[2], node.attr("rhs_format"))
    lhs = decode_lhs(args[0], args[1], node.attr("lhs_format"))
    rhs = decode_rhs(args[2], args[3], node.attr("rhs_format"))
    with N.errstate():
        lhs, rhs = lhs.astype(acc.np), rhs.astype(acc.np)
    return _finish("ab,bc->ac", lhs, rhs, acc)


def check_metadata(meta: np.ndarray, axis: int, fmt) -> np.ndarray:
    """Metadata as int64 [..., groups, keep] with the compression axis last; ValueError when ill-formed."""
    m = np.moveaxis(np.asarray(meta), axis, -1).astype(np.int64)
    m = m.reshape(m.shape[:-1] + (m.shape[-1] // fmt.keep, fmt.keep))
    bad = (m < 0) | (m >= fmt.group)
    if bad.any():
        pos = int(m[bad][0])
        raise ValueError(f"sparse contract {fmt!r}: metadata position {pos} is outside 0..{fmt.group - 1}")
    if fmt.keep > 1 and (np.diff(m, axis=-1) <= 0).any():
        raise ValueError(f"sparse contract {fmt!r}: metadata positions within a group must be strictly increasing")
    return m


def densify(compressed: np.ndarray, meta: np.ndarray, axis: int, fmt) -> np.ndarray:
    """The logical dense lhs: compressed values scattered to their metadata positions, zeros elsewhere."""
    m = check_metadata(meta, axis, fmt)
    c = np.moveaxis(np.asarray(compressed), axis, -1)
    c = c.reshape(m.shape)
    groups = m.shape[-2]
    check_allocation(f"the dense lhs of sparse_contract (shape {m.shape[:-2] + (groups * fmt.group,)})",
                     m.shape[:-2] + (groups, fmt.group), c.dtype.itemsize)
    dense = np.zeros(m.shape[:-2] + (groups, fmt.group), dtype=c.dtype)
    np.put_along_axis(dense, m, c, axis=-1)
    dense = dense.reshape(m.shape[:-2] + (groups * fmt.group,))
    return np.moveaxis(dense, -1, axis)


@rule(ops.sparse_contract)
def _sparse_contract(it, node, args):
    check_compression(node, args)
    acc = node.attr("acc_dtype")
    reduce, batch = node.attr("reduce"), node.attr("batch")
    dense = densify(args[0], args[1], reduce[0][0], node.attr("format"))
    lhs, rhs = N.cast(dense, acc), N.cast(np.asarray(args[2]), acc)
    return _finish(subscripts(lhs.ndim, rhs.ndim, reduce, batch), lhs, rhs, acc)
