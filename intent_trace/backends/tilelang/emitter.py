"""KIR -> the text of one TileLang program (the code generator shared by every TileLang target).

The emitter is an :class:`~intent_trace.graph.interpreter.Interpreter` whose values are TIR source
fragments, as the cpu oracle's Numba emitter is. Scalars become TileLang locals bound once
(``v17 = ...``); tensors stay *lazy*: a function that writes the statements computing one element
at given index expressions, evaluated where the value is consumed (a view write, a reduction) and
memoised per element within a block. A tensor that would be read after something overwrote what
it reads is snapshotted into a local buffer (:mod:`.storage`: the stack, or the heap when its size
is known only at run time). Loop carries and branch results are mutable locals (``T.alloc_var``),
tensor-valued ones buffers; ``break``/``continue`` become TileLang's own. Run-time checks record
an error in a hidden parameter and return (:mod:`.storage`).

Nothing the user named reaches the text: parameters are ``p0, p1, ...``, extents ``d0, d1, ...``,
values ``v17``, constants ``K3``. Value arithmetic is a call of a helper named by
:mod:`.scalar_rules` whose body the target module writes (:mod:`.c`).

Targets differ only in their value (:class:`.spec.TileLangTarget`: launch line, language import, helper
bodies, compiler flags, capabilities); the rules here are the same for all of them.
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...errors import LoweringError
from ...graph.interpreter import Interpreter
from ...graph.lowering import components, extent_expr, intern_constant, name_extents, pointwise_shape
from ...graph.values import KernelGraph, Var
from ...codegen.analysis import fusion, snapshot_values
from ...codegen.protocol import EmitterCore
from ...codegen.values import Aggregate, Array, Domain, Lazy, Scalar  # noqa: F401  (the values rule modules import)
from ...codegen.writer import SourceWriter
from . import accumulate, cuda_groups
from .dialect import TILELANG, View, add, as_index, mul  # noqa: F401  (the dialect's helpers rule modules import)
from .scalar_rules import SCALAR_RULES, constant_expr, tir_dtype
from .storage import StorageMixin

# The values are the shared classes (intent_trace.codegen.values; an Array is a local buffer: a snapshot) and
# TileLang's View; index text is spelled by the dialect (:mod:`.dialect`), whose helpers other modules import here.

LAZY_DEPTH = 64  # lazy links evaluated by nested elem calls before a value is materialised (_too_deep)
CHAIN_LENGTH = 512  # ops emitted per element of a lazy value before it is materialised (_too_deep)
INT32_FLAT = 2**31  # a flat grid of fewer elements finds its coordinates in 32-bit arithmetic (coordinates)


class TileLangEmitter(StorageMixin, EmitterCore, SourceWriter, Interpreter):
    """The walk and the values every rule shares. Its rule table is given (:mod:`.rules` composes it from the
    rule modules, which import this module: it imports none of them)."""

    dialect = TILELANG  # how the shared rules (intent_trace.codegen) spell index text, selects and codecs here
    helper_prefix = "it_"  # of the helpers' names (cuda_region_nan's second emitter in the same program: its own)

    def __init__(self, graph: KernelGraph, target, rules: dict, rejected: dict, checks: bool = True,
                 nest=None, grid=None):
        Interpreter.__init__(self)
        self.rules = rules  # OpDef -> rule
        self.rejected = rejected  # OpDef -> why no TileLang target lowers it
        SourceWriter.__init__(self)
        self.init_storage(target, checks, nest is not None or grid is not None)  # buffers and checks (.storage)
        self.graph = graph
        self.target = target  # the TileLangTarget (.spec): helper bodies, launch, flags, capabilities
        self.target_name = target.name
        # The launch plan the driver's pre-pass chose (program.plan_launch), fixed for the whole emission: the graph's
        # one write nest as a grid of threads (cuda_kernels.FlatNest; None once its loop is written), or its
        # top-level parallel loop mapped onto threads (cuda_kernels.ParallelGrid), or neither (one serial program).
        self.flat_nest = nest
        self.grid = grid
        self.helpers: dict = {}  # helper name -> C++ definition
        self.constants: dict = {}
        self.constant_lines: list = []
        self.dim_names: dict = {}
        analysis = fusion(graph)
        self.fused, self.reads, self.aligned = analysis.fused, analysis.reads, analysis.aligned
        # Lazy values whose elements each run a loop (a reduction, a contraction) and whose consumer would evaluate
        # an element more than once: held in a buffer, computed once (analysis.Fusion.materialized).
        self.materialized = analysis.materialized
        self.snapshots = snapshot_values(graph, self.fused, self.reads)
        self.memo: list = [{}]  # per open block: (id(lazy), idx) -> (lazy, element expression)
        self.depths: dict = {}  # Var -> (nesting of elem calls, ops per element) of its lazy value (_too_deep)
        self.loop_stack: list = []  # (kind, carry leaf names, carry type, body depth) of enclosing KIR loops
        self.node = None

    # -- errors ----------------------------------------------------------------------------------------
    def reject(self, why: str, node=None) -> LoweringError:
        node = node if node is not None else self.node
        where = f" at {node.loc!r}" if node is not None and node.loc is not None else ""
        op = f"op `{node.op.name}`{where}" if node is not None else f"kernel {self.graph.name}"
        return LoweringError(f"target {self.target_name} cannot lower {op}: {why}")

    def run_node(self, node):
        outer, self.node = self.node, node
        try:
            if node.op not in self.rules:
                raise self.reject(self.rejected[node.op])
            super().run_node(node)
        finally:
            self.node = outer
        for v in node.outputs:
            value = self.env[v]
            if v in self.snapshots or v in self.materialized or self._too_deep(node, value):
                value = self.hold(value, v.type)
                self.env[v] = value
            self.bind_dims(v, value)

    def _too_deep(self, node, value) -> bool:
        """Whether ``value``'s element code is too deep or too long to stay lazy. Depth: each lazy link that is
        not a same-index operand (a broadcast, reshape, gather, ...) nests one more Python ``elem`` call
        (LAZY_DEPTH). Length: the ops emitted per element (CHAIN_LENGTH), summed over distinct operands (an
        over-estimate where operands share values, which the memo emits once). TileLang's front end and TVM
        crash (a C++ stack overflow) on a loop body of 10,000 bound values. Such a value is materialised, so
        code generation is bounded for chains of any length, and so is every loop body handed to TileLang."""
        if not isinstance(value, Lazy):
            return False
        below = [self.depths.get(x, (0, 0)) for x in dict.fromkeys(x for x in node.inputs if isinstance(x, Var))]
        depth = max((d for d, _ in below), default=0) + (0 if value.operands or not below else 1)
        length = 1 + sum(n for _, n in below)
        if depth > LAZY_DEPTH or length > CHAIN_LENGTH:
            return True
        for v in node.outputs:
            self.depths[v] = (depth, length)
        return False

    # -- text --------------------------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        assert prefix not in ("p", "d", "K", "T"), "reserved: parameters p0.., extents d0.., constants K0.., T"
        return SourceWriter.fresh(self, prefix)

    @contextlib.contextmanager
    def block(self, header: str):
        self.memo.append({})
        try:
            with SourceWriter.block(self, header):
                yield
                self.release(self.depth)  # heap buffers allocated in the block
        finally:
            self.memo.pop()

    @contextlib.contextmanager
    def loop_nest(self, shape):
        nest = self.flat_nest
        if nest is not None and tuple(shape) == nest.shape:
            self.flat_nest = None  # the graph's one write nest: a grid of threads (cuda_kernels.FlatNest)
            yield from self._flat_loop(nest)
            return
        idx = []
        for n in shape:
            i = self.fresh("i")
            self.line(f"for {i} in T.serial({n}):")
            self.depth += 1
            self.memo.append({})
            idx.append(i)
        try:
            yield idx
        finally:
            for _ in shape:
                self.release(self.depth)
                self.depth -= 1
                self.memo.pop()

    # -- what the shared rules call besides the walk (intent_trace.codegen.protocol) ----------------------------
    def nest(self, shape, parallel: bool):
        """A shared rule's loop nest: serial, whatever ``parallel`` says (a grid of threads is planned before the
        emission, :mod:`.program`, and taken by :meth:`loop_nest`)."""
        return self.loop_nest(shape)

    def buffer_nest(self, shape):
        """The nest that writes every element of a buffer (a snapshot, a copy, a fill): a loop nest here; a program
        whose threads share its buffers spreads it over them (:mod:`.cuda_region_scan`)."""
        return self.loop_nest(shape)

    def written_mask(self, view) -> str:
        """A unique store's mask of the elements written so far: zeroed bytes of the view's shape."""
        return self.allocate(view.shape, "uint8", zero=True)

    def race_read(self, var, view, shape, coords_at) -> None:
        """Conflicting parallel accesses are not checked on TileLang targets (generic and cpu check them)."""

    def race_write(self, var, view, element) -> None:
        """Not checked here (:meth:`race_read`)."""

    def scalar_op(self, node, d: T.DType):
        """The spelling of an elementwise op on operand expressions: a helper call (:data:`.scalar_rules.SCALAR_RULES`),
        after the check that the target has ``d``."""
        self.tir(d)
        rule = SCALAR_RULES[node.op]
        return lambda *exprs: rule(self, node, d, *exprs)

    def inlines(self, node) -> bool:
        """Whether a reduce's or scan's combine is inlined per element: pointwise, with captures that are scalars
        or tensors of the accumulator's shape (read at the element)."""
        shape = pointwise_shape(node)
        return shape is not None and all(isinstance(t, T.ScalarType) or tuple(t.shape) == shape
                                         for c in node.inputs[2:] for t in T.leaf_types(c.type))

    def accumulators(self, types: list, inits: list) -> list:
        """Scalar accumulators of an inlined combine: mutable locals (``T.alloc_var``) initialised to ``inits``."""
        return accumulate.accumulators(self, types, inits)

    def read_accumulators(self, accs: list) -> list:
        """The accumulators' present values, each bound once: the combine's operands must not see the update."""
        return [self.assign(a, "x") for a in accs]

    def inline_combine(self, node, acc_t: T.Type, lhs: list, rhs: list, captures: list, pos) -> list:
        """The combine region inlined for one element (:func:`.accumulate.combine`)."""
        return accumulate.combine(self, node, acc_t, lhs, rhs, captures, pos)

    def result_array(self, shape, t: T.Type) -> str:
        """A new buffer for a result leaf of type ``t`` and extents ``shape`` (:meth:`allocate`)."""
        return self.allocate(shape, self.tir(t.dtype))

    def computed(self, value, t: T.Type):
        """A value a serial fold then reads element by element: read where it is (lazily), as any value."""
        return value

    def in_loop(self):
        """Around a KIR loop's body: nothing to note here (cpu counts loop depth)."""
        return contextlib.nullcontext()

    def leave_blocks(self, depth: int) -> None:
        """Before a jump out of the blocks at ``depth`` and deeper: free their heap buffers."""
        self.free_from(depth)

    def while_header(self) -> str:
        """TileLang's ``while`` takes one expression: the loop runs on a guard that never changes and leaves
        through ``break``."""
        guard = self.fresh("g")
        self.line(f"{guard} = T.alloc_var('bool', init=T.bool(True))")
        return f"while {guard}:"

    def while_stop(self, condition: str) -> str:
        return f"not {self.flag(condition)}"

    def _thread(self, plan) -> str:
        """This thread's index in its block: its binding, or, emulated (the C target), a serial loop over the
        block's threads, one level deeper."""
        tx = self.fresh("tx")
        if plan.emulated:
            self.line(f"for {tx} in T.serial({plan.threads}):")
            self.depth += 1
        else:
            self.line(f"{tx} = T.get_thread_binding()")
        return tx

    @contextlib.contextmanager
    def grid_iteration(self, grid, length: str):
        """The body of the parallel loop mapped onto threads (cuda_kernels.ParallelGrid): this thread's iteration
        ``o``, if it is one (the last block may have threads to spare)."""
        tx, o = self._thread(grid), self.fresh("o")
        emulated = grid.emulated
        self.line(f"{o} = T.Cast('int64', bx) * T.int64({grid.threads}) + T.Cast('int64', {tx})")
        self.in_grid = True
        try:
            with self.block(f"if {o} < {length}:"), self.loop_frame("for"):
                yield o
        finally:
            self.in_grid = False
            if emulated:
                self.depth -= 1

    def _flat_loop(self, nest):
        """Each thread takes ``nest.vector`` elements, ``nest.threads`` apart (coalesced), of the flattened nest.
        Past the end a thread recomputes the last element instead of skipping its own: the element code is a pure
        function of In views ending in its one write, so the repeat stores the same bits, and with no branch per
        element the unrolled copies issue all their loads before waiting on any.

        A nest of rank 2 or more whose last axis fills a block's elements (``nest.width``) is spread row by row
        instead (``cuda_kernels.FlatNest.launch``: a block is a chunk of one row, one uniform test): the row's
        coordinates are found once per thread and the last one is the thread's offset, so no element divides (a
        flat element divides once per axis, which a gather's nest paid in full: compute-bound). A rank-1 nest of
        4-byte views moves 16-byte groups instead (``nest.group``: :mod:`.cuda_groups`)."""
        if nest.group > 1:
            yield from cuda_groups.group_loop(self, nest)
            return
        tx, v = self._thread(nest), self.fresh("u")
        # a target whose memory model makes two threads' stores of the same bits a data race (Metal) guards instead
        guard = not nest.emulated and not self.target.lanes.repeat_writes
        self.line(f"if {nest.total} > 0:")
        self.depth += 1
        rows = len(nest.shape) > 1
        if rows:
            wide, chunks = self.variable("bool", nest.wide, "w"), nest.chunks
            row = self.variable("int64", f"T.if_then_else({wide}, T.Cast('int64', bx) // ({chunks}), T.int64(0))",
                                "r")
            start = self.variable("int64", f"(T.Cast('int64', bx) - {row} * ({chunks})) * T.int64({nest.width})",
                                  "o")
            outer = self.coordinates(row, nest.shape[:-1], nest.outer)  # once: the block's row
        self.line(f"for {v} in T.{'unroll' if nest.unroll else 'serial'}({nest.vector}):")
        self.depth += 1
        self.memo.append({})
        j = f"(T.Cast('int64', bx) * {nest.vector} + {v}) * {nest.threads} + T.Cast('int64', {tx})"
        f = self.variable("int64", j if guard else f"T.min({j}, {nest.total} - 1)", "f")
        valid = f"{f} < {nest.total}"
        if rows:
            coordinates = [self.variable("int64", "T.int64(0)", "c") for _ in nest.shape]
            last = f"{start} + T.Cast('int64', {v}) * T.int64({nest.threads}) + T.Cast('int64', {tx})"
            in_row = [*outer, last if guard else f"T.min({last}, {nest.shape[-1]} - 1)"]
            with self.block(f"if {wide}:"):
                for name, value in zip(coordinates, in_row):
                    self.line(f"{name} = {value}")
            with self.block("else:"):  # the divisions only here
                for name, value in zip(coordinates, self.coordinates(f, nest.shape, nest.total)):
                    self.line(f"{name} = {value}")
            valid = f"T.if_then_else({wide}, {coordinates[-1]} < {nest.shape[-1]}, {valid})"
        else:
            coordinates = self.coordinates(f, nest.shape, nest.total)
        if guard:
            self.line(f"if {valid}:")
            self.depth += 1
        self.in_grid = True  # a failed check claims the error record (threads fail at once)
        try:
            yield coordinates
        finally:
            self.in_grid = False
            self.release(self.depth)
            self.depth -= (3 if nest.emulated else 2) + guard
            self.memo.pop()

    def coordinates(self, flat: str, shape: tuple, total: str) -> list:
        """The row-major coordinates of flat index ``flat`` (``0 <= flat < total``, the product of ``shape``, extent
        expressions): each axis but the first by one division (the quotient goes on to the next axis, the remainder
        is a multiply and a subtraction; the first axis is the last quotient, no modulo), in 32-bit unsigned
        arithmetic when ``total`` is below :data:`INT32_FLAT` (one uniform test: a 64-bit division is dozens of
        instructions on a GPU, which a 2-D flat nest paid three times per element)."""
        if len(shape) == 1:
            return [flat]
        small = self.variable("bool", f"{total} < T.int64({INT32_FLAT})", "s")
        rest, idx = flat, []
        for n in reversed(shape[1:]):
            q = self.variable("int64", f"T.if_then_else({small}, T.Cast('int64', T.Cast('uint32', {rest}) // "
                              f"T.Cast('uint32', {n})), {rest} // ({n}))", "q")
            idx.append(self.variable("int64", f"{rest} - {q} * ({n})", "i"))
            rest = q
        return [rest, *reversed(idx)]

    def variable(self, dtype: str, value: str, prefix: str) -> str:
        """A local holding ``value``, computed once: TVM substitutes a plain binding's expression into each of its
        uses, and the CUDA compiler did not merge the copies (an embedding gather's element divided six times)."""
        name = self.fresh(prefix)
        self.line(f"{name} = T.alloc_var({dtype!r}, init={value})")
        return name

    def helper(self, family: str, dtypes: tuple, ret: T.DType, args: tuple) -> str:
        name = self.helper_prefix + "_".join((family, *(d.name for d in dtypes)))
        if name not in self.helpers:
            source = self.target.helper_source(name, family, dtypes, ret, args)
            if source is None:
                raise self.reject(f"{family} on {', '.join(d.name for d in dtypes)} is not supported on this target")
            self.helpers[name] = source
        return name

    def tir(self, d: T.DType) -> str:
        if not self.target.supports(d):
            raise self.reject(f"dtype {d} is not supported on this target yet")
        return tir_dtype(d)

    def constant(self, value, dtype: T.DType) -> str:
        self.tir(dtype)
        text = constant_expr(self, value, dtype)
        if not text.startswith("T.call_extern"):
            return text  # an integer or bool immediate: exact, and only ever an operand of a helper call
        return intern_constant(self.constants, self.constant_lines, (dtype, repr(value), str(value)), text)

    def extent(self, e) -> str:
        # An extent given by a runtime value is computed once, where it is first needed, and named.
        name = extent_expr(e, self.dim_names, self.env, Scalar, self._clamped_extent)
        if name is None:
            raise self.reject(f"internal: extent {e!r} has no runtime value here")
        name_extents(self.dim_names, (e,), (name,))
        return name

    def _clamped_extent(self, v: str) -> str:
        name = self.assign(f"T.max(T.int64(0), {as_index(v)})", "n")
        self.sized_by(name, v)
        return name

    # -- values ------------------------------------------------------------------------------------------
    def lazy_elem(self, value: Lazy, idx) -> str:
        """One element of a lazy value, memoised per element within the open block (same-index operands first,
        bottom-up: :meth:`_operands_first`)."""
        hit = self._memoised(value, idx)
        if hit is not None:
            return hit
        if value.operands:
            self._operands_first(value, idx)
        out = value.elem(list(idx))
        self.memo[-1][(id(value), tuple(idx))] = (value, out)
        return out

    def _memoised(self, value, idx) -> str | None:
        key = (id(value), tuple(idx))
        for scope in reversed(self.memo):
            hit = scope.get(key)
            if hit is not None and hit[0] is value:
                return hit[1]
        return None

    def _operands_first(self, value: Lazy, idx) -> None:
        """Evaluate the chain of same-index operands below ``value`` bottom-up, without recursion: a chain of
        10,000 elementwise ops would otherwise nest 10,000 ``elem`` calls. Each is then memoised, so ``value``'s
        own ``elem`` (and every one below it) finds its operands at once."""
        order, stack, seen = [], [(value, False)], set()
        while stack:
            v, done = stack.pop()
            if done:
                order.append(v)
                continue
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.append((v, True))
            for o in v.operands:
                if isinstance(o, Lazy) and id(o) not in seen and self._memoised(o, idx) is None:
                    stack.append((o, False))
        for v in order[:-1]:  # the last is value itself
            if self._memoised(v, idx) is None:
                self.memo[-1][(id(v), tuple(idx))] = (v, v.elem(list(idx)))

    def materialize(self, value, t: T.Type):
        """A snapshot of a lazy tensor in a local buffer (.storage: on the stack or the heap)."""
        if not isinstance(value, Lazy):
            return value
        name = self.allocate(value.shape, self.tir(t.dtype))
        with self.buffer_nest(value.shape) as idx:
            self.line(f"{name}[{', '.join(idx) or '0'}] = {self.elem(value, idx)}")
        return Array(name, value.shape)

    def hold(self, value, t: T.Type):
        """``value`` with each lazy tensor leaf materialised (an aggregate's leaves one by one)."""
        if isinstance(value, Aggregate):
            return Aggregate(tuple(self.hold(v, it) for v, it in zip(value.items, components(t))))
        return self.materialize(value, t)

    # -- carries and branch results --------------------------------------------------------------------
    # A scalar leaf is a mutable local (``T.alloc_var``); a tensor leaf is a buffer of its shape (a Slot). A new
    # loop carry may read the carries it replaces (``(c[1], c[0])``, ``c[::-1]``), so it goes through the slot's
    # scratch buffer first; a branch result never reads its own (fresh) buffer and is written directly.
    def leaves(self, value, t: T.Type) -> list:
        """The leaves of ``value``: the expression of each scalar leaf, the value of each tensor leaf."""
        if isinstance(t, (T.TupleType, T.RecordType)):
            return [x for v, it in zip(value.items, components(t)) for x in self.leaves(v, it)]
        return [value] if isinstance(t, T.TensorType) else [value.expr]

    def mutable(self, t: T.Type, init=None, scratch: bool = True) -> list:
        """One mutable local or Slot per leaf of ``t`` (initialised from ``init``'s leaves when given)."""
        types = T.leaf_types(t)
        names = []
        for lt in types:
            if isinstance(lt, T.TensorType):
                shape, dtype = self.shape(lt), self.tir(lt.dtype)
                names.append(Slot(Array(self.allocate(shape, dtype), shape),
                                  self.allocate(shape, dtype) if scratch else None))
                continue
            name = self.fresh("c")
            self.line(f"{name} = T.alloc_var({self.tir(lt.dtype)!r})")
            names.append(name)
        if init is not None:
            self.store(names, init, t, direct=True)  # a fresh slot: the value cannot read it
        return names

    def current(self, names: list, t: T.Type):
        """The present values of mutable locals ``names`` as an immutable value of type ``t`` (a tensor leaf is
        its slot's buffer, which changes only where the carry is stored)."""
        names = list(names)

        def build(t):
            if isinstance(t, (T.TupleType, T.RecordType)):
                return Aggregate(tuple(build(it) for it in components(t)))
            name = names.pop(0)
            return name.array if isinstance(name, Slot) else Scalar(self.assign(name))

        return build(t)

    def store(self, names: list, value, t: T.Type, direct: bool = False) -> None:
        """Assign ``value`` to the carries ``names`` (through the scratch buffers unless ``direct``)."""
        leaves = self.leaves(value, t)
        buffers = {n.array.name for n in names if isinstance(n, Slot)}
        copies = []
        for name, leaf in zip(names, leaves):
            if not isinstance(name, Slot):
                self.line(f"{name} = {leaf}")
            elif not (isinstance(leaf, Array) and leaf.name == name.array.name):
                if not direct and name.scratch is not None and \
                        not (isinstance(leaf, Array) and leaf.name not in buffers):
                    self._copy(Array(name.scratch, name.array.shape), leaf)
                    leaf = Array(name.scratch, name.array.shape)
                copies.append((name.array, leaf))
        for dest, leaf in copies:
            self._copy(dest, leaf)

    def _copy(self, dest: Array, value) -> None:
        with self.buffer_nest(dest.shape) as idx:
            self.line(f"{dest.name}[{', '.join(idx) or '0'}] = {self.elem(value, idx)}")


@attrs.frozen(slots=True)
class Slot:
    """The storage of a tensor-valued carry or branch result: its buffer and, for carries, a scratch buffer."""

    array: Array
    scratch: str | None
