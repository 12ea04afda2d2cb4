"""A rank-1 flat nest in 16-byte groups (issue 17: GELU, pointwise chains): each thread takes ``nest.vector`` groups
of ``nest.group`` consecutive elements (4 of 4 bytes), ``nest.threads`` groups apart (a warp's groups are
neighbours: coalesced), and moves a whole group with one 16-byte load per read view and one 16-byte store
(``float4``: a quarter of the element accesses' instructions and index arithmetic).

The element code is the shared emitter's, written once per element as for the element accesses
(:meth:`.emitter.TileLangEmitter._flat_loop`), at the element's flat index ``f`` (clamped to the last element, as
there). It is written first and then placed: every read ``p[f]`` of a view whose elements are 4 bytes becomes the
element's register of that view's group (``L[g * 4 + e]``), and the one final write ``o[f] = x`` becomes the
element's register of the output's group; the groups' loads are written before the element code and their stores
after it. A register holds exactly what its ``p[f]`` would read (the view is an In view the nest never writes:
``cuda_kernels.flat_nest``), so the element code computes the same bits.

Whether a group moves in 16 bytes is decided at run time, per group: every view's start on a 16-byte boundary (its
address's low bits, read in the kernel: ``launch`` takes tensors as the caller has them, a slice ``x[1:]``
included) and the group wholly inside the extent. Else its elements move one by one, at the clamped index, the
element accesses' way (a store past the end repeats the last element's bits: ``lanes.repeat_writes``). Where the
element code is not of that form (no read, several writes, an element's address handed to a helper, which may read
past it) nothing is substituted: the text stays the element accesses' program, on the clamped index, still right.

With ``nest.emulated`` (the C target) the block's threads are a serial loop, as for every flat nest: the tests run
the same text on the CPU, tails and misaligned starts included.
"""
from __future__ import annotations

import re

from .scalar_rules import tir_dtype

GROUP_BYTES = 16


def group_loop(em, nest):
    """The emitter's flat loop for a grouped rank-1 nest (a generator for ``loop_nest``: yields the element's
    coordinates once, then places the element code; module docstring)."""
    outer = em.depth
    tx = em._thread(nest)
    k, per, total = nest.group, nest.vector, nest.total
    em.line(f"if {total} > 0:")
    em.depth += 1
    top, depth = len(em.lines), em.depth
    g, e = em.fresh("g"), em.fresh("e")
    q = f"((T.Cast('int64', bx) * {per} + {g}) * {nest.threads} + T.Cast('int64', {tx})) * {k}"
    em.line(f"for {g} in T.unroll({per}):")
    em.line(f"    for {e} in T.unroll({k}):")
    em.depth += 2
    em.memo.append({})
    f = em.variable("int64", f"T.min({q} + T.Cast('int64', {e}), {total} - 1)", "f")
    body = len(em.lines)
    em.in_grid = True  # a failed check claims the error record (threads fail at once)
    try:
        yield [f]
    finally:
        em.in_grid = False
        em.release(em.depth)
        em.memo.pop()
        em.depth = depth
    views = _grouped_views(em)
    reads, write = _accesses(em.lines[body:], f, views)
    if write is None or not reads:
        em.depth = outer
        return
    at, out = f"{g} * {k} + {e}", write
    registers = {name: em.fresh("L") for name in [*reads, out]}
    load = re.compile(rf"\b({'|'.join(map(re.escape, reads))})\[{re.escape(f)}\]")
    store = re.compile(rf"^(\s*){re.escape(out)}\[{re.escape(f)}\] = ")
    lines = [load.sub(lambda m: f"{registers[m.group(1)]}[{at}]", line) for line in em.lines[body:]]
    em.lines[body:] = [store.sub(lambda m: f"{m.group(1)}{registers[out]}[{at}] = ", line) for line in lines]
    aligned = em.fresh("a")
    pointers = " | ".join(f"T.reinterpret(T.access_ptr({v}[0], 'rw'), 'uint64')" for v in [*reads, out])
    whole = f"{aligned} and {q} + {k} <= {total}"
    last = f"T.min({q} + T.Cast('int64', v), {total} - 1)"
    held = registers[out]
    head = [f"{registers[v]} = T.alloc_local(({per * k},), {views[v]!r})" for v in [*reads, out]]
    head += [f"{aligned} = T.alloc_var('bool', init=(({pointers}) & T.uint64({GROUP_BYTES - 1})) == T.uint64(0))",
             f"for {g} in T.unroll({per}):", f"    if {whole}:"]
    for r in reads:
        head += [f"        for v in T.vectorized({k}):", f"            {registers[r]}[{g} * {k} + v] = {r}[{q} + v]"]
    head.append("    else:")
    for r in reads:
        head += [f"        for v in T.unroll({k}):", f"            {registers[r]}[{g} * {k} + v] = {r}[{last}]"]
    tail = [f"for {g} in T.unroll({per}):", f"    if {whole}:", f"        for v in T.vectorized({k}):",
            f"            {out}[{q} + v] = {held}[{g} * {k} + v]", "    else:", f"        for v in T.unroll({k}):",
            f"            {out}[{last}] = {held}[{g} * {k} + v]"]
    indent = "    " * depth
    em.lines[top:top] = [indent + line for line in head]
    em.lines.extend(indent + line for line in tail)
    em.depth = outer


def _grouped_views(em) -> dict:
    """{buffer name: TIR dtype} of the view parameters whose elements are 4 bytes as the program stores them."""
    views = {}
    for p in em.graph.params:
        v = em.env.get(p.var)
        if p.kind == "view" and v is not None and hasattr(v, "storage"):
            dtype = v.storage or tir_dtype(v.dtype)
            if dtype in ("float32", "int32", "uint32"):
                views[v.name] = dtype
    return views


def _accesses(lines, f: str, views: dict) -> tuple:
    """(the grouped views read at ``f``, in order of first read; the grouped view stored at ``f``, or None where
    there is not exactly one such store, as its own statement)."""
    if not views:
        return [], None
    names = "|".join(map(re.escape, views))
    store, read = re.compile(rf"^\s*({names})\[{re.escape(f)}\] = "), re.compile(rf"\b({names})\[{re.escape(f)}\]")
    stores, reads = [], []
    for line in lines:
        m = store.match(line)
        if m:
            stores.append(m.group(1))
        for r in read.finditer(line[m.end():] if m else line):
            if r.group(1) not in reads:
                reads.append(r.group(1))
    if len(stores) != 1 or stores[0] in reads or any(f"access_ptr({v}[{f}]" in line for line in lines for v in views):
        return reads, None
    return reads, stores[0]
