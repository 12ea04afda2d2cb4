"""The base of the CPU oracle's code generator (KIR -> the source of one Numba function).

The emitter is an :class:`~intent_trace.graph.interpreter.Interpreter` whose values are source
fragments (:mod:`.values`). Scalars become locals assigned once (``v17 = ...``); tensors are
*fused* element expressions when the fusion analysis (:mod:`intent_trace.codegen.analysis`)
allows, or arrays filled by one loop nest (the outermost loop a ``prange`` when the nest is at
top level). Structured control becomes Python control; loop carries are the only reassigned names.

Run-time checks (``checks=True``) never raise inside compiled code: they record an error site,
the coordinate and the extent in ``err`` and leave the function (``return``), or skip the
iteration inside a ``prange`` (``continue``); the executable raises the Python exception and
discards the staged outputs.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ... import types as T
from ...codegen.analysis import fusible_values
from ...codegen.checks import Check
from ...codegen.protocol import EmitterCore
from ...codegen.writer import SourceWriter
from ...graph.interpreter import Interpreter
from ...graph.lowering import ErrorSite, components, extent_expr, intern_constant, leaf_values
from ...graph.values import KernelGraph, Var
from ..generic_races import READ, WRITE
from .indexing import NUMBA
from .inline import inline_combine, pointwise_combine, result_arrays
from .races import note, note_region
from .scalar_rules import SCALAR_RULES, np_type
from .staging import Staging
from .values import Aggregate, Array, Lazy, Scalar, shape_text


# A fused value's element is written by its closure calling its operands' closures: a chain of fused ops
# recurses once per op while the source is generated (a few Python frames each). Past this many, the value
# is materialised (computed into an array where it is defined, which is always its meaning in KIR) and
# the chain restarts from an array read, so code generation has bounded depth for chains of any length.
MAX_FUSION_DEPTH = 64


class EmitterBase(EmitterCore, SourceWriter, Interpreter):
    """The cpu code generator without its rules: text, checks, allocation, loop nests, fusion and carries.

    Every Numba rule module imports this (and the helper modules below the rules), never the composition:
    :mod:`.emitter` builds the rule table and subclasses this as ``NumbaEmitter``."""

    target_name = "cpu"
    rules: dict = {}
    dialect = NUMBA  # how the shared rules (intent_trace.codegen) spell index text, selects and codecs here

    def __init__(self, graph: KernelGraph, checks: bool = True):
        Interpreter.__init__(self)
        SourceWriter.__init__(self)
        self.graph = graph
        self.checks = checks
        self.constants: dict = {}
        self.constant_lines: list = []
        self.dim_names: dict = {}
        self.fused, self.reads, self.aligned = fusible_values(graph)
        self.error_sites: list = []
        self.prange_depth = 0
        self.loop_depth = 0
        self.uses_prange = False
        self.blas_in_prange = False  # a contraction calls BLAS inside a prange body (:mod:`.blas_threads`)
        self.loop_stack: list = []  # (kind, carry leaf names, carry type, body depth) of enclosing KIR loops
        self.node = None  # the node being emitted (error sites name its source line)
        self.pointwise = 0  # > 0 while a combine region is inlined per element (tensors stay lazy)
        self.fusion_depth: dict = {}  # Lazy -> how many fused ops its element expression nests
        self.row = None  # (row index, row extent) while a row group's members are emitted (:mod:`.rows`)
        self.parallel_body = None  # the body region of the top-level ``prange`` being emitted (its row groups)
        self.row_header = None  # the indentation of a row loop inside it (its row buffers' checks go before it)
        self.recomputed: frozenset = frozenset()  # the row group's values each use recomputes (:mod:`.rows`)
        self.staging = Staging()  # which error sites can be reached after a write (:mod:`.staging`)

    # -- text (fresh, line, assign, block come from SourceWriter) --------------------------------
    def constant(self, value, dtype: T.DType) -> str:
        """A module-level constant holding ``value`` exactly in ``dtype``'s Numba type."""
        if dtype.is_bool:
            return "True" if value else "False"
        if dtype.is_float:
            f = float(value)
            if f != f:
                return self._nan_constant(value, dtype)
            text = f"float.fromhex({f.hex()!r})" if abs(f) != float("inf") else f"float({str(f)!r})"
        else:
            text = str(int(value))
        return intern_constant(self.constants, self.constant_lines, (dtype, repr(value), str(value)),
                               f"{np_type(dtype)}({text})")

    def _nan_constant(self, value, dtype: T.DType) -> str:
        """A NaN constant, bit for bit: its bits as an unsigned module constant, reinterpreted where used.

        A NaN's sign and payload live only in its bits, which every float spelling loses (``float('nan')``
        is +NaN; a frozen float global passes through Python's double and LLVM's constant printer, which
        quiet or drop payloads). A bitcast of an integer constant folds to exactly those bits. f16/bf16
        values are held as the float32 NumPy (ml_dtypes) converts them to, as loads from the caller's
        arrays are (``runtime.f16_value``), so stores give back the literal's own bits."""
        wide = dtype.name == "f64"
        held = np.asarray(value, dtype=dtype.np).astype(np.float64 if wide else np.float32)
        bits = int(held.view(np.uint64 if wide else np.uint32))
        unsigned = "np.uint64" if wide else "np.uint32"
        name = intern_constant(self.constants, self.constant_lines, ("nan", dtype, bits), f"{unsigned}({bits:#x})")
        return f"R.bits_f64({name})" if wide else f"R.bits_f32({name})"

    def extent(self, e) -> str:
        # An extent given by a runtime value is computed from that value wherever it is needed.
        name = extent_expr(e, self.dim_names, self.env, Scalar, lambda v: f"R.max2(0, np.int64({v}))")
        if name is None:
            raise KeyError(f"internal: extent {e!r} has no runtime value here")
        return name

    # -- errors ----------------------------------------------------------------------------------
    def record(self, site: ErrorSite) -> int:
        """Record ``site`` (noting the op being emitted); its number in the error record (``err[0]``)."""
        if self.node is not None and self.node.loc is not None:
            site.note = f"in op `{self.node.op.name}` at {self.node.loc!r}"
        self.error_sites.append(site)
        return len(self.error_sites)

    def leave(self) -> None:
        self.line("continue" if self.prange_depth else "return")

    def error_exit(self, site: ErrorSite, *values: str) -> None:
        self.line(f"err[0] = {self.record(site)}")
        for k, v in enumerate(values[:3]):
            self.line(f"err[{k + 1}] = np.int64({v})")
        self.leave()

    def check(self, bad: str, site, *values: str, **fields) -> None:
        """Record ``site`` (a :class:`~intent_trace.codegen.checks.Check` with its static and text ``fields``, or
        an ErrorSite written at the call) with the int64 ``values`` and leave, when the condition ``bad`` holds."""
        if not self.checks:
            return
        if isinstance(site, Check):
            site = site.site(**fields)
        with self.block(f"if {bad}:"):
            self.error_exit(site, *values)

    # -- allocation ------------------------------------------------------------------------------
    def allocate(self, shape, dtype: str, what: str, fill: str | None = None, prefix: str = "a") -> str:
        """A new array of extent expressions ``shape`` and Numba type ``dtype`` (``np.float32``...), filled
        with ``fill`` when given; the name of the local holding it.

        Every allocation of generated code is made here, for two reasons.

        Its size is checked against the call's allocation limit (the ``limit`` argument, read from
        :func:`intent_trace.limits.allocation_limit` at each call, never baked into the module) before it
        is attempted, whatever ``checks`` says: a failure is reported through the error record as a
        ValueError naming ``what``, its element count and its size, and the executable then discards the
        staged outputs. (A bare MemoryError or Numba's "array is too big" says neither what nor why.)

        An empty array is always made by a runtime function (cached on disk, where ``np.empty`` is compiled
        again by every process), a filled one inside a ``prange`` body too, never by ``np.empty``/``np.full``
        there: Numba's parfor pass hoists every ``np.empty`` (and the ``np.empty`` it makes of
        ``np.zeros``/``np.full``) whose arguments are loop invariant out of the parallel loop, at any
        nesting depth inside it, and reuses one buffer for every execution of that statement. A loop
        carry (``c = a`` at the end of an iteration, read by the next one while it fills ``a`` again)
        then reads the buffer being overwritten. Numba treats a call of a compiled function as impure
        and never hoists it, so each execution gets its own array, as in the serial build.
        """
        itemsize = np.dtype(dtype.removeprefix("np.")).itemsize
        if not self.staging.hoist_check(self, shape, itemsize, what):  # else checked before the parallel loop
            self.check_size(shape, itemsize, what)
        name = self.fresh(prefix)
        # a literal extent as an int64 value: one specialisation of the allocation for every shape of a rank (Numba
        # compiles a function once per literal value it is called with)
        dims = "(" + "".join(f"np.int64({s}), " if s.isdigit() else f"{s}, " for s in shape) + ")"
        if fill is None:  # the runtime's (cached) allocation everywhere: Numba compiles np.empty per process
            call = f"R.alloc_empty({dims}, {dtype})"
        elif self.prange_depth:
            call = f"R.alloc_full({dims}, {dtype}({fill}))"
        else:  # (outside a prange loop the parallel build's parfor pass fills this one in parallel)
            call = f"np.full({dims}, {fill}, dtype={dtype})"
        self.line(f"{name} = {call}")
        return name

    def check_size(self, shape, itemsize: int, what: str) -> None:
        """Leave with the error of :func:`intent_trace.limits.allocation_error` when an array of ``shape``
        would exceed the call's limit (see :meth:`allocate`; for scratch arrays written in templates).
        The element count is a float64: a product of int64 extents may overflow, a float only rounds
        (far above any limit). The comparison and the error record are one call (``R.exceeds``)."""
        if all(s.isdigit() for s in shape):
            elements = f"np.float64({math.prod(int(s) for s in shape)})"
        else:
            elements = " * ".join(f"np.float64({s})" for s in shape)
        site = ErrorSite(ValueError, "{what} needs {0} elements ({1} bytes), more than the {2} bytes one "
                         "allocation may take on this machine", what=what)
        # the site and the item size as int64 values, not literals: Numba compiles a helper once per literal value
        with self.block(f"if R.exceeds(err, np.int64({self.record(site)}), {elements}, np.int64({itemsize}), limit):"):
            self.leave()

    # -- values ----------------------------------------------------------------------------------
    def lazy_elem(self, value: Lazy, idx) -> str:
        """One element of a lazy value: its statements written here, each time (Numba's compiler shares what
        repeats)."""
        return value.elem(idx)

    @contextlib.contextmanager
    def row_loop(self, extent: str):
        """``for r in prange(extent):`` around a row group's members (:mod:`.rows`): inside it every loop nest
        a member opens is over one row (:meth:`loop_nest`), and what a member materialises is a row
        (:meth:`materialize`). Inside a top-level ``prange`` (a group of its body) the rows run in order, in a
        plain ``range``: the enclosing loop is the parallel one."""
        r = self.fresh("r")
        nested = self.prange_depth > 0
        frame = contextlib.nullcontext() if nested else self.staging.parallel_loop(self, extent)
        header = self.depth
        with frame, self.block(f"for {r} in {'range' if nested else 'prange'}({extent}):"):
            self.uses_prange = True
            self.prange_depth += 1
            self.loop_depth += 1
            self.row = (r, extent)
            self.row_header = header if nested else None
            try:
                yield r
            finally:
                self.row = self.row_header = None
                self.loop_depth -= 1
                self.prange_depth -= 1

    @contextlib.contextmanager
    def loop_nest(self, shape, parallel: bool):
        if self.row is not None and shape:
            # A row group's member: the first axis is the row being emitted (the analysis checked that
            # every member's first extent is the group's), so only the rest of the shape loops.
            with self._loops(shape[1:], False) as rest:
                yield [self.row[0], *rest]
        else:
            with self._loops(shape, parallel) as idx:
                yield idx

    @contextlib.contextmanager
    def _loops(self, shape, parallel: bool):
        idx = [self.fresh("i") for _ in shape]
        opened = 0
        use_prange = parallel and bool(shape) and self.prange_depth == 0 and self.loop_depth == 0
        for k, (i, n) in enumerate(zip(idx, shape)):
            # A prange index may be typed unsigned by Numba's parfors: index arithmetic converts its
            # operands to int64 where it combines them (indexing.add/mul), never here, because a
            # converted copy of the index stops Numba from vectorising the loop.
            self.line(f"for {i} in {'prange' if k == 0 and use_prange else 'range'}({n}):")
            self.depth += 1
            opened += 1
        if use_prange:
            self.uses_prange = True
            self.prange_depth += 1
        self.loop_depth += len(shape) > 0
        try:
            yield idx
        finally:
            self.loop_depth -= len(shape) > 0
            if use_prange:
                self.prange_depth -= 1
            self.depth -= opened

    # -- what the shared rules call besides the walk (intent_trace.codegen.protocol) ----------------------------
    def nest(self, shape, parallel: bool):
        """A shared rule's loop nest (:meth:`loop_nest`)."""
        return self.loop_nest(shape, parallel)

    def written_mask(self, view) -> str:
        """A unique store's mask of the elements written so far: an array of bools of the view's shape."""
        return self.allocate(view.shape, "np.bool_", f"the written-element mask of a unique store to {view.label}",
                             fill="False", prefix="m")

    def race_read(self, var, view, shape, coords_at) -> None:
        """The race check of a read inside ``parallel`` (:mod:`.races`)."""
        note_region(self, var, view, shape, coords_at, READ)

    def race_write(self, var, view, element) -> None:
        """The race check of a write inside ``parallel`` (:mod:`.races`)."""
        note(self, var, view, element, WRITE)

    def scalar_op(self, node, d: T.DType):
        """The spelling of an elementwise op on operand expressions (:data:`.scalar_rules.SCALAR_RULES`)."""
        rule = SCALAR_RULES[node.op]
        return lambda *exprs: rule(node, d, *exprs)

    def inlines(self, node) -> bool:
        """Whether a reduce's or scan's combine is inlined per element: pointwise, with scalar captures."""
        return pointwise_combine(node)

    def accumulators(self, types: list, inits: list) -> list:
        """Scalar accumulators of an inlined combine: locals assigned ``inits`` (reassigned by the fold)."""
        return [self.assign(v, "c") for v in inits]

    def read_accumulators(self, accs: list) -> list:
        """The accumulators' present values, as an inlined combine reads them: the locals themselves."""
        return accs

    def inline_combine(self, node, acc_t: T.Type, lhs: list, rhs: list, captures: list, pos) -> list:
        """The combine region inlined for one element (:func:`.inline.inline_combine`)."""
        return inline_combine(self, node, acc_t, lhs, rhs, captures, pos)

    def result_array(self, shape, t: T.Type):
        """A new array for a result leaf of type ``t`` and extents ``shape``."""
        return result_arrays(self, [t], shape)[0]

    def computed(self, value, t: T.Type):
        """A value a serial fold then reads element by element: computed into an array first (a parallel loop
        nest at top level) rather than element by element inside the fold."""
        return self.materialize(value, t)

    def flag(self, condition: str) -> str:
        """A condition a block that leaves tests: Python evaluates an ``if``'s condition once, as it is."""
        return condition

    @contextlib.contextmanager
    def in_loop(self):
        """Around a KIR loop's body: a loop nest inside it is never a ``prange`` (:meth:`_loops`)."""
        self.loop_depth += 1
        try:
            yield
        finally:
            self.loop_depth -= 1

    def leave_blocks(self, depth: int) -> None:
        """Before a jump out of blocks: they hold nothing to release here (arrays are garbage collected)."""

    def while_header(self) -> str:
        return "while True:"

    def while_stop(self, condition: str) -> str:
        """When a ``while`` leaves: its condition is false, or a failed check inside a ``prange`` body (which
        skips the iteration instead of returning; allocation checks are made without checks too) recorded an
        error."""
        return f"not {condition} or err[0] != 0"

    def materialize(self, value, t: T.Type):
        if not isinstance(value, Lazy):
            return value
        shape = value.shape
        if not shape:  # rank 0: a scalar local (Numba's parfors mishandle 0-d arrays)
            return Scalar(value.elem([]))
        if self.row is not None:
            return self._materialize_row(value, t)
        what = f"the result of `{self.node.op.name}`" if self.node is not None else "a temporary"
        name = self.allocate(shape, np_type(t.dtype), f"{what} of shape {shape_text(t)}")
        with self.loop_nest(shape, parallel=True) as idx:
            v = value.elem(idx)
            self.line(f"{name}[{', '.join(idx)}] = {v}")
        return Array(name, shape)

    def _materialize_row(self, value: Lazy, t: T.Type) -> Lazy:
        """Row ``r`` of a row group member's value (:meth:`row_loop`): a scalar local for a value of one
        element per row (``[M]``, ``[M, 1]``), else a buffer of the row's shape, allocated per row; read back
        at index ``[r, ...]``."""
        r = self.row[0]
        rest = value.shape[1:]
        if all(e == "1" for e in rest):  # one element per row ([M], or [M, 1] of a per-row value)
            s = self.assign(value.elem([r, *("0" for _ in rest)]), "w")
            return Lazy(value.shape, lambda idx: s)
        what = f"a row of the result of `{self.node.op.name}`" if self.node is not None else "a row"
        name = self.allocate(rest, np_type(t.dtype), f"{what} of shape {shape_text(t)}")
        with self._loops(rest, False) as idx:
            self.line(f"{name}[{', '.join(idx)}] = {value.elem([r, *idx])}")
        return Lazy(value.shape, lambda idx: f"{name}[{', '.join(idx[1:])}]")

    def store_rows(self, node, v, r: str, at: tuple) -> tuple:
        """Row ``r`` of row-group member ``node``'s value ``v`` stored into an array of its whole shape, allocated
        where the row loop begins (``at``: the line index and depth there; its lines are inserted): what the nodes
        after the group read (:mod:`.rows`, a group of a parallel loop's body). (the array, how many lines were
        inserted)"""
        value = self.env[v]
        shape = value.shape
        lines, depth, outer = self.lines, self.depth, self.node
        self.lines, self.depth, self.node = [], at[1], node  # an allocation error names the member's line
        try:
            name = self.allocate(shape, np_type(v.type.dtype), f"the result of `{node.op.name}` of shape "
                                 f"{shape_text(v.type)}")
            inserted = self.lines
        finally:
            self.lines, self.depth, self.node = lines, depth, outer
        self.lines[at[0]:at[0]] = inserted
        with self._loops(shape[1:], False) as idx:
            self.line(f"{name}[{', '.join([r, *idx])}] = {value.elem([r, *idx])}")
        return Array(name, shape), len(inserted)

    def run_node(self, node):
        outer, self.node = self.node, node
        try:
            with self.staging.node(self, node):
                super().run_node(node)
            for v in node.outputs:
                value = self.env[v]
                if isinstance(value, Lazy) and not self.pointwise:
                    depth = 1 + max((self.fusion_depth.get(leaf, 0) for x in node.inputs if isinstance(x, Var)
                                     for leaf in leaf_values(self.env.get(x), Aggregate)), default=0)
                    if (v not in self.fused and v not in self.recomputed) or depth > MAX_FUSION_DEPTH:
                        value = self.materialize(value, v.type)
                        self.env[v] = value
                    else:
                        self.fusion_depth[value] = max(depth, self.fusion_depth.get(value, 0))
                self.bind_dims(v, value)
        finally:
            self.node = outer

    # -- leaves of carries and branch results ---------------------------------------------------
    def leaves(self, value, t: T.Type) -> list:
        if isinstance(t, (T.TupleType, T.RecordType)):
            return [x for v, it in zip(value.items, components(t)) for x in self.leaves(v, it)]
        value = self.materialize(value, t)
        return [value.expr if isinstance(value, Scalar) else value.name]

    def rebuild(self, names: list, t: T.Type, shape_of=None):
        """A value of type ``t`` whose leaves are the locals ``names`` (consumed from the front)."""
        if isinstance(t, (T.TupleType, T.RecordType)):
            return Aggregate(tuple(self.rebuild(names, it) for it in components(t)))
        name = names.pop(0)
        if isinstance(t, T.TensorType) and t.rank:
            return Array(name, tuple(f"{name}.shape[{k}]" for k in range(t.rank)))
        return Scalar(name)

    def mutable(self, t: T.Type, init=None, scratch: bool = True) -> list:
        """One carry local per leaf of ``t``, assigned ``init``'s leaves when given (``scratch`` is TileLang's: a
        permutation of carries is assigned at once here, :meth:`assign_leaves`)."""
        names = self.carry_names(t)
        if init is not None:
            self.assign_leaves(names, init, t)
        return names

    def current(self, names: list, t: T.Type):
        """The present values of the carry locals ``names`` as a value of type ``t``."""
        return self.rebuild(list(names), t)

    def store(self, names: list, value, t: T.Type) -> None:
        """Assign ``value`` to the carry locals ``names``."""
        self.assign_leaves(names, value, t)

    def carry_names(self, t: T.Type) -> list:
        return [self.fresh("c") for _ in T.leaf_types(t)]

    def assign_leaves(self, names: list, value, t: T.Type) -> None:
        pairs = [(name, leaf) for name, leaf in zip(names, self.leaves(value, t)) if name != leaf]
        if len(pairs) > 1 and any(leaf in names for _, leaf in pairs):
            # a permutation of carries (c0, c1 = c1, c0): assign them all at once
            self.line(f"{', '.join(n for n, _ in pairs)} = {', '.join(leaf for _, leaf in pairs)}")
            return
        for name, leaf in pairs:
            self.line(f"{name} = {leaf}")

