"""The kernels of ``examples/`` for tests: each script loaded once as a module (no ``sys.path`` change)."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@functools.cache
def example(name: str):
    """``examples/<name>.py`` as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
