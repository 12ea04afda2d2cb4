"""Storage and run-time checks for the TileLang emitter: local buffers of any shape, and the error channel.

Storage. A tensor that must be held (a snapshot, a tensor loop carry or branch result, a scan's output, a
logical buffer, a unique-store mask) gets a buffer from :meth:`StorageMixin.allocate`. A small static shape is a
stack buffer (``T.alloc_local``); any other shape, whose size is known only at run time, lives on the heap:
the C target rejects stack allocations of dynamic size, and the size may depend on data (a ragged member
count), so it cannot in general be a workspace the host sizes before the call. The target value supplies the
allocation helpers (``workspace_source``: ``itw_alloc``/``itw_free``, :mod:`.c`). A heap buffer is freed where
the block that allocated it ends, before a ``break``/``continue`` that leaves that block, and before an
early return; an allocation inside a loop body is therefore one per iteration, like cpu's ``np.empty``.

Host workspaces. A GPU kernel cannot allocate (Metal) or should not (CUDA's device heap is small and
slow), so on a target with ``host_workspaces`` a buffer that is not a small static one is a hidden buffer
parameter ``W0, W1, ...`` that the executable allocates before the call, one per allocation site. Each axis
must be sized by something the host knows (:attr:`StorageMixin.host_sizes`): a static size, a kernel extent
(``d0, d1, ...``), a scalar parameter (clamped at 0), or a static bound of a size computed in the kernel (a
region's slice: the buffer is then larger than the value, which is indexed in it as it is); any other size
depends on data, and is a LoweringError naming the op and target. One workspace per site is the heap path's
meaning too: the programs are serial, and a site's buffer dies where its block ends, before the site
runs again.

Checks. The tests require the run-time errors generic and cpu raise (out-of-range coordinates, non-injective
unique stores, histogram values outside the bins, negative extents, ...), so a TileLang target checks what
cpu checks (``checks=False`` drops them, as on cpu) when its target value says how a kernel leaves early
(``early_exit``; a target without it does not check, T9). A failed check records an error code and up to
three int64 values in the hidden parameter ``E`` (four int64) and leaves the kernel at once; the executable
raises the site's exception after the call and commits no output (every output is staged).

Allocation limits (:mod:`intent_trace.limits`). A heap buffer's element count is computed without overflow and
compared with the call's limit (the hidden scalar ``L``) before ``malloc``; one that cannot fit is limits.py's
ValueError naming it, its shape and its size (:class:`AllocationSite`). Host workspaces are checked on the host
(:meth:`Workspace.sizes`), as are the executable's staging copies.

The prologue's checks (:mod:`intent_trace.schedule.prologue`: extent equalities over the bound extents and scalars)
are made by the executable on the host before any launch, so no program records them (:meth:`StorageMixin.checking`
is false while their nodes are emitted): the node's value is computed as usual, its check is not written. A grid
program then has no error site from them, and every call checks them once, before anything runs.

A condition that leaves a block is evaluated once, into a local (:meth:`StorageMixin.flag`). TileLang's
``IfStmtBinding`` distributes an ``if`` over the statements of its body and re-evaluates the condition before
each one when the body writes none of the buffers it reads; a ``free`` is an opaque call, not a write, so
``if mask[j] != 0: E[0] = 3; free(h); return`` became three ``if``s, two of them reading the freed mask (a read
after free, then a double free). A local is never freed, so re-reading it is harmless.
"""
from __future__ import annotations

import math
import re

import attrs

from ...codegen.checks import Check
from ...graph.lowering import ErrorSite
from ...limits import allocation_error, check_allocation
from ...schedule.prologue import prologue
from .extern import address

STACK_LIMIT = 1024  # elements: static buffers up to this size live on the stack
ERROR_PARAM = "E"  # the hidden int64[4] error record: code (1-based site number, 0 = none), then three values
LIMIT_PARAM = "L"  # the hidden int64 scalar: the bytes one allocation may take (limits.allocation_limit)
_KERNEL_EXTENT = re.compile(r"d\d+")  # the emitter's names of the graph's extents (target.generate_program)
SCALAR_PARAM = re.compile(r"p(\d+)")  # the emitter's names of the graph's parameters


