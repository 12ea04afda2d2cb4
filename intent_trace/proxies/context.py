"""The tracing context: the stack of open regions, value scopes and source locations.

One :class:`Trace` exists while a kernel is traced. Surface code calls :func:`emit` to append a
node to the innermost open region; the context records which scope defined each value, so that
a value created inside a traced loop body and used after it is caught at the use, with both
lines in the message.

The stack of open traces is a context variable, not a module global: each thread (and each asyncio
task, which runs in a copy of its creator's context) traces on its own, so kernels traced
concurrently never see each other's values. Helpers are traced inline in their caller's context, so
they see the trace that called them. The stack is an immutable tuple, so a copied context never
shares a mutable list with the one it was copied from.
"""
from __future__ import annotations

import contextvars
import os
import sys

from ..errors import TraceError, TraceTypeError, TraceValueError
from ..graph.values import Node, Region, SourceLoc, Var

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL_CODE: dict = {}  # code object -> defined inside this package


class BrokenLoop:
    """Recorded when Python `break`/`return` leaves a traced `for` body early."""

    def __init__(self, loc):
        self.loc = loc


class Scope:
    """An open region being traced."""

    __slots__ = ("kind", "nodes", "params", "parent", "active", "opened_at", "point_deps", "ordered", "isolated_by")

    def __init__(self, kind: str, parent, opened_at, params=(), point=None, isolated_by=None):
        self.kind = kind
        self.nodes: list = []
        self.params = tuple(params)
        self.parent = parent
        self.active = True
        self.opened_at = opened_at
        # Values that depend on the point of an enclosing ``parallel`` region (for conflict checks).
        self.point_deps = parent.point_deps if parent is not None else None
        if point is not None:
            self.point_deps = {point}
        self.ordered = kind in ("for", "loop", "while_body")
        # The innermost pure-helper region (a combine, summarize, ...) this scope is part of: values
        # from outside it are runtime captures, which must be explicit operands (spec §7).
        self.isolated_by = isolated_by or (parent.isolated_by if parent is not None else None)

    def close(self, results=()) -> Region:
        self.active = False
        return Region(self.params, tuple(self.nodes), tuple(results))


