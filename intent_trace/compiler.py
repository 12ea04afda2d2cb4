"""``intent.compile``: pick a target, trace, and build an executable.

Targets register a builder here. A target name that DESIGN.md lists but this build does not
provide yet raises ValueError saying so; a name nobody knows raises ValueError listing targets.
"""
from __future__ import annotations

from typing import Callable

PLANNED_TARGETS = ("generic", "cpu", "tilelang-c", "tilelang-cuda", "tilelang-metal")
_BUILDERS: dict[str, Callable] = {}
DEFAULT_TARGET = "generic"


def register_target(name: str, builder: Callable) -> None:
    """``builder(graph, **options) -> executable`` with ``.graph``, ``.target``, ``.source`` and ``__call__``."""
    _BUILDERS[name] = builder


def targets() -> tuple:
    """The targets this build can compile for."""
    _load_targets()
    return tuple(_BUILDERS)


def _load_targets() -> None:
    if not _BUILDERS:
        from .oracle import generic  # noqa: F401  (registers "generic")
        from .oracle import numba  # noqa: F401  (registers "cpu")


def compile(kernel, target: str = DEFAULT_TARGET, **options):
    """Trace ``kernel`` with the constexprs in ``options`` and build it for ``target``."""
    from .kernel import Kernel

    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.compile takes an @intent.kernel, got {kernel!r}")
    _load_targets()
    builder = _BUILDERS.get(target)
    if builder is None:
        if target in PLANNED_TARGETS:
            raise ValueError(f"target {target!r} is not available in this build yet; available: "
                             f"{', '.join(_BUILDERS)}")
        raise ValueError(f"unknown target {target!r}; targets: {', '.join(PLANNED_TARGETS)}")
    constexprs = {k: v for k, v in options.items() if k in kernel.constexpr_params}
    rest = {k: v for k, v in options.items() if k not in constexprs}
    return builder(kernel.trace(**constexprs), **rest)
