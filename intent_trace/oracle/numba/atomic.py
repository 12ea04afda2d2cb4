"""Atomic operations on view elements (spec §16, numerics T9).

Every atomic is one hardware atomic on the element's address, emitted as an LLVM instruction
through a Numba intrinsic defined here (``A.<name>(array, (coordinates...), value)`` in the
generated source): ``load atomic``/``store atomic``, ``atomicrmw`` (xchg, add, and, or, xor,
max/min or umax/umin by signedness) and ``cmpxchg``, with the node's memory order (relaxed is
LLVM's ``monotonic``) and, for compare-exchange, the recorded failure order. f32 add/max/min are
compare-exchange loops on the element's 32-bit pattern, so they round (one f32 addition) and
choose (IEEE maximum/minimum, ``R.fmax``/``R.fmin``, the element first) exactly as the elementwise
ops do. The code is therefore correct under ``prange`` as well as in the serial build: points of
a ``parallel`` body may update the same element concurrently.

Coordinates are bounds-checked like a view read (``IndexError`` naming the view, the coordinate
and the extent; outputs are staged).
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ...graph import ops
from ...graph.interpreter import rule_registrar
from ..generic_races import COMBINE
from .indexing import coords, index_plan
from .races import note
from .lazy import lazy_module
from .scalar_rules import np_type
from .values import Aggregate, Scalar

LLVM_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_RW_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
_INT_OP = {"exchange": "xchg", "add": "add", "and": "and", "or": "or", "xor": "xor"}

# Generated modules name these helpers ``A.<name>``; like the runtime ``R``, the module is imported lazily:
# Numba resolves the names only when it compiles, and a kernel loaded from its cache never does.
IMPORT_LINE = "A = lazy_module('intent_trace.oracle.numba.atomic')"
R = lazy_module("intent_trace.oracle.numba.runtime")  # resolved when a helper below is first compiled


# --- LLVM intrinsics ----------------------------------------------------------------------------------

def _pointer(context, builder, aryty, ary, idxty, idx, bits: int = 0):
    """The address of ``ary[idx]`` (as a pointer to an ``i<bits>`` when ``bits``)."""
    array = context.make_array(aryty)(context, builder, ary)
    indices = [context.cast(builder, i, t, types.intp)
               for i, t in zip(cgutils.unpack_tuple(builder, idx, len(idxty)), idxty)]
    ptr = cgutils.get_item_pointer(context, builder, aryty, array, indices)
    return builder.bitcast(ptr, ir.IntType(bits).as_pointer()) if bits else ptr


def _align(context, dtype) -> int:
    return context.get_abi_sizeof(context.get_data_type(dtype))


def _is_element_ref(ary, idx) -> bool:
    return isinstance(ary, types.Array) and isinstance(idx, types.BaseTuple) and len(idx) == ary.ndim and \
        all(isinstance(t, types.Integer) for t in idx)


def _load(order: str, bits: int = 0):
    """``load atomic``: the element (or, with ``bits``, its bit pattern as an unsigned integer)."""
    result = getattr(types, f"uint{bits}") if bits else None

    @intrinsic
    def atomic_load(typingctx, ary, idx):
        if not _is_element_ref(ary, idx):
            return None
        sig = (result or ary.dtype)(ary, idx)

        def codegen(context, builder, signature, args):
            ptr = _pointer(context, builder, ary, args[0], idx, args[1], bits)
            typ = ir.IntType(bits) if bits else context.get_value_type(ary.dtype)
            return builder.load_atomic(ptr, LLVM_ORDER[order], _align(context, ary.dtype), typ=typ)

        return sig, codegen

    return atomic_load


def _store(order: str):
    @intrinsic
    def atomic_store(typingctx, ary, idx, value):
        if not _is_element_ref(ary, idx):
            return None
        sig = types.none(ary, idx, value)

        def codegen(context, builder, signature, args):
            ptr = _pointer(context, builder, ary, args[0], idx, args[1])
            v = context.cast(builder, args[2], value, ary.dtype)
            builder.store_atomic(v, ptr, LLVM_ORDER[order], _align(context, ary.dtype))
            return context.get_dummy_value()

        return sig, codegen

    return atomic_store


def _int_rmw(kind: str, order: str):
    """``atomicrmw``: replaces an integer element and returns its old value."""

    @intrinsic
    def atomic_rmw(typingctx, ary, idx, value):
        if not _is_element_ref(ary, idx) or not isinstance(ary.dtype, types.Integer):
            return None
        sig = ary.dtype(ary, idx, value)

        def codegen(context, builder, signature, args):
            ptr = _pointer(context, builder, ary, args[0], idx, args[1])
            v = context.cast(builder, args[2], value, ary.dtype)
            op = _INT_OP.get(kind) or (kind if ary.dtype.signed else f"u{kind}")  # max/min: signed or unsigned
            return builder.atomic_rmw(op, ptr, v, LLVM_ORDER[order])

        return sig, codegen

    return atomic_rmw


def _cas(order: str, failure: str, bits: int = 0):
    """``cmpxchg``: (old value, success). With ``bits``, expected/desired/old are the element's bit pattern."""

    @intrinsic
    def atomic_cas(typingctx, ary, idx, expected, desired):
        if not _is_element_ref(ary, idx) or not (bits or isinstance(ary.dtype, types.Integer)):
            return None
        elem = getattr(types, f"uint{bits}") if bits else ary.dtype
        ret = types.Tuple((elem, types.boolean))
        sig = ret(ary, idx, expected, desired)

        def codegen(context, builder, signature, args):
            ptr = _pointer(context, builder, ary, args[0], idx, args[1], bits)
            e = context.cast(builder, args[2], expected, elem)
            d = context.cast(builder, args[3], desired, elem)
            pair = builder.cmpxchg(ptr, e, d, LLVM_ORDER[order], LLVM_ORDER[failure])
            return context.make_tuple(builder, ret, [builder.extract_value(pair, 0), builder.extract_value(pair, 1)])

        return sig, codegen

    return atomic_cas


