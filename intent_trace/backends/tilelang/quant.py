"""TileLang rules for ``quantize`` and ``quantized_dot`` (quantization.md; ggml's k-quants).

quantize: the record is computed where the node stands, one super-block (256 consecutive elements of the
last axis) at a time: the block's values are copied into a local buffer, one helper call,
``quantize_q8_k`` or ``quantize_q4_k`` (:mod:`.extern`), fills the block's fields in small local buffers,
and those are copied into the record's buffers. The helpers' bodies (:mod:`.c`) are generic's float32
transcription of ggml's reference code, one f32 operation per step in the same order, hence
bit-identical to generic (and to the cpu oracle). The record's fields are buffers of the emitter's
storage (:mod:`.storage`: the stack when small and static, else the heap), so the record is a value fixed
where it is defined, whatever later writes do. A dynamic last extent K is checked to be a multiple of 256 first (a
ValueError naming K and its value); B = K // 256 is then the kernel's value, which a target whose host sizes the
buffers before the call (CUDA, Metal) cannot size by: there each field is held flat in ``(*lead, K)``
(:class:`_Field`).

quantized_dot: per result element a serial loop over the blocks; per block the integer sums are exact in
i64 and the scale products and the accumulation over blocks are f32 in generic's order
(``(xd * yd) * f32(isum)`` for q8_k x q8_k; ``(xd * yd) * f32(Σ_j scales_j Σ q·qs) - (xdmin * yd) *
f32(Σ_t bsums_t mins_{t/2})`` for q4_k x q8_k), accumulated from 0 in block order: the same bits as generic,
well within Q3's bound. Leading axes broadcast (size-one, right-aligned) as generic broadcasts them.
"""
from __future__ import annotations

import math

from ... import types as T
from ...codegen import checks as C
from . import extern
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Aggregate, Array, Lazy, Scalar
from .scalar_rules import call, cast_expr

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)

_ORDER = {"q8_k": ("d", "qs", "bsums"), "q4_k": ("d", "dmin", "scales", "mins", "q")}


class _Field:
    """A record field's storage: its logical shape ``(*lead, B, *tail)`` in a buffer of that shape, or (``flat``)
    in a buffer ``(*lead, K)`` holding each block's ``prod(tail)`` elements at ``b * prod(tail)``: a host sizes
    that one by the kernel's K before the call, where it cannot size B = K // 256, which the kernel computes
    (B * prod(tail) <= K, as prod(tail) <= 256)."""

    def __init__(self, em, shape: tuple, rank_lead: int, dtype: str, flat_extent: str | None):
        self.shape, self.lead, self.flat = shape, rank_lead, flat_extent is not None
        tail = [int(n) for n in shape[rank_lead + 1:]]
        self.strides = [math.prod(tail[k + 1:]) for k in range(len(tail))]  # row-major within a block
        self.block = math.prod(tail)
        self.buffer = em.allocate((*shape[:rank_lead], flat_extent) if self.flat else shape, dtype)

    def at(self, idx) -> str:
        """The buffer element of logical index ``idx``."""
        if not self.flat:
            return f"{self.buffer}[{', '.join(idx)}]"
        lead, b, within = idx[:self.lead], idx[self.lead], idx[self.lead + 1:]
        terms = (i if s == 1 else f"{i} * {s}" for i, s in zip(within, self.strides))
        offset = " + ".join([f"{b} * {self.block}", *terms])
        return f"{self.buffer}[{', '.join((*lead, offset))}]"

    def value(self):
        return Lazy(self.shape, self.at) if self.flat else Array(self.buffer, self.shape)


