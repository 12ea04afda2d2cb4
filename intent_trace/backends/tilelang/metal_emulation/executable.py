"""``intent.compile(k, target="tilelang-metal", emulate=True)``: the real Metal program, run by the emulator.

The executable is tilelang-metal's own (:class:`~..target.TileLangExecutable`: the same program, arguments, staging,
error record and exceptions) with two things swapped: the kernel is an :class:`.ProgramKernel` (the Metal source
TileLang generates, compiled as host C++ by :mod:`.kernel`) instead of a TileLang JIT kernel, and the "device" is
host memory (the staged arrays' torch tensors are passed as they are). Anything the emulator reports (an
out-of-bounds access, a data race) raises :class:`~.kernel.EmulationError` and, like a failed check, commits
nothing: the caller's arrays stay as they were.

For the verifier's Stage Two (``verify metal-tilelang --emulate``, not wired yet): :func:`build_emulated` takes the
graph, the target value (:data:`..targets.METAL`) and ``checks`` as :func:`..target.build` passes them and returns
a drop-in executable (``.graph``, ``.target == "tilelang-metal"``, ``.source``, ``__call__``, ``.emulated``).
"""
from __future__ import annotations

import ast
import re

import attrs

from .. import metal
from ..executable import TileLangExecutable
from .kernel import EmulatedKernel, compiler

_EMPTY = re.compile(r"\bkernel void \w+\(\) \{\s*\}")


def require_runtime() -> None:
    """Raise RuntimeError unless the emulator can run here (TileLang for the Metal source, a C++ compiler)."""
    try:
        import tilelang  # noqa: F401
    except Exception as e:
        raise RuntimeError(f"emulated tilelang-metal needs the tilelang package, which failed to import: {e}") from e
    if compiler() is None:
        raise RuntimeError("emulated tilelang-metal needs a C++ compiler (g++, clang++ or c++ on PATH, or $CXX)")


def _synchronize() -> None:
    """An emulated dispatch returns when it is done."""


def on_host(spec):
    """tilelang-metal's target value with host memory in place of a Metal device."""
    return attrs.evolve(spec, to_device=lambda tensor: tensor, synchronize=_synchronize,
                        require_runtime=require_runtime)


def _constant(node):
    return ast.literal_eval(node)


class ProgramKernel:
    """A generated TileLang program's Metal kernel, called as TileLang's kernel is: the prim_func's arguments in
    order (tensors and scalars); the dynamic extents come from the tensors' shapes."""

    def __init__(self, program: str):
        self.program = program
        self.params, self.grid, self.threads = _signature(program)
        self.source = metal.kernel_source(program)
        self.empty = _EMPTY.search(self.source) is not None and "[[kernel" not in self.source
        self.kernel = None if self.empty else EmulatedKernel(self.source)

    def __call__(self, *args, seed: int = 0) -> None:
        if self.empty:
            return
        if len(args) != len(self.params):
            raise TypeError(f"the emulated Metal kernel takes {len(self.params)} arguments, got {len(args)}")
        buffers, values = {}, {}
        for (name, shape), value in zip(self.params, args):
            if shape is None:
                values[name] = value
                continue
            buffers[name] = value
            for dim, n in zip(shape, tuple(value.shape)):
                if isinstance(dim, str):
                    values.setdefault(dim, int(n))
        self.kernel(buffers, values, self.grid, self.threads, seed=seed)


def _signature(program: str) -> tuple:
    """([(param name, shape entries or None for a scalar)], grid, threads) of the program's ``kernel``."""
    tree = ast.parse(program)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    params = []
    for a in fn.args.args:
        ann = a.annotation
        if isinstance(ann, ast.Call) and isinstance(ann.func, ast.Attribute) and ann.func.attr == "Tensor":
            shape = [e.id if isinstance(e, ast.Name) else _constant(e) for e in ann.args[0].elts]
            params.append((a.arg, tuple(shape)))
        else:
            params.append((a.arg, None))
    calls = [item.context_expr for node in ast.walk(fn) if isinstance(node, ast.With) for item in node.items]
    launch = next(c for c in calls if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "Kernel")
    grid = tuple(_constant(g) for g in launch.args) or (1,)
    threads = next((_constant(k.value) for k in launch.keywords if k.arg == "threads"), 1)
    return params, grid, threads


class EmulatedMetalExecutable(TileLangExecutable):
    """tilelang-metal's executable with the emulator as its device (see the module docstring)."""

    emulated = True

    def __init__(self, graph, spec, checks: bool = True):
        super().__init__(graph, on_host(spec), checks)

    @property
    def kernel(self) -> ProgramKernel:
        if self._kernel is None:
            require_runtime()
            self._kernel = ProgramKernel(self.program)
        return self._kernel

    def __repr__(self) -> str:
        return f"<{self.target} executable {self.graph.name} (emulated)>"


def build_emulated(graph, spec, checks: bool = True) -> EmulatedMetalExecutable:
    """The emulated tilelang-metal executable for ``graph`` (``target.build`` caches it per graph and options)."""
    return EmulatedMetalExecutable(graph, spec, checks)
