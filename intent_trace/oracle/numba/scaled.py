"""cpu rules for scaled and sparse contract (spec §11, §12; numerics T6, T7).

scaled_contract: a loop nest decodes each operand into a contiguous accumulator-dtype matrix, lhs
``[M, G * group]`` and rhs ``[G * group, N]`` (element value times 2^(s - 127) in float64, exact; then
one conversion to f32/f64, exact unless it overflows or underflows; a NaN scale makes its group NaN). The
code and scale tables are decoded by ml_dtypes when the kernel is generated and embedded as constants.
``np.dot`` (BLAS gemm in the accumulator dtype) then forms the exact products and sums them within T5's
bound, as contract does.

sparse_contract: a sequential loop checks the metadata first (positions inside the group, strictly
increasing within a group: ValueError through the error slot, before any output is written), a loop nest
scatters the compressed values into a zero-filled dense lhs in their source dtype, and contract's rule
multiplies it with the rhs.
"""
from __future__ import annotations

import numpy as np

from ... import _format_mx as MX
from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...codegen import checks as C
from ...graph.lowering import (DenseContract, compression_extents, dynamic_carriers, intern_constant,
                                named_extent)
from .contract import blas_usable, dense_contract
from .scalar_rules import np_type
from .values import Array

RULES: dict = {}
rule = rule_registrar(RULES)


def _extent(em, e, fallback) -> str:
    try:
        return em.extent(e)
    except KeyError:
        return fallback


def _shape(em, var, value) -> tuple:
    return tuple(_extent(em, e, s) for e, s in zip(var.type.shape, value.shape))


def _table(em, key: str, values: np.ndarray) -> str:
    """A module-level float64 array constant."""
    items = ", ".join(f"float.fromhex({float(v).hex()!r})" if v == v else "float('nan')" for v in values)
    return intern_constant(em.constants, em.constant_lines, ("table", key), f"np.array([{items}], dtype=np.float64)")


def _decode(em, dst: str, fmt, codes, scales, carrier_shape, code_idx, scale_idx, dst_idx, acc) -> None:
    """dst[dst_idx(k)] = acc(table[code] * scale) for every carrier position (two codes per e2m1 byte)."""
    tl = _table(em, fmt.name, MX.code_table(fmt))
    ts = _table(em, "e8m0", MX.scale_table())
    cast = np_type(acc)
    with em.loop_nest(carrier_shape, parallel=True) as idx:
        code = em.assign(f"np.int64({em.elem(codes, code_idx(idx))})", "x")
        s = em.assign(f"{ts}[np.int64({em.elem(scales, scale_idx(idx))})]", "x")
        if fmt.name == "e4m3":
            em.line(f"{dst}[{dst_idx(idx, 0, 1)}] = {cast}({tl}[{code}] * {s})")
        else:
            em.line(f"{dst}[{dst_idx(idx, 0, 2)}] = {cast}({tl}[{code} & 15] * {s})")
            em.line(f"{dst}[{dst_idx(idx, 1, 2)}] = {cast}({tl}[{code} >> 4] * {s})")


@rule(ops.scaled_contract)
def _scaled_contract(em, node, args):
    a, sa, b, sb = args
    acc = node.attr("acc_dtype")
    gs = node.attr("group_size")
    fl, fr = node.attr("lhs_format"), node.attr("rhs_format")
    m, g, cl = _shape(em, node.inputs[0], a)
    _, cr, n = _shape(em, node.inputs[2], b)
    for operand, axis, role, fmt, want, e in dynamic_carriers(node):  # C held to the group size (spec §11)
        c = em.assign(f"np.int64({cl if operand == 0 else cr})", "n")
        em.check(f"{c} != {want}", C.SCALED_CARRIER, c, axis=axis, group=gs, want=want, role=role,
                 extent=T.extent_str(e), fmt=str(fmt))
        cl, cr = (str(want), cr) if operand == 0 else (cl, str(want))
    k = em.assign(f"{g} * {gs}", "n")
    dtype = np_type(acc)
    lhs = em.allocate((m, k), dtype, "the decoded lhs of `scaled_contract`")
    rhs = em.allocate((k, n), dtype, "the decoded rhs of `scaled_contract`")
    _decode(em, lhs, fl, a, sa, (m, g, cl), lambda i: i, lambda i: i[:2],
            lambda i, o, w: f"{i[0]}, np.int64({i[1]}) * {gs} + {w} * np.int64({i[2]}) + {o}", acc)
    _decode(em, rhs, fr, b, sb, (g, cr, n), lambda i: i, lambda i: [i[2], i[0]],
            lambda i, o, w: f"np.int64({i[0]}) * {gs} + {w} * np.int64({i[1]}) + {o}, {i[2]}", acc)
    out = em.allocate((m, n), dtype, "the result of `scaled_contract`")
    with em.block(f"if {k} == 0:"):
        em.line(f"{out}.fill(0)")
    with em.block(f"if {k} > 0 and {m} > 0 and {n} > 0:"):
        if not blas_usable(em):  # no BLAS inside this parallel loop (see contract.dense_contract)
            i, j, r = em.fresh("i"), em.fresh("j"), em.fresh("k")
            with em.block(f"for {i} in range({m}):"), em.block(f"for {j} in range({n}):"):
                s = em.assign(f"{dtype}(0)", "c")
                with em.block(f"for {r} in range({k}):"):
                    em.line(f"{s} += {lhs}[{i}, {r}] * {rhs}[{r}, {j}]")
                em.line(f"{out}[{i}, {j}] = {s}")
        else:
            em.line(f"R.gemm({lhs}, {rhs}, {out})")
    return Array(out, (m, n))


