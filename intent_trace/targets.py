"""The targets: which module provides each one, and the builders those modules register.

Each target lives in its own module, imported the first time it is used (so a program that only
runs on ``cpu`` never loads the reference interpreter, and the reverse). Importing a target module
registers its builder. A target that DESIGN.md lists but this build does not provide yet raises
ValueError saying so; a name nobody knows raises ValueError listing the targets.

Below both :mod:`.kernel` (a kernel called directly builds for the default target) and :mod:`.compiler`.
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
