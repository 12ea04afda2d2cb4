"""How a row group's threads (:mod:`.cuda_rows`) combine what they fold. On chip, a thread folds its slots into one
accumulator per slot of a chunk, then those in a tree (:func:`chunk_lanes`, :func:`fold_lanes`). The threads'
partial results are combined into the row's in two butterflies of warp shuffles -- within each warp (lane ^ 16,
^ 8, ... ^ 1, so every lane ends with its warp's total), then, in the first warp, across the warps' totals (lane ^
warps/2, ..., ^ 1), through shared memory with two barriers per reduction (after the warps' totals are stored,
after the row's result is). Each lane combines (its value, its partner's) with the reduce's own combine, the serial
program's helper: re-association and re-ordering are what ``reduce`` allows (T10). A warp's row (its lanes' slots
hold it) stops after the first butterfly, with no barrier.

Emulated (the C target running CUDA's mapping), every step is a phase of its own: every thread's register is a slot
of a buffer, and a step writes the other buffer, so each lane reads its partner's value before any is replaced.
The functions take the row emitter (:class:`.cuda_rows.RowEmitter`): its shared buffers, lanes and phases."""
from __future__ import annotations

from ... import types as T
from .accumulate import combine
from .cuda_butterfly import emulated_butterflies
from .cuda_butterfly import shuffles as block_shuffles
from .cuda_rows_slots import UNROLL



def chunk_lanes(em, acc_t, inits: list) -> list:
    """A thread's accumulators for the slots of a chunk, one per slot of it (a local buffer of UNROLL per leaf, every
    index a constant once unrolled: registers), each from the identity: slot k of every chunk goes to accumulator k,
    so a thread's fold is UNROLL independent chains (4 combines each for 16 slots) instead of one of 16, where each
    combine waits on the previous one's NaN test (T3's payload rule: a compare and a select on the chain)."""
    lanes = []
    for t, init in zip(T.leaf_types(acc_t), inits):
        buffer = em.assign(f"T.alloc_local(({UNROLL},), {em.tir(t.dtype)!r})", "a")
        for k in range(UNROLL):
            em.line(f"{buffer}[{k}] = {init}")
        lanes.append(buffer)
    return lanes


def fold_lanes(em, node, acc_t, pos, accs: list, lanes: list) -> None:
    """The chunk accumulators ``lanes`` combined in a balanced tree (pairs, then pairs of pairs), then into the
    thread's accumulators ``accs`` (which start from the identity, as the serial fold does)."""
    level = [[f"{b}[{k}]" for b in lanes] for k in range(UNROLL)]
    while len(level) > 1:
        level = [combine(em, node, acc_t, [em.assign(x, "x") for x in a], [em.assign(x, "x") for x in b], [], pos)
                 for a, b in zip(level[::2], level[1::2])]
    mine = [em.assign(a, "x") for a in accs]
    for acc, value in zip(accs, combine(em, node, acc_t, mine, level[0], [], pos)):
        em.line(f"{acc} = {value}")


def shuffles(em, node, acc_t, pos, accs: list) -> list:
    """The row's result of the reduction ``node`` from each thread's accumulators ``accs`` (names of its leaves):
    :func:`.cuda_butterfly.shuffles` over the row's threads."""
    return block_shuffles(em, node, acc_t, em.shared[id(node)], accs, em.width, pos)


def emulated_shuffles(em, node, acc_t, pos) -> list:
    """The same butterflies emulated (:func:`.cuda_butterfly.emulated_butterflies`), from the threads'
    accumulators in ``em.shared``'s first buffers."""
    return emulated_butterflies(em, node, acc_t, em.shared[id(node)], em.width, em.plan.warps, pos)
