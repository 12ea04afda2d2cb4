"""``@intent.kernel`` and ``@intent.fn``: definitions, tracing and helper calls (spec §1, §2)."""
from __future__ import annotations

import functools
import inspect
import os
import threading
import types as pytypes

import numpy as np

from . import types as T
from .errors import TraceTypeError, TraceValueError
from .graph.values import KernelGraph, Param, SourceLoc, Var
from .params import ConstexprSpec, Enum, ViewSpec
from .proxies import context
from . import specialize
from .targets import DEFAULT_TARGET
from .proxies.values import Proxy, ScalarProxy
from .proxies.view import ViewProxy


# Re-check every traced graph against the registry (the test suite turns this on).
_VALIDATE = os.environ.get("INTENT_TRACE_VALIDATE", "") not in ("", "0")


def closure_values(fn) -> dict:
    """The values a function closes over, by name (cells not yet bound are left out)."""
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            pass
    return values


def _annotations(fn) -> dict:
    """Parameter annotations, evaluated when they are strings (``from __future__ import annotations``)
    in the function's globals plus the values it closes over."""
    try:
        return inspect.get_annotations(fn, eval_str=True, locals=closure_values(fn))
    except Exception as e:  # an annotation that does not evaluate
        raise TypeError(f"kernel {fn.__name__}: its annotations do not evaluate: {e}. With `from __future__ import "
                        f"annotations` they are strings evaluated in the module's globals: define the dtypes and "
                        f"shapes they name at module level") from e


