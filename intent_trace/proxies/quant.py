"""Quantized computation: I.quantize, I.quantized_dot (spec §11.1, quantization.md).

``quantize`` takes an f32 tensor ``[..., K]`` and builds one ``quantize`` node whose result is the format's record
of logical fields (Q1). A static K must be a positive multiple of 256 (a TraceError otherwise); a dynamic K
gives B = K // 256 blocks (the node's second operand, that value; its extent is the one ``K // 256`` gives) and
is checked to be a multiple of 256 when the kernel runs. ``quantized_dot`` takes two such
records, checks the (lhs_format, rhs_format) pair ((q4_k, q8_k) or (q8_k, q8_k)), the f32
accumulator, equal block counts and right-aligned broadcastable leading axes, and builds one
``quantized_dot`` node whose result is the leading broadcast shape (an f32 scalar if empty).
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from .build import binary, broadcast_shapes, shape_values
from .context import current, fail
from .quant_formats import QK_K, QuantFormat, q4_k, q8_k
from .aggregates import RecordProxy
from .values import Proxy, ValueProxy, wrap

SUPPORTED = ((q4_k, q8_k), (q8_k, q8_k))


def _format(fmt, who: str, role: str) -> QuantFormat:
    if not isinstance(fmt, QuantFormat):
        fail(f"{who}: {role} must be a k-quant format token (I.quant.q4_k or I.quant.q8_k), got {fmt!r}", "type")
    return fmt


def quantize(values, *, format):  # noqa: A002
    """quantization.md Q2: f32[..., K] -> the format's record (K % 256 == 0, B = K / 256 blocks)."""
    who = "I.quantize"
    fmt = _format(format, who, "format")
    if not (isinstance(values, ValueProxy) and isinstance(values.type, T.TensorType)):
        if isinstance(values, Proxy) and isinstance(getattr(values, "type", None), T.ViewType):
            fail(f"{who}: values is a view; read it into a tensor first (e.g. x[:])", "type")
        fail(f"{who}: values must be an f32 tensor [..., K], got {getattr(values, 'type', type(values).__name__)!r}",
             "type")
    var = values._var
    t = var.type
    if t.dtype is not T.f32:
        fail(f"{who}: values must be f32, got {t.dtype}; write I.cast(values, I.f32)", "type")
    if t.rank < 1:
        fail(f"{who}: values must have rank >= 1 ([..., K]), got {t!r}", "type")
    k = t.shape[-1]
    if isinstance(k, int):
        if k % QK_K != 0 or k == 0:
            fail(f"{who}: the last extent K = {k} must be a positive multiple of {QK_K} (super-blocks of {QK_K} "
                 f"elements)", "value")
        (out,) = current().emit(ops.quantize, (var,), (("format", fmt),))
        return wrap(out)
    # A dynamic K (one kernel for every width): B = K // 256 blocks, an extent of its own that the expression
    # K // 256 gives (so `x.shape[-1] // 256` written by the kernel is the same extent); every target checks
    # K % 256 == 0 when the kernel runs (a ValueError naming K and its value, before any output is written).
    (width,) = shape_values(var, (k,))
    blocks = binary("floordiv", width, QK_K)._var
    rtype = fmt.record_type(t.shape[:-1], current().value_dim(blocks))
    (out,) = current().emit(ops.quantize, (var, blocks), (("format", fmt), ("type", rtype)))
    return wrap(out)


def _record(x, fmt: QuantFormat, who: str, role: str):
    if not isinstance(x, RecordProxy):
        fail(f"{who}: {role} must be a {fmt!r} record (from I.quantize), got "
             f"{getattr(x, 'type', type(x).__name__)!r}", "type")
    t = x._var.type
    names = tuple(n for n, _, _ in fmt.field_shapes())
    if t.names != names:
        fail(f"{who}: {role} has fields ({', '.join(t.names)}), not those of {fmt!r} ({', '.join(names)})", "type")
    first = t.field_type(names[0])
    lead, blocks = first.shape[:-1], first.shape[-1]
    if t != fmt.record_type(lead, blocks):
        fail(f"{who}: {role} has type {t!r}, not the {fmt!r} record {fmt.record_type(lead, blocks)!r}", "type")
    return x._var, lead, blocks


def quantized_dot(lhs, rhs, *, lhs_format, rhs_format, acc_dtype):
    """quantization.md Q3: the dot of two quantized records over the blocks axis."""
    who = "I.quantized_dot"
    lf, rf = _format(lhs_format, who, "lhs_format"), _format(rhs_format, who, "rhs_format")
    if (lf, rf) not in SUPPORTED:
        fail(f"{who}: the format pair ({lf!r}, {rf!r}) is not supported; supported pairs are "
             f"(I.quant.q4_k, I.quant.q8_k) and (I.quant.q8_k, I.quant.q8_k)", "type")
    if acc_dtype is not T.f32:
        fail(f"{who}: acc_dtype must be I.f32, got {acc_dtype!r}", "type")
    a, la, ba = _record(lhs, lf, who, "lhs")
    b, lb, bb = _record(rhs, rf, who, "rhs")
    if not T.same_extent(ba, bb):
        fail(f"{who}: the operands have {T.extent_str(ba)} and {T.extent_str(bb)} blocks; the blocks axis is "
             f"contracted and must be provably equal", "value")
    broadcast_shapes([la, lb], f"{who} leading axes")
    attrs = (("lhs_format", lf), ("rhs_format", rf), ("acc_dtype", T.f32))
    (out,) = current().emit(ops.quantized_dot, (a, b), attrs)
    return wrap(out)


__all__ = ["quantize", "quantized_dot"]
