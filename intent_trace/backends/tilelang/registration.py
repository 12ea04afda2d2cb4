"""Registers the TileLang targets with ``intent.compile`` (imported by :mod:`intent_trace.compiler` on first use)."""
from __future__ import annotations

import functools

from ...compiler import register_target
from .target import TARGETS, build, require_runtime

for _name in TARGETS:
    _builder = functools.partial(build, target=_name)
    _builder.require_runtime = functools.partial(require_runtime, _name)
    register_target(_name, _builder)
