"""Region fold and region scan (spec §9): list homomorphisms over compiler-chosen contiguous slices.

The author supplies pure helpers — ``summarize`` a slice, ``combine`` two summaries, and for a
region scan ``apply`` a summary (a transition) to a state and ``emit`` a slice's outputs from its
incoming state — and promises the laws of §9. Each helper is traced once into an isolated region.
Slices have an extent of their own (a Dim no other value mentions), so nothing outside the
summarize/emit regions can observe where the compiler cut the source.
"""
from __future__ import annotations

from .. import types as T
from ..errors import TraceValueError
from ..graph import ops
from ..graph.values import Var
from .aggregates import pack
from .build import is_py_number
from .context import current, fail
from .control import _schema_mismatch
from .structured import _components, _helper_name, normalize_axes, trace_pure
from .values import Proxy, ValueProxy, wrap


def _mentions(t: T.Type, dim) -> bool:
    return any(e is dim for c in _components(t) for e in getattr(c, "shape", ()))


def _source_slices(source, axis, who: str):
    comps = source if isinstance(source, tuple) else (source,)
    if not comps:
        fail(f"{who}: source must be a tensor or a non-empty tuple of tensors", "value")
    for c in comps:
        if not isinstance(c, ValueProxy) or not isinstance(c.type, T.TensorType):
            fail(f"{who}: every source component must be a ranked tensor, got {getattr(c, 'type', c)!r}", "type")
    rank = min(c.type.rank for c in comps)
    (a,) = normalize_axes(axis, rank, who, single=True)
    first = comps[0].type.shape[a]
    for c in comps:
        if not T.same_extent(c.type.shape[a], first):
            fail(f"{who}: source components disagree on the extent of axis {a} ({T.extent_str(first)} vs "
                 f"{T.extent_str(c.type.shape[a])}); every component is cut at the same boundaries", "value")
    source_var = pack(source, f"{who} source")
    slice_dim = T.Dim(label=f"the extent of a {who} slice (unobservable)")
    slice_types = [T.TensorType(c.type.dtype, tuple(slice_dim if k == a else e for k, e in enumerate(c.type.shape)))
                   for c in comps]
    return source_var, a, slice_dim, slice_types


def _split_operands(operands, who: str):
    """Runtime operands become KIR operands; Python constants stay specialisation facts."""
    if not isinstance(operands, tuple):
        fail(f"{who}: operands must be a tuple", "type")
    runtime = [pack(o, f"{who} operand {i}") for i, o in enumerate(operands) if isinstance(o, Proxy)]
    for o in operands:
        if not isinstance(o, Proxy) and not (is_py_number(o) or isinstance(o, (str, type(None)))):
            fail(f"{who}: operand {o!r} is neither a traced value nor a constexpr number", "type")

    def arrange(wrapped_runtime):
        it = iter(wrapped_runtime)
        return [next(it) if isinstance(o, Proxy) else o for o in operands]

    return runtime, arrange


