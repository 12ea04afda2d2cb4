"""The segmented fold without the blocks a coordinate mask empties (causal attention's blocks past the diagonal).

:mod:`intent_trace.schedule.region_skip` proves, from ``summarize``'s graph, that a block of the source whose
row/source comparison is false for every pair summarises to the fold's identity when some source components are
finite there (attention's ``V``: ``0 * inf`` is NaN). Combining the identity changes nothing (language §9.1), so the
program of a block of rows folds only the source blocks the comparison may keep, ``[lo, hi)``, and any skippable
block where a needed component is not finite: the range grows to take it in (the blocks between are computed as
today -- their summaries are the identity when finite, so computing them is exact too). Two kernels, one stream:

1. **the finiteness pass**: a block per (source block, batch entry) loads each needed component's tile (zeros past
   the tensor, which are finite), tests every element (``itr_nonfinite``: exponent bits all ones, an opaque call
   TVM's simplifier cannot rewrite -- it turns ``not (|x| < inf)`` into ``inf <= |x|``, false for a NaN), reduces
   the tile to one flag and stores it in the workspace ``W0[batch, block]``;
2. **the fold** (:mod:`.cuda_region`): each block of rows computes ``lo``/``hi`` from its first row and the bounds,
   then reads the flags of the blocks outside them and widens the range to the outermost flagged one.

Reading the needed components once in a pass of their own costs one read of them (at HBM bandwidth); testing them
in the fold instead would read every skipped block once per block of rows, about as much traffic as the products it
saves. The prelude (the helpers) goes on the first kernel: TileLang writes one per kernel into one source file.
Metal's spelling does not skip (``masked_skip``; its runtime launches one kernel).
"""
from __future__ import annotations

from ...schedule import region_skip
from ...schedule.region import SLICE
from .cuda_region_tiles import NONFINITE
from .storage import Workspace

FLAGS = "W0"  # the workspace of the finiteness flags: one int32 per (batch entry, source block), sized (batch, S)


def proof(graph, plan, spelling):
    """The skip of ``plan`` on ``spelling``, or None (no proof, or a spelling that does not skip)."""
    if not spelling.masked_skip:
        return None
    skip = region_skip.prove(graph, plan)
    if isinstance(skip, str):
        return None
    if any(plan.sources[k].param is None or len(plan.sources[k].layout) != 2 for k in skip.finite):
        return None  # the flags pass tests (source, free) tiles of views
    return skip


def describe(graph, plan, skip) -> str:
    """The schedule's ``skip`` parameter: the bounds and what skipped blocks need finite."""
    names = [graph.params[s.param].name if s.param is not None else "indices" for s in plan.sources]
    return f"blocks where {skip.describe(names)}"


def workspace(prog) -> Workspace:
    plan = prog.plan
    shape = ((prog.dims[plan.batch],) if plan.batch is not None else ()) + (prog.dims[plan.source],)
    return Workspace(FLAGS, shape, "int32", " for the finiteness flags of the source blocks a segmented fold skips")


def flags_pass(prog, skip) -> list:
    """The lines of the finiteness pass (its launch first), written with ``prog``'s emitter and spelling; the
    program's own allocations, lines and shared-memory count are left as they were."""
    em, sp, t, plan = prog.em, prog.sp, prog.t, prog.plan
    saved = (sp.allocs, sp.shared_bytes, len(em.lines), em.depth)
    sp.allocs = []
    count = f"T.ceildiv({prog.dims[plan.source]}, {t.block_N})"
    blocks = [count] + ([prog.dims[plan.batch]] if plan.batch is not None else [])
    launch, coords = sp.kernel(blocks, "PRELUDE")
    test = sp.helper("itr_nonfinite", NONFINITE)
    em.depth = 2
    flag = sp.alloc("flag", (1,), "float32", "fragment")
    rows = []
    for k in skip.finite:
        tile = prog.view_tile(plan.sources[k], {SLICE: f"bx * {t.block_N}"})
        shape = tile.shape
        bad = sp.alloc("bad", shape, "float32", "fragment")
        i, j = em.fresh("i"), em.fresh("j")
        with em.block(sp.parallel([i, j], shape)):
            em.line(f"{bad}[{i}, {j}] = T.Cast('float32', T.call_extern('int32', {test!r}, "
                    f"{sp.element(tile.buf, tile.dtype, [i, j])}))")
        row = sp.alloc("badrow", (shape[0],), "float32", "fragment")
        sp.reduce("max", bad, row, shape, True)
        rows.append(row)
    for n, row in enumerate(rows):
        sp.reduce_vector("max", row, flag, t.block_N, n == 0)
    i = em.fresh("i")
    at = ("bz, " if plan.batch is not None else "") + "bx"
    with em.block(sp.parallel([i], (1,))):
        em.line(f"{FLAGS}[{at}] = T.Cast('int32', {flag}[{i}])")
    body = em.lines[saved[2]:]
    del em.lines[saved[2]:]
    lines = [f"    {launch}", *("        " + x for x in [*coords, *sp.allocs]), *body]
    sp.allocs, sp.shared_bytes, _, em.depth = saved
    return lines


def source_range(prog, skip) -> tuple:
    """Writes the lines that compute this block of rows' source blocks ``[lo, hi)``; returns (lo, hi) as names."""
    em, t, plan = prog.em, prog.t, prog.plan
    count = f"T.ceildiv({prog.dims[plan.source]}, {t.block_N})"
    first = f"bx * {t.block_M}"
    his = [f"T.ceildiv(T.max({first} + {t.block_M + b.shift}, 0), {t.block_N})" for b in skip.bounds
           if b.side == "upper"]
    los = [f"T.max({first} + {b.shift}, 0) // {t.block_N}" for b in skip.bounds if b.side == "lower"]
    hi0 = _fold("T.min", [count, *his])
    lo0 = f"T.min({_fold('T.max', los)}, {count})" if los else "0"
    lo, hi, k = em.fresh("lo"), em.fresh("hi"), em.fresh("k")
    prog.sp.allocs += [f"{lo} = T.alloc_var('int32')", f"{hi} = T.alloc_var('int32')"]
    em.line(f"{hi} = {hi0}")
    em.line(f"{lo} = T.min({lo0}, {hi})")
    at = "bz, " if plan.batch is not None else ""
    if his:  # the outermost flagged block past hi
        with em.block(f"for {k} in T.serial({hi0}, {count}):"):
            with em.block(f"if {FLAGS}[{at}{k}] != 0:"):
                em.line(f"{hi} = {k} + 1")
    if los:  # the outermost flagged block before lo
        with em.block(f"for {k} in T.serial(0, {lo0}):"):
            with em.block(f"if {FLAGS}[{at}{lo0} - 1 - {k}] != 0:"):
                em.line(f"{lo} = {lo0} - 1 - {k}")
    return lo, hi


def _fold(fn: str, items: list) -> str:
    out = items[0]
    for x in items[1:]:
        out = f"{fn}({out}, {x})"
    return out
