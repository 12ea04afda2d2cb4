"""The segmented fold without the blocks a coordinate mask empties (causal attention's blocks past the diagonal).

:mod:`intent_trace.schedule.region_skip` proves, from ``summarize``'s graph, that a block of the source whose
row/source comparison is false for every pair summarises to the fold's identity when some source components are
finite there (attention's ``V``: ``0 * inf`` is NaN). Combining the identity changes nothing (language §9.1), so the
program of a block of rows folds only the source blocks the comparison may keep, ``[lo, hi)``, and any skippable
block where a needed component is not finite: the range grows to take it in (the blocks between are computed as
today -- their summaries are the identity when finite, so computing them is exact too). Three kernels, one stream:

1. **the flags**: a block per (source block, batch entry) loads each needed component's tile (zeros past the
   tensor, which are finite), tests every element (``itr_nonfinite``: exponent bits all ones, an opaque call TVM's
   simplifier cannot rewrite -- it turns ``not (|x| < inf)`` into ``inf <= |x|``, false for a NaN), reduces the tile
   to one flag and stores it in the workspace ``W0[batch, block]``;
2. **the extremes**: a block per batch entry stores its last and first flagged block in ``W1[batch, :]``;
3. **the fold** (:mod:`.cuda_region`): each block of rows folds ``[start, stop)``: ``stop`` the first block its
   upper bounds empty, or one past the last flagged block if that is later; ``start`` likewise from the lower
   bounds and the first flagged block. Both are expressions of the block's coordinates, the extents and ``W1``,
   never locals: a local holding the bound through the loop made ptxas spill in attention's combine. Where every
   bound is an upper one the work of a block of rows grows with its index, so the grid runs the batch fastest and
   the blocks of rows from the last (the busiest first, the lightest in the last wave).

A proof that needs nothing finite (a masked max) has neither pass: the bounds alone decide.

Reading the needed components once in a pass of their own costs one read of them (at HBM bandwidth); testing them
in the fold instead would read every skipped block once per block of rows, about as much traffic as the products it
saves. The prelude (the helpers) goes on the first kernel: TileLang writes one per kernel into one source file.
Metal's spelling does not skip (``masked_skip``; its runtime launches one kernel).
"""
from __future__ import annotations

import contextlib
import math

from ...schedule import region_skip
from ...schedule.region import SLICE
from .cuda_region_tiles import NONFINITE
from .storage import Workspace

FLAGS = "W0"  # the finiteness flags: one int32 per (batch entry, source block), sized (batch, S)
EXTREMES = "W1"  # per batch entry: the last flagged source block (-1: none), the first (the block count: none)


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
    """The schedule's ``skip`` parameter: which blocks of the source a block of rows does not fold."""
    names = [graph.params[s.param].name if s.param is not None else "indices" for s in plan.sources]
    busiest = "; the busiest blocks of rows first" if _longest_first(skip) else ""
    return f"source blocks where the mask is {skip.describe(names)} (a flags pass first{busiest})"


def workspaces(prog) -> tuple:
    """The flags and the extremes; none where the proof needs nothing finite (the bounds alone then decide)."""
    plan = prog.plan
    if not prog.skip.finite:
        return ()
    batch = (prog.dims[plan.batch],) if plan.batch is not None else ()
    why = " for the finiteness of the source blocks a segmented fold skips"
    return (Workspace(FLAGS, (*batch, prog.dims[plan.source]), "int32", why),
            Workspace(EXTREMES, (*batch, "2"), "int32", why))


def passes(prog, skip) -> list:
    """The lines of the two kernels before the fold (each launch first), written with ``prog``'s emitter and
    spelling; the program's own allocations, lines and shared-memory count are left as they were."""
    em, sp, t, plan = prog.em, prog.sp, prog.t, prog.plan
    if not skip.finite:
        return []
    saved = (sp.allocs, sp.shared_bytes, len(em.lines), em.depth)
    em.depth = 2
    count = f"T.ceildiv({prog.dims[plan.source]}, {t.block_N})"
    batch = [prog.dims[plan.batch]] if plan.batch is not None else []
    lines = _kernel(prog, [count, *batch], "PRELUDE", ("fx", "fz"), lambda: _flags(prog, skip))
    lines += _kernel(prog, batch or ["1"], None, ("ex", "ez"), lambda: _extremes(prog, count))
    sp.allocs, sp.shared_bytes, _, em.depth = saved
    return lines


def _kernel(prog, blocks: list, prelude, names: tuple, body) -> list:
    em, sp = prog.em, prog.sp
    sp.allocs, first = [], len(em.lines)
    launch, coords = sp.kernel(blocks, prelude, names)
    body()
    lines = em.lines[first:]
    del em.lines[first:]
    return [f"    {launch}", *("        " + x for x in [*coords, *sp.allocs]), *lines]


