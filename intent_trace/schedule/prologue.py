"""The prologue: checks a call can make before anything is launched, because their operands are known once the
call's arguments are bound.

A **prologue check** is a top-level node whose only effect is ``"check"`` (it may fail the run; today
``I.assume_equal``) and whose operands are *prologue values*: kernel extents, literals, integer scalar parameters,
``dim`` of a view parameter, and integer or bool scalars computed from those by pointwise ops (index arithmetic,
casts, comparisons), or another check's result; and nothing before it in the body may fail (only prologue values,
constants, domains of literal steps and whole-axis reads precede it), so making it first reports the error the
body's order reports. Nothing it reads depends on a view's elements, a loop or a thread, so a target may decide it
once, first, instead of where it stands in the body (a statement made after work that may fail, such as a
histogram's bin count, stays where it stands, and the program checks it there):

- a grid program whose every thread would make the same check (and leave a block waiting at its barrier when it
  fails), or a program of several launches whose later kernels would run after the first failed, then has no
  error site from it; the recognisers and planners treat the check as a uniform scalar (its result is its value)
  instead of refusing the graph, and it is part of no part's body;
- the TileLang executable makes it on the host before any launch (``backends/tilelang/executable.py``); the cpu
  oracle emits it where it stands, which is before its row loops and parallel loops (nothing but prologue values
  and nodes that cannot fail precedes it).

:func:`prologue` finds them from effects, traits and types (never op names); ``exe.schedule`` names them on its
``prologue`` line (:class:`.plan.Schedule`).
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph import ops
from ..graph.traits import POINTWISE
from ..graph.values import KernelGraph, Literal, walk_region


def _integral(t) -> bool:
    """An integer or bool scalar: what index arithmetic computes (no float rounding decided on the host)."""
    return isinstance(t, T.ScalarType) and (t.dtype.is_int or t.dtype.is_bool)


@attrs.frozen(slots=True)
class Prologue:
    """The prologue of one graph. ``checks``: the prologue checks in program order; ``nodes``: the checks and the
    prologue values before the last of them, in program order (what a host evaluates); ``extents``:
    {prologue value: graph extent index} for the values that equal a kernel extent (their ``extent`` is that
    extent's), so a ``domain(0, n, 1)`` of one covers that extent whole."""

    checks: tuple = attrs.field(default=(), eq=False)
    nodes: tuple = attrs.field(default=(), eq=False)
    extents: dict = attrs.field(factory=dict, eq=False)
    complete: bool = True  # every check of the graph is one of ``checks`` (its extent equalities hold before a launch)
    ids: frozenset = attrs.field(init=False, eq=False)

    @ids.default
    def _ids(self) -> frozenset:
        return frozenset(id(n) for n in self.nodes)

    def __bool__(self) -> bool:
        return bool(self.checks)

    def __contains__(self, node) -> bool:
        """Whether ``node`` belongs to the prologue (a check, or a prologue value the host evaluates before one)."""
        return id(node) in self.ids

    def describe(self) -> tuple:
        """One text per check: its op and where the kernel states it."""
        return tuple(f"{n.op.name}" + (f" at {n.loc!r}" if n.loc is not None else "") for n in self.checks)


def _value_of_view_axis(node, views: set) -> bool:
    """``dim`` of a view parameter: the bound argument's extent."""
    return node.op is ops.dim and node.inputs[0] in views


def _cannot_fail(node) -> bool:
    """A node no target checks: a constant, a domain with a literal step (its length needs no check), a read of
    whole axes. What comes before a prologue check must be such nodes or prologue values (:func:`prologue`)."""
    if node.regions or node.op.effects - {"read"}:
        return False
    if not node.inputs:
        return not node.op.effects
    if node.op is ops.domain:
        return isinstance(node.inputs[2], Literal)
    return node.op is ops.read and all(k == "all" for k in node.attr("index"))


def prologue(graph: KernelGraph) -> Prologue:
    """The prologue checks of ``graph`` and the nodes they are computed from (:class:`Prologue`).

    A check is made first only where that changes no outcome: the nodes before it in the body are prologue values
    or nodes that cannot fail (:func:`_cannot_fail`), so when it fails it is the error the body's order reports
    (generic's), and when something before it would fail too, it stays where it stands (the program checks it
    there). The nodes the host evaluates are every prologue value up to the last check, in program order: an
    integer division by zero among them raises there as in the body."""
    known = {ev for ev in graph.extents}
    known.update(p.var for p in graph.params if p.kind == "scalar" and _integral(p.type))
    views = {p.var for p in graph.params if p.kind == "view"}
    checks, values, first = [], [], True  # first: nothing before this node may fail

    def computable(x) -> bool:
        return _integral(x.type) if x.__class__ is Literal else x in known

    for node in graph.body.nodes:
        integral = not node.regions and all(_integral(v.type) for v in node.outputs)
        operands = all(computable(x) for x in node.inputs)
        if integral and node.op.effects == {"check"} and operands and first:
            checks.append(node)
        elif integral and not node.op.effects and (_value_of_view_axis(node, views) or
                                                   (node.op in POINTWISE and operands)):
            values.append(node)
        else:
            first = first and _cannot_fail(node)
            continue
        known.update(node.outputs)
    complete = sum(1 for n in walk_region(graph.body) if "check" in n.op.effects) == len(checks)
    if not checks:
        return Prologue(complete=complete)
    made = {id(n) for n in checks} | {id(n) for n in values}
    last = next(k for k, n in enumerate(graph.body.nodes) if n is checks[-1])
    nodes = tuple(n for n in graph.body.nodes[:last + 1] if id(n) in made)
    index = extent_index(graph, complete)
    extents = {v: index[v.extent] for n in nodes for v in n.outputs if v.extent in index}
    return Prologue(tuple(checks), nodes, extents, complete)


def extent_index(graph: KernelGraph, united: bool | None = None) -> dict:
    """{Dim: graph extent index}: each kernel extent, and the representative of its class of extents stated equal
    (:func:`..types.representative`: the Dim the types of values made after the statement carry), mapped to the
    index of the class's first kernel extent. Extents stated equal are then one axis to a recogniser (``w[cols]``
    with ``w: [K]`` covers a row of ``N`` elements after ``I.assume_equal(w.shape[0], x.shape[1])``), which holds
    in every program because the statement is a prologue check, made before any launch. Without a statement
    each extent is its own class and this is ``{ev.extent: k}``. A class a static size represents maps no Dim
    of its own: its values have that static size. ``united``: whether the statements are all prologue checks
    (:attr:`Prologue.complete`; found when None); when one is made where it stands in the body, the extents stay
    apart (what is read before it must not rely on it)."""
    if united is None:
        united = prologue(graph).complete
    index: dict = {}
    for k, ev in enumerate(graph.extents):
        rep = T.representative(ev.extent) if united else ev.extent
        first = index.setdefault(rep, k) if isinstance(rep, T.Dim) else k
        index.setdefault(ev.extent, first)
    return index


def extent_vars(graph: KernelGraph, pro: Prologue | None = None) -> dict:
    """{value: graph extent index}: the kernel's extents, and the prologue values that equal one (a recogniser
    accepts ``domain(0, n, 1)`` of either as a whole axis); extents stated equal share one index
    (:func:`extent_index`)."""
    pro = prologue(graph) if pro is None else pro
    index = extent_index(graph, pro.complete)
    return {**{ev: index[ev.extent] for ev in graph.extents}, **pro.extents}