@njit(nogil=True, error_model="numpy")
def _f32_add(a, b):
    return a + b  # one RNE f32 addition, as the elementwise `+` of f32 values


@njit(nogil=True, error_model="numpy")
def _f32_max(a, b):
    return R.fmax(a, b)  # IEEE maximum, as I.maximum


@njit(nogil=True, error_model="numpy")
def _f32_min(a, b):
    return R.fmin(a, b)


_F32_COMBINE = {"add": _f32_add, "max": _f32_max, "min": _f32_min}


def _f32_rmw(kind: str, order: str):
    """A compare-exchange loop on the 32-bit pattern of an f32 element; returns the old value."""
    combine = _F32_COMBINE[kind]
    load_bits = _load("relaxed", 32)
    cas_bits = _cas(order, "relaxed", 32)

    @njit(nogil=True, error_model="numpy")
    def f32_rmw(ary, idx, value):
        old = load_bits(ary, idx)
        while True:
            new = R.f32_bits(combine(R.bits_f32(old), value))
            seen, ok = cas_bits(ary, idx, old, new)
            if ok:
                return R.bits_f32(old)
            old = seen

    return f32_rmw


FAILURE_ORDERS = ("relaxed", "acquire")
HELPERS: dict = {}
for _order in ("relaxed", "acquire"):
    HELPERS[f"load_{_order}"] = _load(_order)
for _order in ("relaxed", "release"):
    HELPERS[f"store_{_order}"] = _store(_order)
for _order in _RW_ORDERS:
    for _kind in ("exchange", "add", "max", "min", "and", "or", "xor"):
        HELPERS[f"rmw_{_kind}_{_order}"] = _int_rmw(_kind, _order)
    for _kind in _F32_COMBINE:
        HELPERS[f"f32_rmw_{_kind}_{_order}"] = _f32_rmw(_kind, _order)
    for _failure in FAILURE_ORDERS:
        HELPERS[f"cas_{_order}_{_failure}"] = _cas(_order, _failure)
globals().update(HELPERS)  # the generated source refers to them as A.<name>


# --- rules ----------------------------------------------------------------------------------------------

RULES: dict = {}
rule = rule_registrar(RULES)


class _Address:
    """An atomic's address seen as the view ``read`` it replaced (operands: view, then index operands)."""

    __slots__ = ("op", "inputs", "attr")

    def __init__(self, node, first: int):
        self.op = ops.read
        self.inputs = (node.inputs[0], *node.inputs[first:])
        self.attr = node.attr


def _element(em, node, args, first: int):
    """(view, source of the coordinate tuple) for the node's element; emits the bounds checks."""
    if IMPORT_LINE not in em.constant_lines:
        em.constant_lines.insert(0, IMPORT_LINE)
    view = args[0]
    shape, plan = index_plan(em, _Address(node, first), view, args[first:])
    if shape:
        raise ValueError(f"internal: {node.op.name} addresses a region of shape {shape}, not one element")
    element = coords(em, plan, [])
    note(em, node.inputs[0], view, element, COMBINE)  # race check
    return view, "(" + "".join(f"np.int64({c}), " for c in element) + ")"


def _value(view, arg) -> str:
    return f"{np_type(view.dtype)}({arg.expr})"


@rule(ops.atomic_load)
def _atomic_load(em, node, args):
    view, idx = _element(em, node, args, 1)
    return Scalar(em.assign(f"A.load_{node.attr('order')}({view.name}, {idx})"))


@rule(ops.atomic_store)
def _atomic_store(em, node, args):
    view, idx = _element(em, node, args, 2)
    em.line(f"A.store_{node.attr('order')}({view.name}, {idx}, {_value(view, args[1])})")


@rule(ops.atomic_rmw)
def _atomic_rmw(em, node, args):
    view, idx = _element(em, node, args, 2)
    prefix = "f32_rmw" if view.dtype.is_float else "rmw"
    name = f"{prefix}_{node.attr('kind')}_{node.attr('order')}"
    return Scalar(em.assign(f"A.{name}({view.name}, {idx}, {_value(view, args[1])})"))


@rule(ops.atomic_compare_exchange)
def _atomic_compare_exchange(em, node, args):
    view, idx = _element(em, node, args, 3)
    old, ok = em.fresh("v"), em.fresh("v")
    em.line(f"{old}, {ok} = A.cas_{node.attr('order')}_{node.attr('failure_order')}({view.name}, {idx}, "
            f"{_value(view, args[1])}, {_value(view, args[2])})")
    return Aggregate((Scalar(old), Scalar(ok)))


__all__ = ["HELPERS", "IMPORT_LINE", "LLVM_ORDER"]
