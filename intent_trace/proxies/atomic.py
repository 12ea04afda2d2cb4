"""Atomic operations on view elements (spec §16, numerics T9).

An atomic takes an *element reference* written as indexing, ``I.atomic.add(counts[v[i]], 1,
order="relaxed")``. Indexing a view emits a ``read`` node; the atomic takes that node back out of
the current region (it must be the node that produced the reference and nothing may have used its
value) and reuses its view, index operands and ``index`` attribute as the atomic's address, so no
plain load is left behind.

- ``load`` (orders relaxed, acquire) and ``store`` (relaxed, release) act on integer and f32 views;
- the read-modify-writes ``exchange``, ``add``, ``max``, ``min``, ``and_``, ``or_``, ``xor`` (orders
  relaxed, acquire, release, acq_rel) act on integer views, and ``add``/``max``/``min`` also on f32
  views (max/min are IEEE maximum/minimum, as ``I.maximum``); each returns the element's old value;
- ``compare_exchange(address, expected, desired)`` (same orders; integer views) returns a record
  ``{old_value, success}``; its failure order is derived from the success order
  (relaxed->relaxed, acquire->acquire, release->relaxed, acq_rel->acquire) and recorded in the node.

Values take the view's dtype (Python numbers become literals of it). Atomics have no ``scope=``:
the provider chooses the physical scope. Several points of a ``parallel`` body may hit the same
element through atomics: they are never write conflicts.
"""
from __future__ import annotations

from .. import types as T
from ..graph import ops
from ..graph.type_rules_structured import CAS_FIELDS
from ..graph.values import Var
from .build import is_py_number, make_literal
from .context import current, fail
from .aggregates import RecordProxy
from .values import Proxy, ScalarProxy, TensorProxy, ValueProxy, wrap

__all__ = ["load", "store", "add", "exchange", "max", "min", "and_", "or_", "xor", "compare_exchange"]

_RW_ORDERS = ("relaxed", "acquire", "release", "acq_rel")
ORDERS = {"load": ("relaxed", "acquire"), "store": ("relaxed", "release"), "rmw": _RW_ORDERS, "cas": _RW_ORDERS}
FAILURE_ORDER = {"relaxed": "relaxed", "acquire": "acquire", "release": "relaxed", "acq_rel": "acquire"}
FLOAT_KINDS = ("add", "max", "min")  # the rmw kinds that f32 views also have (T9)
RECORD_FIELDS = CAS_FIELDS  # the registry names the fields (graph/type_rules.py)


def _surface(kind: str) -> str:
    return {"and": "and_", "or": "or_"}.get(kind, kind)


def _check_keywords(fn: str, extra: dict) -> None:
    if not extra:
        return
    if "scope" in extra:
        fail(f"{fn} takes no scope= argument: atomics have no author-visible scope (spec §16); the logical "
             f"allocation, its index relation and the kernel invocation decide which executions share an atomic "
             f"object, and the provider chooses the physical scope", "type")
    fail(f"{fn} got unexpected keyword argument(s) {', '.join(sorted(extra))}; it takes order=", "type")


def _check_order(fn: str, family: str, order) -> str:
    allowed = ORDERS[family]
    words = {"load": "atomic loads", "store": "atomic stores", "rmw": "atomic read-modify-writes",
             "cas": "atomic compare-exchanges"}[family]
    if order is None:
        fail(f"{fn} needs a memory order: order= one of {', '.join(allowed)}", "value")
    if not isinstance(order, str) or order not in allowed:
        fail(f"{fn}: order {order!r} is not allowed; {words} take order= one of {', '.join(allowed)} (T9)", "value")
    return order


def _address(fn: str, ref, writes: bool):
    """(view Var, index kinds, index operands, the read node's scope position) of an element reference.

    The reference is the ScalarProxy a view read produced; the read node is taken out of the current
    region (the caller removes it once every other check has passed)."""
    hint = "pass an element reference written as indexing a view, like counts[i] (one element)"
    if isinstance(ref, TensorProxy):
        fail(f"{fn} acts on one element, but its address is a tensor of type {ref.type!r}; {hint}, inside a "
             f"parallel body or loop over the elements you mean", "type")
    if not isinstance(ref, ScalarProxy):
        what = "a Python number" if is_py_number(ref) else type(ref).__name__
        fail(f"{fn} needs the address of a view element, got {what}; {hint}", "type")
    var = ref._var
    trace = current()
    nodes = trace.scope.nodes
    position = None
    for k in range(len(nodes) - 1, -1, -1):
        if any(o is var for o in nodes[k].outputs):
            position = k
            break
    if position is None:
        fail(f"{fn} needs the address of a view element, but this value was not produced by indexing a view "
             f"here (a computed value, or a reference made outside the current region); {hint}", "type")
    node = nodes[position]
    if node.op is not ops.read:
        if node.op is ops.load:
            fail(f"{fn} acts on view elements; this value was loaded from a logical buffer (atomics on buffers "
                 f"are not part of the language, spec §16); {hint}", "type")
        fail(f"{fn} needs the address of a view element, but this value was computed by `{node.op.name}`; {hint}",
             "type")
    if _used_after(var, nodes[position + 1:]):
        fail(f"{fn}: the element reference was already used as a value before this atomic; an atomic's address "
             f"must be written inline and used only by the atomic ({hint}); read the value with "
             f"I.atomic.load(...) if you need it", "value")
    view = node.inputs[0]
    name = view.hint or "view"
    if writes and view.type.access == "In":
        fail(f"{fn} writes {name}, an In view (read-only); declare it InOut (or Out) to update it atomically",
             "value")
    return view, node.attr("index"), tuple(node.inputs[1:]), position


