"""``intent.compile``: pick a target, trace, and build an executable.

The targets and their builders are :mod:`.targets` (re-exported here, where the backends register).
"""
from __future__ import annotations

import time

from .display import record_compile
from .kernel import Kernel
from .targets import (DEFAULT_TARGET, PLANNED_TARGETS, builder_for, register_target, runnable_targets,  # noqa: F401
                      targets, unavailable_reason)


def compile(kernel, target: str = DEFAULT_TARGET, **options):
    """Trace ``kernel`` with the constexprs in ``options`` and build it for ``target``.

    Options that are not constexprs of the kernel go to the target (``checks=False`` on ``cpu``).
    The time this call took and whether the target's in-process cache returned an executable an earlier call
    built are recorded for the executable's display and ``intent.bench`` (``display.record_compile``).
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"intent.compile takes an @intent.kernel, got {kernel!r}")
    start = time.perf_counter()
    exe = kernel.build(target, **options)
    record_compile(exe, time.perf_counter() - start)
    return exe
