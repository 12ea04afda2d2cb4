"""Where compiled kernels are cached: one root for every on-disk cache of intent_trace.

Ordinary use caches under ``$INTENT_TRACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/intent_trace``, else
``~/.cache/intent_trace`` (the cpu target's generated modules and Numba's machine code, the TileLang C
target's precompiled header). Local verification is different: the spec lets it write only an optional
caller destination. So :func:`verification_caches` redirects our caches *and TileLang's*
(``TILELANG_CACHE_DIR``, which TileLang reads on every lookup) under one root for its duration: the
caller's directory (``cache_dir=``, or ``$INTENT_TRACE_CACHE_DIR``), kept so a later run skips the
compilers, or by default a temporary directory removed afterwards. Kernels compiled earlier in the
process stay usable (their code is in memory and was verified there); nothing new lands under ``$HOME``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading

import attrs

ENV_VAR = "INTENT_TRACE_CACHE_DIR"
TILELANG_ENV_VAR = "TILELANG_CACHE_DIR"

_lock = threading.Lock()
_redirect: list = []  # the active verification roots, innermost last


def default_root() -> str:
    """The root of ordinary (non-verification) use."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "intent_trace")


def cache_root() -> str:
    """The root every intent_trace cache lives under now (a verification's redirect while one runs)."""
    with _lock:
        if _redirect:
            return _redirect[-1]
    return default_root()


def cache_path(name: str) -> str:
    """``cache_root()/name``, created if missing."""
    path = os.path.join(cache_root(), name)
    os.makedirs(path, exist_ok=True)
    return path


@attrs.frozen
class CacheUse:
    """Which compile cache a verification used: a kept directory (``caller``: an argument or the environment
    variable) or a temporary one removed afterwards."""

    root: str
    source: str  # "argument" | "environment" | "temporary"

    @property
    def kept(self) -> bool:
        return self.source != "temporary"

    def to_json(self) -> dict:
        # a temporary root's path is noise (it no longer exists); a kept one is where the kernels are
        return {"source": self.source, "kept": self.kept, "root": self.root if self.kept else None}


def _choose(cache_dir) -> CacheUse:
    check_cache_dir(cache_dir)
    if cache_dir is not None:
        return CacheUse(os.path.abspath(os.fspath(cache_dir)), "argument")
    configured = os.environ.get(ENV_VAR)
    if configured:
        return CacheUse(os.path.abspath(configured), "environment")
    return CacheUse(tempfile.mkdtemp(prefix="intent-trace-verify-"), "temporary")


def check_cache_dir(cache_dir) -> None:
    """Raise TypeError / ValueError for a cache directory that cannot be used (before anything runs)."""
    if cache_dir is None:
        return
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir must be a str or path-like directory, or None; got {type(cache_dir).__name__}")
    path = os.path.abspath(os.fspath(cache_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"cache directory {path} exists and is not a directory")
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cache directory {path} cannot be created or written ({parent} is not a writable directory)")


@contextlib.contextmanager
def verification_caches(cache_dir=None):
    """Within the block, every compile cache (ours and TileLang's) lives under one root; yields its CacheUse.

    A temporary root is removed on exit. ``TILELANG_CACHE_DIR`` is restored to what it was. The compilers'
    scratch files (TileLang leaves ``tmp*.cpp`` / ``tmp*.so`` in the temporary directory) go to a scratch
    directory of this run (``tempfile.tempdir``), removed on exit as well.
    """
    use = _choose(cache_dir)
    os.makedirs(use.root, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="intent-trace-scratch-")
    saved_env, saved_tempdir = os.environ.get(TILELANG_ENV_VAR), tempfile.tempdir
    os.environ[TILELANG_ENV_VAR] = os.path.join(use.root, "tilelang")
    tempfile.tempdir = scratch
    with _lock:
        _redirect.append(use.root)
    try:
        yield use
    finally:
        with _lock:
            _redirect.remove(use.root)
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop(TILELANG_ENV_VAR, None)
        else:
            os.environ[TILELANG_ENV_VAR] = saved_env
        shutil.rmtree(scratch, ignore_errors=True)
        if not use.kept:
            shutil.rmtree(use.root, ignore_errors=True)
