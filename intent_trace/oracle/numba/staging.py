"""Which run-time checks of a cpu kernel can fail after it wrote to memory: only those make a call stage its outputs.

A kernel that raises leaves the caller's arrays unchanged (T9). The executable guarantees it by running the
kernel on copies of its Out/InOut arrays and copying them back on success: two passes over every output and a
fresh allocation (page faults) per call, as much as the whole computation of a row softmax. A check that can
only fail before the kernel's first write needs none of it: when it fails, nothing was written.

:class:`Staging` follows the emission. Every node that writes memory (its own effects or its regions') makes
the error sites recorded from its start on *late*; the sites before the first one are early. One kind of check
is moved to where it is early: the allocation checks of the buffers a top-level parallel loop allocates in its
body (a row group's row buffers, an ``I.parallel`` body's temporaries). Their sizes are extents fixed at entry
and every iteration allocates them before anything else can stop it, so the check is made once before the loop
(``if extent > 0``: only a loop that runs allocates) and, when nothing was written before the loop, it is early:
a failed check there leaves the outputs as they were, and the loop never starts.
"""
from __future__ import annotations

import contextlib
import re

import attrs

from ...graph.ops import region_effects

# Extents defined on entry to the kernel function: a literal, an extent argument, an argument's shape.
ENTRY_EXTENT = re.compile(r"\d+|ext\d+|arg\d+\.shape\[\d+\]")


@attrs.define(slots=True)
class _Loop:
    index: int  # where the loop's header line is in the emitter's lines
    depth: int  # the header's indentation
    extent: str
    early: bool  # nothing was written before the loop
    lines: list = attrs.field(factory=list)  # the checks made before the loop


@attrs.define(slots=True)
class Staging:
    """The emitter's record of writes and error sites (``em.staging``)."""

    wrote: bool = False  # a node that writes memory has started
    first_late: int | None = None  # how many error sites there were when the first writing node started
    early: set = attrs.field(factory=set)  # sites recorded later that are early all the same (hoisted checks)
    before: list = attrs.field(factory=list)  # ``wrote`` when each node being emitted started (a stack)
    loop: _Loop | None = None

    @contextlib.contextmanager
    def node(self, em, node):
        """Around the emission of ``node``."""
        self.before.append(self.wrote)
        if "write" in region_effects(node) and not self.wrote:
            self.wrote = True
            self.first_late = len(em.error_sites)
        try:
            yield
        finally:
            self.before.pop()

    @contextlib.contextmanager
    def parallel_loop(self, em, extent: str):
        """Around a top-level parallel loop (entered before its header is emitted): the allocation checks of its
        body go before it (:meth:`hoist_check`)."""
        wrote = self.before[-1] if self.before else self.wrote  # before the node that opens the loop
        self.loop = _Loop(len(em.lines), em.depth, extent, not wrote)
        try:
            yield
        finally:
            loop, self.loop = self.loop, None
            em.lines[loop.index:loop.index] = loop.lines

    def hoist_check(self, em, shape, itemsize: int, what: str) -> bool:
        """Make the allocation check of ``shape`` before the enclosing top-level parallel loop, if it is a straight
        line of the loop's body (or of a row group's loop that is one: its row buffers) and its extents are fixed on
        entry; whether it did."""
        loop = self.loop
        if loop is None or not all(ENTRY_EXTENT.fullmatch(s) for s in shape):
            return False
        if em.depth != loop.depth + 1 and not (em.row_header == loop.depth + 1 and em.depth == loop.depth + 2):
            return False
        lines, depth, prange_depth = em.lines, em.depth, em.prange_depth
        em.lines, em.depth, em.prange_depth = loop.lines, loop.depth, 0
        first = len(em.error_sites)
        try:
            with em.block(f"if {loop.extent} > 0:"):
                em.check_size(shape, itemsize, what)
        finally:
            em.lines, em.depth, em.prange_depth = lines, depth, prange_depth
        if loop.early:
            self.early.update(range(first, len(em.error_sites)))
        return True

    def stages(self, em) -> bool:
        """Whether some error site can be reached after a write (the call must stage its outputs)."""
        late = range(self.first_late, len(em.error_sites)) if self.first_late is not None else ()
        return any(k not in self.early for k in late)
