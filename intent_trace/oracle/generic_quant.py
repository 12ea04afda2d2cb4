"""Generic rules for quantize and quantized_dot (quantization.md).

Vectorised NumPy float32 transcriptions of ggml's reference algorithms: every arithmetic step is one
float32 operation in ggml's order, vectorised across blocks (or 32-element sub-blocks); sums that
ggml accumulates serially are accumulated serially over the element index (never pairwise), so the
results are bit-identical to ``quantize_row_q8_K_ref`` / ``quantize_row_q4_K_ref``.

- ``nearest_int(f)``: ggml adds 1.5 * 2^23 in float32 (round half to even) and reads the integer back;
  here ``(f + 12582912f) - 12582912f``, identical for |f| <= 2^22.
- q4_k: ``make_qkx2_quants(32, 15, x, w, rmin=-1, rdelta=0.1, nstep=20, use_mad=false)`` per sub-block.
  Where ``f32(d) * scales_j == 0`` the quants are 0 (Q2).
- quantized_dot: per block the integer sums are exact (int64), the scale products and the
  accumulation over blocks are float32 (within Q3's bound).
- a dynamic last extent K (the node's block-count operand) is checked here: K % 256 == 0, else a ValueError
  naming K and its value.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..codegen import checks as C
from ..graph import ops
from ..graph.interpreter import rule_registrar

RULES: dict = {}
rule = rule_registrar(RULES)

F = np.float32
MAGIC = F(12582912.0)


def nearest_int(f: np.ndarray) -> np.ndarray:
    f = np.asarray(f, dtype=np.float32)
    with np.errstate(all="ignore"):
        return ((f + MAGIC) - MAGIC).astype(np.int32)


def _blocks(x: np.ndarray):
    x = np.ascontiguousarray(x, dtype=np.float32)
    lead = x.shape[:-1]
    nb = x.shape[-1] // 256
    return x.reshape(-1, 256), lead, nb


def nan_nearest_q8(x: np.ndarray) -> np.ndarray:
    """ggml's q8_k quant of a NaN element: ``MIN(127, nearest_int(iscale * x))`` with nearest_int reading the bits.

    iscale is finite, so on x86 the product is x quieted, and ``(bits & 0x7fffff) - 0x400000`` is x's low 22
    payload bits: 0 for the default NaN, up to 127 for a payload (the finite path never sees this).
    """
    return np.minimum(127, x.view(np.uint32) & np.uint32(0x3FFFFF)).astype(np.int32)


def quantize_q8_k(x: np.ndarray) -> tuple:
    """(d f32[..., B], qs i8[..., B, 256], bsums i16[..., B, 16]).

    The block's maximum is ggml's ``fabsf(x) > amax`` scan from amax = 0: the first largest |x|, NaNs skipped
    (a NaN compares false), so a block of zeros and NaNs is the zero block.
    """
    xb, lead, nb = _blocks(x)
    n = xb.shape[0]
    nan = np.isnan(xb)
    ax = np.where(nan, F(0), np.abs(xb))
    where = np.argmax(ax, axis=1) if n else np.zeros(0, np.int64)
    rows = np.arange(n)
    amax = ax[rows, where]
    mx = xb[rows, where]
    zero = amax == 0
    with np.errstate(all="ignore"):
        iscale = F(-127.0) / np.where(zero, F(1), mx).astype(F)
        q = np.minimum(127, nearest_int(iscale[:, None] * xb))
        d = (F(1.0) / iscale).astype(F)
    q = np.where(nan, nan_nearest_q8(xb), q)
    q = np.where(zero[:, None], 0, q).astype(np.int8)
    d = np.where(zero, F(0), d).astype(F)
    bsums = q.reshape(n, 16, 16).astype(np.int32).sum(axis=2).astype(np.int16)
    return (d.reshape(lead + (nb,)), q.reshape(lead + (nb, 256)), bsums.reshape(lead + (nb, 16)))


def make_qkx2_quants(x: np.ndarray, w: np.ndarray, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20):
    """Vectorised over rows of x, w (M, n): returns (scale f32[M], the_min f32[M], L u8[M, n])."""
    m, n = x.shape
    nmax_f, rmin_f, rdelta_f = F(nmax), F(rmin), F(rdelta)
    with np.errstate(all="ignore"):
        mn = x[:, 0].copy()
        mx = x[:, 0].copy()
        sum_w = w[:, 0].copy()
        sum_x = sum_w * x[:, 0]
        for i in range(1, n):
            xi = x[:, i]
            mn = np.where(xi < mn, xi, mn)
            mx = np.where(xi > mx, xi, mx)
            sum_w = sum_w + w[:, i]
            sum_x = sum_x + w[:, i] * xi
        mn = np.where(mn > 0, F(0), mn).astype(F)
        flat = mx == mn
        rng = np.where(flat, F(1), mx - mn).astype(F)
        shifted = x - mn[:, None]
        iscale = nmax_f / rng
        scale = F(1) / iscale
        big_l = np.clip(nearest_int(iscale[:, None] * shifted), 0, nmax).astype(F)
        best = np.zeros(m, F)
        for i in range(n):
            diff = (scale * big_l[:, i] + mn) - x[:, i]
            diff = diff * diff
            best = best + w[:, i] * diff
        for step in range(nstep + 1):
            # ggml uses the current (possibly improved) min in both the range and the shift
            rng = np.where(flat, F(1), mx - mn).astype(F)
            iscale = (rmin_f + rdelta_f * F(step) + nmax_f) / rng
            laux = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(F)
            sum_l = np.zeros(m, F)
            sum_l2 = np.zeros(m, F)
            sum_xl = np.zeros(m, F)
            for i in range(n):
                wl = w[:, i] * laux[:, i]
                sum_l = sum_l + wl
                sum_l2 = sum_l2 + wl * laux[:, i]
                sum_xl = sum_xl + wl * x[:, i]
            big_d = sum_w * sum_l2 - sum_l * sum_l
            ok = big_d > 0
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / big_d
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / big_d
            pos = this_min > 0
            this_min = np.where(pos, F(0), this_min).astype(F)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(F)
            mad = np.zeros(m, F)
            for i in range(n):
                diff = (this_scale * laux[:, i] + this_min) - x[:, i]
                diff = diff * diff
                mad = mad + w[:, i] * diff
            better = ok & (mad < best) & ~flat
            big_l = np.where(better[:, None], laux, big_l)
            best = np.where(better, mad, best)
            scale = np.where(better, this_scale, scale)
            mn = np.where(better, this_min, mn)
        scale = np.where(flat, F(0), scale).astype(F)
        big_l = np.where(flat[:, None], F(0), big_l)
    return scale, (-mn).astype(F), big_l.astype(np.uint8)


def quantize_q4_k(x: np.ndarray) -> tuple:
    """(d f16[..., B], dmin f16[..., B], scales u8[..., B, 8], mins u8[..., B, 8], q u8[..., B, 256])."""
    xb, lead, nb = _blocks(x)
    n = xb.shape[0]
    sub = xb.reshape(n * 8, 32)
    with np.errstate(all="ignore"):
        sum_x2 = np.zeros(n * 8, F)
        for i in range(32):
            sum_x2 = sum_x2 + sub[:, i] * sub[:, i]
        av = np.sqrt(sum_x2 / F(32))
        w = (av[:, None] + np.abs(sub)).astype(F)
        sc, mi, _ = make_qkx2_quants(sub, w)
        sc, mi = sc.reshape(n, 8), mi.reshape(n, 8)
        max_scale = np.zeros(n, F)
        max_min = np.zeros(n, F)
        for j in range(8):
            max_scale = np.where(sc[:, j] > max_scale, sc[:, j], max_scale)
            max_min = np.where(mi[:, j] > max_min, mi[:, j], max_min)
        inv_scale = np.where(max_scale > 0, F(63) / np.where(max_scale > 0, max_scale, F(1)), F(0)).astype(F)
        inv_min = np.where(max_min > 0, F(63) / np.where(max_min > 0, max_min, F(1)), F(0)).astype(F)
        # ggml: (uint8_t)MIN(63, nearest_int(...)), of which the packed layout keeps the low 6 bits.
        ls = (np.minimum(63, nearest_int(inv_scale[:, None] * sc)) & 63).astype(np.uint8)
        lm = (np.minimum(63, nearest_int(inv_min[:, None] * mi)) & 63).astype(np.uint8)
        d = (max_scale / F(63)).astype(np.float16)
        dmin = (max_min / F(63)).astype(np.float16)
        dd = d.astype(F)[:, None] * ls.astype(F)  # (n, 8)
        dm = dmin.astype(F)[:, None] * lm.astype(F)
        live = dd != 0
        safe = np.where(live, dd, F(1)).astype(F)
        xs = xb.reshape(n, 8, 32)
        l = np.clip(nearest_int((xs + dm[:, :, None]) / safe[:, :, None]), 0, 15)
        q = np.where(live[:, :, None], l, 0).astype(np.uint8).reshape(n, 256)
    return (d.reshape(lead + (nb,)), dmin.reshape(lead + (nb,)), ls.reshape(lead + (nb, 8)),
            lm.reshape(lead + (nb, 8)), q.reshape(lead + (nb, 256)))


def _broadcast(leaves: tuple, lead_rank: int, tails: tuple, out_lead: tuple) -> list:
    return [np.broadcast_to(np.asarray(v), out_lead + np.asarray(v).shape[lead_rank:]) for v in leaves]


def dot_blocks(lf: str, lhs: tuple, rhs: tuple, out_lead: tuple) -> np.ndarray:
    """f32 per-output dot of two record values (tuples of arrays) with leading axes broadcast to out_lead."""
    nb = np.asarray(rhs[0]).shape[-1]
    la = np.asarray(lhs[0]).ndim - 1
    lb = np.asarray(rhs[0]).ndim - 1
    L = _broadcast(lhs, la, None, out_lead)
    Rr = _broadcast(rhs, lb, None, out_lead)
    yd = Rr[0].astype(F)
    yqs = Rr[1].astype(np.int64)
    with np.errstate(all="ignore"):
        if lf == "q8_k":
            xd = L[0].astype(F)
            isum = np.einsum("...bi,...bi->...b", L[1].astype(np.int64), yqs)
            terms = (xd * yd) * isum.astype(F)
        else:
            xd, xdmin = L[0].astype(F), L[1].astype(F)
            scales, mins, q = (v.astype(np.int64) for v in L[2:5])
            prod = (q * yqs).reshape(q.shape[:-1] + (8, 32)).sum(axis=-1)  # exact per sub-block
            blockint = (prod * scales).sum(axis=-1)
            sumi = (Rr[2].astype(np.int64) * np.repeat(mins, 2, axis=-1)).sum(axis=-1)
            terms = (xd * yd) * blockint.astype(F) - (xdmin * yd) * sumi.astype(F)
        acc = np.zeros(out_lead, F)
        for b in range(nb):
            acc = acc + terms[..., b]
    return np.asarray(acc, dtype=F)


@rule(ops.quantize)
def _quantize(it, node, args):
    fmt = node.attr("format")
    x = np.asarray(args[0], dtype=np.float32)
    if len(node.inputs) == 2 and x.shape[-1] % 256:  # a dynamic K: the tracer could not check it (Q1)
        raise C.QUANTIZE_EXTENT.error(x.shape[-1], extent=T.extent_str(node.inputs[0].type.shape[-1]))
    return quantize_q8_k(x) if fmt.name == "q8_k" else quantize_q4_k(x)


@rule(ops.quantized_dot)
def _quantized_dot(it, node, args):
    out_t = node.attr("type")
    lead = tuple(getattr(out_t, "shape", ()))
    lhs, rhs = args
    out_lead = np.broadcast_shapes(np.asarray(lhs[0]).shape[:-1], np.asarray(rhs[0]).shape[:-1])
    result = dot_blocks(node.attr("lhs_format").name, tuple(lhs), tuple(rhs), out_lead)
    if not lead and result.ndim == 0:
        return F(result)
    return result
