"""When a segmented fold's tile max/min reductions may ignore NaN operands and zero signs.

A tile reduction on a GPU (TileLang's ``T.reduce_max``, CUDA's ``fmaxf``) returns the larger non-NaN operand -- a NaN
operand is ignored unless every operand is NaN -- and either zero when both signs meet, where ``maximum`` (T3, IEEE
754-2019) returns NaN and takes -0 < +0. That is one cheap instruction per element; the exact form costs more (a
target encodes each element as an ordered integer). :func:`tolerant` proves, from the fold's regions, that the two
cannot give different outputs, so the cheap form may be used:

- **NaN**: a NaN operand at row ``i`` of the reduction reaches every output element of row ``i`` along another path
  that does not go through the reduction's result (so the outputs of that row are NaN either way; the other rows
  never see the difference). Flash attention is the example: a NaN score ``s`` makes ``p = exp(s - m)`` NaN there,
  so the row's sum ``l`` and its product ``P V`` are NaN, and so is every output ``acc / l`` of the row.
- **zero signs**: the reduction's result reaches no output except through ops that map -0 and +0 to the same value
  (comparisons, ``exp``: T4's specials say which functions are even at zero), so its zero sign is never observed.

The analysis is a forward walk over the summarize helper, the combine helper (to its fixed point: the running
summary is combined again and again) and the fold's consumers. It is conservative: an op it does not know stops the
proof, and the target then reduces exactly.
"""
from __future__ import annotations

import struct

from .. import types as T
from ..graph import ops
from ..graph.traits import AGGREGATE, MATH_FUNCTIONS
from .recognition import at as _at

#: Ops whose float result is NaN when the named operands are NaN, whatever the others (IEEE arithmetic, IEEE 754-2019
#: maximum/minimum, and T4's functions: "NaN in gives NaN out"); ``pow`` is not one (C99: pow(NaN, 0) = 1). An
#: identity set, as graph/patterns.py keeps COMMUTATIVE: no trait says this yet.
NAN_PROPAGATING = frozenset({ops.add, ops.sub, ops.mul, ops.div, ops.neg, ops.maximum, ops.minimum, ops.fma}) \
    | frozenset(MATH_FUNCTIONS)
#: Ops whose result may differ only in the sign of a zero when an operand does (and nothing else): the sum or
#: product with, the negation, maximum or minimum of, a zero of either sign.
SIGN_ONLY = frozenset({ops.add, ops.sub, ops.mul, ops.neg, ops.maximum, ops.minimum, ops.fma})

ROW, ELEM = "row", "elem"


class _Stop(Exception):
    pass


def tolerant(fold, reductions: list, after: list, writes: list) -> tuple:
    """(whether every max/min reduction of ``fold``'s summarize helper may ignore NaN operands and zero signs, why
    not when it may not)."""
    tiles = [r for r in reductions if r.kind in ("max", "min")]
    if not tiles:
        return True, ""
    try:
        for r in tiles:
            _nan_reaches_outputs(fold, r.node, after, writes)
        _zero_sign_unobserved(fold, [r.node for r in tiles], after, writes)
    except _Stop as e:
        return False, str(e)
    return True, ""


# --- the walk ---------------------------------------------------------------------------------------------

def _walk(nodes, state: dict, step) -> None:
    """Propagate ``state`` (Var -> mark) through ``nodes``: aggregates and shape ops carry marks, ``step(node,
    marks)`` says every other node's mark (or None)."""
    for node in nodes:
        marks = [state.get(x) for x in node.inputs]
        if not any(m is not None for m in marks):
            continue
        if node.op is ops.tuple:
            state[node.outputs[0]] = tuple(marks)
        elif node.op is ops.get:
            m = marks[0]
            state[node.outputs[0]] = m[node.attr("index")] if isinstance(m, tuple) else m
        elif node.op in AGGREGATE:
            raise _Stop(f"op {node.op.name}{_at(node)} is not followed by the proof")
        else:
            mark = step(node, marks)
            if mark is not None:
                state[node.outputs[0]] = mark


def _leaves(mark, n: int) -> list:
    return list(mark) if isinstance(mark, tuple) else [mark] * n


def _summary_marks(fold, summarize_state) -> list:
    region = fold.regions[0]
    n = len(T.leaf_types(fold.outputs[0].type))
    return _leaves(summarize_state.get(region.results[0]), n)


def _combine(fold, a_marks: list, b_marks: list, step) -> list:
    combine = fold.regions[1]
    a, b = combine.params
    state = {a: tuple(a_marks), b: tuple(b_marks)}
    _walk(combine.nodes, state, step)
    return _leaves(state.get(combine.results[0]), len(a_marks))


def _outputs(fold, leaf_marks: list, after, writes, step) -> list:
    state = {fold.outputs[0]: tuple(leaf_marks)}
    _walk(after, state, step)
    return [state.get(w.inputs[1]) for w in writes]


# --- NaN --------------------------------------------------------------------------------------------------

def _nan_guards(x, producers: dict) -> frozenset:
    """Predicates known true wherever ``x`` is NaN: ``select(c, a, fill)`` is NaN only where ``c`` holds when the
    fill cannot be NaN (a fill of a non-NaN constant, broadcast)."""
    node = producers.get(x)
    if node is None or node.op is not ops.select:
        return frozenset()
    c, a, b = node.inputs
    fill = producers.get(b)
    while fill is not None and fill.op is ops.broadcast:
        fill = producers.get(fill.inputs[0])
    value = None
    if fill is not None and fill.op is ops.full:
        v = fill.inputs[0]
        value = getattr(v, "value", None)
        if value is None and producers.get(v) is not None and producers[v].op is ops.constant:
            value = producers[v].attr("value")
    if value is None or value != value:
        return frozenset()
    return frozenset({c}) | _nan_guards(a, producers)


