"""How a row group's threads (:mod:`.cuda_rows`) combine their partial results into the row's: two butterflies of
warp shuffles -- within each warp (lane ^ 16, ^ 8, ... ^ 1, so every lane ends with its warp's total), then, in the
first warp, across the warps' totals (lane ^ warps/2, ..., ^ 1), through shared memory with two barriers per
reduction (after the warps' totals are stored, after the row's result is). Each lane combines (its value, its
partner's) with the reduce's own combine, the serial program's helper: re-association and re-ordering are what
``reduce`` allows (T10). A warp's row (its lanes' slots hold it) stops after the first butterfly, with no barrier.

Emulated (the C target running CUDA's mapping), every step is a phase of its own: every thread's register is a slot
of a buffer, and a step writes the other buffer, so each lane reads its partner's value before any is replaced.
The functions take the row emitter (:class:`.cuda_rows.RowEmitter`): its shared buffers, lanes and phases."""
from __future__ import annotations

from ... import types as T
from .accumulate import combine

WARP = 32  # CUDA's warp: the lanes a shuffle exchanges values among


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


def shuffles(em, node, acc_t, pos, accs: list) -> list:
    """The row's result of the reduction ``node`` from each thread's accumulators ``accs`` (names of its leaves)."""
    shared, tx, warps = em.shared[id(node)], em.tx, em.plan.warps
    butterfly(em, node, acc_t, pos, accs, WARP)
    if em.width == WARP:  # a warp's row: every lane holds the total, no barrier
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


def emulated_shuffles(em, node, acc_t, pos) -> list:
    """The same butterflies emulated, one phase per step, from the threads' accumulators in ``em.shared``'s
    first buffers."""
    now, new = em.shared[id(node)]
    warps = em.plan.warps

    def steps(width: int, count: int):
        nonlocal now, new
        step = width // 2
        while step:
            with em.phase(count) as tx:
                mine = [em.assign(f"{b}[{tx}]", "x") for b in now]
                other = [em.assign(f"{b}[T.bitwise_xor({tx}, {step})]", "x") for b in now]
                for buffer, value in zip(new, combine(em, node, acc_t, mine, other, [], pos)):
                    em.line(f"{buffer}[{tx}] = {value}")
            now, new = new, now
            step //= 2

    steps(WARP, em.width)
    if em.width == WARP:
        return [em.assign(f"{b}[0]", "r") for b in now]
    with em.phase(WARP) as tx:  # the first warp's lanes take the warps' totals (lane 0 of each warp)
        for buffer, source in zip(new, now):
            em.line(f"{buffer}[{tx}] = {source}[T.floormod({tx}, {warps}) * {WARP}]")
    now, new = new, now
    steps(warps, WARP)
    return [em.assign(f"{b}[0]", "r") for b in now]
