"""TileLang targets by name: ``build``, ``generate``, ``compile_program``, ``require_runtime``.

``build(graph, target="tilelang-c")`` lowers the graph to the text of a TileLang program at once (so an
op the target cannot lower raises :class:`~intent_trace.errors.LoweringError` there) and compiles it
with TileLang on first use. The layers below take the target as a value (:class:`.spec.TileLangTarget`,
:mod:`.targets`): :mod:`.program` writes the text (the launch pre-pass, then one emission), :mod:`.executable`
compiles and runs it. Executables are kept here per (graph, target, options) in process.
"""
from __future__ import annotations

from ...graph.values import KernelGraph
from .executable import TileLangExecutable, compile_with
from .program import Program, lower, plan_launch  # noqa: F401  (the pre-pass, for tests and tools)
from .targets import TARGETS, target_named  # noqa: F401  (TARGETS: registration names them)


def require_runtime(target: str = "tilelang-c") -> None:
    """Raise RuntimeError saying what this machine lacks to run ``target``."""
    target_named(target).require_runtime()


def generate(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True) -> str:
    """The TileLang program for ``graph`` (Python source defining ``kernel``, a ``T.prim_func``)."""
    return generate_program(graph, target, checks).text


def generate_program(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True) -> Program:
    """The TileLang program for ``graph`` on the target called ``target`` (:func:`.program.lower`)."""
    return lower(graph, target_named(target), checks)


def compile_program(program: str, target: str = "tilelang-c"):
    """The program text compiled with TileLang for the target called ``target`` (:func:`.executable.compile_with`)."""
    return compile_with(program, target_named(target))


_EXECUTABLES: dict = {}


def build(graph: KernelGraph, target: str = "tilelang-c", checks: bool = True,
          emulate: bool = False) -> TileLangExecutable:
    """Lower ``graph`` for a TileLang target. With ``checks`` (the default) the kernel checks at run time what
    cpu checks (coordinates, extents, unique stores, histogram bins, ...) and the executable raises the same
    exceptions, leaving every output unchanged; ``checks=False`` drops the checks, as on cpu (T9).
    ``emulate=True`` runs the target's program in its host emulator (tilelang-metal: metal_emulation)."""
    key = (graph, target, bool(checks), bool(emulate))
    exe = _EXECUTABLES.get(key)
    if exe is None:
        spec = target_named(target)
        emulated = spec.emulated_executable
        if emulate and emulated is None:
            raise ValueError(f"target {target} has no emulator: emulate=True is for tilelang-metal")
        exe = emulated(graph, spec, bool(checks)) if emulate else TileLangExecutable(graph, spec, bool(checks))
        _EXECUTABLES[key] = exe
    return exe


build.require_runtime = require_runtime
