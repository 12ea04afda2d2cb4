"""Many TileLang programs compiled at once, before the calls that need them.

A verification's Stage Two compiles a few hundred witness kernels, each on first use, one after another: on a GPU
machine nvcc and ptxas take seconds per program while the other cores idle (``verify cuda-tilelang`` took 396 s
cold on the H200, nearly all of it compiling). :func:`precompile` hands the programs of a list of executables to
worker processes first; each compiles its programs into TileLang's disk cache (``TILELANG_CACHE_DIR``, which a
verification points at its own root: :mod:`intent_trace.caches`), so that the calls that follow find them there.
Nothing is trusted that was not made in this run's cache: the workers write where the calls read, and a program a
worker failed to compile is compiled again by its call, which reports the error where it always did.

The programs are an executable's general program and its specialisations (the calls' extents choose among them;
an unused one costs a worker's time, not the caller's). A worker sees the target by its registered name, so its
compile flags and pass configurations are the call's (they depend on the target and the program text only).
"""
from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import tempfile

from ... import caches
from .executable import TileLangExecutable, compile_with, compiled
from .targets import target_named


def programs(executables) -> list:
    """The (target name, program text) pairs of ``executables`` not compiled in this process yet, each once."""
    jobs = {}
    for exe in executables:
        if type(exe) is not TileLangExecutable or exe.spec.kernel_source is not None:
            continue  # an emulated or source-only target compiles no TileLang kernel
        for text in (exe.program, *(s.program for s in exe.specializations)):
            if not compiled(exe.spec.name, text):
                jobs[(exe.spec.name, text)] = None
    return list(jobs)


#: worker processes by default: each imports TileLang and torch (about a gigabyte), so a host's every core is too many
MAX_WORKERS = 16


def precompile(executables, workers: int | None = None) -> int:
    """Compile the programs of ``executables`` in up to ``workers`` processes (default: this machine's cores, at most
    :data:`MAX_WORKERS`) into TileLang's disk cache; returns how many were handed out (0 when fewer than two
    programs or one core make a pool pointless)."""
    jobs = programs(executables)
    workers = min(len(jobs), workers or min(os.cpu_count() or 1, MAX_WORKERS))
    if workers < 2:
        return 0
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited TileLang or CUDA state
    levels = {name: lg.level for name, lg in logging.root.manager.loggerDict.items()
              if isinstance(lg, logging.Logger) and lg.level}  # a caller that quiets the compilers' logs (the CLI)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                                                initargs=(caches.cache_root(), tempfile.gettempdir(), levels)) as pool:
        list(pool.map(_compile, jobs))
    return len(jobs)


def _start(root: str, scratch: str, levels: dict) -> None:
    """A worker's caches: the caller's root (its TileLang cache comes with the environment) and scratch
    directory, so its compile flags (the C target's precompiled header lives under the root) and files match; and
    the caller's logger levels, set after TileLang has configured its own."""
    os.environ[caches.ENV_VAR] = root
    tempfile.tempdir = scratch
    import tilelang  # noqa: F401  (its loggers exist now)

    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _compile(job: tuple) -> str | None:
    """One program compiled into the disk cache; its error's text, or None (the call compiles it again)."""
    name, text = job
    try:
        compile_with(text, target_named(name))
    except Exception as e:  # noqa: BLE001  (reported by the call that needs the program)
        return f"{type(e).__name__}: {e}"
    return None
