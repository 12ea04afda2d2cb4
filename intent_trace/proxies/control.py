"""Staged control: I.if_, I.loop, I.while_, I.break_, I.continue_ (spec §5, §6; DESIGN §3).

Python cannot stage an ``if`` on a runtime value or a loop-carried reassignment, so these take
functions and trace each once into a region. Carries are checked per component: same dtype,
rank and provably the same extents on entry, on every update and at exit.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from ..graph.values import Var
from .aggregates import pack
from .context import current, fail
from .domain import as_domain, point_var
from .values import ScalarProxy, ValueProxy, wrap

_LOOP_SCOPES = ("for", "loop", "while_body")


def _bool_scalar(pred, who: str) -> Var:
    if isinstance(pred, (bool, np.bool_)):
        fail(f"{who} with a Python bool: that choice is static; use a plain Python `if`", "type")
    if not isinstance(pred, ValueProxy) or pred.dtype is not T.bool_:
        fail(f"{who} needs a bool scalar predicate, got {getattr(pred, 'type', type(pred).__name__)!r}", "type")
    if not isinstance(pred, ScalarProxy):
        fail(f"{who} needs a bool scalar; a tensor predicate chooses per element: use I.select(pred, a, b)", "type")
    return pred._var


def _schema_mismatch(expected: T.Type, got: T.Type, path: str = "") -> str | None:
    """A readable description of the first component where two value schemas differ."""
    where = f" at {path}" if path else ""
    if expected.__class__ is not got.__class__:
        return f"{expected!r} became {got!r}{where}"
    if isinstance(expected, T.TupleType):
        if len(expected.items) != len(got.items):
            return f"tuple of {len(expected.items)} became tuple of {len(got.items)}{where}"
        for i, (a, b) in enumerate(zip(expected.items, got.items)):
            m = _schema_mismatch(a, b, f"{path}[{i}]")
            if m:
                return m
        return None
    if isinstance(expected, T.RecordType):
        if expected.names != got.names:
            return f"record fields {expected.names} became {got.names}{where}"
        for (n, a), (_, b) in zip(expected.fields, got.fields):
            m = _schema_mismatch(a, b, f"{path}.{n}")
            if m:
                return m
        return None
    if expected.dtype is not got.dtype:
        return f"dtype {expected.dtype} became {got.dtype}{where}"
    if isinstance(expected, T.TensorType):
        if expected.rank != got.rank:
            return f"rank {expected.rank} became rank {got.rank}{where}"
        if not T.same_shape(expected.shape, got.shape):
            return f"shape {expected!r} became {got!r}{where} (extents must be provably the same)"
    return None


def _traced(trace, scope, fn, *args):
    try:
        return fn(*args)
    except BaseException:
        trace.abandon(scope)
        raise


def if_(pred, then_fn, else_fn=None):
    """Both branches are traced; they return the same schema (or both nothing)."""
    trace = current()
    p = _bool_scalar(pred, "I.if_")
    if not callable(then_fn) or (else_fn is not None and not callable(else_fn)):
        fail("I.if_(pred, then_fn, else_fn) takes functions of no arguments for the branches", "type")
    regions, results = [], []
    for kind, fn in (("then", then_fn), ("else", else_fn)):
        scope = trace.open(kind)
        value = None if fn is None else _traced(trace, scope, fn)
        packed = () if value is None else (_traced(trace, scope, pack, value, f"I.if_ {kind} branch result"),)
        regions.append(trace.close(scope, packed))
        results.append(packed)
    then_r, else_r = results
    if len(then_r) != len(else_r):
        fail("I.if_ branches must both return a value or both return nothing"
             + ("; an if without else returns nothing" if else_fn is None else ""), "type")
    types = tuple(v.type for v in then_r)
    if then_r:
        mismatch = _schema_mismatch(then_r[0].type, else_r[0].type)
        if mismatch:
            fail(f"I.if_ branches return different schemas: then gives {then_r[0].type!r}, else gives "
                 f"{else_r[0].type!r} ({mismatch})", "type")
    outs = trace.emit(ops.if_, (p,), (("types", types),), regions=tuple(regions))
    return wrap(outs[0]) if outs else None


def _carry_init(init, who: str) -> Var:
    if init is None:
        fail(f"{who} needs an initial carry value", "value")
    return pack(init, f"{who} initial carry")


def _check_carry(trace, scope, who: str, init: Var, value) -> Var:
    if value is None:
        trace.abandon(scope)
        fail(f"{who} body must return the new carry", "value")
    new = _traced(trace, scope, pack, value, f"{who} carry")
    mismatch = _schema_mismatch(init.type, new.type)
    if mismatch:
        trace.abandon(scope)
        fail(f"{who} carry must keep its schema {init.type!r} on every iteration: {mismatch}. Broadcasting "
             f"inside the body never widens a carry; start from the full shape (I.full) instead", "type")
    return new


def loop(domain, init, body):
    """Ordered iteration with a carry: ``body(point, carry) -> carry``; returns the final carry."""
    trace = current()
    d = as_domain(domain, "I.loop")
    init_v = _carry_init(init, "I.loop")
    point = point_var(d)
    carry = Var(init_v.type)
    scope = trace.open("loop", params=(point, carry))
    new = _check_carry(trace, scope, "I.loop", init_v,
                       _traced(trace, scope, body, ScalarProxy(point), _traced(trace, scope, wrap, carry)))
    region = trace.close(scope, (new,))
    (out,) = trace.emit(ops.loop, (d._var, init_v), (("types", (init_v.type,)),),
                        regions=(region,))
    return wrap(out)


def while_(cond, body, init):
    """``while cond(carry): carry = body(carry)``; returns the final carry."""
    trace = current()
    init_v = _carry_init(init, "I.while_")
    c_param = Var(init_v.type)
    scope = trace.open("while_cond", params=(c_param,))
    p = _traced(trace, scope, cond, _traced(trace, scope, wrap, c_param))
    if not (isinstance(p, ScalarProxy) and p.dtype is T.bool_):
        trace.abandon(scope)
        fail(f"I.while_ cond must return a bool scalar, got {getattr(p, 'type', type(p).__name__)!r}", "type")
    cond_region = trace.close(scope, (p._var,))
    b_param = Var(init_v.type)
    scope = trace.open("while_body", params=(b_param,))
    new = _check_carry(trace, scope, "I.while_", init_v, _traced(trace, scope, body, _traced(trace, scope, wrap, b_param)))
    body_region = trace.close(scope, (new,))
    (out,) = trace.emit(ops.while_, (init_v,), (("types", (init_v.type,)),),
                        regions=(cond_region, body_region))
    return wrap(out)


def _enclosing_loop(trace, who: str):
    scope = trace.scope
    while scope is not None:
        if scope.kind in _LOOP_SCOPES:
            return scope
        if scope.kind == "parallel":
            fail(f"{who} inside a parallel body: parallel points have no order, so there is nothing to leave", "value")
        if scope.kind in ("then", "else", "while_cond"):
            fail(f"{who} inside an I.if_ branch or a while condition; write I.{who[2:]}(when=pred) directly in the "
                 f"loop body", "value")
        scope = scope.parent
    fail(f"{who} outside an ordered loop (for over a domain, I.loop or I.while_)", "value")


def _exit(opname: str, when, carry):
    who = f"I.{opname}_"
    trace = current()
    scope = _enclosing_loop(trace, who)
    if isinstance(when, (bool, np.bool_)):
        if not when:
            return
        pred = _literal_true()
    else:
        pred = _bool_scalar(when, who)
    inputs = [pred]
    if scope.kind == "for":
        if carry is not None:
            fail(f"{who}: an effect-only `for` has no carry; use I.loop to carry values", "value")
    else:
        incoming = scope.params[-1]
        if carry is None:
            inputs.append(incoming)
        else:
            v = pack(carry, f"{who} carry")
            mismatch = _schema_mismatch(incoming.type, v.type)
            if mismatch:
                fail(f"{who} carry must have the loop's carry schema {incoming.type!r}: {mismatch}", "type")
            inputs.append(v)
    trace.emit(ops.REGISTRY[opname], tuple(inputs), types=())


def _literal_true():
    from ..graph.values import Literal

    return Literal(True, T.ScalarType(T.bool_))


def break_(when=True, carry=None):
    """Leave the innermost ordered loop when ``when`` holds; the loop's result is ``carry`` (default:
    the carry this iteration started with). The rest of the iteration does not run."""
    _exit("break", when, carry)


def continue_(when=True, carry=None):
    """End this iteration when ``when`` holds; the next iteration starts from ``carry`` (default: the
    carry this iteration started with)."""
    _exit("continue", when, carry)


