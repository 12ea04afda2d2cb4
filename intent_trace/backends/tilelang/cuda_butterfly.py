"""A block's shuffle tree, shared by the row groups (:mod:`.cuda_rows_combine`) and the multi-block reductions
(:mod:`.cuda_reduce`): on the GPU (warp shuffles, then the warps' totals through shared memory) and as the C target
emulates it (``emulated``: a block's threads are serial loops, one per phase between barriers), in the same order.
"""
from __future__ import annotations

from ... import types as T
from .accumulate import combine

WARP = 32  # CUDA's warp: the lanes a shuffle exchanges values among


def emulated_butterflies(em, node, acc_t, buffers, width: int, warps: int, pos=()) -> list:
    """The xor butterflies within each warp, then across the warps' totals, one phase a step: every thread's
    register is a slot of a buffer and a step writes the other buffer (each lane reads its partner's value before
    any is replaced). ``buffers``: the two lists of shared buffers, the first holding the ``width`` threads'
    accumulators; ``warps``: ``width // WARP``; ``pos``: the combine's positions (an arg-reduction's). Returns the
    block's total."""
    now, new = buffers

    def steps(lanes: int, count: int):
        nonlocal now, new
        step = lanes // 2
        while step:
            with em.phase(count) as tx:
                mine = [em.assign(f"{b}[{tx}]", "x") for b in now]
                other = [em.assign(f"{b}[T.bitwise_xor({tx}, {step})]", "x") for b in now]
                for buffer, value in zip(new, combine(em, node, acc_t, mine, other, [], list(pos))):
                    em.line(f"{buffer}[{tx}] = {value}")
            now, new = new, now
            step //= 2

    steps(WARP, width)
    if width == WARP:
        return [em.assign(f"{b}[0]", "r") for b in now]
    with em.phase(WARP) as tx:  # the first warp's lanes take the warps' totals (lane 0 of each warp)
        for buffer, source in zip(new, now):
            em.line(f"{buffer}[{tx}] = {source}[T.floormod({tx}, {warps}) * {WARP}]")
    now, new = new, now
    steps(warps, WARP)
    return [em.assign(f"{b}[0]", "r") for b in now]


def butterfly(em, node, acc_t, pos, accs: list, width: int) -> None:
    """``accs`` of every lane of ``width`` combined with its partners' (``T.shfl_xor``, or Metal's spelling):
    every lane ends with their total."""
    step, lanes = width // 2, em.target.lanes
    dtypes = [em.tir(t.dtype) for t in T.leaf_types(acc_t)]
    while step:
        mine = [em.assign(a, "x") for a in accs]
        other = [em.assign(lanes.shuffle(em, "xor", m, step, d), "x") for m, d in zip(mine, dtypes)]
        for acc, value in zip(accs, combine(em, node, acc_t, mine, other, [], pos)):
            em.line(f"{acc} = {value}")
        step //= 2


def shuffles(em, node, acc_t, shared, accs: list, width: int, pos=()) -> list:
    """The block's result of the reduction ``node`` from each thread's accumulators ``accs`` (names of its
    leaves): butterflies within each warp, the warps' totals through ``shared`` (one buffer a leaf), the first
    warp's butterfly over them; a block of one warp needs no barrier. ``width``: the block's threads."""
    tx, warps = em.tx, em.plan.warps
    butterfly(em, node, acc_t, pos, accs, WARP)
    if width == WARP:  # a warp's row: every lane holds the total, no barrier
        return [em.assign(a, "r") for a in accs]
    with em.block(f"if {tx} % {WARP} == 0:"):
        for buffer, acc in zip(shared, accs):
            em.line(f"{buffer}[{tx} // {WARP}] = {acc}")
    em.sync()
    with em.block(f"if {tx} < {WARP}:"):  # the first warp: lane l takes warp l % warps's total
        for acc, buffer in zip(accs, shared):
            em.line(f"{acc} = {buffer}[{tx} % {warps}]")
        butterfly(em, node, acc_t, pos, accs, warps)
        with em.block(f"if {tx} == 0:"):
            for buffer, acc in zip(shared, accs):
                em.line(f"{buffer}[{warps}] = {acc}")
    em.sync()
    return [em.assign(f"{b}[{warps}]", "r") for b in shared]