def _cut_observed(region, slice_dim):
    """(what, node, the node reading the extent) when ``region``'s results depend on where the source was
    cut, else None.

    The slice extent becomes a value only through ``x.shape[a]`` of a slice-shaped tensor (a ``dim`` node
    whose result stands for the slice's Dim). Such a value may size new tensors (the extent operands of
    ``full``/``reshape``: ``I.reshape(v, (k.shape[0], 1))`` only restates the slice's shape), but a result
    that depends on it otherwise (arithmetic, a cast, a comparison, a domain over it and the slice-relative
    coordinates of that domain) observes the cut, which §9.1 forbids: targets choose different cuts and
    would silently disagree. Dependencies are followed through nested regions (a loop over such a domain
    taints its body's parameters and the loop's results) and per component through tuples, records and
    reductions: component j of a ``reduce``/``scan`` is taken to depend on component j of its source and
    identity, so ``I.arg_reduce.max(s, axis=0)[0]`` (whose slice-relative positions only break ties between
    equal values) stays legal while its position component is rejected. What this misses (a combine that
    mixes components, a scan of ones) is the dynamic check's (``check_laws``) to find."""
    taint: dict = {}  # Var -> found, or a tuple of per-component found/None for an aggregate

    def of(x):
        return taint.get(x) if x.__class__ is Var else None

    def whole(t):
        if isinstance(t, tuple) and (not t or not isinstance(t[0], str)):
            return next((w for w in map(whole, t) if w is not None), None)
        return t

    def component(t, i):
        return t[i] if isinstance(t, tuple) and (not t or not isinstance(t[0], str)) else t

    def visit(r):
        for node in r.nodes:
            op = node.op
            if op is ops.tuple or op is ops.record:
                parts = tuple(of(x) for x in node.inputs)
                out = parts if any(p is not None for p in parts) else None
            elif op is ops.get or op is ops.field:
                t = node.inputs[0].type
                i = node.attr("index") if op is ops.get else t.names.index(node.attr("name"))
                out = component(of(node.inputs[0]), i)
            elif op is ops.reduce or op is ops.scan:
                src, ident = of(node.inputs[0]), of(node.inputs[1])
                captured = whole(tuple(of(x) for x in node.inputs[2:]))
                t = node.outputs[0].type if len(node.outputs) == 1 else None
                n = len(t.items) if isinstance(t, T.TupleType) else len(t.fields) if isinstance(t, T.RecordType) \
                    else len(node.outputs)
                parts = tuple(captured or whole(component(src, j)) or whole(component(ident, j)) for j in range(n))
                if len(node.outputs) > 1 or n == 1:
                    taint.update((v, p) for v, p in zip(node.outputs, parts) if p is not None)
                    continue
                out = parts if any(p is not None for p in parts) else None
            else:
                skip_extents = bool(node.attr("extents"))
                out = whole(tuple(of(x) for k, x in enumerate(node.inputs) if not (k and skip_extents)))
                for inner in node.regions:
                    if out is not None:
                        taint.update((p, out) for p in inner.params)
                    visit(inner)
                    if out is None:
                        out = whole(tuple(of(x) for x in inner.results))
                if out is None and op is ops.dim and any(v.extent is slice_dim for v in node.outputs):
                    out = ("the slice extent", node, node)
                elif out is not None and op is ops.domain and out[0] == "the slice extent":
                    out = ("slice-relative coordinates (a domain over the slice extent)", node, out[2])
            if out is not None:
                taint.update((v, out) for v in node.outputs)

    visit(region)
    return whole(tuple(of(x) for x in region.results))


def _reject_observed_cut(region, slice_dim, who: str, fn) -> None:
    seen = _cut_observed(region, slice_dim)
    if seen is not None:
        what, node, read = seen
        if read is not node:
            what += f" (the extent is read at {read.loc!r})"
        raise TraceValueError(f"{who} helper `{_helper_name(fn)}` reads {what}; its result must not observe how "
                              f"the compiler cut the source (spec §9.1). Pass I.indices(source_axis) as a source "
                              f"component for absolute coordinates, or count members with a reduction",
                              where=repr(node.loc) if node.loc is not None else None)


def _summarize(summarize, who, slice_types, runtime, arrange, slice_dim):
    params = [Var(t) for t in slice_types] + [Var(o.type) for o in runtime]
    n = len(slice_types)
    region, out = trace_pure(summarize, f"{who} summarize", params, None,
                             arrange=lambda w: w[:n] + arrange(w[n:]))
    _reject_observed_cut(region, slice_dim, f"{who} summarize", summarize)
    if _mentions(out.type, slice_dim):
        fail(f"{who}: the summary {out.type!r} depends on the slice extent; summaries must not observe where the "
             f"source is cut", "value")
    return region, out.type


def _combine(combine, who, summary_t):
    region, _ = trace_pure(combine, f"{who} combine", [Var(summary_t), Var(summary_t)], summary_t)
    return region


def _identity(identity, summary_t, who: str) -> Var:
    if identity is None or is_py_number(identity):
        fail(f"{who}: identity must be a typed value with the summary schema {summary_t!r}"
             + (f"; write I.cast({identity!r}, I.<dtype>)" if is_py_number(identity) else ""), "type")
    var = pack(identity, f"{who} identity")
    mismatch = _schema_mismatch(summary_t, var.type)
    if mismatch:
        fail(f"{who}: identity must have the summary schema {summary_t!r}: {mismatch}", "type")
    return var


