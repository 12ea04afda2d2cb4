"""The kernels of ``examples/`` and ``benchmarks/`` for tests: each script loaded once as a module (no
``sys.path`` change; its ``main`` is not run)."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@functools.cache
def _load(folder: str, name: str):
    spec = importlib.util.spec_from_file_location(f"_{folder}_{name}", ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example(name: str):
    """``examples/<name>.py`` as a module."""
    return _load("examples", name)


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` as a module (e.g. the GPU zoo's kernels, ``zoo_kernels``)."""
    return _load("benchmarks", name)