def checks_on(target, checks: bool) -> bool:
    """Whether programs for ``target`` check at run time: asked to, and the target says how a kernel leaves early
    (``early_exit``; a target without it does not check, T9)."""
    return bool(checks) and target.early_exit is not None


@attrs.frozen(slots=True)
class Workspace:
    """A hidden buffer parameter the executable allocates, sized per axis by a static size ("16"), a graph
    extent ("d3": graph.extents[3]), a scalar parameter ("p2": max(0, the call's argument 2)), or either of those
    divided, rounded up, plus a constant ("d0/2048+1": ceil(extents[0] / 2048) + 1, a grid's tiles and a ticket).

    ``zeroed``: every element starts at zero, made so per call with the target's zero fill (``torch.zeros``: a
    memset on CUDA; a zeroed host allocation on the C target). A grid's atomic ticket and its tiles' status flags
    need it (:mod:`.grid_sync`); per call, because launches on several streams may overlap, so no program may
    count on a previous call having left its workspace at zero."""

    name: str
    shape: tuple
    dtype: str  # TIR dtype
    what: str = ""  # " for op `reduce` at file.py:12": where the program needs it, for error messages
    zeroed: bool = False

    @property
    def sized_by_arguments(self) -> bool:
        """Whether a scalar argument sizes an axis ("p2", "p2/16+1"): then its shape is known per call, not per
        extents."""
        return any(s.startswith("p") for s in self.shape)

    def dims(self) -> tuple:
        """The parameter's shape: an axis sized by a scalar or a derived size is a dynamic variable of its own,
        bound by the buffer."""
        return tuple(f"{self.name}_{k}" if SCALAR_PARAM.fullmatch(s) or _DERIVED.fullmatch(s) else s
                     for k, s in enumerate(self.shape))

    def dynamic_lines(self) -> list:
        return [f"{d} = T.dynamic({d!r}, 'int64')" for d, s in zip(self.dims(), self.shape) if d != s]

    def param(self) -> str:
        return f"{self.name}: T.Tensor(({', '.join(self.dims())},), {self.dtype!r})"

    def sizes(self, extents: dict, args) -> tuple:
        """The shape for one call, given {graph extent index: size} and the call's arguments in parameter order;
        a ValueError (limits.py) when it cannot fit."""
        def base(s):
            param = SCALAR_PARAM.fullmatch(s)
            return max(0, int(args[int(param[1])])) if param else int(extents[int(s[1:])])

        def size(s):
            if s.isdigit():
                return int(s)
            derived = _DERIVED.fullmatch(s)
            if derived:
                return -(-base(derived[1]) // int(derived[2])) + int(derived[3] or 0)
            return base(s)
        shape = tuple(size(s) for s in self.shape)
        check_allocation(f"workspace {self.name} of shape {shape}{self.what}", shape, _itemsize(self.dtype))
        return shape


def host_dtype(dtype: str) -> str:
    """A workspace's TIR dtype: bool travels as bytes (TileLang's host wrappers mistype bool buffers)."""
    return "uint8" if dtype == "bool" else dtype


_DERIVED = re.compile(r"([dp]\d+)/(\d+)(?:\+(\d+))?")  # "d0/2048+1": ceil(extent 0 / 2048) + 1


class StorageMixin:
    """Mixed into the emitter: ``self.line``/``self.fresh``/``self.depth`` come from its SourceWriter."""

    def init_storage(self, target, checks: bool, grid_planned: bool = False) -> None:
        # A target checks when it says how to leave its kernel early (``early_exit``: ``return 0;`` on the C target).
        self.exit_statement = target.early_exit
        self.checks = checks_on(target, checks)
        self.error_sites: list = []
        self.heap: list = []  # (depth of the allocating block, handle) of live heap buffers, innermost last
        self.host_workspaces = target.host_workspaces
        self.in_grid = False  # emitting the body of a parallel loop mapped onto threads
        self.grid_planned = grid_planned  # the launch is a grid of threads (cuda_kernels.FlatNest/ParallelGrid)
        self.workspaces: list = []  # Workspace parameters, in order
        self.uses_limit = False  # a heap allocation compares its size with the hidden LIMIT_PARAM
        # what the host sizes a workspace axis by, for extents the kernel computes: {local name: "pK" or a bound}
        self.host_sizes: dict = {}

    # -- storage ---------------------------------------------------------------------------------------------
    def _workspace_helper(self, name: str) -> str:
        if name not in self.helpers:
            source_of = self.target.workspace_source
            source = source_of(name) if source_of is not None else None
            if source is None:
                raise self.reject("this needs a buffer whose size is known only at run time, which this target "
                                  "cannot allocate yet")
            self.helpers[name] = source
        return name

    def allocate(self, shape, dtype: str, zero: bool = False) -> str:
        """A buffer of ``shape`` (extent expressions; rank 0 is one element) holding TIR ``dtype`` values, live
        until the enclosing block ends; zero-filled when ``zero``."""
        dims = tuple(shape) or ("1",)
        name = self.fresh("a")
        static = all(s.isdigit() for s in dims)
        if static and math.prod(int(s) for s in dims) <= STACK_LIMIT:
            self.line(f"{name} = T.alloc_local(({', '.join(dims)},), {dtype!r})")
            self.zero_fill(name, dims, dtype, zero)
            return name
        if self.host_workspaces:
            return self._host_workspace(dims, dtype, zero)
        alloc = self._workspace_helper("itw_calloc" if zero else "itw_alloc")
        self._workspace_helper("itw_free")
        count = self._checked_count(dims, _itemsize(dtype))
        size = f"T.int64({_itemsize(dtype)})"
        handle = self.assign(f"T.call_extern('handle', {alloc!r}, {count}, {size})", "h")
        self.heap.append((self.depth, handle))
        null = self._workspace_helper("itw_null")
        self.check(f"T.call_extern('bool', {null!r}, {handle})", MemoryError,
                   "a local buffer of {0} elements of " + str(_itemsize(dtype)) + " bytes could not be allocated",
                   count)
        self.line(f"{name} = T.make_tensor_from_addr({handle}, ({', '.join(dims)},), {dtype!r})")
        return name

    def _checked_count(self, dims: tuple, itemsize: int) -> str:
        """The element count of a heap buffer of extents ``dims``, computed without overflow (``itw_mul``: -1 when
        the product does not fit in int64), after a check that refuses it (limits.py's ValueError naming the
        shape and size, through the error record) when it is more than the call's allocation limit allows."""
        count = self.assign(self._product(dims), "n")
        if self.checks:
            self.uses_limit = True
            dynamic = [s for s in dims if not s.isdigit()]
            # up to three values travel in the record: the run-time extents (the leading ones as one product)
            recorded = dynamic if len(dynamic) <= 3 else [self._product(dynamic[:-2]), *dynamic[-2:]]
            shape = tuple(int(s) if s.isdigit() else None for s in dims) if len(dynamic) <= 3 else None
            static = math.prod(int(s) for s in dims if s.isdigit())
            site = AllocationSite(f"a local buffer{self._for_op()}", shape, static, itemsize, len(recorded),
                                  self._note())
            bad = f"{count} < T.int64(0) or {count} > T.floordiv({LIMIT_PARAM}, T.int64({itemsize}))"
            with self.block(f"if {self.flag(bad)}:"):
                self.fail_at(site, *recorded)
        return count

    def _product(self, dims) -> str:
        """The int64 product of extents ``dims``, -1 when it overflows (``itw_mul``)."""
        self._workspace_helper("itw_mul")
        out = "T.int64(1)"
        for s in dims:
            out = f"T.call_extern('int64', 'itw_mul', {out}, T.Cast('int64', {s}))"
        return out

    def _for_op(self) -> str:
        node = self.node
        if node is None:
            return ""
        return f" for op `{node.op.name}`" + (f" at {node.loc!r}" if node.loc is not None else "")

    def _note(self) -> str:
        node = self.node
        return f"in op `{node.op.name}` at {node.loc!r}" if node is not None and node.loc is not None else ""

    def sized_by(self, name: str, value: str) -> None:
        """Note that the extent ``name`` is max(0, ``value``): when ``value`` is a scalar parameter, the host can
        size a workspace axis by it."""
        if SCALAR_PARAM.fullmatch(value):
            self.host_sizes[name] = value

    def _host_workspace(self, dims: tuple, dtype: str, zero: bool) -> str:
        if self.grid_planned:  # one buffer for all threads: the pre-pass (program.plan_launch) keeps these serial
            raise self.reject("internal: a program on a grid of threads needs a workspace (the launch plan is wrong)")
        sizes = self.host_shape(dims)
        if sizes is None:
            raise self.reject("this needs a buffer whose size depends on data computed in the kernel; this target's "
                              "kernels cannot allocate memory and the host cannot size it before the call")
        space = Workspace(f"W{len(self.workspaces)}", sizes, host_dtype(dtype), self._for_op())
        name = space.name
        if dtype == "bool":
            name = self.fresh("wb")
            self.line(f"{name} = T.make_tensor_from_addr(T.access_ptr({space.name}[{', '.join('0' * len(dims))}], "
                      f"'rw'), ({', '.join(dims)},), 'bool')")
        self.workspaces.append(space)
        self.zero_fill(name, dims, dtype, zero)
        return name

    def host_shape(self, dims: tuple) -> tuple | None:
        """How the host sizes a buffer of extents ``dims`` (a static size, a kernel extent, or the bound of a size
        computed in the kernel: :attr:`host_sizes`), or None when an axis depends on data."""
        sizes = tuple(s if s.isdigit() or _KERNEL_EXTENT.fullmatch(s) else self.host_sizes.get(s) for s in dims)
        return None if None in sizes else sizes

    def zero_fill(self, name: str, dims: tuple, dtype: str, zero: bool) -> None:
        if zero:
            with self.buffer_nest(dims) as idx:
                self.line(f"{name}[{', '.join(idx)}] = T.Cast({dtype!r}, 0)")

    def free_line(self, handle: str) -> str:
        return f"T.evaluate(T.call_extern('int32', 'itw_free', {handle}))"

    def release(self, depth: int) -> None:
        """Free the heap buffers allocated at ``depth`` or deeper (the block at ``depth`` is ending)."""
        while self.heap and self.heap[-1][0] >= depth:
            self.line(self.free_line(self.heap.pop()[1]))

    def free_from(self, depth: int) -> None:
        """Free (without forgetting them) the heap buffers allocated at ``depth`` or deeper: before a jump out."""
        for d, handle in reversed(self.heap):
            if d >= depth:
                self.line(self.free_line(handle))

    # -- the error channel -----------------------------------------------------------------------------------
    @property
    def hoisted(self) -> frozenset:
        """The ids of the nodes whose checks the host makes before any launch (the graph's prologue checks), when
        this program checks at all."""
        found = self.__dict__.get("_hoisted")
        if found is None:
            checks = prologue(self.graph).checks if self.checks else ()
            found = self.__dict__["_hoisted"] = frozenset(id(n) for n in checks)
        return found

    def checking(self) -> bool:
        """Whether a check made here is written: the program checks, and the node being emitted is not one the host
        checks before the launch (:attr:`hoisted`)."""
        return self.checks and (self.node is None or id(self.node) not in self.hoisted)

    def fail(self, what, *rest: str, **fields) -> None:
        """Record a run-time error here and leave the kernel. ``what`` is the failed check
        (:class:`~intent_trace.codegen.checks.Check`), ``rest`` its operands (int64 expressions) and ``fields`` its
        static and text fields; the executable raises the check's exception with its message. User text (a view's
        name, a buffer's label holding its file name) is always a text field, never part of the template
        (ErrorSite). A no-op without checks.

        The older spelling ``fail(exception, message, *values, **texts)`` (a template written at the call) is kept
        for the rules not yet converted to checks-as-data."""
        if not self.checking():
            return
        if isinstance(what, Check):
            self.fail_at(what.site(self._note(), **fields), *rest)
        else:
            self.fail_at(ErrorSite(what, rest[0], self._note(), **fields), *rest[1:])

    def fail_at(self, site: ErrorSite, *values: str) -> None:
        """``fail`` with the error site given."""
        if not self.checking():
            return
        self.error_sites.append(site)
        code = f"T.int64({len(self.error_sites)})"
        # Threads may fail at once (a grid's iterations; on a target where two threads' identical stores race, every
        # thread of a grid checking its prologue): the first to claim the record writes it (target's itc_claim).
        lanes = self.target.lanes
        if self.in_grid or (self.grid_planned and lanes is not None and not lanes.repeat_writes):
            self.helpers.setdefault("itc_claim", self.target.claim_source())
            claim = f"T.call_extern('bool', 'itc_claim', {address(ERROR_PARAM, ['0'])}, {code})"
            with self.block(f"if {self.flag(claim)}:"):
                self._record(values)
        else:
            self.line(f"{ERROR_PARAM}[0] = {code}")
            self._record(values)
        self.free_from(0)
        self.line(self.exit_statement)

    def _record(self, values) -> None:
        for k, v in enumerate(values[:3]):
            self.line(f"{ERROR_PARAM}[{k + 1}] = T.Cast('int64', {v})")

    def check(self, bad: str, what, *rest: str, **fields) -> None:
        """``fail(what, *rest, **fields)`` when the TIR condition ``bad`` holds."""
        if not self.checking():
            return
        with self.block(f"if {self.flag(bad)}:"):
            self.fail(what, *rest, **fields)

    def flag(self, condition: str) -> str:
        """A local holding ``condition`` evaluated once here: the condition of a block that frees, writes or
        leaves (TileLang may re-evaluate an ``if``'s condition before each statement of its body)."""
        name = self.fresh("b")
        self.line(f"{name} = T.alloc_var('bool')")
        self.line(f"{name} = {condition}")
        return name


class AllocationSite(ErrorSite):
    """The error site of a heap buffer too large for the call's allocation limit (or whose element count does not
    fit in int64): its exception is limits.py's ValueError naming the buffer, its shape and its size, computed
    exactly here from the run-time extents the kernel recorded."""

    __slots__ = ("shape", "static", "itemsize", "recorded")

    def __init__(self, what: str, shape: tuple | None, static: int, itemsize: int, recorded: int, note: str = ""):
        super().__init__(ValueError, what, note)
        self.recorded = recorded  # how many of the record's values are this site's
        self.shape = shape  # static extents, None where the kernel records one; None: more than three recorded
        self.static = static  # the product of the static extents
        self.itemsize = itemsize

    def error(self, values) -> Exception:
        values = [int(v) for v in values[:self.recorded]]
        what = self.message
        if self.shape is not None:
            it = iter(values)
            what += f" of shape {tuple(n if n is not None else next(it) for n in self.shape)}"
        if any(v < 0 for v in values):  # a product of the leading extents overflowed
            error = ValueError(f"{what} needs more than {2 ** 63 - 1} elements of {self.itemsize} bytes, more "
                               f"than one allocation may take")
        else:
            error = allocation_error(what, self.static * math.prod(values), self.itemsize)
        if self.note:
            error.add_note(self.note)
        return error


_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "float32": 4,
             "int64": 8, "uint64": 8, "float64": 8}


def _itemsize(dtype: str) -> int:
    return _ITEMSIZE[dtype]
