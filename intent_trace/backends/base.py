"""The target protocol: what every backend's builder and executable provide (DESIGN §3).

``intent.compile(kernel, target=...)`` calls a *builder* ``build(graph, **options) -> Executable``.
An executable keeps the graph it was built from, names its target, exposes the generated source
(``None`` for interpreters) and is called with the kernel's runtime arguments: views as arrays
(NumPy; torch tensors too on TileLang targets), runtime scalars as Python numbers. A call checks
every argument before it writes anything, writes the Out/InOut views in place and returns None.

A builder whose target needs something this machine may lack (a GPU runtime, a C compiler)
carries ``require_runtime()``, which raises ``RuntimeError`` saying what is missing.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..graph.values import KernelGraph


@runtime_checkable
class Executable(Protocol):
    graph: KernelGraph
    target: str

    @property
    def source(self) -> str | None:
        """The generated program text (None for interpreters)."""

    def __call__(self, *args: Any) -> None:
        """Run on ``args``: TypeError/ValueError before any write when they do not fit the kernel."""


class Builder(Protocol):
    def __call__(self, graph: KernelGraph, **options: Any) -> Executable:
        ...


RuntimeCheck = Callable[[], None]  # raises RuntimeError naming what the target's runtime lacks