class Trace:
    """State of one kernel trace."""

    def __init__(self, kernel_name: str, kernel_loc: SourceLoc | None = None):
        self.kernel_name = kernel_name
        self.kernel_loc = kernel_loc  # the kernel's `def` line (where its named extents are made)
        self.root = Scope("kernel", None, None)
        self.scope = self.root
        self.defined_in: dict = {}  # Var -> Scope
        self.helpers: list = []  # names of helpers being traced (innermost last)
        self.helpers_key: tuple = ()  # tuple(helpers), kept in step by push_helper/pop_helper
        self.helper_fns: list = []
        self.dim_vars: dict = {}  # Dim -> the index Var holding its value (kernel extents)
        self.extent_vars: set = set()  # those Vars: kernel-wide values, visible in every region
        self.value_dims: dict = {}  # index Var -> the Dim it gives when used as an extent (one per value)
        self.aggregate_parts: dict = {}  # tuple/record Var -> its component Vars (provenance of selections)
        self.written_views: set = set()  # view Vars with a traced write (Out read-before-write check)
        self.pending_error = None  # set when Python `break` leaves a traced loop body
        self._loc_cache: dict = {}

    # -- source locations ------------------------------------------------------------------
    def location(self, depth: int = 1) -> SourceLoc | None:
        f = sys._getframe(depth)
        internal = _INTERNAL_CODE
        while f is not None:
            code = f.f_code
            inside = internal.get(code)
            if inside is None:
                inside = internal[code] = code.co_filename.startswith(_PACKAGE_DIR)
            if not inside:
                break
            f = f.f_back
        if f is None:
            return None
        code = f.f_code
        key = (code, f.f_lineno, self.helpers_key)
        loc = self._loc_cache.get(key)
        if loc is None:
            loc = SourceLoc(code.co_filename, f.f_lineno, code.co_name, tuple(reversed(self.helpers)))
            self._loc_cache[key] = loc
        return loc

    def push_helper(self, helper) -> None:
        self.helpers.append(helper.name)
        self.helper_fns.append(helper)
        self.helpers_key = tuple(self.helpers)

    def pop_helper(self) -> None:
        self.helpers.pop()
        self.helper_fns.pop()
        self.helpers_key = tuple(self.helpers)

    # -- scopes ----------------------------------------------------------------------------
    def open(self, kind: str, params=(), point=None, isolated: str | None = None) -> Scope:
        scope = Scope(kind, self.scope, self.location(), params, point)
        if isolated is not None:
            scope.isolated_by = (scope, isolated)
        for p in scope.params:
            self.defined_in[p] = scope
        self.scope = scope
        return scope

    def close(self, scope: Scope, results=()) -> Region:
        if self.scope is not scope:
            raise TraceValueError("internal: regions closed out of order", where=self.where())
        for r in results:
            self.check_visible(r)
        self.scope = scope.parent
        return scope.close(results)

    def abandon(self, scope: Scope) -> None:
        """Drop an open scope (and any scopes opened within it) after an error."""
        while self.scope is not None and self.scope is not scope.parent:
            self.scope.active = False
            self.scope = self.scope.parent

    def define(self, var: Var, scope: Scope | None = None) -> Var:
        self.defined_in[var] = scope or self.scope
        return var

    def check_visible(self, x) -> None:
        if isinstance(x, Var):
            scope = self.defined_in.get(x)
            if scope is None:
                raise TraceValueError("a value from another kernel trace was used here", where=self.where())
            if not scope.active:
                what = {"for": "an ordered `for` loop body", "parallel": "a `parallel` loop body",
                        "loop": "an I.loop body", "while_body": "an I.while_ body", "while_cond": "an I.while_ condition",
                        "then": "an I.if_ branch", "else": "an I.if_ branch"}.get(scope.kind, "a closed region")
                hint = ("carry it out with I.loop(domain, init, body) (or I.while_)"
                        if scope.kind in ("for", "parallel", "loop", "while_body", "while_cond")
                        else "return it from both branches of I.if_")
                raise TraceValueError(
                    f"a value defined inside {what} (opened at {scope.opened_at}) is used outside it; {hint}",
                    where=self.where())

    # -- nodes -----------------------------------------------------------------------------
    def emit(self, op, inputs: tuple, attrs: tuple = (), types=None, regions: tuple = (),
             provenance=None, extent=None) -> tuple:
        """Append ``op(inputs; attrs)`` to the current region and return its result Vars.

        Without ``types`` the op's registry type rule computes them (memoised: types are values); an op that
        records its result type (the ``type`` attribute the backends read) gets the rule's result recorded.
        """
        scope = self.scope
        defined = self.defined_in
        key = [op, attrs]
        isolated = scope.isolated_by
        for x in inputs:
            if x.__class__ is Var:
                s = defined.get(x)
                if s is None or not s.active:
                    self.check_visible(x)
                if isolated is not None and s.isolated_by is not isolated and x not in self.extent_vars:
                    self._captured(x, isolated)
                key.append(x.type)
            else:
                key.append(x)  # Literals hash by value and type
        if types is None:
            key = tuple(key)
            types = _INFERRED.get(key)
            if types is None:
                types = self._infer(op, inputs, attrs)
                if len(_INFERRED) > 65536:
                    _INFERRED.clear()
                _INFERRED[key] = types
            if types and op.records_type and "type" not in {k for k, _ in attrs}:
                attrs = op.with_attr(attrs, "type", types[0])
        if len(types) == 1:
            outputs = (Var(types[0], provenance, extent),)
        else:
            outputs = tuple(Var(t) for t in types)
        for v in outputs:
            defined[v] = scope
        deps = scope.point_deps
        if deps is not None and any(x in deps for x in inputs if x.__class__ is Var):
            deps.update(outputs)
        scope.nodes.append(Node(op, inputs, attrs, outputs, regions, self.location(2)))
        if self.pending_error is not None:
            self.raise_pending()
        return outputs

    def raise_pending(self) -> None:
        """Raise the mistake recorded where Python could not be stopped (a `break` out of a traced loop body)."""
        pending = self.pending_error
        if isinstance(pending, BrokenLoop):
            self.pending_error = None
            raise TraceValueError("Python `break` or `return` left a traced loop body early (a Python `for` over a "
                                  "domain is traced once, not run per point); use I.break_(when=pred) to stop an "
                                  "ordered loop, or I.loop/I.while_ for a loop with a result", where=repr(pending.loc))

    def _captured(self, x: Var, isolated) -> None:
        scope, who = isolated
        s = self.defined_in.get(x)
        while s is not None and s is not scope:
            s = s.parent
        if s is None:
            from ..types import BufferType, ViewType

            if isinstance(x.type, (ViewType, BufferType)):
                raise TraceValueError(f"{who} must be pure, but it accesses the view `{x.hint or 'buffer'}`; pure "
                                      f"helpers may not read or write views: read the values outside and pass them "
                                      f"as operands", where=self.where())
            raise TraceValueError(f"{who} uses a runtime value from outside it; a pure helper's runtime captures must "
                                  f"be explicit operands (pass it in combine_operands=... / operands=...)",
                                  where=self.where())

    def _infer(self, op, inputs, attrs) -> tuple:
        try:
            return op.infer(op, inputs, dict(attrs))
        except TraceError as e:
            if e.where is None:
                raise type(e)(e.bare_message, where=self.where()) from None
            raise

    def value_dim(self, var: Var):
        """The extent a runtime index value stands for: one Dim per value (and per structurally equal
        expression in scope, :mod:`.extents`), so two shapes built from equal values have provably equal
        extents."""
        from .extents import value_dim

        return value_dim(self, var)

    def where(self) -> str:
        loc = self.location()
        if loc is None:
            return f"in kernel {self.kernel_name}"
        return f"{loc.file}:{loc.line}" + (f" (in {' <- '.join(loc.helpers)})" if loc.helpers else "") + \
            f", in {loc.function}"


_current: contextvars.ContextVar = contextvars.ContextVar("intent_trace_traces", default=())
# Type-rule results by (op, attrs, operand kinds and types): types are values, so rules are pure.
_INFERRED: dict = {}


def current() -> Trace:
    traces = _current.get()
    if not traces:
        raise TraceTypeError("intent_trace operations can only be used while tracing a kernel "
                         "(inside an @intent.kernel function or an @intent.fn helper it calls)")
    return traces[-1]


def tracing() -> bool:
    return bool(_current.get())


class active_trace:
    """Context manager installing a Trace as the current one (in this thread / task only)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._token = None

    def __enter__(self) -> Trace:
        self._token = _current.set(_current.get() + (self.trace,))
        return self.trace

    def __exit__(self, *exc) -> None:
        _current.reset(self._token)


def fail(message: str, kind: str = "value"):
    """Raise a TraceError located at the user's current line."""
    cls = TraceTypeError if kind == "type" else TraceValueError if kind == "value" else TraceError
    traces = _current.get()
    raise cls(message, where=traces[-1].where() if traces else None)


