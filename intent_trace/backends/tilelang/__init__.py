"""TileLang backends: KIR lowered to a TileLang ``prim_func`` (DESIGN §1.3).

One lowering (:mod:`.emitter`, :mod:`.structure`, :mod:`.structured`, :mod:`.scalar_rules`) with the
per-target choices in small modules: :mod:`.c` for ``tilelang-c`` (TileLang's C target, any CPU).
:mod:`.target` builds executables. Importing this package does not import TileLang; compiling does.
"""
from .target import TileLangExecutable, build, generate, require_runtime  # noqa: F401