def _same_axes(a, b) -> bool:
    def core(t):
        return tuple(d for d in getattr(t, "shape", ()) if not (isinstance(d, int) and d == 1))
    ca, cb = core(a.type), core(b.type)
    return len(ca) == len(cb) and all(x is y for x, y in zip(ca, cb))


def _nan_reaches_outputs(fold, reduce_node, after, writes) -> None:
    summarize = fold.regions[0]
    producers = {v: n for n in summarize.nodes for v in n.outputs}
    source = reduce_node.inputs[0]
    guards = _nan_guards(source, producers)

    def step(node, marks):
        op = node.op
        out = node.outputs[0]
        if op is ops.broadcast or op is ops.reshape:
            m = marks[0]
            return ROW if m == ROW else (ELEM if m == ELEM and _same_axes(node.inputs[0], out) else None)
        if op is ops.reduce:
            (body,) = node.regions
            sums = len(body.nodes) == 1 and body.nodes[0].op is ops.add
            return ROW if sums and marks[0] is not None else None
        if op is ops.contract:
            lhs = marks[0]
            reduced_lhs_axis = node.attr("reduce")[0][0]
            return ROW if lhs == ROW or (lhs == ELEM and reduced_lhs_axis == 1) else None
        if op is ops.select:
            c, a, b = node.inputs
            return marks[1] if marks[1] == ELEM and c in guards else None
        if op is ops.cast:
            float_to_float = node.inputs[0].type.dtype.is_float and out.type.dtype.is_float
            return (ROW if ROW in marks else ELEM) if float_to_float else None
        if op in NAN_PROPAGATING and T.leaf_types(out.type)[0].dtype.is_float:
            return ROW if ROW in marks else ELEM
        return None

    state = {source: ELEM}
    _walk(summarize.nodes, state, step)
    summary = _summary_marks(fold, state)
    poisoned = [m == ROW for m in summary]
    if not any(poisoned):
        raise _Stop(f"a NaN operand of the reduction{_at(reduce_node)} reaches no summary row but through it")
    for side in (0, 1):  # the running summary poisoned, then the block's
        row = [ROW if p else None for p in poisoned]
        none = [None] * len(poisoned)
        result = _combine(fold, *((row, none) if side == 0 else (none, row)), step)
        if any(p and m != ROW for p, m in zip(poisoned, result)):
            raise _Stop(f"a NaN operand of the reduction{_at(reduce_node)} does not stay in the summary through the "
                        f"combine")
    outs = _outputs(fold, [ROW if p else None for p in poisoned], after, writes, step)
    if any(m != ROW for m in outs):
        raise _Stop(f"a NaN operand of the reduction{_at(reduce_node)} would not reach every output of its row")


# --- zero signs -------------------------------------------------------------------------------------------

def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _even_at_zero(op) -> bool | None:
    """True when T4's specials give one value for +0 and -0 (exp), False when they differ only in the zero's sign
    (sin), None when they differ more (rsqrt) or the specials do not say."""
    specials = dict((_bits(x), y) for x, y in (op.math.specials or ()))
    plus, minus = specials.get(_bits(0.0)), specials.get(_bits(-0.0))
    if plus is None or minus is None:
        return None
    if _bits(plus) == _bits(minus):
        return True
    return False if plus == minus else None


def _zero_sign_unobserved(fold, reduce_nodes, after, writes) -> None:
    def step(node, marks):
        op, out = node.op, node.outputs[0]
        d = T.leaf_types(out.type)[0].dtype
        if not d.is_float:
            return None  # a comparison, or a cast to an integer: -0 and +0 are one value
        if op is ops.broadcast or op is ops.reshape or op is ops.cast or op is ops.select:
            return "sign"
        if op in MATH_FUNCTIONS:
            even = _even_at_zero(op)
            if even is None:
                raise _Stop(f"op {op.name}{_at(node)} maps -0 and +0 to values that differ")
            return None if even else "sign"
        if op is ops.div and marks[1] is not None:
            raise _Stop(f"the division{_at(node)} by a reduction's zero would give an infinity of either sign")
        if op in SIGN_ONLY or op is ops.div or op is ops.reduce or op is ops.contract:
            return "sign"
        raise _Stop(f"op {op.name}{_at(node)} is not followed by the zero-sign proof")

    summarize = fold.regions[0]
    state = {n.outputs[0]: "sign" for n in reduce_nodes}
    _walk([n for n in summarize.nodes if n not in reduce_nodes], state, step)
    tainted = [m is not None for m in _summary_marks(fold, state)]
    while True:
        marks = ["sign" if t else None for t in tainted]
        result = _combine(fold, marks, marks, step)
        grown = [t or m is not None for t, m in zip(tainted, result)]
        if grown == tainted:
            break
        tainted = grown
    outs = _outputs(fold, ["sign" if t else None for t in tainted], after, writes, step)
    if any(m is not None for m in outs):
        raise _Stop("the zero sign of a max/min reduction would reach an output")
