"""What the schedule pass decided for one graph on one target: a :class:`Schedule`, one :class:`Part` per part of
the graph, each with its mapping and the reason for it.

A part is the unit a target launches as one program (today a whole graph is one part: the general program or one
of its tiled specialisations). ``mapping`` names the kind of parallel program:

- ``row_group``: one thread block per row, a cooperative reduction per level, producers and consumers fused;
- ``flat_nest``: a whole write's elements spread over a grid of threads;
- ``parallel_grid``: the top-level ``parallel`` loop, one iteration per thread;
- ``full_reduce``: a reduction over every axis: a grid of blocks folds partials, a final block combines them;
- ``multi_block_scan``: a scan along a long axis: block totals, their scan, each block's tile from its offset;
- ``tiled_matmul``: tiled specialisations chosen per call by the extents;
- ``segmented_fold``: a ``region_fold`` whose summary rows are independent, as a tile program per block of rows: the
  source folded in pipelined blocks (``summarize`` on tiles: matrix products, row reductions, pointwise ops),
  ``combine`` into a running summary in registers, the consumers fused before one store (schedule/region.py);
- ``segmented_scan``: a ``region_scan`` as three phases over chunks of its source axis: each chunk's transition
  (``summarize``) in parallel, the transitions' prefixes combined in order and applied to the initial state, each
  chunk's outputs (``emit``) from its incoming state in parallel (schedule/region_scan.py);
- ``carried_lanes``: an ordered loop whose carry is a vector of independent lanes: one thread a lane, each running
  the loop in order on its element (schedule/carry.py);
- ``privatised_histogram``: a grid over the values, each block counting into private bins added atomically;
- ``atomic_scatter``: a grid over a scatter's updates, each one device atomic;
- ``gather_rows``: a grid over a gather's output rows, each row's coordinates read once, the row copied;
- ``serial``: one thread runs the program; ``reason`` says what kept it serial.

Before the parts, ``prologue`` names the checks a call makes before any part runs (:mod:`.prologue`: extent
equalities over the bound extents and scalars), which are therefore part of no part's program.

The record is data for people and tests (``exe.schedule``, ``print(exe)``): nothing is re-derived from it.
"""
from __future__ import annotations

import attrs

MAPPINGS = ("row_group", "flat_nest", "parallel_grid", "full_reduce", "multi_block_scan", "tiled_matmul",
            "segmented_fold", "segmented_scan", "carried_lanes", "privatised_histogram", "atomic_scatter",
            "gather_rows", "serial")


def _check_mapping(instance, attribute, value) -> None:
    if value not in MAPPINGS:
        raise ValueError(f"unknown mapping {value!r}; the mappings are {', '.join(MAPPINGS)}")


@attrs.frozen(slots=True)
class Part:
    """One part of a graph and how it runs.

    ``nodes`` are the graph's nodes the part covers (compared by identity, so two spellings of one computation have
    equal parts when everything else agrees); ``params`` are ``(name, value)`` pairs (threads, grid axes, passes);
    ``fused`` names the ops computed inside the part's loops instead of in passes of their own; ``when`` says for
    which calls it runs (a specialisation's extent conditions; empty: every call)."""

    mapping: str = attrs.field(validator=_check_mapping)
    reason: str
    params: tuple = ()
    fused: tuple = ()
    when: str = ""
    nodes: tuple = attrs.field(default=(), eq=False)

    def param(self, name: str, default=None):
        return dict(self.params).get(name, default)

    def describe(self) -> str:
        """One line: the mapping, its parameters and fused ops, when it runs, and why."""
        params = ", ".join(f"{k}={v}" for k, v in self.params)
        text = self.mapping + (f" ({params})" if params else "")
        if self.fused:
            text += f"; fused: {', '.join(self.fused)}"
        if self.when:
            text += f"; when {self.when}"
        return f"{text}: {self.reason}"


@attrs.frozen(slots=True)
class Schedule:
    """The parts of one graph on one target, in the order a call considers them: the specialisations first (each
    with its ``when``), the general program last; ``prologue`` the checks every call makes before any of them
    (one text per check: its op and line)."""

    parts: tuple = attrs.field(converter=tuple)
    prologue: tuple = attrs.field(default=(), converter=tuple)

    def __iter__(self):
        return iter(self.parts)

    def __len__(self) -> int:
        return len(self.parts)

    @property
    def general(self) -> Part:
        """The part every call runs unless a specialisation applies (the last)."""
        return self.parts[-1]

    def mappings(self) -> tuple:
        return tuple(p.mapping for p in self.parts)

    def prologue_line(self) -> str | None:
        """``prologue: assume_equal at k.py:7; ...``: what every call checks first, or None when nothing."""
        if not self.prologue:
            return None
        return f"prologue: {'; '.join(self.prologue)}: checked before any launch (their operands are extents and " \
               f"scalars, known once the arguments are bound)"

    def lines(self) -> list:
        first = self.prologue_line()
        return ([first] if first else []) + [p.describe() for p in self.parts]

    def __str__(self) -> str:
        return "\n".join(self.lines())
