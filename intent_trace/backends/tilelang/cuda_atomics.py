"""Device atomics for ``tilelang-cuda`` (spec §16, numerics T9), for programs whose threads run at once.

tilelang-c's atomics are plain read-modify-writes, exact for its one serial thread. On CUDA the iterations of a
``parallel`` loop run in threads of their own (:func:`.cuda_kernels.parallel_grid`), so an atomic must be one.
Every read-modify-write is a compare-and-swap loop around the *same* combine helper the serial program calls
(wrap-around integer add, one RNE f32 addition, IEEE maximum and minimum with NaN and signed-zero rules): the
numerics of each update are the oracle's, only the interleaving is the hardware's, which T9 leaves open.

- The swap compares bits (``itc_cas_<dtype>``): ``atomicCAS`` on the 32- or 64-bit word, or, for 8- and 16-bit
  elements, on the aligned 32-bit word holding them with the neighbouring bytes written back unchanged (they may
  lie past the view's last element, inside the allocation's granule: CUDA allocations are at least 256 bytes).
- A load is one ``volatile`` read (naturally aligned accesses of up to 8 bytes are single transactions); a
  store is an exchange whose old value is dropped.
- Compare-exchange keeps generic's rule: the element is replaced only when it equals ``expected`` by value
  (``==``), and the old value is returned either way.
- ``atomic_iadd_<order>`` (a scatter's integer add, :mod:`.cuda_scatter`): the native ``atomicAdd`` on the 32- or
  64-bit word, wrap-around like the add helper (two's complement), so no CAS loop; on tilelang-c the plain
  read-modify-write with the add helper (:func:`.c.extern_source`).
- Memory orders: ``__threadfence()`` before a release (acq_rel, seq_cst) and after an acquire (acq_rel,
  seq_cst); relaxed has neither. A compare-exchange takes the union of its success and failure orders.
"""
from __future__ import annotations

import re

from ... import types as T
from . import c

_ORDERS = re.compile(r"acq_rel|seq_cst|relaxed|acquire|release")
_BEFORE = frozenset({"release", "acq_rel", "seq_cst"})
_AFTER = frozenset({"acquire", "acq_rel", "seq_cst"})
_BITS = {1: "uint8_t", 2: "uint16_t", 4: "unsigned int", 8: "unsigned long long"}


def cas_source(d: T.DType, spelling) -> str:
    """``itc_cas_<d>(q, expect, desired)``: swap in ``desired`` if the element's bits are ``expect``'s; returns the
    element found."""
    t, n, size = c.C_TYPE[d.name], d.name, d.bits // 8
    bits = _BITS[size]
    head = f"{spelling.static} {t} itc_cas_{n}({t}* q, {t} expect, {t} desired) {{\n"
    if size >= 4:
        return head + (f"  {bits} e, w; memcpy(&e, &expect, {size}); memcpy(&w, &desired, {size});\n"
                       f"  {bits} r = atomicCAS(({bits}*)q, e, w);\n"
                       f"  {t} out; memcpy(&out, &r, {size}); return out;\n}}")
    mask = "0xffu" if size == 1 else "0xffffu"
    return head + (
        "  unsigned int* w = (unsigned int*)((unsigned long long)q & ~3ull);\n"
        f"  unsigned int shift = (unsigned int)((unsigned long long)q & 3ull) * 8u, mask = {mask} << shift;\n"
        f"  {bits} eb, db; memcpy(&eb, &expect, {size}); memcpy(&db, &desired, {size});\n"
        "  unsigned int cur = *(volatile unsigned int*)w;\n"
        "  for (;;) {\n"
        f"    {bits} vb = ({bits})((cur & mask) >> shift);\n"
        f"    if (vb != eb) {{ {t} out; memcpy(&out, &vb, {size}); return out; }}\n"
        "    unsigned int seen = atomicCAS(w, cur, (cur & ~mask) | ((unsigned int)db << shift));\n"
        "    if (seen == cur) return expect;\n"
        "    cur = seen;\n"
        "  }\n}")


def _same(d: T.DType, x: str, y: str) -> str:
    """Bit equality of two values (a float NaN equals itself here: the loop compares what it read)."""
    if d.is_float:
        return f"itb_bits32({x}) == itb_bits32({y})"
    return f"{x} == {y}"


def atomic_body(op: str, orders: tuple, d: T.DType, combine: str | None) -> str:
    t, n = c.C_TYPE[d.name], d.name
    before = "__threadfence(); " if _BEFORE & set(orders) else ""
    after = "__threadfence(); " if _AFTER & set(orders) else ""
    load = f"{t} old = *(volatile {t}*)q;"
    if op == "load":
        return f"{t}* q = ({t}*)p; {before}{load} {after}return old;"
    if op == "iadd":  # an integer add (a scatter's, cuda_scatter): the native atomic, wrap-around as the helper's
        word, size = _BITS[d.bits // 8], d.bits // 8
        return (f"{t}* q = ({t}*)p; {before}{word} w; memcpy(&w, &a, {size}); {word} r = atomicAdd(({word}*)q, w); "
                f"{after}{t} old; memcpy(&old, &r, {size}); return old;")
    if op == "cas":
        loop = (f"for (;;) {{ if (!(old == a)) break; {t} seen = itc_cas_{n}(q, old, b); "
                f"if ({_same(d, 'seen', 'old')}) break; old = seen; }}")
    else:
        new = "a" if op in ("exchange", "store") else f"{combine}(old, a)"
        loop = (f"for (;;) {{ {t} seen = itc_cas_{n}(q, old, {new}); if ({_same(d, 'seen', 'old')}) break; "
                f"old = seen; }}")
    result = "return 0;" if op == "store" else "return old;"
    return f"{t}* q = ({t}*)p; {before}{load} {loop} {after}{result}"


def extern_source(name: str, family: str, dtypes: tuple, ret: T.DType, args: tuple, combine: str | None,
                  spelling) -> str | None:
    """The C++ definition, in ``spelling`` (:data:`.cuda.DEVICE`), of an atomic helper (its CAS helper comes with
    the prelude, :func:`cas_helpers`)."""
    (d,) = dtypes
    if not (d.is_int or d.name == "f32") or not c.supports(d):
        return None
    op, rest = family[len("atomic_"):].split("_", 1)
    if op == "iadd" and not (d.is_int and d.bits in (32, 64)):
        return None
    orders = tuple(_ORDERS.findall(rest))
    return c.pointer_helper(name, ret, args, ("p", "a", "b"), atomic_body(op, orders, d, combine), spelling)


_CAS_CALL = re.compile(r"\bitc_cas_(\w+)\(")


def cas_helpers(definitions: list, spelling) -> list:
    """The CAS helpers the definitions call, each once (several atomics of one dtype share one)."""
    names = sorted({m for text in definitions for m in _CAS_CALL.findall(text)})
    return [cas_source(T.DTYPES[n], spelling) for n in names]
