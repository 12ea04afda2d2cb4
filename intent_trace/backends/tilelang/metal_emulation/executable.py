"""``intent.compile(k, target="tilelang-metal", emulate=True)``: the real Metal program, run by the emulator.

The executable is tilelang-metal's own (:class:`~..target.TileLangExecutable`: the same program, arguments, staging,
error record and exceptions) with two things swapped: the kernel is an :class:`.ProgramKernel` (the Metal source
TileLang generates, compiled as host C++ by :mod:`.kernel`) instead of a TileLang JIT kernel -- the general program's,
or a tiled specialisation's where one applies to the call's extents (:mod:`..metal_matmul`) -- and the "device" is
host memory (the staged arrays' torch tensors are passed as they are). Anything the emulator reports (an
out-of-bounds access, a data race) raises :class:`~.kernel.EmulationError` and, like a failed check, commits
nothing: the caller's arrays stay as they were.

:func:`build_emulated` takes the graph, the target value (:data:`..targets.METAL`) and ``checks`` as
:func:`..target.build` passes them and returns a drop-in executable (``.graph``, ``.target == "tilelang-metal"``,
``.source``, ``__call__``, ``.emulated``), which the verifier's Stage Two uses (``verify metal-tilelang --emulate``).
A program of several launches (a multi-block reduction, a scan, a histogram) runs them in order, each over the grid
its launch computes from the call's extents.
"""
from __future__ import annotations

import ast
import re

import attrs

from .. import metal
from ..executable import TileLangExecutable
from .kernel import EmulatedKernel, compiler
from .translate import TranslationError

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


class _Launch:
    """``T.*`` over Python integers: a launch's grid and threads evaluated at a call from its extents and scalars
    (the expressions the generated program wrote: max, min, ceildiv, casts, a run-time choice of tier)."""

    @staticmethod
    def ceildiv(a, b):
        return -(-a // b)

    @staticmethod
    def floordiv(a, b):
        return a // b

    @staticmethod
    def floormod(a, b):
        return a % b

    @staticmethod
    def if_then_else(cond, a, b):
        return a if cond else b

    @staticmethod
    def Cast(dtype, x):  # noqa: N802  (TileLang's spelling)
        return int(x)

    max, min = staticmethod(max), staticmethod(min)
    int64 = int32 = uint32 = staticmethod(int)


def _evaluate(node: ast.expr, values: dict) -> int:
    """The value of a launch expression of the program text (our own generated text; no builtins)."""
    code = compile(ast.Expression(node), "<launch>", "eval")
    return int(eval(code, {"__builtins__": {}, "T": _Launch}, values))  # noqa: S307


_SECTION = re.compile(r"^// Function: (\w+)\n", re.M)


def sections(source: str) -> dict:
    """{kernel name: its Metal source}: TileLang writes one self-contained section per kernel of a program (each
    with its own includes, argument struct and prelude), headed ``// Function: <name>``."""
    heads = list(_SECTION.finditer(source))
    if not heads:
        return {"": source}
    return {m[1]: source[m.end():heads[k + 1].start() if k + 1 < len(heads) else len(source)]
            for k, m in enumerate(heads)}


class ProgramKernel:
    """A generated TileLang program's Metal kernels, called as TileLang's kernel is: the prim_func's arguments in
    order (tensors and scalars); the dynamic extents come from the tensors' shapes. A program of several launches
    (a multi-block reduction's grid pass and final pass, a histogram's zeroing and counting) runs them in order,
    each over the grid its launch computes from the extents at this call."""

    def __init__(self, program: str):
        self.program = program
        self.params, self.launches = _signature(program)
        self.source = metal.kernel_source(program)
        self.empty = "[[kernel" not in self.source and _EMPTY.search(self.source) is not None
        self.kernels = []
        if not self.empty:
            found = [(name, text) for name, text in sections(self.source).items() if "[[kernel" in text]
            if len(found) != len(self.launches):
                raise TranslationError(f"the program has {len(self.launches)} launches but its Metal source "
                                       f"{len(found)} kernels ({', '.join(n for n, _ in found)})")
            self.kernels = [EmulatedKernel(text, name or None) for name, text in found]

    @property
    def kernel(self):
        """The first (usually the only) kernel."""
        return self.kernels[0] if self.kernels else None

    @kernel.setter
    def kernel(self, value) -> None:  # a test plants a changed kernel
        self.kernels[0] = value

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
        for kernel, launch, (blocks, threads) in zip(self.kernels, self.launches, launch_sizes(self.launches, values)):
            kernel(buffers, _host_values(launch[2], values), blocks, threads, seed=seed)


def launch_sizes(launches, values: dict) -> list:
    """[(threadgroups, threads per threadgroup)] of each launch (:func:`_signature`'s, or a program text's) at the
    extents and scalars ``values`` (``{"d0": 4096, ...}``)."""
    if isinstance(launches, str):
        launches = _signature(launches)[1]
    return [(tuple(_evaluate(g, values) for g in grid) or (1,), threads) for grid, threads, _ in launches]


def _signature(program: str) -> tuple:
    """([(param name, shape entries or None for a scalar)], [(grid expressions, threads, the body's bindings)] of
    each launch in program order) of the program's ``kernel``."""
    tree = ast.parse(program)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    params = []
    for a in fn.args.args:
        ann = a.annotation
        if isinstance(ann, ast.Call) and isinstance(ann.func, ast.Attribute) and ann.func.attr == "Tensor":
            shape = [e.id if isinstance(e, ast.Name) else ast.literal_eval(e) for e in ann.args[0].elts]
            params.append((a.arg, tuple(shape)))
        else:
            params.append((a.arg, None))
    calls = [item.context_expr for node in ast.walk(fn) if isinstance(node, ast.With) for item in node.items]
    launches = sorted((c for c in calls if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "Kernel"),
                      key=lambda c: (c.lineno, c.col_offset))
    withs = {id(item.context_expr): node for node in ast.walk(fn) if isinstance(node, ast.With) for item in node.items}
    out = []
    for launch in launches:
        threads = next((ast.literal_eval(k.value) for k in launch.keywords if k.arg == "threads"), 1)
        lets = tuple((s.targets[0].id, s.value) for s in withs[id(launch)].body
                     if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name))
        out.append((tuple(launch.args), threads, lets))
    return params, out