def region_fold(*, source, axis, summarize, combine, identity, operands=()):
    """Fold ``combine`` over ``summarize`` of contiguous, order-preserving slices of ``axis``."""
    who = "I.region_fold"
    source_var, a, slice_dim, slice_types = _source_slices(source, axis, who)
    runtime, arrange = _split_operands(operands, who)
    summarize_region, summary_t = _summarize(summarize, who, slice_types, runtime, arrange, slice_dim)
    combine_region = _combine(combine, who, summary_t)
    ident = _identity(identity, summary_t, who)
    helpers = (_helper_name(summarize), _helper_name(combine))
    (out,) = current().emit(ops.region_fold, (source_var, ident, *runtime),
                            (("axis", a), ("helpers", helpers), ("types", (summary_t,))),
                            regions=(summarize_region, combine_region))
    return wrap(out)


def region_scan(*, source, axis, combine, identity, summarize=None, initial_state=None, apply=None, emit=None,
                operands=()):
    """(outputs, final_state): ``emit`` each slice from its incoming state, ``apply(prefix, initial_state)``.

    Without summarize/apply/emit/initial_state the region scan is element-wise, which is an ordinary
    inclusive scan: it canonicalises to ``I.scan(source, axis=..., identity=..., combine=...)``."""
    who = "I.region_scan"
    if summarize is None and apply is None and emit is None and initial_state is None:
        from .structured import generic_scan

        if operands:
            return generic_scan(source, axis=axis, identity=identity, combine=combine, combine_operands=operands)
        return generic_scan(source, axis=axis, identity=identity, combine=combine)
    if summarize is None or apply is None or emit is None or initial_state is None:
        fail(f"{who} needs summarize, apply, emit and initial_state together (or none of them for an element-wise "
             f"scan)", "value")
    source_var, a, slice_dim, slice_types = _source_slices(source, axis, who)
    runtime, arrange = _split_operands(operands, who)
    summarize_region, transition_t = _summarize(summarize, who, slice_types, runtime, arrange, slice_dim)
    combine_region = _combine(combine, who, transition_t)
    ident = _identity(identity, transition_t, who)
    state = pack(initial_state, f"{who} initial_state")
    apply_region, _ = trace_pure(apply, f"{who} apply", [Var(transition_t), Var(state.type)], state.type)
    n = len(slice_types)
    params = [Var(t) for t in slice_types] + [Var(state.type)] + [Var(o.type) for o in runtime]
    emit_region, out = trace_pure(emit, f"{who} emit", params, None,
                                  arrange=lambda w: w[:n + 1] + arrange(w[n + 1:]))
    _reject_observed_cut(emit_region, slice_dim, f"{who} emit", emit)
    for c in _components(out.type):
        if not isinstance(c, T.TensorType) or len(c.shape) <= a or c.shape[a] is not slice_dim:
            fail(f"{who}: every emit output must keep the slice's member axis {a} (the slice extent), got {c!r}",
                 "value")
    source_extent = _components(source_var.type)[0].shape[a]
    out_t = _replace_dim(out.type, slice_dim, source_extent)
    helpers = tuple(_helper_name(f) for f in (summarize, combine, apply, emit))
    outs = current().emit(ops.region_scan, (source_var, ident, state, *runtime),
                          (("axis", a), ("helpers", helpers), ("types", (out_t, state.type))),
                          regions=(summarize_region, combine_region, apply_region,
                                                              emit_region))
    return wrap(outs[0]), wrap(outs[1])


def _replace_dim(t: T.Type, old, new) -> T.Type:
    if isinstance(t, T.TupleType):
        return T.TupleType(tuple(_replace_dim(it, old, new) for it in t.items))
    if isinstance(t, T.RecordType):
        return T.RecordType(tuple((n, _replace_dim(ft, old, new)) for n, ft in t.fields))
    if isinstance(t, T.TensorType):
        return T.TensorType(t.dtype, tuple(new if e is old else e for e in t.shape))
    return t
