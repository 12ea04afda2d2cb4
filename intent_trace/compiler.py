"""``intent.compile``: pick a target, trace, and build an executable.

The targets and their builders are :mod:`.targets` (re-exported here, where the backends register).
"""
from __future__ import annotations

from .kernel import Kernel
from .targets import (DEFAULT_TARGET, PLANNED_TARGETS, builder_for, register_target, runnable_targets,  # noqa: F401
                      targets, unavailable_reason)


def compile(kernel, target: str = DEFAULT_TARGET, **options):
    """Trace ``kernel`` with the constexprs in ``options`` and build it for ``target``.

    Options that are not constexprs of the kernel go to the target (``checks=False`` on ``cpu``).
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.compile takes an @intent.kernel, got {kernel!r}")
    return kernel.build(target, **options)
