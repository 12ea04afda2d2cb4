"""A block's shuffle tree as the C target emulates it (``emulated``: a block's threads are serial loops, one per
phase between barriers), shared by the row groups (:mod:`.cuda_rows_combine`) and the multi-block reductions
(:mod:`.cuda_reduce`), so both emulate CUDA's butterflies in the same order the GPU combines them.
"""
from __future__ import annotations

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