# --- sparse contract -----------------------------------------------------------------------------------------

@rule(ops.sparse_contract)
def _sparse_contract(em, node, args):
    comp, meta, rhs = args
    fmt = node.attr("format")
    acc = node.attr("acc_dtype")
    reduce = node.attr("reduce")
    ca, rb = reduce[0]
    ct = node.inputs[0].type
    src = ct.dtype
    cshape = _shape(em, node.inputs[0], comp)
    meta = em.materialize(meta, node.inputs[1].type)
    group, keep = fmt.group, fmt.keep
    _, _, ekc, k = compression_extents(node)
    kx = str(k)
    if not (isinstance(k, int) and isinstance(ekc, int)):  # dynamic: held to the static relations (spec §12)
        kv = em.assign(f"np.int64({em.extent(k)})", "n")
        kc = em.assign(f"np.int64({cshape[ca]})", "n")
        if not isinstance(k, int):
            em.check(f"{kv} % {group} != 0", C.SPARSE_REDUCTION, kv, axis=rb, group=group, fmt=repr(fmt),
                     extent=T.extent_str(k))
        em.check(f"{kc} * {group} != {kv} * {keep}", C.SPARSE_COMPRESSED, kc, kv, f"{kv} * {keep} // {group}",
                 axis=ca, rhs_axis=rb, keep=keep, group=group, fmt=repr(fmt), extent=named_extent(ekc))
        kx = kv
    # 1. metadata check, sequential, before anything is written.
    site_range = C.SPARSE_POSITION.site(last=group - 1, fmt=repr(fmt))
    site_order = C.SPARSE_ORDER.site(fmt=repr(fmt))
    with em.loop_nest(cshape, parallel=False) as idx:
        x = em.assign(f"np.int64({em.elem(meta, idx)})", "x")
        em.check(f"{x} < 0 or {x} >= {group}", site_range, x)
        if keep > 1:
            with em.block(f"if {idx[ca]} % {keep} != 0:"):
                prev_idx = list(idx)
                prev_idx[ca] = f"{idx[ca]} - 1"
                p = em.assign(f"np.int64({em.elem(meta, prev_idx)})", "x")
                em.check(f"{x} <= {p}", site_order, p, x)
    # 2. the dense lhs in the source dtype (zeros where nothing is kept).
    dshape = list(cshape)
    dshape[ca] = kx
    dense = em.allocate(tuple(dshape), np_type(src), "the dense lhs of `sparse_contract`", fill="0")
    with em.loop_nest(cshape, parallel=True) as idx:
        x = em.assign(f"np.int64({em.elem(meta, idx)})", "x")
        with em.block(f"if {x} >= 0 and {x} < {group}:"):  # in bounds even with checks off
            didx = list(idx)
            didx[ca] = f"(np.int64({idx[ca]}) // {keep}) * {group} + {x}"  # a prange index may be unsigned
            em.line(f"{dense}[{', '.join(didx)}] = {em.elem(comp, idx)}")
    dtype_shape = list(ct.shape)
    dtype_shape[ca] = k
    shim = DenseContract(node, T.TensorType(src, tuple(dtype_shape)))
    value = Array(dense, tuple(dshape))
    return dense_contract(em, shim, [value, rhs], acc)
