"""KIR data: SSA values, nodes, regions and the kernel graph.

Everything here is a frozen, slotted attrs class; rewrites build new graphs. Values compare by
identity (SSA); printed names are assigned by the printer, never stored.
"""
from __future__ import annotations

from typing import Any

import attrs

from ..types import Dim, Type
from .printer import format_graph, format_graph_html


@attrs.frozen(slots=True, repr=False)
class SourceLoc:
    """Where the user wrote the operation: file, line, enclosing function, helper chain."""

    file: str
    line: int
    function: str
    helpers: tuple = ()

    def __repr__(self) -> str:
        base = f"{_short(self.file)}:{self.line}"
        if self.helpers:
            return f"{base} (in {' <- '.join(self.helpers)})"
        return base


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@attrs.frozen(slots=True, eq=False, repr=False)
class Var:
    """An SSA value. ``extent`` is set when the value equals that extent (``x.shape[0]``);
    ``provenance`` records where a coordinate came from (see :mod:`.provenance`)."""

    type: Type
    provenance: Any = None
    extent: Dim | None = None
    hint: str | None = None

    def __repr__(self) -> str:
        return f"Var({self.hint or hex(id(self))}: {self.type!r})"

    text = None  # an SSA value has no spelling of its own: the printer names it


@attrs.frozen(slots=True, repr=False)
class Literal:
    """A constant operand, already of its KIR type (scalar dtype)."""

    value: Any
    type: Type

    def __repr__(self) -> str:
        return f"{self.value!r}:{self.type!r}"

    @property
    def text(self) -> str:
        """How the constant is spelled in KIR text: ``2.5:f32``, ``True:bool``."""
        v = self.value
        return f"{repr(bool(v)) if isinstance(v, bool) else str(v)}:{self.type!r}"


@attrs.frozen(slots=True, eq=False, repr=False)
class Node:
    """One operation: ``outputs = op(inputs; attrs) { regions }``."""

    op: Any  # OpDef
    inputs: tuple
    attrs: tuple  # ((name, value), ...) in schema order
    outputs: tuple
    regions: tuple = ()
    loc: SourceLoc | None = None

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def __repr__(self) -> str:
        return f"Node({self.op.name})"


@attrs.frozen(slots=True, eq=False, repr=False)
class Region:
    """A nested block: parameters bound by the parent op, nodes, and yielded results."""

    params: tuple
    nodes: tuple
    results: tuple = ()

    def __repr__(self) -> str:
        return f"Region({len(self.params)} params, {len(self.nodes)} nodes)"


@attrs.frozen(slots=True, repr=False)
class Param:
    """A kernel parameter: an external view or a runtime scalar."""

    name: str
    kind: str  # "view" | "scalar"
    var: Var

    @property
    def type(self) -> Type:
        return self.var.type


@attrs.frozen(slots=True, eq=False, repr=False)
class KernelGraph:
    """A traced kernel: its ABI (params and the dynamic extents they name) and its body."""

    name: str
    params: tuple  # Param
    extents: tuple  # Var of index scalar type, one per named dynamic extent, in first-use order
    body: Region
    constexprs: tuple = ()  # ((name, value), ...)
    loc: SourceLoc | None = None

    def __str__(self) -> str:
        return format_graph(self)

    def __repr__(self) -> str:
        return f"<KernelGraph {self.name}: {len(self.params)} params, {count_nodes(self.body)} nodes>"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython
        p.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter
        return format_graph_html(self)

    def walk(self):
        """Every node, parents before their regions' nodes, in program order."""
        yield from walk_region(self.body)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def walk_region(region: Region):
    for node in region.nodes:
        yield node
        for r in node.regions:
            yield from walk_region(r)


def count_nodes(region: Region) -> int:
    return sum(1 for _ in walk_region(region))
