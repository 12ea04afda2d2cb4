"""Shared by the indexed grid tests (histogram, scatter, row gather): the ``compiled`` fixture and the emulated C
target that runs tilelang-cuda's indexed mappings (cuda_indexed, a block's threads one after another)."""
import attrs
import numpy as np
from conftest import EXECUTABLE_TARGETS

import intent_trace as intent
from intent_trace.backends.tilelang import cuda_indexed, targets
from intent_trace.backends.tilelang import target as tl_target

#: the C target running CUDA's indexed mappings, a block's threads one after another
EMULATED = attrs.evolve(targets.C, indexed_grid=lambda g: cuda_indexed.indexed_plan(g, emulated=True),
                        host_workspaces=True)
GRID_TARGETS = ("tilelang-c", "tilelang-cuda")  # the targets whose programs are the indexed grids
UNCHECKED = [t for t in EXECUTABLE_TARGETS if t in GRID_TARGETS]  # where checks=False builds are tested


def body(program: str) -> str:
    """The program text from ``def kernel(`` on."""
    return program[program.index("def kernel("):]


def make_compiled(target, monkeypatch, mapping: str, spec=EMULATED):
    """``compiled(kernel, checks=True)``: the kernel for this target; on tilelang-c with CUDA's mapping emulated
    (``spec``). On a target that runs the indexed grids the test fails unless the program is ``mapping``."""
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, spec)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel, checks: bool = True):
        if target in GRID_TARGETS:
            exe = tl_target.build(kernel.trace(), target=target, checks=checks)
            assert exe.schedule.general.mapping == mapping, exe.schedule
            return exe
        assert checks, "checks=False is a TileLang build option (parametrize over UNCHECKED)"
        return intent.compile(kernel, target=target)

    return compiled


def within_t5(got, dest, idx, v, unit: float = 2.0 ** -24) -> None:
    """Each destination's sum within T5's bound for its own terms (the initial value and its updates: the order of
    collisions is free, T10)."""
    exact = dest.astype(np.float64)
    np.add.at(exact, idx, v.astype(np.float64))
    terms = np.abs(dest.astype(np.float64))
    np.add.at(terms, idx, np.abs(v.astype(np.float64)))
    n = np.ones(dest.shape)
    np.add.at(n, idx, 1)
    gamma = n * unit / (1 - n * unit)
    assert np.all(np.abs(got - exact) <= gamma * terms), np.max(np.abs(got - exact))
