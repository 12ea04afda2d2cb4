"""What the indexed grid programs share (:mod:`.cuda_histogram`, :mod:`.cuda_scatter`, :mod:`.cuda_gather`): the
shared emitter with a block's threads bound once, phases between barriers, a grid-stride loop over a flat extent,
and a failed check that is claimed without leaving the kernel (a thread that left before a barrier would leave its
block waiting). CUDA's and Metal's programs alike: where they differ (an atomic add's width) the target's
``lanes`` says how (:mod:`.lanes`).

With a plan's ``emulated`` the threads of a block are serial loops, one per phase: the C target runs the same
mapping on the CPU (tests, ``tools/pytest_plugins/emulate_cuda_grids.py``), and a device atomic is the plain
read-modify-write it is for one thread at a time.
"""
from __future__ import annotations

import contextlib
import re

from ...graph import ops
from ...graph.lowering import ErrorSite
from ...graph.traits import POINTWISE
from ...schedule.prologue import prologue
from .emitter import TileLangEmitter
from .extern import address
from .storage import ERROR_PARAM

_TYPED = re.compile(r"T\.(?:Cast\('(\w+)'|(u?int\d+|float\d+)\()")  # a value expression's dtype, where it says


def block_count(total: str, per_block: int, most: int) -> str:
    """Blocks for ``total`` items, ``per_block`` a block's share of one grid-stride step, at most ``most`` (the
    grid then strides); at least one (CUDA refuses an empty grid)."""
    return f"T.max(T.min(T.ceildiv({total}, T.int64({per_block})), T.int64({most})), T.int64(1))"


#: the ops of an indexed grid's element code (reads of whole axes and pointwise ops): none can fail a check, so the
#: only checks of the program are its own, claimed
ELEMENT_OPS = POINTWISE | {ops.read, ops.domain, ops.indices, ops.broadcast, ops.full, ops.reshape}


def recognised(graph, recognise, record, tail: int):
    """``recognise(graph)``'s record when it is a ``record`` and every node before the graph's last ``tail`` is element
    code or a prologue check (made before any launch, schedule.prologue), else None."""
    got = recognise(graph)
    if not isinstance(got, record):
        return None
    pro = prologue(graph)
    return None if any(n.op not in ELEMENT_OPS and n not in pro for n in graph.body.nodes[:-tail]) else got


def extent_names(graph, shape) -> list | None:
    """Each axis of ``shape`` as the program names it (``dK`` for a kernel extent, ``T.int64(n)`` for a literal), or
    None when an axis is neither."""
    names = {id(ev.extent): f"d{k}" for k, ev in enumerate(graph.extents)}
    parts = [f"T.int64({s})" if isinstance(s, int) else names.get(id(s)) for s in shape]
    return None if None in parts else parts


def kernel_line(blocks: str, threads: int, emulated: bool, prelude: str | None, name: str = "bx") -> str:
    extra = f", prelude={prelude}" if prelude else ""
    return f"with T.Kernel({blocks}{'' if emulated else f', threads={threads}'}{extra}) as {name}:"


class GridEmitter(TileLangEmitter):
    """The shared emitter, its launch a plan's grid: ``self.plan`` is the plan (``threads``, ``emulated``)."""

    def __init__(self, graph, target, rules, rejected, checks=True, nest=None, grid=None):
        super().__init__(graph, target, rules, rejected, checks, nest=None, grid=None)
        self.plan = grid
        self.grid_planned = True  # a workspace would be one buffer for every thread: the plan is then refused
        self.tx = None

    def run_region(self, region, params=()) -> list:
        if region is self.graph.body and not self.plan.emulated:
            self.tx = self.assign("T.get_thread_binding()", "tx")
        return super().run_region(region, params)

    @property
    def emulated(self) -> bool:
        return self.plan.emulated

    @contextlib.contextmanager
    def phase(self):
        """Code each thread of the block runs between two barriers; yields its index (emulated: a serial loop)."""
        if self.emulated:
            tx = self.fresh("tx")
            with self.block(f"for {tx} in T.serial({self.plan.threads}):"):
                yield tx
        else:
            yield self.tx

    def sync(self) -> None:
        if not self.emulated:
            self.line("T.sync_threads()")

    def atomic_add(self, cell: str, value: str) -> None:
        """``cell += value`` as one device atomic on shared or global memory, its old value unread (the target's
        ``lanes.atomic_add``; emulated a plain add). ``value`` names its dtype (``T.Cast('int64', ...)`` or a typed
        literal such as ``T.uint32(1)``): a target whose atomics depend on the width reads it there."""
        if self.emulated:
            self.line(f"{cell} = {cell} + {value}")
            return
        typed = _TYPED.match(value)
        if typed is None:
            raise self.reject(f"internal: the atomic add's value {value!r} does not name its dtype")
        self.line(self.target.lanes.atomic_add(self, cell, value, typed[1] or typed[2]))

    def emit_at(self, node, emit) -> None:
        """``emit(node)`` with ``node`` the node being emitted (its checks' notes and rejections name it)."""
        outer, self.node = self.node, node
        try:
            emit(node)
        finally:
            self.node = outer

    def unflatten(self, j: str, shape: tuple) -> list:
        """The row-major coordinates of flat index ``j`` in ``shape`` (extent expressions): ``coordinates``."""
        return self.coordinates(j, shape, " * ".join(f"({n})" for n in shape))

    def claim(self, site: ErrorSite, *values: str) -> None:
        """Record a failed check without leaving: the first thread to claim the record writes it (the executable
        raises the site's exception and commits nothing); the thread goes on past the failing update."""
        if not self.checks:
            return
        self.error_sites.append(site)
        code = f"T.int64({len(self.error_sites)})"
        self.helpers.setdefault("itc_claim", self.target.claim_source())
        claim = f"T.call_extern('bool', 'itc_claim', {address(ERROR_PARAM, ['0'])}, {code})"
        with self.block(f"if {self.flag(claim)}:"):
            self._record(values)
