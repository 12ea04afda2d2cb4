"""The load phase of a row group held on chip (:mod:`.cuda_rows`): a thread's elements of the row read into its slots,
every load issued before any is used, then what each slot holds for the passes computed once.

A read decoded from stored bits (f16, bf16) loads the bits into slots of their own first, and one loop over the
chunks decodes them (a decode next to its load made each chunk's code wait on its loads before the next chunk's were
issued: RMSNorm f16 had 4 loads in flight, not 32). A read whose one use is a unary pointwise op of it alone
(:func:`.cuda_rows_slots.applied`: RMSNorm's and an f16 softmax's ``cast(x, f32)``) has that op applied in the same
loop, so its slots hold the op's value and no pass computes it again: RMSNorm f16 quieted each element's NaN twice
(its fold and its write: 3 SASS instructions an element each on sm_90a).
"""
from __future__ import annotations

from ...codegen.access import coords, index_plan
from . import cuda_rows_slots as slots_of


def stored(em, node, buffer: str, raw: str | None, streaming: bool) -> slots_of.Stored:
    """An element read loaded from its view's storage by the load phase: decoded from its stored bits (f16/bf16: the
    stored loads into ``raw`` alone, then the slots decoded) where ``raw`` is given; on CUDA as a streaming load
    (:func:`.cuda_rows_slots.streaming`) where ``streaming``."""
    view = em.operand(node.inputs[0])
    _, plan = index_plan(em, node, view, [em.operand(x) for x in node.inputs[1:]])
    d, kept = em.dialect, view.storage or em.tir(view.dtype)

    def cell(idx):
        text = f"{view.name}[{d.subscript(coords(em, plan, idx))}]"
        return slots_of.streaming(kept, text) if streaming else text

    if raw is None:
        return slots_of.Stored(buffer, cell)
    return slots_of.Stored(raw, cell, lambda bits: d.decode(em, view, bits))


def load_phase(em, loads: list, applied: list) -> None:
    """``loads``: (read node, its slots, the global read's value or a :class:`~.cuda_rows_slots.Stored`), every
    load issued first; then one loop over the chunks decodes stored bits and applies ``applied`` -- (op node, the
    slots it replaces, its value read from them) -- slot by slot."""
    pos, outer = em.position(), em.node
    with em.phase() as tx:
        for part in em.parts():
            with em.strided(tx, part) as j:
                for node, buffer, source in loads:
                    em.node = node
                    if isinstance(source, slots_of.Stored):
                        em.line(f"{source.bits}[{em.slot}] = {source.cell([*pos, j])}")
                    else:
                        em.line(f"{buffer}[{em.slot}] = {em.elem(source, [*pos, j])}")
        decoded = [(node, buffer, source) for node, buffer, source in loads
                   if isinstance(source, slots_of.Stored) and source.decode is not None]
        if decoded or applied:
            with em.chunks(tx):
                for part in em.parts():
                    with em.strided(tx, part) as j:
                        for node, buffer, source in decoded:
                            em.node = node
                            em.line(f"{buffer}[{em.slot}] = {source.decode(f'{source.bits}[{em.slot}]')}")
                        for node, buffer, value in applied:
                            em.node = node
                            em.line(f"{buffer}[{em.slot}] = {em.elem(value, [*pos, j])}")
    em.node = outer
