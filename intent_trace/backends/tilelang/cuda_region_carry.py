"""Carried lanes on CUDA (:class:`~intent_trace.schedule.carry.CarriedLanes`): one thread a lane, each running the whole
ordered loop on its element of the carry (a Mamba-style state passing, ``examples/mamba_state_passing.py``).

The program is the shared lowering's (:class:`.emitter.TileLangEmitter`: every element the serial program's helpers,
so the bits are the serial program's: each lane's chain is the same sequence of operations in the same order), with
its loop nests over the lanes and its vector carries restricted to the thread's lane: a nest over the lanes is no loop
(the element is the thread's ``lane``), and a vector carry leaf is one mutable local (``T.alloc_var``) instead of a
buffer. Threads are laid out along the lanes, so a warp's loads and stores of ``x[c, lane]`` are coalesced and a
scalar of the iteration (``decay[c]``) is one broadcast load. With ``emulated`` the threads of a block are a serial
loop: the C target runs the same mapping (tests, ``tools/pytest_plugins``).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...schedule import carry as schedule_carry
from .cuda_grid import GridEmitter, kernel_line
from .emitter import Lazy, Scalar, TileLangEmitter

THREADS = 128


@attrs.frozen
class LanePlan:
    """The launch of a lane loop: ``lanes`` the extent name of the lanes."""

    lanes_of: schedule_carry.CarriedLanes = attrs.field(eq=False)
    lanes: str
    threads: int = THREADS
    emulated: bool = False
    mapping: str = "carried_lanes"
    node = None  # no parallel loop of the graph is the grid's

    @property
    def emitter(self):
        return LaneEmitter

    def part(self, graph):
        return self.lanes_of.part(graph, threads=self.threads, per_thread="one lane, the whole loop in order")

    def launch(self, prelude: str | None) -> str:
        blocks = f"T.max(T.ceildiv({self.lanes}, T.int64({self.threads})), T.int64(1))"
        return kernel_line(blocks, self.threads, self.emulated, prelude)


def lane_plan(graph, emulated: bool = False) -> LanePlan | None:
    """The lane launch of ``graph``, or None (:func:`~intent_trace.schedule.carry.recognise` says why)."""
    found = schedule_carry.recognise(graph)
    if not isinstance(found, schedule_carry.CarriedLanes):
        return None
    return LanePlan(found, f"d{found.lanes}", THREADS, emulated)


@attrs.frozen
class _LaneSlot:
    """A vector carry leaf held for one lane: a mutable local."""

    name: str


class LaneEmitter(GridEmitter):
    """The shared emitter with every nest over the lanes the thread's own lane, and vector carries scalars."""

    lane = None

    def run_region(self, region, params=()) -> list:
        if region is not self.graph.body:
            return super().run_region(region, params)
        if not self.emulated:
            self.tx = self.assign("T.get_thread_binding()", "tx")
        with self.phase() as tx:
            self.lane = self.assign(f"T.Cast('int64', bx) * T.int64({self.plan.threads}) + T.Cast('int64', {tx})",
                                    "lane")
            self.in_grid = True
            try:
                with self.block(f"if {self.lane} < {self.plan.lanes}:"):
                    return TileLangEmitter.run_region(self, region, params)
            finally:
                self.in_grid = False

    @contextlib.contextmanager
    def loop_nest(self, shape):
        if tuple(shape) == (self.plan.lanes,):
            yield [self.lane]  # the thread's lane: no loop
            return
        if not shape:
            yield []
            return
        raise self.reject(f"a loop nest over {tuple(shape)!r} in a lane program")

    def _is_lanes(self, t) -> bool:
        return isinstance(t, T.TensorType) and tuple(self.shape(t)) == (self.plan.lanes,)

    def mutable(self, t, init=None, scratch: bool = True) -> list:
        names = []
        for lt in T.leaf_types(t):
            if isinstance(lt, T.TensorType) and not self._is_lanes(lt):
                raise self.reject(f"a carry of shape {tuple(lt.shape)!r} in a lane program")
            name = self.fresh("c")
            self.line(f"{name} = T.alloc_var({self.tir(lt.dtype)!r})")
            names.append(_LaneSlot(name) if isinstance(lt, T.TensorType) else name)
        if init is not None:
            self.store(names, init, t, direct=True)
        return names

    def current(self, names: list, t):
        names = list(names)
        lanes = (self.plan.lanes,)

        def build(t):
            from ...graph.lowering import components
            from .emitter import Aggregate

            if isinstance(t, (T.TupleType, T.RecordType)):
                return Aggregate(tuple(build(it) for it in components(t)))
            name = names.pop(0)
            if isinstance(name, _LaneSlot):
                local = self.assign(name.name)  # the value now (the slot changes at the store)
                return Lazy(lanes, lambda idx, v=local: v)
            return Scalar(self.assign(name))

        return build(t)

    def store(self, names: list, value, t, direct: bool = False) -> None:
        """Every new leaf computed first (a leaf may read another's old value), then assigned."""
        leaves = self.leaves(value, t)
        exprs = []
        for name, leaf in zip(names, leaves):
            expr = self.elem(leaf, [self.lane]) if isinstance(name, _LaneSlot) else leaf
            exprs.append(self.assign(expr))
        for name, expr in zip(names, exprs):
            self.line(f"{name.name if isinstance(name, _LaneSlot) else name} = {expr}")
