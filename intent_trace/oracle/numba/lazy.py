"""A module that imports itself on first attribute access.

Generated kernels name the runtime helpers as ``R.<helper>``; Numba resolves those names only when
it compiles. A kernel loaded from Numba's on-disk cache is never compiled, so deferring the runtime
import (which builds a few dozen dispatchers) keeps a warm process start cheap.
"""
from __future__ import annotations

import importlib.util
import sys


def lazy_module(name: str):
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