class Kernel:
    """A logical kernel. ``trace(**constexprs)`` gives its KIR; calling it runs it on the default target."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError("@intent.kernel decorates a function")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.specs = self._parse_params()
        self._traces: dict = {}
        self._compiled: dict = {}
        # Guards the two caches: threads tracing or compiling one key concurrently get one graph and one
        # executable (re-entrant: compiling traces). Lookups of a filled key take no lock.
        self._lock = threading.RLock()

    def _parse_params(self) -> dict:
        ann = _annotations(self.fn)
        specs = {}
        for name, p in self.signature.parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"kernel {self.name}: *{name} parameters are not supported; list each parameter")
            if name not in ann:
                raise TypeError(f"kernel {self.name}: parameter {name} needs an annotation "
                                f"(I.In[...], I.Out[...], I.InOut[...], a dtype such as I.f32, or I.Constexpr[...])")
            spec = ann[name]
            if isinstance(spec, type) and issubclass(spec, Enum):
                raise TypeError(f"kernel {self.name}: parameter {name}: enum values are constexpr only; "
                                f"write I.Constexpr[{spec.__name__}]")
            if not isinstance(spec, (ViewSpec, ConstexprSpec, T.DType)):
                raise TypeError(f"kernel {self.name}: parameter {name} has annotation {spec!r}; expected I.In[...], "
                                f"I.Out[...], I.InOut[...], a dtype such as I.f32, or I.Constexpr[...]")
            if isinstance(spec, T.DType) and spec.kind == "mx":
                raise TypeError(f"kernel {self.name}: parameter {name}: {spec} is not a runtime scalar dtype")
            if not isinstance(spec, ConstexprSpec) and p.default is not p.empty:
                raise TypeError(f"kernel {self.name}: runtime parameter {name} cannot have a default")
            specs[name] = spec
        return specs

    @property
    def runtime_params(self) -> list:
        return [n for n, s in self.specs.items() if not isinstance(s, ConstexprSpec)]

    @property
    def constexpr_params(self) -> list:
        return [n for n, s in self.specs.items() if isinstance(s, ConstexprSpec)]

    def check_constexprs(self, given: dict) -> None:
        """Unknown names and values of the wrong type are TypeErrors naming them."""
        unknown = set(given) - set(self.constexpr_params)
        if unknown:
            raise TypeError(f"kernel {self.name} has no constexpr parameter {', '.join(sorted(unknown))}; "
                            f"constexprs: {', '.join(self.constexpr_params) or 'none'}")
        for name, value in given.items():
            self.specs[name].check(name, value)

    def missing_constexprs(self, given: dict) -> list:
        """The constexprs that neither ``given`` nor a default gives a value."""
        return [n for n in self.constexpr_params
                if n not in given and self.signature.parameters[n].default is inspect.Parameter.empty]

    def bind_constexprs(self, given: dict) -> tuple:
        self.check_constexprs(given)
        for name in self.missing_constexprs(given):
            raise TypeError(f"kernel {self.name}: constexpr {name} needs a value (pass {name}=... to trace, to "
                            f"compile or to the call)")
        return tuple((name, given[name] if name in given else self.signature.parameters[name].default)
                     for name in self.constexpr_params)

    def trace(self, **constexprs) -> KernelGraph:
        key = self.bind_constexprs(constexprs)
        graph = self._traces.get(key)
        if graph is None:
            with self._lock:
                graph = self._traces.get(key)
                if graph is None:
                    graph = _trace_kernel(self, key)
                    self._traces[key] = graph
        return graph

    def build(self, target: str, **options):
        """Trace with the constexprs in ``options`` and build for ``target`` (``intent.compile``); the other
        options go to the target (``checks=False`` on ``cpu``). A constexpr with no value yet makes an executable
        that takes it as a keyword at each call (:mod:`.specialize`)."""
        constexprs = {k: v for k, v in options.items() if k in self.constexpr_params}
        rest = {k: v for k, v in options.items() if k not in constexprs}
        return specialize.compile_or_defer(self, target, constexprs, rest)

    def __call__(self, *args, target: str | None = None, **constexprs):
        """Run on ``target`` (the default target) with the keyword constexprs: that specialisation, built once."""
        if context.tracing():
            raise TraceTypeError(f"kernel {self.name} launched inside a traced kernel; call an @intent.fn helper "
                             f"instead (a kernel never launches another)", where=context.current().where())
        return specialize.specialization(self, target or DEFAULT_TARGET, constexprs, {})(*args)

    def __repr__(self) -> str:
        return f"<intent.kernel {self.name}>"


def _trace_kernel(kernel: Kernel, constexprs: tuple) -> KernelGraph:
    code = kernel.fn.__code__
    loc = SourceLoc(code.co_filename, code.co_firstlineno, kernel.name)
    trace = context.Trace(kernel.name, loc)
    params, extents, args = [], [], dict(constexprs)
    dims: dict = {}
    for name, spec in kernel.specs.items():
        if isinstance(spec, ConstexprSpec):
            continue
        if isinstance(spec, ViewSpec):
            shape = []
            for e in spec.shape:
                if isinstance(e, str):
                    if e in kernel.specs:
                        raise TraceValueError(f"kernel {kernel.name}: extent name {e} is also a parameter name", where=repr(loc))
                    if e not in dims:
                        dims[e] = T.Dim(e)
                        ev = Var(T.ScalarType(T.index), extent=dims[e], hint=e)
                        trace.define(ev)
                        trace.dim_vars[dims[e]] = ev
                        trace.extent_vars.add(ev)
                        extents.append(ev)
                    shape.append(dims[e])
                else:
                    shape.append(e)
            var = trace.define(Var(T.ViewType(spec.access, spec.dtype, tuple(shape)), hint=name))
            params.append(Param(name, "view", var))
            args[name] = ViewProxy(var, name)
        else:
            var = trace.define(Var(T.ScalarType(spec), hint=name))
            params.append(Param(name, "scalar", var))
            args[name] = ScalarProxy(var)
    with context.active_trace(trace):
        result = kernel.fn(**args)
        trace.raise_pending()
        if result is not None:
            raise TraceTypeError(f"kernel {kernel.name} returned a value; kernels return nothing and write their "
                                 f"results into Out/InOut views", where=repr(loc))
    if trace.scope is not trace.root:
        raise TraceValueError(f"kernel {kernel.name}: a traced region was left open", where=repr(loc))
    body = trace.root.close()
    graph = KernelGraph(kernel.name, tuple(params), tuple(extents), body, constexprs, loc)
    if _VALIDATE:
        from .graph.validate import validate  # only when asked for: a plain import does not load the checker

        validate(graph)
    return graph


_IMMUTABLE = (int, float, bool, str, bytes, complex, type(None), T.DType, Enum, frozenset, range, pytypes.ModuleType,
              pytypes.FunctionType, pytypes.BuiltinFunctionType, type, np.generic, type(Ellipsis), slice,
              pytypes.MethodType)


def _frozen_instance(value) -> bool:
    """Instances of frozen attrs classes or frozen dataclasses (language objects such as I.In specs)."""
    cls = type(value)
    attrs_fields = getattr(cls, "__attrs_attrs__", None)
    if attrs_fields is not None:
        return cls.__setattr__ is not object.__setattr__
    params = getattr(cls, "__dataclass_params__", None)
    return bool(params is not None and params.frozen)


def _check_capture(helper: str, name: str, value, trace) -> None:
    if isinstance(value, Proxy):
        isolated = trace.scope.isolated_by
        if isolated is not None and isinstance(getattr(value._var, "type", None), (T.ViewType, T.BufferType)):
            raise TraceValueError(f"{isolated[1]} must be pure, but it reads the view `{name}` it closes over; pure "
                                  f"helpers may not read or write views: read the values outside and pass them as "
                                  f"operands", where=trace.where())
        if isolated is not None:
            raise TraceValueError(f"{isolated[1]} captures the runtime value `{name}` from an enclosing scope; a pure "
                                  f"helper's runtime captures must be explicit operands: pass `{name}` in "
                                  f"combine_operands=... (operands=... for region operations)", where=trace.where())
        raise TraceValueError(f"helper {helper} captures the runtime value `{name}` from an enclosing scope; runtime "
                              f"values must be explicit parameters: add `{name}` to its parameters and pass it",
                              where=trace.where())
    if isinstance(value, tuple):
        for v in value:
            _check_capture(helper, name, v, trace)
        return
    if isinstance(value, (Helper, Kernel, functools.partial)) or isinstance(value, _IMMUTABLE) or \
            _frozen_instance(value):
        return
    raise TraceValueError(f"helper {helper} captures `{name}` ({type(value).__name__}), which is mutable; only "
                          f"immutable constexpr values may be captured (pass it as a parameter or make it a tuple)",
                          where=trace.where())


def _global_names(code) -> set:
    """Names a code object (and the functions, lambdas and comprehensions nested in it) loads globally."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _global_names(const)
    return names


