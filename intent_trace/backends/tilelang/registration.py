"""Registers the TileLang targets with ``intent.compile`` (imported by :mod:`intent_trace.compiler` on first use)."""
from __future__ import annotations

import functools

from ...compiler import register_target
from .precompile import precompile
from .target import TARGETS, build, require_runtime

for _name in TARGETS:
    _builder = functools.partial(build, target=_name)
    _builder.require_runtime = functools.partial(require_runtime, _name)
    _builder.precompile = precompile  # many kernels' programs at once (verification's Stage Two)
    register_target(_name, _builder)
