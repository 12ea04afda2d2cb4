"""Deterministic KIR text, jaxpr-like.

Names come from the order values are defined at print time (``%0``, ``%1``, ...); parameters and
named extents print by their names. Each line shows the result type, the op and its operands,
the coordinate provenance of index values in ``⟨...⟩`` and the user's source line after ``#``.
"""
from __future__ import annotations

import contextvars
import enum
import html

from .. import types as T

# The printer reads KIR data (graph/values.py) but needs none of its classes: values.py imports it (a graph
# prints itself), so the annotations below name them without importing them.

# The name map of the print in progress, per thread/task (graphs may be printed concurrently, and
# printing may nest through reprs: each print restores the map it found).
_names: contextvars.ContextVar = contextvars.ContextVar("intent_trace_print_names", default=None)


def current_name(var) -> str:
    namer = _names.get()
    if namer is not None:
        name = namer.get(var)
        if name is not None:
            return name
    return getattr(var, "hint", None) or "%?"


class _Namer:
    def __init__(self, graph: KernelGraph):
        self.map: dict = {}
        self.count = 0
        for p in graph.params:
            self.map[p.var] = p.name
        for e in graph.extents:
            self.map[e] = e.hint

    def get(self, var):
        return self.map.get(var)

    def define(self, var) -> str:
        name = f"%{self.count}"
        self.count += 1
        self.map[var] = name
        return name

    def dim(self, d: T.Dim) -> str:
        origin = d.origin
        if origin is not None and origin in self.map:
            return f"|{self.map[origin]}|" if isinstance(origin.type, T.DomainType) else self.map[origin]
        # A derived extent without a defining value (e.g. a slice length) is named after its first use.
        name = self.map.get(d)
        if name is None:
            name = f"e{sum(1 for k in self.map if isinstance(k, T.Dim))}"
            self.map[d] = name
        return name


def _operand(x) -> str:
    text = x.text  # a Literal spells itself; a Var is named by the print in progress
    return current_name(x) if text is None else text


def _attr_value(v) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, bool):
        return repr(v)
    return str(v)


def _decl(namer: _Namer, var: Var) -> str:
    name = namer.define(var)
    text = f"{name}: {var.type!r}"
    if var.provenance is not None:
        text += f" ⟨{var.provenance!r}⟩"
    return text


def _result_decl(namer: _Namer, var) -> str:
    name = namer.define(var)
    t = var.type
    if isinstance(t, T.DomainType) and isinstance(t.extent, T.Dim) and t.extent.origin is var:
        return f"{name}: domain[runtime]"  # its extent is |name| wherever it is used
    return f"{name}: {t!r}"


def generic_body(node, args) -> str:
    """``op %0, %1 {attr=value, ...}``: every op prints so unless its OpDef has a printer hook."""
    shown = [(k, v) for k, v in node.attrs if k not in ("type", "types") and not (k == "extents" and not v)]
    body = node.op.name + (" " + ", ".join(args) if args else "")
    if shown:
        body += " {" + ", ".join(f"{k}={_attr_value(v)}" for k, v in shown) + "}"
    return body


def _format_node(namer: _Namer, node, indent: str, lines: list) -> None:
    op = node.op
    args = [_operand(x) for x in node.inputs]
    body = (op.printer or generic_body)(node, args)
    outs = ", ".join(_result_decl(namer, v) for v in node.outputs)
    line = f"{indent}{outs} = {body}" if outs else f"{indent}{body}"
    provenance = [v.provenance for v in node.outputs if v.provenance is not None]
    if provenance:
        line += "  " + " ".join(f"⟨{p!r}⟩" for p in provenance)
    if node.loc is not None:
        line = f"{line}  # {node.loc!r}"
    if not node.regions:
        lines.append(line)
        return
    lines.append(line + " {" if node.loc is None else line.replace(f"  # {node.loc!r}", f" {{  # {node.loc!r}"))
    labels = op.region_names
    for i, region in enumerate(node.regions):
        if labels:
            lines.append(f"{indent}  {labels[i]}:")
        _format_region(namer, region, indent + ("    " if labels else "  "), lines)
    lines.append(f"{indent}}}")


def _format_region(namer: _Namer, region: Region, indent: str, lines: list) -> None:
    if region.params:
        lines.append(f"{indent}^(" + ", ".join(_decl(namer, p) for p in region.params) + ")")
    for node in region.nodes:
        _format_node(namer, node, indent, lines)
    if region.results:
        lines.append(f"{indent}yield " + ", ".join(_operand(r) for r in region.results))


def _constexpr(v) -> str:
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    return repr(v)


def format_graph(graph: KernelGraph) -> str:
    namer = _Namer(graph)
    token = _names.set(namer)
    previous = T.set_dim_namer(namer.dim)
    try:
        params = ", ".join(f"{p.name}: {p.type!r}" for p in graph.params)
        lines = [f"kernel {graph.name}({params})"]
        if graph.extents:
            lines.append("  extents " + ", ".join(e.hint for e in graph.extents) + ": index")
        if graph.constexprs:
            lines.append("  constexprs " + ", ".join(f"{k}={_constexpr(v)}" for k, v in graph.constexprs))
        lines.append("{")
        _format_region(namer, graph.body, "  ", lines)
        lines.append("}")
        return "\n".join(lines)
    finally:
        T.set_dim_namer(previous)
        _names.reset(token)


def format_graph_html(graph: KernelGraph) -> str:
    return f"<pre class='intent-kir'>{html.escape(format_graph(graph))}</pre>"