class Helper:
    """A typed helper traced inline at each call; binding follows its Python signature."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError("@intent.fn decorates a function")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "helper")
        self.signature = inspect.signature(fn)
        self._global_names = None

    def __call__(self, *args, **kwargs):
        if not context.tracing():
            raise TraceTypeError(f"helper {self.name} can only be called while tracing a kernel")
        trace = context.current()
        if self in trace.helper_fns:
            chain = " -> ".join(h.name for h in trace.helper_fns[trace.helper_fns.index(self):])
            raise TraceValueError(f"recursive helper call ({chain} -> {self.name}); helpers cannot recurse", where=trace.where())
        code = getattr(self.fn, "__code__", None)
        if code is not None:
            self._check_captures(code, trace)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TraceTypeError(f"call of helper {self.name}: {e}", where=trace.where()) from None
        bound.apply_defaults()
        trace.push_helper(self)
        try:
            return self.fn(*bound.args, **bound.kwargs)
        finally:
            trace.pop_helper()

    def _check_captures(self, code, trace) -> None:
        """Lexical captures (closure cells and module globals the body names) must be immutable constexprs."""
        for name, value in closure_values(self.fn).items():
            _check_capture(self.name, name, value, trace)
        if self._global_names is None:
            self._global_names = tuple(sorted(_global_names(code)))
        module = self.fn.__globals__
        for name in self._global_names:
            if name in module:
                _check_capture(self.name, name, module[name], trace)

    def __repr__(self) -> str:
        return f"<intent.fn {self.name}>"


def kernel(fn) -> Kernel:
    return Kernel(fn)


def fn(f) -> Helper:
    return f if isinstance(f, Helper) else Helper(f)
