"""Blocks inside a coordinate mask: where a comparison of the row and source coordinates is true for every pair of a
block, the segmented fold's element code takes it as true instead of evaluating it per element.

:mod:`intent_trace.schedule.region_skip` finds the comparisons of ``summarize`` between the absolute row and source
coordinates (causal attention's ``query_pos >= key_pos``) and, for each, the side of the diagonal where it holds
(:class:`~intent_trace.schedule.region_skip.Bound`: ``j < i + 1 + shift`` for an upper bound, ``j >= i + shift``
for a lower one). A block of rows ``[bx * M, bx * M + M)`` and of the source ``[kb * N, kb * N + N)`` lies inside
every bound when

- upper: its last source coordinate is below its first row's bound, ``kb * N + N <= bx * M + 1 + shift``;
- lower: its first source coordinate is at or past its last row's, ``kb * N >= bx * M + M - 1 + shift``.

There the comparison's value is ``True`` for every element, and replacing a value by the value it has changes no bit
of any result: ``select(True, x, y)`` is ``x`` (``y`` is never computed, as before it was computed and dropped). So
every tile a comparison feeds is written in two branches, one uniform test per block: inside (and a whole block of
the source), the element code with the comparison replaced by ``T.bool(True)``, which the compiler folds away --
causal attention's blocks below the diagonal then run the unmasked program's element code -- and otherwise the code
as it was (the comparison evaluated, the tail masked). Causal attention folds about ``n/2`` blocks a block of rows and
only one of them is on the diagonal. The proof is the graph's, not a name's; a fold without such a comparison has one
branch, as before. Every spelling takes it (the C emulation runs both branches, so tests check them).
"""
from __future__ import annotations

import contextlib

from ...codegen.values import Lazy
from ...schedule import region_skip

TRUE = "T.bool(True)"


class Inside:
    """The fold's coordinate comparisons (``bounds``), the values that read them (``masked``) and the condition that a
    block ``(bx, kb)`` lies inside every one (``condition``; None where there is none)."""

    def __init__(self, graph, plan, tiling):
        proof = region_skip.prove(graph, plan)
        self.bounds = () if isinstance(proof, str) else proof.bounds
        self.nodes = frozenset(id(b.node) for b in self.bounds)
        self.masked: set = set()  # the Vars of summarize whose values read a comparison
        self.assumed = False  # while a block inside every bound is written: the comparisons are True
        self.condition = " and ".join(_inside(b, tiling) for b in self.bounds) or None

    def track(self, em, node) -> None:
        """After ``node`` ran: a comparison's value reads ``True`` while :attr:`assumed`; what reads one is masked."""
        if id(node) in self.nodes:
            value = em.env[node.outputs[0]]
            if isinstance(value, Lazy):
                em.env[node.outputs[0]] = Lazy(value.shape,
                                               lambda idx, v=value: TRUE if self.assumed else em.elem(v, idx))
        if id(node) in self.nodes or any(x in self.masked for x in node.inputs):
            self.masked.update(node.outputs)

    def known(self, var) -> str | None:
        """The condition under which ``var``'s tile may be written with the comparisons known, or None."""
        return self.condition if var in self.masked else None

    @contextlib.contextmanager
    def assuming(self, on: bool):
        self.assumed = on
        try:
            yield
        finally:
            self.assumed = False


def _inside(bound, t) -> str:
    """Block ``(bx, kb)`` lies where ``bound``'s comparison is true for every pair."""
    if bound.side == "upper":
        return f"kb * {t.block_N} + {t.block_N} <= bx * {t.block_M} + {1 + bound.shift}"
    return f"kb * {t.block_N} >= bx * {t.block_M} + {t.block_M - 1 + bound.shift}"
