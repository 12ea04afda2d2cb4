"""The text half of the Numba code generator: fresh names, indented lines, blocks."""
from __future__ import annotations

import contextlib


class SourceWriter:
    """Writes one function body. Names are unique per value (``v17``): reassigning one variable makes
    Numba compile quadratically, so only loop carries are ever reassigned."""

    def __init__(self):
        self.lines: list = []
        self.depth = 1
        self.counter = 0

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def assign(self, expr: str, prefix: str = "v") -> str:
        name = self.fresh(prefix)
        self.line(f"{name} = {expr}")
        return name

    @contextlib.contextmanager
    def block(self, header: str):
        self.line(header)
        self.depth += 1
        start = len(self.lines)
        yield
        if len(self.lines) == start:
            self.line("pass")
        self.depth -= 1
