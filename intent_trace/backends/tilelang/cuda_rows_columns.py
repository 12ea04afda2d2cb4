"""A row group's per-column values computed once per block where a block holds several rows (:mod:`.cuda_rows`' warp
tier: 8 rows of up to 32 * slots elements). Such a value depends on the column alone -- RMSNorm's ``cast(w[:], f32)``,
layer norm's ``g[:]`` and ``b[:]``: the schedule pass's :attr:`~intent_trace.schedule.rows.RowGroup.columns` -- so
every row of the block reads the same element at a column, and each of the block's 8 warps computed it again per
element of its row's write: RMSNorm f16's weight was a load, its f16 decode and its f32 cast's NaN rule per element,
10 of the write pass's 39 SASS instructions an element on sm_90a. Here the block's threads compute each such value
once into shared memory (one element per thread and column chunk, the same element code), a barrier, and the row
passes read it there: one shared load an element.

The fill runs before the row's guard (a barrier in a branch some threads skip would hang the block), under a guard
that the block holds a row at all (no element is computed that no row computes: the serial program evaluates the
weight for every row and column, so an empty tensor evaluates none). With ``emulated`` the fill is one serial loop
over the row's columns and the buffer a local one (the C target runs a block's threads in turn).
"""
from __future__ import annotations

from ... import types as T
from .emitter import Lazy


def buffers(em, plan) -> dict:
    """``id(var) -> its block buffer`` for the group's per-column values, sized for the widest row a multi-row tier
    holds (allocated in the kernel's prologue); empty where no tier holds several rows a block."""
    caps = [cap for width, _, cap in plan.tiers if cap is not None and width < plan.threads]
    if not caps or not plan.group.columns:
        return {}
    alloc = "T.alloc_local" if plan.emulated else "T.alloc_shared"
    out = {}
    for var in plan.group.columns:
        (t,) = T.leaf_types(var.type)
        out[id(var)] = em.assign(f"{alloc}(({max(caps)},), {em.tir(t.dtype)!r})", "w")
    return out


def hoist(em, plan, held: dict) -> set:
    """In a tier of several rows a block, the group's row-invariant nodes emitted here, before the row's guard, and
    each per-column value they give a row filled into its buffer (``held``) by the block's threads, then a barrier;
    the values become reads of those buffers. Returns the ids of the nodes placed (the row's walk skips them)."""
    per_block = plan.threads // em.width
    if per_block == 1 or not held:
        return set()
    group, outer = plan.group, em.node
    for node in group.invariant:
        em.run_node(node)
    first = f"T.Cast('int64', bx) * T.int64({per_block})"
    with em.block(f"if {first} < {plan.rows}:"):  # the block holds a row: its values are computed for it
        if plan.emulated:
            j = em.fresh("j")
            with em.block(f"for {j} in T.serial({plan.cols}):"):
                _fill(em, group, held, j)
        else:
            k, cap = em.fresh("k"), max(cap for w, _, cap in plan.tiers if cap is not None and w < plan.threads)
            with em.block(f"for {k} in T.unroll({-(-cap // plan.threads)}):"):
                j = em.assign(f"T.Cast('int64', {k}) * T.int64({plan.threads}) + T.Cast('int64', {em.tx})", "j")
                with em.block(f"if {j} < {plan.cols}:"):
                    _fill(em, group, held, j)
    em.sync()
    em.node = outer
    for var in group.columns:
        value = em.env[var]
        shared = Lazy(value.shape, lambda idx, b=held[id(var)]: f"{b}[{idx[-1]}]")
        em.env[var] = shared
        em.bind_dims(var, shared)
    return {id(node) for node in group.invariant}


def _fill(em, group, held: dict, j: str) -> None:
    producers = {v: n for n in group.invariant for v in n.outputs}
    for var in group.columns:
        em.node = producers[var]
        value = em.env[var]
        idx = ["0"] * (len(value.shape) - 1) + [j]
        em.line(f"{held[id(var)]}[{j}] = {em.elem(value, idx)}")
