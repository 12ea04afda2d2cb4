"""The CPU oracle's code generator composed: KIR -> the source of one Numba function.

:class:`NumbaEmitter` is :class:`.base.EmitterBase` (values are source fragments, :mod:`.values`) over
:data:`RULES`, the union of the rule modules' tables. Each rule module owns its ``RULES`` (the structural rules
are the shared ones of :mod:`intent_trace.codegen`, which the rule modules enter in their tables) and imports only
downward (the base emitter, :mod:`.indexing`, :mod:`.inline`, :mod:`.scalar_rules`, :mod:`.values`); this is the
only module that imports them all, and nothing fills a table as an import side effect.

Scalars become locals assigned once (``v17 = ...``); tensors are *fused* element expressions when the
fusion analysis allows, or arrays filled by one loop nest (the outermost loop a ``prange`` when the nest is
at top level). Structured control becomes Python control; loop carries are the only reassigned names.
Run-time checks (``checks=True``) never raise inside compiled code: they record an error site, the
coordinate and the extent in ``err`` and leave the function (``return``), or skip the iteration inside a
``prange`` (``continue``); the executable raises the Python exception and discards the staged outputs.
"""
from __future__ import annotations

import re

from ...graph.interpreter import rule_table
from ...graph.ops import region_effects
from . import atomic, contract, elementwise, memory, quant, random, region, scaled, structure, structured
from .rows import row_groups
from .values import Scalar
from .base import MAX_FUSION_DEPTH, EmitterBase  # noqa: F401  (public names of the generator)

RULES = rule_table(elementwise.RULES, structure.RULES, structured.RULES, contract.RULES, region.RULES,
                   memory.RULES, random.RULES, atomic.RULES, scaled.RULES, quant.RULES)
# Ops this target refuses, with the reason (OpDef -> str): none, the CPU oracle lowers every op.
REJECTED: dict = {}


class NumbaEmitter(EmitterBase):
    """The cpu target's code generator: the base emitter over the composed rule table."""

    rules = RULES

    def run_region(self, region, params=()) -> list:
        """The kernel's body runs its row groups (:mod:`.rows`) as one parallel loop over rows each: the
        hoisted nodes first, then the members inside ``for r in prange(M)``; the body of a top-level parallel
        loop runs its groups' rows in a ``range`` inside it, members that later nodes read stored whole; every
        other region (and every node outside a group) runs node by node. A group's rows, and the iterations of a
        top-level parallel loop, prefetch the next row of what they read before their first write
        (:meth:`_prefetch_next_rows`)."""
        top = region is self.graph.body and not (self.prange_depth or self.loop_depth)
        nested = region is self.parallel_body and self.row is None  # a top-level prange's body (its iteration)
        if self.pointwise or not (top or nested):
            return super().run_region(region, params)
        groups = row_groups(region, store_escaping=nested)
        # a top-level parallel loop's iteration point: its body prefetches the next point's rows like a group
        point = params[0].expr if nested and len(params) == 1 and isinstance(params[0], Scalar) else None
        if not groups and point is None:
            return super().run_region(region, params)
        for var, value in zip(region.params, params):
            self.env[var] = value
        body, k = len(self.lines), 0
        while k < len(region.nodes):
            group = groups.get(k)
            if group is None:
                node = region.nodes[k]
                if point is not None and "write" in region_effects(node):
                    self._prefetch_next_rows(self.lines[body:], point)
                    point = None
                self.run_node(node)
                k += 1
                continue
            self.recomputed = group.recomputed  # hoisted values too: each member's use recomputes them per row
            for node in group.hoisted:
                self.run_node(node)
            at, stored = [len(self.lines), self.depth], {}
            with self.row_loop(self.extent(group.extent)) as r:
                body, prefetched = len(self.lines), False
                for node in group.members:
                    if not prefetched and "write" in region_effects(node):
                        self._prefetch_next_rows(self.lines[body:], r)
                        prefetched = True
                    self.run_node(node)
                    for v in node.outputs:
                        if v in group.stored:
                            stored[v], inserted = self.store_rows(node, v, r, tuple(at))
                            at[0] += inserted
            self.env.update(stored)
            self.recomputed = frozenset()
            k = group.end
        return [self.operand(r) for r in region.results]

    def _prefetch_next_rows(self, lines: list, r: str) -> None:
        """Before a row group's (or a parallel loop's iteration's) first write: a prefetch of row ``r + 1`` of each
        kernel argument the code so far (``lines``) reads at row ``r`` (``argN[r, ...]``), overlapping the next
        row's first loads with this row's stores (:mod:`.prefetch`; a hint: for a loop whose step is not 1 it is
        merely useless)."""
        read = re.compile(rf"\b(arg\d+)\[{re.escape(r)}, ")
        for name in sorted({m.group(1) for line in lines for m in read.finditer(line)}, key=lambda n: int(n[3:])):
            self.line(f"R.prefetch_row({name}, {r} + 1)")