def _used_after(var: Var, nodes) -> bool:
    for n in nodes:
        if any(x is var for x in n.inputs):
            return True
        for r in n.regions:
            if any(x is var for x in r.results) or _used_after(var, r.nodes):
                return True
    return False


def _operand(fn: str, value, dtype: T.DType, role: str, view_name: str, address: Var):
    """A value operand: a scalar of the view's dtype or a Python number taking it."""
    if isinstance(value, ValueProxy):
        if not isinstance(value.type, T.ScalarType):
            fail(f"{fn}: {role} must be one scalar, got a tensor of type {value.type!r}", "type")
        if value._var is address:
            fail(f"{fn}: {role} is the atomic's own element reference; read it with I.atomic.load(...) first if "
                 f"you mean its value", "value")
        if value.dtype is not dtype:
            fail(f"{fn}: {role} is {value.dtype} but {view_name} holds {dtype}; dtypes never convert implicitly: "
                 f"write I.cast({role}, I.{dtype.name})", "type")
        return value._var
    if isinstance(value, Proxy):
        fail(f"{fn}: {role} must be a scalar of {dtype} or a Python number, got {type(value).__name__}", "type")
    if is_py_number(value):
        return make_literal(value, dtype, f"{fn} {role}")
    fail(f"{fn}: {role} must be a scalar of {dtype} or a Python number, got {type(value).__name__}", "type")


def _check_dtype(fn: str, family: str, kind: str | None, dtype: T.DType, view_name: str) -> None:
    if dtype.is_int:
        return
    if dtype is T.f32 and (family in ("load", "store") or kind in FLOAT_KINDS):
        return
    if family in ("load", "store"):
        need = "an integer or f32 view"
    elif family == "cas":
        need = ("an integer view (compare-exchange compares bit patterns; keep the element as a same-width "
                "integer, e.g. I.u32, and I.bitcast values)")
    elif kind in FLOAT_KINDS:
        need = "an integer or f32 view"
    else:
        need = "an integer view"
    fail(f"{fn} needs {need}; {view_name} holds {dtype} (T9: atomic rmw kinds are integer, add/max/min also f32)",
         "type")


def _emit(fn: str, family: str, op, ref, values: tuple, order, kind: str | None = None):
    trace = current()
    order = _check_order(fn, family, order)
    view, kinds, index, position = _address(fn, ref, writes=family != "load")
    dtype = view.type.dtype
    name = view.hint or "view"
    _check_dtype(fn, family, kind, dtype, name)
    operands = tuple(_operand(fn, v, dtype, role, name, ref._var) for role, v in values)
    del trace.scope.nodes[position]  # the read becomes the atomic's address: no plain load is left
    if family == "load":
        attrs = (("index", kinds), ("order", order))
    elif family == "store":
        attrs = (("index", kinds), ("order", order))
    elif family == "rmw":
        attrs = (("index", kinds), ("kind", kind), ("order", order))
    else:
        attrs = (("index", kinds), ("order", order), ("failure_order", FAILURE_ORDER[order]))
    outputs = trace.emit(op, (view, *operands, *index), attrs)  # the result type is the op's rule
    if family != "load":
        trace.written_views.add(view)
    return wrap(outputs[0]) if outputs else None


# --- the surface -----------------------------------------------------------------------------------------------

def load(address, *, order=None, **unexpected):
    """The element's value, read atomically (order relaxed or acquire)."""
    _check_keywords("I.atomic.load", unexpected)
    return _emit("I.atomic.load", "load", ops.atomic_load, address, (), order)


def store(address, value, *, order=None, **unexpected):
    """Write ``value`` to the element atomically (order relaxed or release)."""
    _check_keywords("I.atomic.store", unexpected)
    _emit("I.atomic.store", "store", ops.atomic_store, address, (("value", value),), order)


def _rmw(kind: str):
    fn = f"I.atomic.{_surface(kind)}"

    def rmw(address, value, *, order=None, **unexpected):
        _check_keywords(fn, unexpected)
        return _emit(fn, "rmw", ops.atomic_rmw, address, (("value", value),), order, kind)

    rmw.__name__ = rmw.__qualname__ = _surface(kind)
    rmw.__doc__ = (f"Atomically replace the element by {kind}(element, value) and return its old value "
                   f"(order relaxed, acquire, release or acq_rel).") if kind != "exchange" else \
        "Atomically replace the element by value and return its old value (order relaxed, acquire, release, acq_rel)."
    return rmw


exchange = _rmw("exchange")
add = _rmw("add")
max = _rmw("max")  # noqa: A001  (I.atomic.max / I.atomic.min shadow the builtins only in this module)
min = _rmw("min")  # noqa: A001
and_ = _rmw("and")
or_ = _rmw("or")
xor = _rmw("xor")


def compare_exchange(address, expected, desired, *, order=None, **unexpected):
    """If the element equals ``expected``, replace it by ``desired``; atomically. Returns the record
    ``{old_value, success}`` (order relaxed, acquire, release or acq_rel; the failure order is derived)."""
    _check_keywords("I.atomic.compare_exchange", unexpected)
    result = _emit("I.atomic.compare_exchange", "cas", ops.atomic_compare_exchange, address,
                   (("expected", expected), ("desired", desired)), order)
    assert isinstance(result, RecordProxy)
    return result