def _flags(prog, skip) -> None:
    """Block ``fx`` of the source (batch entry ``fz``): 1 when a needed component holds an infinity or a NaN. Each
    thread tests its share of the tile (consecutive threads, consecutive elements: the elements it copied) into
    one value, then one reduction over the threads. (A fragment of the tile's tests reduced row by row, as this pass
    was first written, put a block barrier in every row's reduction: 56 us for V at B32 L4096 D128 on one H100,
    four times its loads, 14% of causal attention.)"""
    em, sp, t, plan = prog.em, prog.sp, prog.t, prog.plan
    test = sp.helper("itr_nonfinite", NONFINITE)
    tiles = [prog.view_tile(plan.sources[k], {SLICE: f"fx * {t.block_N}"}, "fz") for k in skip.finite]
    lanes = sp.alloc("lanes", (t.threads,), "float32", "fragment")
    flag = sp.alloc("flag", (1,), "float32", "fragment")
    x = em.fresh("x")
    with em.block(sp.parallel([x], (t.threads,))):
        em.line(f"{lanes}[{x}] = T.float32(0)")
        for tile in tiles:  # zeros past the end of the tensor: finite
            size, width, e = math.prod(tile.shape), tile.shape[1], em.fresh("e")
            flat = f"{e} * {t.threads} + {x}"
            with em.block(f"for {e} in T.unroll({-(-size // t.threads)}):"):
                with em.block(f"if {flat} < {size}:") if size % t.threads else contextlib.nullcontext():
                    element = sp.element(tile.buf, tile.dtype, [f"({flat}) // {width}", f"({flat}) % {width}"])
                    em.line(f"{lanes}[{x}] = T.max({lanes}[{x}], "
                            f"T.Cast('float32', T.call_extern('int32', {test!r}, {element})))")
    sp.reduce_vector("max", lanes, flag, t.threads, True)
    i = em.fresh("i")
    with em.block(sp.parallel([i], (1,))):
        em.line(f"{FLAGS}[{'fz, ' if plan.batch is not None else ''}fx] = T.Cast('int32', {flag}[{i}])")


def _extremes(prog, count: str) -> None:
    """Batch entry ``ex``: the last and the first flagged block (every thread the same loop over the flags)."""
    em, sp = prog.em, prog.sp
    at = "ex, " if prog.plan.batch is not None else ""
    last, first, k = em.fresh("last"), em.fresh("first"), em.fresh("k")
    sp.allocs += [f"{last} = T.alloc_local((1,), 'int32')", f"{first} = T.alloc_local((1,), 'int32')"]
    em.line(f"{last}[0] = -1")
    em.line(f"{first}[0] = {count}")
    with em.block(f"for {k} in T.serial({count}):"):
        with em.block(f"if {FLAGS}[{at}{k}] != 0:"):
            em.line(f"{last}[0] = {k}")
            em.line(f"{first}[0] = T.min({first}[0], {k})")
    i = em.fresh("i")
    with em.block(sp.parallel([i], (1,))):
        em.line(f"{EXTREMES}[{at}0] = {last}[0]")
        em.line(f"{EXTREMES}[{at}1] = {first}[0]")


def fold_launch(prog, rows: str, batch: list) -> tuple:
    """The fold's launch line and coordinate lines. Where every bound is an upper one (causal attention), the work of
    a block of rows grows with ``bx``: the grid runs the batch fastest and the blocks of rows from the last, so every
    batch entry's busiest blocks start first and the last wave holds the lightest (the longest-first order that
    keeps the SMs evenly busy at the end); otherwise the grid is the fold's usual one."""
    skip, sp = prog.skip, prog.sp
    prelude = None if prog.passes else "PRELUDE"  # the helpers go to the program's first kernel
    if not _longest_first(skip):
        return sp.kernel([rows, *batch], prelude)
    if batch:
        launch, coords = sp.kernel([*batch, rows], prelude, ("bz", "rx"))
    else:
        launch, coords = sp.kernel([rows], prelude, ("rx", None))
    return launch, [*coords, f"bx = {rows} - 1 - rx"]


def source_range(prog, skip) -> tuple:
    """This block of rows' source blocks ``[start, stop)`` as expressions of its coordinates, the extents and the
    extremes (start None: 0, where no bound is a lower one -- causal attention's). No local holds them: the loop
    bound is recomputed where it is tested, so the fold keeps the registers it had (a local ``hi`` cost 156 bytes of
    spills in attention's combine at head 128)."""
    t, plan = prog.t, prog.plan
    count = f"T.ceildiv({prog.dims[plan.source]}, {t.block_N})"
    first = f"bx * {t.block_M}"
    his = [f"T.ceildiv(T.max({first} + {t.block_M + b.shift}, 0), {t.block_N})" for b in skip.bounds
           if b.side == "upper"]
    los = [f"T.max({first} + {b.shift}, 0) // {t.block_N}" for b in skip.bounds if b.side == "lower"]
    hi = _fold("T.min", [count, *his])
    flagged = bool(skip.finite)  # else no block is flagged: the bounds alone
    stop = f"T.max({hi}, {EXTREMES}[{_at(prog)}0] + 1)" if his and flagged else hi
    if not los:
        return None, stop
    return _fold("T.min", [*los, hi, *([f"{EXTREMES}[{_at(prog)}1]"] if flagged else [])]), stop


def _longest_first(skip) -> bool:
    """Whether a block of rows' work grows with its index (every bound an upper one)."""
    return all(b.side == "upper" for b in skip.bounds)


def _at(prog) -> str:
    return "bz, " if prog.plan.batch is not None else ""


def _fold(fn: str, items: list) -> str:
    out = items[0]
    for x in items[1:]:
        out = f"{fn}({out}, {x})"
    return out
