"""TileLang rules for atomics on view elements (spec §16, numerics T9).

Each atomic is one call of a helper that takes the element's address (:mod:`.extern`): ``atomic_load``,
``atomic_store``, ``atomic_<kind>`` for the read-modify-writes (exchange, add, max, min, and, or, xor) and
``atomic_cas``, each family named with its memory order (and CAS failure order) so that a target with
threads can emit the matching instruction. The new value of a read-modify-write is the elementwise helper
of the same operation with the element first (wrap-around integer add, one RNE f32 addition, IEEE
maximum/minimum: the combine of generic's rule). Compare-exchange returns the old value; success is the
integer equality of old and expected (value equality is bit equality on integers), as generic decides it.

On ``tilelang-c`` the program is one serial thread, so the helpers are plain read-modify-writes in program
order, which is a correct implementation of every memory order (see :func:`.c._atomic_body`).

Coordinates are checked like generic checks them (``IndexError`` naming the view, the coordinate and the
extent, through the emitter's error channel, :mod:`.storage`): a failed check leaves the kernel before the
element is touched.
"""
from __future__ import annotations

from ... import types as T
from . import extern
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .emitter import Aggregate, Scalar, as_index
from .scalar_rules import call

RULES: dict = {}
REJECTED: dict = {}
rule = rule_registrar(RULES)

_COMBINE = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor"}


def _element(em, node, view, entries) -> str:
    """The address of the node's element, after the checks that its coordinates are inside the view."""
    coords = []
    for kind, value in zip(node.attr("index"), entries):
        if kind != "point":
            raise em.reject(f"an atomic address with a {kind!r} index entry is not lowered")
        coords.append(em.assign(as_index(value.expr), "j"))
    if len(coords) != len(node.attr("index")):
        raise em.reject("an atomic address must name one element")
    for axis, (c, n) in enumerate(zip(coords, view.shape)):
        em.check(f"{c} < T.int64(0) or {c} >= {as_index(n)}", IndexError,
                 f"{{view}}: coordinate {{0}} on axis {axis} is outside its extent {{1}}", c, as_index(n),
                 view=view.label)
    return extern.address(view.name, coords if not view.rank0 else ["0"])


def _storage(em, view) -> str:
    return view.storage or em.tir(view.dtype)


def _order(node) -> str:
    return node.attr("order")


@rule(ops.atomic_load)
def _atomic_load(em, node, args):
    view = args[0]
    d = view.dtype
    addr = _element(em, node, view, args[1:])
    return Scalar(em.assign(extern.call(em, f"atomic_load_{_order(node)}", (d,), d, (_storage(em, view),), addr)))


@rule(ops.atomic_store)
def _atomic_store(em, node, args):
    view, value = args[0], args[1]
    d = view.dtype
    addr = _element(em, node, view, args[2:])
    store = extern.call(em, f"atomic_store_{_order(node)}", (d,), T.i32, (_storage(em, view), d), addr, value.expr)
    em.line(f"T.evaluate({store})")


@rule(ops.atomic_rmw)
def _atomic_rmw(em, node, args):
    view, value = args[0], args[1]
    d = view.dtype
    kind = node.attr("kind")
    addr = _element(em, node, view, args[2:])
    combine = None
    if kind != "exchange":
        combine = em.helper(_COMBINE[kind], (d,), d, (d, d))  # defined before the atomic helper that calls it
    return Scalar(em.assign(extern.call(em, f"atomic_{kind}_{_order(node)}", (d,), d, (_storage(em, view), d), addr,
                                        value.expr, combine=combine)))


@rule(ops.atomic_compare_exchange)
def _atomic_compare_exchange(em, node, args):
    view, expected, desired = args[0], args[1], args[2]
    d = view.dtype
    addr = _element(em, node, view, args[3:])
    family = f"atomic_cas_{_order(node)}_{node.attr('failure_order')}"
    old = em.assign(extern.call(em, family, (d,), d, (_storage(em, view), d, d), addr, expected.expr, desired.expr))
    ok = em.assign(call(em, "eq", (d,), T.bool_, (d, d), old, expected.expr))
    return Aggregate((Scalar(old), Scalar(ok)))