@rule(ops.quantize)
def _quantize(em, node, args):
    x = args[0]
    fmt = node.attr("format").name
    t_in = node.inputs[0].type
    out_t = node.attr("type")
    lead = em.shape(t_in)[:-1]
    flat = None
    if isinstance(t_in.shape[-1], int):
        blocks = str(t_in.shape[-1] // 256)
    else:  # a dynamic K: a multiple of 256 (Q1), checked before anything is quantized; B = K // 256 blocks
        k = em.extent(t_in.shape[-1])
        em.check(f"T.floormod({k}, T.int64(256)) != T.int64(0)", C.QUANTIZE_EXTENT, k,
                 extent=T.extent_str(t_in.shape[-1]))
        blocks = em.extent(out_t.fields[0][1].shape[-1])
        flat = k if em.host_workspaces else None
    types = dict(out_t.fields)
    fields = {name: _Field(em, em.shape(ft), len(lead), em.tir(ft.dtype), flat) for name, ft in out_t.fields}
    # The helper works on one block in small local buffers (pointers into a heap buffer are not available to it
    # on every path through TileLang), which are then copied into the record's buffers.
    scratch = {}
    for name in ("x", *_ORDER[fmt]):
        dtype = "float32" if name == "x" else em.tir(types[name].dtype)
        tail = ("256",) if name == "x" else em.shape(types[name])[len(lead) + 1:]
        scratch[name] = (em.fresh("a"), tail, dtype)
        em.line(f"{scratch[name][0]} = T.alloc_local(({', '.join(tail) or '1'},), {dtype!r})")
    with em.loop_nest((*lead, blocks)) as idx:
        with em.loop_nest(("256",)) as (l,):
            em.line(f"{scratch['x'][0]}[{l}] = {em.elem(x, [*idx[:-1], f'{idx[-1]} * 256 + {l}'])}")
        names = ("x", *_ORDER[fmt])
        addresses = [extern.address(scratch[n][0], ["0"]) for n in names]
        helper = extern.call(em, f"quantize_{fmt}", (), T.i32, tuple(scratch[n][2] for n in names), *addresses)
        em.line(f"T.evaluate({helper})")
        for name in _ORDER[fmt]:
            local, tail, _ = scratch[name]
            with em.loop_nest(tail) as t:
                em.line(f"{fields[name].at([*idx, *t])} = {local}[{', '.join(t) or '0'}]")
    return Aggregate(tuple(fields[name].value() for name, _ in out_t.fields))


def _broadcast(em, pos: list, lead: tuple) -> list:
    """Indices into an operand's leading axes (right-aligned) for result position ``pos``."""
    offset = len(pos) - len(lead)
    out = []
    for k, n in enumerate(lead):
        i = pos[k + offset]
        out.append("0" if n == "1" else i if n.isdigit() else em.assign(f"T.min({i}, {n} - 1)", "j"))
    return out


@rule(ops.quantized_dot)
def _quantized_dot(em, node, args):
    lt, rt = node.inputs[0].type, node.inputs[1].type
    x = dict(zip(lt.names, args[0].items))
    y = dict(zip(rt.names, args[1].items))
    lf = node.attr("lhs_format").name
    lshape, rshape = em.shape(lt.field_type("d")), em.shape(rt.field_type("d"))
    out_t = node.attr("type")
    shape = em.shape(out_t) if isinstance(out_t, T.TensorType) else ()
    f32, i64 = T.f32, T.i64
    zero_f, zero_i = em.constant(0, f32), em.constant(0, i64)

    def f(family, a, b):
        return em.assign(call(em, family, (f32,), f32, (f32, f32), a, b), "x")

    def widen(record, name, idx):
        side, t = (x, lt) if record == "x" else (y, rt)
        return cast_expr(em, t.field_type(name).dtype, i64, em.elem(side[name], idx))

    def accumulate(into, a, b):
        product = call(em, "mul", (i64,), i64, (i64, i64), a, b)
        em.line(f"{into} = {call(em, 'add', (i64,), i64, (i64, i64), into, product)}")

    def local(dtype, init):
        name = em.fresh("c")
        em.line(f"{name} = T.alloc_var({em.tir(dtype)!r}, init={init})")
        return name

    def compute(pos):
        li, ri = _broadcast(em, pos, lshape[:-1]), _broadcast(em, pos, rshape[:-1])
        acc = local(f32, zero_f)
        with em.loop_nest((rshape[-1],)) as (b,):
            yd = em.elem(y["d"], [*ri, b])  # q8_k's d is f32
            if lf == "q8_k":
                s = local(i64, zero_i)
                with em.loop_nest(("256",)) as (i,):
                    accumulate(s, widen("x", "qs", [*li, b, i]), widen("y", "qs", [*ri, b, i]))
                term = f("mul", f("mul", em.elem(x["d"], [*li, b]), yd), cast_expr(em, i64, f32, s))
            else:
                total = local(i64, zero_i)
                with em.loop_nest(("8",)) as (j,):
                    s = local(i64, zero_i)
                    with em.loop_nest(("32",)) as (i,):
                        at = f"{j} * 32 + {i}"
                        accumulate(s, widen("x", "q", [*li, b, at]), widen("y", "qs", [*ri, b, at]))
                    accumulate(total, widen("x", "scales", [*li, b, j]), s)
                sumi = local(i64, zero_i)
                with em.loop_nest(("16",)) as (t,):
                    accumulate(sumi, widen("y", "bsums", [*ri, b, t]),
                               widen("x", "mins", [*li, b, f"T.floordiv({t}, 2)"]))
                xd = cast_expr(em, lt.field_type("d").dtype, f32, em.elem(x["d"], [*li, b]))
                xdmin = cast_expr(em, lt.field_type("dmin").dtype, f32, em.elem(x["dmin"], [*li, b]))
                term = f("sub", f("mul", f("mul", xd, yd), cast_expr(em, i64, f32, total)),
                         f("mul", f("mul", xdmin, yd), cast_expr(em, i64, f32, sumi)))
            em.line(f"{acc} = {call(em, 'add', (f32,), f32, (f32, f32), acc, term)}")
        return em.assign(acc, "r")

    if not shape:
        return Scalar(compute([]))
    return Lazy(shape, compute)
