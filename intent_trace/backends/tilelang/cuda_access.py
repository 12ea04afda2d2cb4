"""What the CUDA recognisers share: the specialisation record and the whole-axis access tests.

A recognised graph is built from full unit-step domains and reads of whole axes; :func:`view_access` and
:func:`full_axes` say which nodes are those, with the patterns of :mod:`intent_trace.graph.patterns`. The
recognisers (:mod:`.cuda_kernels`' nests and grids, :mod:`.cuda_matmul`, :mod:`.cuda_region`) import this
module, and :mod:`.cuda_kernels` gathers their specialisations, so none of them imports another.
"""
from __future__ import annotations

import math

import attrs

from ...errors import LoweringError
from ...graph import ops
from ...graph.patterns import pat
# the whole-axis tests are the schedule pass's (target-neutral); re-exported for the CUDA recognisers
from ...schedule.access import FROM_DOMAIN, REJECT, UNIT_DOMAIN, full_axes, view_access  # noqa: F401


@attrs.frozen
class Specialization:
    """A tiled program for the calls whose extents satisfy ``divides``: {extent index: tile}, and ``equals``:
    {extent index: the size the program is written for}, and whose grid of ``grid`` tiles ((extent index, tile),
    ...) has at least ``least`` blocks (a program of wide tiles, which leaves SMs idle on fewer blocks than SMs: a
    recogniser lists a smaller tiling's program after it for the other calls).

    It takes the graph's own arguments (no error record: a recogniser returns one only for graphs whose general
    program cannot fail a run-time check wherever the specialisation applies -- full unit-step domains, whole views,
    reshapes whose sizes agree by construction), then its ``workspaces`` (storage.Workspace), which the executable
    allocates per call (a segmented fold's finiteness flags: cuda_region_skip)."""

    name: str
    program: str
    divides: tuple  # ((graph extent index, tile), ...)
    equals: tuple = ()  # ((graph extent index, size), ...)
    # the extent indices of each operand's axes: every operand stays under 2**31 elements (int32 indices);
    # by default a matmul's, whose operands are the consecutive pairs of ``divides`` (C, B, A)
    operands: tuple | None = None
    # the parameter indices of views the program declares in their storage dtype (``view_storage``: f16 as its
    # uint16 bits), as the general program does: a fused epilogue's reads (cuda_epilogue); others in value dtypes
    stored: tuple = ()
    # the schedule's record of this program (schedule.plan.Part, without ``when``), or None: program.py then names
    # it from its name (a tiled matmul or the flash-attention template)
    part: object = attrs.field(default=None, eq=False)
    # ((graph extent index, elements), ...): extents that must be multiples of ``elements``: the innermost axes of
    # views the program copies with TMA, whose descriptors need every row stride a multiple of 16 bytes
    aligned: tuple = ()
    workspaces: tuple = ()
    grid: tuple = ()  # ((graph extent index, tile), ...): the program's grid of output tiles, for ``least``
    least: int = 0

    def blocks(self, extents: dict) -> int:
        """The blocks of the program's ``grid`` at ``extents``."""
        return math.prod(-(-extents[k] // tile) for k, tile in self.grid)

    def applies(self, extents: dict) -> bool:
        operands = self.operands
        if operands is None:
            operands = tuple((a, b) for (a, _), (b, _) in zip(self.divides, self.divides[1:] + self.divides[:1]))
        if any(math.prod(extents[k] for k in axes) >= 2**31 for axes in operands):
            return False
        if any(extents[k] != size for k, size in self.equals):
            return False
        if any(extents[k] % units for k, units in self.aligned):
            return False
        if not all(extents[k] > 0 and extents[k] % tile == 0 for k, tile in self.divides):
            return False
        return self.blocks(extents) >= self.least


def tma_rows(graph) -> tuple:
    """((extent index, elements), ...): the innermost extent of every view of rank 2 or more must hold whole
    16-byte units (TMA descriptors, which TileLang's tile copies use, need each row stride a multiple of 16 bytes;
    other extents take the general program). A static innermost extent that does not is a LoweringError: no call
    can take this program."""
    index = {ev.extent: k for k, ev in enumerate(graph.extents)}
    out = []
    for p in graph.params:
        if p.kind != "view" or len(p.type.shape) < 2:
            continue
        inner, size = p.type.shape[-1], p.type.dtype.np.itemsize
        units = 16 // math.gcd(16, size)
        if isinstance(inner, int):
            if inner % units:
                raise LoweringError(f"view {p.name}'s rows of {inner} x {size} bytes are no whole 16-byte units")
        elif units > 1:
            if inner not in index:
                raise LoweringError(f"view {p.name}'s innermost extent {inner} is no extent of the call")
            out.append((index[inner], units))
    return tuple(sorted(set(out)))


#: A division that may round differently from IEEE's (the element code would not be the serial program's).
APPROXIMATE_DIV = pat(ops.div, where=lambda node: bool(node.attr("approximate") or node.attr("flush_to_zero")))
