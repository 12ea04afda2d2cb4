"""``intent.compile``: pick a target, trace, and build an executable.

Each target lives in its own module, imported the first time it is used (so a program that only
runs on ``cpu`` never loads the reference interpreter, and the reverse). Importing a target module
registers its builder. A target that DESIGN.md lists but this build does not provide yet raises
ValueError saying so; a name nobody knows raises ValueError listing the targets.
"""
from __future__ import annotations

import importlib
from typing import Callable

PLANNED_TARGETS = ("generic", "cpu", "tilelang-c", "tilelang-cuda", "tilelang-metal")
# target -> module that registers it on import
_TARGET_MODULES = {"generic": "intent_trace.oracle.generic", "cpu": "intent_trace.oracle.numba",
                   "tilelang-c": "intent_trace.backends.tilelang.registration",
                   "tilelang-cuda": "intent_trace.backends.tilelang.registration",
                   "tilelang-metal": "intent_trace.backends.tilelang.registration"}
_BUILDERS: dict[str, Callable] = {}
DEFAULT_TARGET = "cpu"


def register_target(name: str, builder: Callable) -> None:
    """``builder(graph, **options) -> executable`` with ``.graph``, ``.target``, ``.source`` and ``__call__``."""
    _BUILDERS[name] = builder


def targets() -> tuple:
    """The targets this build can compile for."""
    return tuple(_TARGET_MODULES)


def unavailable_reason(target: str) -> str | None:
    """Why ``target`` cannot run on this machine (its runtime check's message), or None when it can."""
    check = getattr(builder_for(target), "require_runtime", None)
    if check is not None:
        try:
            check()
        except RuntimeError as e:
            return str(e)
    return None


def runnable_targets() -> tuple:
    """The targets this build provides whose runtime this machine has (no GPU: no tilelang-cuda)."""
    return tuple(t for t in targets() if unavailable_reason(t) is None)


def builder_for(target: str) -> Callable:
    builder = _BUILDERS.get(target)
    if builder is None:
        module = _TARGET_MODULES.get(target)
        if module is None:
            if target in PLANNED_TARGETS:
                raise ValueError(f"target {target!r} is not available in this build yet; available: "
                                 f"{', '.join(_TARGET_MODULES)}")
            raise ValueError(f"unknown target {target!r}; targets: {', '.join(PLANNED_TARGETS)}")
        importlib.import_module(module)
        builder = _BUILDERS[target]
    return builder


def compile(kernel, target: str = DEFAULT_TARGET, **options):
    """Trace ``kernel`` with the constexprs in ``options`` and build it for ``target``.

    Options that are not constexprs of the kernel go to the target (``checks=False`` on ``cpu``).
    The time this call took and whether the target's in-process cache returned an executable an earlier call
    built are recorded for the executable's display and ``intent.bench`` (``display.record_compile``).
    """
    import time

    from .display import record_compile
    from .kernel import Kernel

    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.compile takes an @intent.kernel, got {kernel!r}")
    builder = builder_for(target)
    constexprs = {k: v for k, v in options.items() if k in kernel.constexpr_params}
    rest = {k: v for k, v in options.items() if k not in constexprs}
    start = time.perf_counter()
    exe = builder(kernel.trace(**constexprs), **rest)
    record_compile(exe, time.perf_counter() - start)
    return exe
