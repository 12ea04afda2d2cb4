"""Atomics for ``tilelang-metal`` (spec §16, numerics T9): Metal device atomics where Metal has them, for programs
whose threads run at once (parallel grids, scatters, histograms: :mod:`.metal_grid`).

Metal's atomic functions act on 32-bit words (``atomic_int``, ``atomic_uint``; MSL specification §6.15) and take
``memory_order_relaxed`` only. So:

- **i32, u32**: the native functions: ``atomic_fetch_add/and/or/xor`` on the word as ``atomic_uint`` (wrap-around,
  as the add helper), ``atomic_fetch_max/min`` on ``atomic_int`` or ``atomic_uint`` as the dtype's order, exchange,
  load and store; compare-exchange a ``compare_exchange_weak`` loop that replaces the element only while it equals
  ``expected`` (the rule generic's compare-exchange has) and returns the value it found.
- **f32**: the element's bits as an ``atomic_uint``: add, maximum and minimum are compare-and-swap loops around the
  *same* combine helper the serial program calls (one RNE addition with x86's NaN rules, IEEE maximum/minimum), so
  each update has the oracle's numerics and only the order of collisions is the hardware's, which T9 leaves open;
  exchange, load and store move the bits; compare-exchange compares values (``==``: -0 equals +0, NaN nothing).
- **other widths** (8-, 16- and 64-bit elements): a plain read-modify-write, correct only for one thread at a time:
  the serial program's. Planners never put such an atomic, or one whose order is not relaxed, on a grid
  (:func:`grid_refusal`), so those programs stay serial on Metal (what ``exe.schedule`` says).

The one 64-bit atomic a grid needs, a histogram's or scatter's integer add whose old value is not read, is
``itb_atomic_add64`` (:data:`ADD64`): two 32-bit atomic adds, the carry out of the low word added into the high
word (exact for the element's final value, T2 wrap-around; a reader during the kernel could see the halves apart,
and none does).
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops

RELAXED = "memory_order_relaxed"
#: the atomic ops a kernel writes (by identity)
ATOMIC_OPS = frozenset({ops.atomic_load, ops.atomic_store, ops.atomic_rmw, ops.atomic_compare_exchange})
_M_TYPE = {"i32": "int", "u32": "uint", "f32": "float"}


def native(d: T.DType) -> bool:
    """Whether Metal has device atomics on elements of ``d`` (32-bit integers and f32's bits)."""
    return d.name in _M_TYPE


def grid_refusal(nodes) -> str | None:
    """Why these nodes' atomics cannot run in threads of a grid on Metal, or None: every atomic must be on a 32-bit
    element and relaxed (Metal's atomics have no acquire/release; a grid's threads would not be ordered)."""
    for node in nodes:
        if node.op not in ATOMIC_OPS:
            continue
        d = node.inputs[0].type.dtype
        if not native(d):
            return f"an atomic on a {d} element (Metal's atomics act on 32-bit words)"
        orders = {node.attr("order")}
        if node.op is ops.atomic_compare_exchange:
            orders.add(node.attr("failure_order"))
        if orders != {"relaxed"}:
            return f"an atomic of order {'/'.join(sorted(orders - {'relaxed'}))} (Metal's atomics are relaxed only)"
    return None


def _bits(d: T.DType, x: str) -> str:
    return f"as_type<uint>({x})" if d.name == "f32" else f"(uint){x}"


def _value(d: T.DType, bits: str) -> str:
    return f"as_type<float>({bits})" if d.name == "f32" else f"({_M_TYPE[d.name]}){bits}"


def body(op: str, d: T.DType, m_type: str, combine: str | None) -> str:
    """The body of an atomic helper (parameters ``p``, the element's address, and ``a``, ``b``) on Metal; ``m_type``
    is the Metal type of ``d``'s values."""
    if not native(d) and op != "iadd":
        return _serial(op, m_type, combine)
    if op == "iadd" and not native(d):  # a scatter's 64-bit integer add: its old value is not read (the scatter
        return "itb_atomic_add64(p, a); return 0;"  # drops it), so two 32-bit adds make it (ADD64)
    if op == "iadd":
        op = "add"
    t = _M_TYPE[d.name]
    word = "(device atomic_uint*)p"
    if op == "load":
        return f"return {_value(d, f'atomic_load_explicit({word}, {RELAXED})')};"
    if op == "store":
        return f"atomic_store_explicit({word}, {_bits(d, 'a')}, {RELAXED}); return 0;"
    if op == "exchange":
        swap = f"atomic_exchange_explicit({word}, {_bits(d, 'a')}, {RELAXED})"
        return f"return {_value(d, swap)};"
    if op in ("add", "and", "or", "xor") and d.name != "f32":
        return f"return ({t})atomic_fetch_{op}_explicit({word}, (uint)a, {RELAXED});"
    if op in ("max", "min") and d.name != "f32":
        return f"return atomic_fetch_{op}_explicit((device atomic_{t}*)p, a, {RELAXED});"
    loop = f"device atomic_uint* w = {word}; uint e = atomic_load_explicit(w, {RELAXED}); "
    if op == "cas":  # replace only while the element equals a (by value); the value found is returned either way
        return (loop + f"for (;;) {{ {t} old = {_value(d, 'e')}; if (!(old == a)) return old; "
                f"if (atomic_compare_exchange_weak_explicit(w, &e, {_bits(d, 'b')}, {RELAXED}, {RELAXED})) "
                f"return old; }}")
    # f32 add, max, min: a compare-and-swap loop around the serial program's combine (a failed swap reloads e)
    new = _bits(d, f"{combine}(old, a)")
    return (loop + f"for (;;) {{ {t} old = {_value(d, 'e')}; uint n = {new}; "
            f"if (atomic_compare_exchange_weak_explicit(w, &e, n, {RELAXED}, {RELAXED})) return old; }}")


def _serial(op: str, t: str, combine: str | None) -> str:
    """A plain read-modify-write: right for the serial program's one thread (every memory order)."""
    if op == "load":
        return f"return ({t})*p;"
    if op == "store":
        return "*p = a; return 0;"
    if op == "cas":
        return f"{t} old = ({t})*p; if (old == a) *p = b; return old;"
    return f"{t} old = ({t})*p; *p = {'a' if op == 'exchange' else f'{combine}(old, a)'}; return old;"


#: ``itb_atomic_add64(p, v)``: ``*p += v`` for a 64-bit device element in two 32-bit atomic adds (see the module
#: docstring); the words are little-endian (every Apple GPU). An internal helper of the prelude (metal.BASE).
ADD64 = """template <typename P, typename V> static inline int itb_atomic_add64(P p, V v) {
  /* the element's final value is exact: every wrap of the low word carries one into the high word */
  device atomic_uint* w = (device atomic_uint*)p;
  ulong u = (ulong)v;
  uint lo = (uint)u, hi = (uint)(u >> 32);
  uint old = atomic_fetch_add_explicit(w, lo, memory_order_relaxed);
  hi += (uint)(old + lo < old);
  if (hi != 0u) atomic_fetch_add_explicit(w + 1, hi, memory_order_relaxed);
  return 0;
}"""