def _host_values(lets: tuple, values: dict) -> dict:
    """``values`` and the kernel body's bindings of extents and scalars (``v1 = d0``): TVM computes those on the
    host and passes them in the argument struct. A binding of anything else (a thread index, a load) is the
    kernel's own and is skipped."""
    values = dict(values)
    for name, expr in lets:
        try:
            values.setdefault(name, _evaluate(expr, values))
        except Exception:  # noqa: BLE001  (not a host value: the kernel computes it)
            continue
    return values


class EmulatedMetalExecutable(TileLangExecutable):
    """tilelang-metal's executable with the emulator as its device (see the module docstring)."""

    emulated = True

    def __init__(self, graph, spec, checks: bool = True):
        self._programs: dict = {}  # program text -> its ProgramKernel (the general program, the specialisations)
        super().__init__(graph, on_host(spec), checks)

    @property
    def kernel(self) -> ProgramKernel:
        if self._kernel is None:
            self._kernel = self._program_kernel(self.program)
        return self._kernel

    def _program_kernel(self, program: str) -> ProgramKernel:
        kernel = self._programs.get(program)
        if kernel is None:
            require_runtime()
            kernel = self._programs[program] = ProgramKernel(program)
        return kernel

    def _kernel_for(self, dims: dict) -> tuple:
        """(the emulated kernel for a call with these extents, the specialisation or None): a tiled program
        (:mod:`..metal_matmul`) runs in the emulator as the general one does."""
        spec = self.specialization_for(dims)
        return (self.kernel, None) if spec is None else (self._program_kernel(spec.program), spec)

    def __repr__(self) -> str:
        return f"<{self.target} executable {self.graph.name} (emulated)>"


def build_emulated(graph, spec, checks: bool = True) -> EmulatedMetalExecutable:
    """The emulated tilelang-metal executable for ``graph`` (``target.build`` caches it per graph and options)."""
    return EmulatedMetalExecutable(graph, spec, checks)
