"""Row groups: graphs whose work is reductions along the last axis of row-shaped values, with the pointwise
producers of those reductions and pointwise consumers of their results broadcast back over the row.

Such a graph (softmax, log-softmax, layer norm, RMSNorm, logsumexp, a row sum, a row argmax) is parallel over its
rows by construction and each row's reductions are associative and commutative (``reduce``: re-association and
re-ordering allowed, language §7; T10), so a target may give every row a group of cooperating threads: each folds
a strided slice of the row, the partial results are combined in a tree, and the producers run inside those loops
(fused) instead of in passes of their own. :func:`recognise` finds them from the graph's structure -- traits
(:data:`~intent_trace.graph.traits.POINTWISE`, :data:`~intent_trace.graph.traits.AGGREGATE`), patterns and the
types' extents -- never from op names, and says why any other graph is not one.

Both spellings of a row kernel are recognised and give the same plan:

- the **tensor** form: ``e = exp(x - reshape(reduce.max(x, axis=1), (M, 1)))``, ``y[:, :] = e / ...``: values of
  shape ``(R, C)`` (elements), ``(R,)`` or ``(R, 1)`` (one per row), ``(C,)`` or ``(1, C)`` (one per column);
  reshapes only add or drop unit axes (their sizes agree by their types, so the program needs no check);
- the **parallel** form (``examples/row_softmax.py``): ``for r in I.parallel(rows)`` whose body reads ``x[r,
  cols]`` (a row: shape ``(C,)``), reduces it to scalars (one per row) and writes ``y[r, cols]`` or ``y[r]``.

Every value is classified by what it depends on: nothing (uniform), the row, the column, or both (an element).
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.lowering import pointwise_shape
from ..graph.patterns import match
from ..graph.traits import AGGREGATE, POINTWISE, REDUCTIONS
from ..graph.values import KernelGraph, Literal, walk_region
from .access import UNIT_DOMAIN, unit_reshape
from .plan import Part
from .prologue import extent_index, extent_vars, prologue
from .recognition import NotRecognised, Rejected, run_walk
from .recognition import at as _at

_rep = T.representative  # an extent's class of extents stated equal (I.assume_equal): compared by it
UNIFORM, ROW, COL, ELEMENT = 0, 1, 2, 3  # what a value depends on (bits: the row, the column)
_DEPENDS = {UNIFORM: "nothing", ROW: "the row", COL: "the column", ELEMENT: "the row and the column"}

#: The cooperating threads of one row (a block); a target may choose its own and says so in its part.
THREADS = 256


def _value_dtype(d) -> bool:
    """The dtypes a row group computes in: every arithmetic dtype (f16 and bf16 too: a target computes them with
    the serial program's helpers, their accumulators f32 where the language says so), not microscaling formats
    (T6: no arithmetic on them)."""
    return d.kind in ("int", "uint", "bool", "float")


@attrs.frozen(slots=True)
class RowGroup:
    """A recognised row group. ``rows``/``cols``: the graph extent indices of the rows and of the row's elements
    (the reduced axis); ``reductions``: the reduce nodes in program order, each a pass over the row (its combine
    helper in ``combines``, its level -- 1 + the levels of the reductions it reads -- in ``levels``);
    ``row_write``: the one write covers the row (else it writes one value per row); ``fused``: the pointwise
    ops computed inside the row's loops. ``loop`` is the parallel loop (parallel form) or None (tensor form);
    ``reshapes`` the unit-axis reshapes, ``write`` the final write; ``element_reads`` the reads of the row's
    elements (each a value per row and column: what a target may hold on chip between the passes), in program
    order. ``invariant``: the nodes of the tensor form whose values do not depend on the row (uniform or per column:
    a weight's read and decode), in program order, and ``columns`` the per-column values among them that a value of
    the row consumes -- a target whose block holds several rows may compute those once per block (none in the
    parallel form: its loop body is a row's); ``reads_columns``: a view is read by column alone (either form)."""

    form: str  # "tensor" | "parallel"
    rows: int
    cols: int
    combines: tuple
    levels: tuple
    row_write: bool
    fused: tuple
    reductions: tuple = attrs.field(eq=False)
    write: object = attrs.field(eq=False)
    loop: object = attrs.field(default=None, eq=False)
    reshapes: frozenset = attrs.field(default=frozenset(), eq=False)
    element_reads: tuple = attrs.field(default=(), eq=False)
    invariant: tuple = attrs.field(default=(), eq=False)
    columns: tuple = attrs.field(default=(), eq=False)
    reads_columns: bool = False  # a read of the columns alone (a weight) in either form

    @property
    def passes(self) -> int:
        """Reads of the row from memory: one per level of reductions (a level's reductions share their pass), one
        more for a write of the row."""
        return len(set(self.levels)) + (1 if self.row_write else 0)

    @property
    def reason(self) -> str:
        return (f"{len(self.reductions)} reduction(s) ({', '.join(self.combines)}) along the last axis of each row "
                f"in {len(set(self.levels))} level(s), "
                f"{'with' if self.fused else 'without'} pointwise producers and consumers: a row is independent of "
                f"the others and its reductions may run in any order (T10), so each row gets a block of threads "
                f"folding strided slices and combining them in a tree")

    def part(self, graph: KernelGraph, threads: int = THREADS, **params) -> Part:
        names = [ev.extent.name for ev in graph.extents]
        return Part("row_group", self.reason,
                    (("grid", names[self.rows]), ("threads", threads), ("passes", self.passes), *params.items()),
                    self.fused, nodes=(*self.reductions, self.write))


def recognise(graph: KernelGraph) -> RowGroup | Rejected:
    """The row group of ``graph``, or why it is none."""
    return run_walk(_Walk(graph))


class _Walk:
    def __init__(self, graph: KernelGraph):
        self.graph = graph
        self.prologue = prologue(graph)  # checks made before any launch: uniform scalars here, part of no body
        self.extent_of = extent_vars(graph, self.prologue)
        self.index = extent_index(graph)  # extents stated equal (a prologue check) are one axis: compared by class
        self.kind = {ev: UNIFORM for ev in graph.extents}
        self.kind.update({p.var: UNIFORM for p in graph.params if p.kind == "scalar"})
        self.views = {p.var: p for p in graph.params if p.kind == "view"}
        self.level: dict = {}
        self.domains: dict = {}  # domain Var -> the Dim it covers
        self.reductions, self.combines, self.levels, self.reshapes, self.fused = [], [], [], set(), set()
        self.element_reads = []
        self.reads_columns = False
        self.point = None  # the parallel loop's row coordinate
        self.parallel = any(n.op is ops.parallel for n in graph.body.nodes)

    def fail(self, why: str):
        raise NotRecognised(why)

    # -- the two forms ------------------------------------------------------------------------------------
    def run(self) -> RowGroup:
        nodes = self.graph.body.nodes
        if not nodes:
            self.fail("the graph is empty")
        reduces = [n for n in walk_region(self.graph.body) if n.op is ops.reduce]
        if not reduces:
            other = next((n for n in walk_region(self.graph.body) if n.op in REDUCTIONS), None)
            if other is not None:
                self.fail(f"op {other.op.name}{_at(other)} combines along an axis but not into one value per row "
                          f"(a scan is ordered: a multi-block scan, not a row group)")
            self.fail("no reduction: a row group reduces along its rows (flat_nest or parallel_grid maps the rest)")
        loops = [n for n in nodes if n.op is ops.parallel]
        source = T.leaf_types(reduces[0].inputs[0].type)[0]
        if loops:
            form, loop = "parallel", nodes[-1]
            if len(loops) != 1 or loop is not loops[0]:
                self.fail("a parallel row group is one top-level parallel loop, last in the graph")
            if source.rank != 1:
                self.fail(f"the reduction{_at(reduces[0])} in the parallel loop is not of a row (rank 1)")
            self.cols = _rep(source.shape[0])
            self.rows = None
            self.top(nodes[:-1])
            caps = match(UNIT_DOMAIN, self.producer(nodes, loop.inputs[0]), {})
            if caps is None or caps["end"] not in self.extent_of:
                self.fail(f"the parallel loop{_at(loop)} is not over domain(0, E, 1) of a kernel extent E")
            self.rows = _rep(self.graph.extents[self.extent_of[caps["end"]]].extent)
            self.check_extents()
            (body,) = loop.regions
            self.point = body.params[0]
            self.kind[self.point] = ROW
            write = self.walk(body.nodes)
        else:
            form, loop = "tensor", None
            if source.rank != 2:
                self.fail(f"the reduction{_at(reduces[0])} is of a rank-{source.rank} tensor; a tensor-form row group "
                          f"reduces the last axis of (rows, columns)")
            self.rows, self.cols = map(_rep, source.shape)
            self.check_extents()
            write = self.walk(nodes)
        invariant, columns = self.invariant(nodes, write) if loop is None else ((), ())
        return RowGroup(form, self.index[self.rows], self.index[self.cols], tuple(self.combines), tuple(self.levels),
                        self.row_write, tuple(sorted(self.fused)), tuple(self.reductions), write, loop,
                        frozenset(self.reshapes), tuple(self.element_reads), invariant, columns,
                        self.reads_columns)

    def invariant(self, nodes, write) -> tuple:
        """The tensor form's nodes whose values depend on no row (domains, uniform and per-column values: pure, the
        walk admitted no other effect than whole-axis reads), and the per-column tensors among them that a node of
        the row consumes (the frontier: RMSNorm's ``cast(w[:], f32)``, layer norm's ``g[:]`` and ``b[:]``)."""
        kept = [n for n in nodes if n is not write and n.op is not ops.reduce
                and all(self.kind.get(v, UNIFORM if n.op is ops.domain else ELEMENT) in (UNIFORM, COL)
                        for v in n.outputs)]
        used = {x for n in nodes if n not in kept for x in n.inputs}
        columns = tuple(v for n in kept for v in n.outputs
                        if self.kind.get(v) == COL and v in used and isinstance(v.type, T.TensorType))
        return tuple(kept), columns

    def producer(self, nodes, var):
        return next((n for n in nodes if var in n.outputs), None)

    def check_extents(self) -> None:
        if self.rows not in self.index or self.cols not in self.index:
            self.fail("the rows and the row's elements must be kernel extents (a static axis is not mapped yet)")
        if self.rows is self.cols:
            self.fail("the rows and the row's elements are one extent: which axis a value runs along is ambiguous")

    def top(self, nodes) -> None:
        """The nodes before the parallel loop: domains and uniform or per-column values."""
        for node in nodes:
            if (node.op.effects or node.regions) and node not in self.prologue:
                self.fail(f"op {node.op.name}{_at(node)} before the parallel loop has effects or regions")
            self.node(node)

    def walk(self, nodes):
        """Every node but the last classified; the last must be the one write."""
        *body, write = nodes
        if write.op is not ops.write:
            self.fail(f"the last op{_at(write)} is {write.op.name}, not the write of the row group's result")
        for node in body:
            if node.op.effects - {"read"} and node not in self.prologue:
                self.fail(f"op {node.op.name}{_at(node)} has effects ({', '.join(sorted(node.op.effects))}): a row "
                          f"group's only effect is its final write")
            self.node(node)
        self.final_write(write)
        return write

    # -- values ---------------------------------------------------------------------------------------------
    def shape_kind(self, shape) -> int | None:
        """What a value of ``shape`` may depend on, or None for a shape that is not a row group's."""
        R, C = self.rows, self.cols
        shape = tuple(map(_rep, shape))
        if self.parallel:  # parallel form: a row is (C,), a per-row value ()
            return {(): UNIFORM | ROW, (C,): ELEMENT}.get(shape) if all(s is C for s in shape) else None
        if shape == ():
            return UNIFORM
        if len(shape) == 1:
            return ROW if shape[0] is R else COL if shape[0] is C else None
        if len(shape) == 2:
            a, b = shape
            if a is R and b is C:
                return ELEMENT
            if a is R and b == 1:
                return ROW
            if a == 1 and b is C:
                return COL
        return None

    def operand(self, x) -> int:
        if isinstance(x, Literal):
            return UNIFORM
        if x not in self.kind:
            self.fail(f"a value of type {x.type!r} is used where a row group cannot follow it")
        return self.kind[x]

    def define(self, node, kind: int) -> None:
        for v in node.outputs:
            for t in T.leaf_types(v.type):
                if not isinstance(t, (T.TensorType, T.ScalarType)):
                    continue
                if not _value_dtype(t.dtype):
                    self.fail(f"op {node.op.name}{_at(node)} computes {t.dtype}, which has no arithmetic of its own "
                              f"(a row group computes in arithmetic dtypes)")
                allowed = self.shape_kind(getattr(t, "shape", ()))
                if allowed is None:
                    self.fail(f"op {node.op.name}{_at(node)} has shape {tuple(getattr(t, 'shape', ()))!r}, which is "
                              f"neither a row, one value per row, nor one per column")
                if kind & ~allowed & COL or (not self.parallel and kind & ~allowed):
                    self.fail(f"op {node.op.name}{_at(node)} depends on {_DEPENDS[kind]} but has shape "
                              f"{tuple(getattr(t, 'shape', ()))!r}")
            self.kind[v] = kind
            self.level[v] = max((self.level.get(x, 0) for x in node.inputs if x in self.level), default=0)

    def node(self, node) -> None:
        op = node.op
        if node in self.prologue:  # computed before the launch: a scalar every row sees alike
            return self.define(node, UNIFORM)
        if op is ops.domain:
            caps = match(UNIT_DOMAIN, node, {})
            if caps is None or caps["end"] not in self.extent_of:
                self.fail(f"the domain{_at(node)} is not domain(0, E, 1) of a kernel extent E")
            self.domains[node.outputs[0]] = _rep(self.graph.extents[self.extent_of[caps["end"]]].extent)
            return
        if op is ops.read:
            return self.read(node)
        if op is ops.indices:
            (d,) = node.inputs
            if self.domains.get(d) is not self.cols:
                self.fail(f"indices{_at(node)} of a domain other than the row's elements")
            return self.define(node, COL)
        if op is ops.reduce:
            return self.reduce(node)
        if op is ops.reshape:
            return self.reshape(node)
        if node.regions:
            self.fail(f"op {op.name}{_at(node)} has regions of its own (control flow is not a row group)")
        if op in POINTWISE or op in AGGREGATE or op is ops.broadcast or op is ops.full:
            if op in POINTWISE and node.inputs:
                self.fused.add(op.name)
            kind = UNIFORM
            for x in node.inputs:
                kind |= self.operand(x)
            for v in node.outputs:
                for t in T.leaf_types(v.type):
                    kind |= 0 if self.parallel else self.shape_kind(getattr(t, "shape", ())) or 0
            return self.define(node, kind)
        self.fail(f"op {op.name}{_at(node)} is not part of a row group (one of: whole-row reads, pointwise ops, "
                  f"broadcasts, unit-axis reshapes, reductions along the row)")

    def axes_of(self, node, view_type) -> tuple:
        """What each index entry of a read or write covers: ROW (the row coordinate or a whole row axis) or COL
        (the whole row of elements); fails on anything else (a point elsewhere, a partial domain)."""
        kinds, operands = [], iter(node.inputs[2:] if node.op is ops.write else node.inputs[1:])
        for axis, entry in enumerate(node.attr("index")):
            dim = _rep(view_type.shape[axis])
            if entry == "all":
                covered = dim
            elif entry == "domain":
                covered = self.domains.get(next(operands))
            elif entry == "point":
                if self.point is None or next(operands) is not self.point:
                    self.fail(f"a {node.op.name}{_at(node)} indexes a point that is not the parallel loop's row")
                covered = self.rows
            else:
                covered = None
            if covered is None or covered is not dim or dim not in (self.rows, self.cols):
                self.fail(f"a {node.op.name}{_at(node)} does not cover whole axes of rows or row elements")
            kinds.append(ROW if dim is self.rows else COL)
        return tuple(kinds)

    def read(self, node) -> None:
        p = self.views.get(node.inputs[0])
        if p is None:
            self.fail(f"a read{_at(node)} of something that is not a kernel view")
        kind = UNIFORM
        for k in self.axes_of(node, p.type):
            kind |= k
        self.define(node, kind)
        if kind == ELEMENT:
            self.element_reads.append(node)
        self.reads_columns |= kind == COL

    def reduce(self, node) -> None:
        source, identity, *captures = node.inputs
        shapes = {tuple(map(_rep, t.shape)) for t in T.leaf_types(source.type)}
        row = (self.cols,) if self.parallel else (self.rows, self.cols)
        if len(shapes) != 1 or shapes.pop() != row or node.attr("axes") != (len(row) - 1,):
            self.fail(f"the reduction{_at(node)} is not along the last axis of a row")
        if pointwise_shape(node) is None:
            self.fail(f"the reduction{_at(node)} has a combine with control flow or of several shapes")
        if captures:
            self.fail(f"the reduction{_at(node)} has combine operands")
        self.operand(source)
        if self.operand(identity) & COL:
            self.fail(f"the identity of the reduction{_at(node)} depends on the column")
        level = 1 + max(self.level.get(source, 0), self.level.get(identity, 0))
        self.define(node, ROW)
        for v in node.outputs:
            self.level[v] = level
        self.reductions.append(node)
        self.combines.append(node.attr("helper") or "combine")
        self.levels.append(level)

    def reshape(self, node) -> None:
        """Only unit axes added or dropped: the sizes agree by the types (no run-time check)."""
        x = node.inputs[0]
        why = unit_reshape(node)
        if why is not None:
            self.fail(why)
        self.reshapes.add(node)
        self.define(node, self.operand(x))

    def final_write(self, node) -> None:
        view, value = node.inputs[0], node.inputs[1]
        p = self.views.get(view)
        if p is None or p.type.access != "Out":
            self.fail(f"the write{_at(node)} is not to an Out view")
        if any(n.op is ops.read and n.inputs[0] is view for n in walk_region(self.graph.body)):
            self.fail(f"the written view {p.name} is also read")
        axes = self.axes_of(node, p.type)
        if ROW not in axes or axes.count(ROW) != 1 or axes[0] != ROW or len(axes) > 2:
            self.fail(f"the write{_at(node)} is not of whole rows (rows, elements) or of one value per row")
        self.row_write = axes == (ROW, COL)
        kind = self.operand(value)
        if kind & COL and not self.row_write:
            self.fail(f"the write{_at(node)} of one value per row writes a value that depends on the column")
