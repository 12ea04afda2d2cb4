"""The KIR pattern/rewrite engine (graph/patterns.py) on traced kernels: captures, guards, commutative operands,
op sets from traits, dtypes, shapes and attributes, and rewrites that build a new graph which the reference
interpreter runs to NumPy's answer while the input graph stays as it was."""
from __future__ import annotations

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace import types as T
from intent_trace.graph import ops
from intent_trace.graph.patterns import Pat, any_, any_of, lit, match, matches, pat, producers, rewrite
from intent_trace.graph.traits import LOOPING, POINTWISE
from intent_trace.graph.values import Literal, Node, Var
from intent_trace.oracle.generic import GenericExecutable


@intent.kernel
def axpy(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    out[d] = x[d] * 2.0 + y[d]


@intent.kernel
def square_exp(x: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.exp(a * a) + 2.0 * a


@intent.kernel
def row_sums(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M",)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        n = I.domain(0, x.shape[1])
        out[i] = I.reduce.sum(x[i, n] * 2.0, axis=0)


def _final_write(graph):
    (write,) = [n for n in graph.body.nodes if n.op is ops.write]
    return write


def _nodes(graph, op):
    return [n for n in graph.walk() if n.op is op]


# --- matching ------------------------------------------------------------------------------------------------

def test_captures_name_the_matched_values():
    g = axpy.trace()
    write = _final_write(g)
    p = pat(ops.write, any_("view"), pat(ops.add, pat(ops.mul, pat(ops.read, name="xs", more=True),
                                                      lit(2.0, T.f32, name="two"), name="scaled"),
                                           pat(ops.read, name="ys", more=True)), more=True)
    caps = match(p, write, producers(g.body))
    assert caps is not None and set(caps) == {"view", "xs", "two", "scaled", "ys"}
    assert caps["view"] is g.param("out").var
    (mul,) = _nodes(g, ops.mul)
    assert caps["scaled"] is mul.outputs[0] and isinstance(caps["two"], Literal) and caps["two"].value == 2.0
    reads = {n.inputs[0]: n.outputs[0] for n in _nodes(g, ops.read)}
    assert caps["xs"] is reads[g.param("x").var] and caps["ys"] is reads[g.param("y").var]
    # a different literal, dtype or op anywhere in the tree: no match
    for wrong in (lit(3.0), lit(2.0, T.f64), pat(ops.sub)):
        q = pat(ops.write, any_(), pat(ops.add, pat(ops.mul, any_(), wrong), any_()), more=True)
        assert match(q, write, producers(g.body)) is None, wrong


def test_without_more_the_operand_count_must_be_exact():
    g = axpy.trace()
    write = _final_write(g)
    assert match(pat(ops.write, any_(), any_()), write, producers(g.body)) is None  # write has its domain too
    assert match(pat(ops.write, any_(), any_(), any_()), write, producers(g.body)) is not None


def test_guards_see_every_capture_made_so_far():
    g = axpy.trace()
    mul = _nodes(g, ops.mul)[0]
    prod = producers(g.body)
    two = lambda c: c["k"].value == 2.0  # noqa: E731
    three = lambda c: c["k"].value == 3.0  # noqa: E731
    assert match(pat(ops.mul, any_("a"), lit(name="k"), guard=two), mul, prod) is not None
    assert match(pat(ops.mul, any_("a"), lit(name="k"), guard=three), mul, prod) is None
    # a guard on an operand runs when that operand matched, with the captures to its left
    seen = []
    p = pat(ops.mul, any_("a"), lit(name="k", guard=lambda c: seen.append(set(c)) or True))
    assert match(p, mul, prod) is not None and seen == [{"a", "k"}]


def test_a_name_captured_twice_is_one_value():
    g = square_exp.trace()
    prod = producers(g.body)
    same = pat(ops.mul, any_("a"), any_("a"))
    muls = _nodes(g, ops.mul)
    assert [match(same, m, prod) is not None for m in muls] == [True, False]  # a * a, then 2.0 * a
    # seeded captures: this position *is* that value
    (read,) = _nodes(g, ops.read)
    assert match(same, muls[0], prod, {"a": read.outputs[0]}) is not None
    assert match(same, muls[0], prod, {"a": g.param("x").var}) is None


def test_commutative_patterns_match_either_operand_order():
    g = square_exp.trace()
    prod = producers(g.body)
    scaled = _nodes(g, ops.mul)[1]  # mul 2.0, a
    ordered = pat(ops.mul, pat(ops.read, more=True), lit(2.0))
    assert match(ordered, scaled, prod) is None
    assert match(attrs.evolve(ordered, commutative=True), scaled, prod) is not None
    g2 = axpy.trace()  # mul a, 2.0: the ordered pattern matches there
    assert match(ordered, _nodes(g2, ops.mul)[0], producers(g2.body)) is not None
    # commutative matching backtracks: a capture made in one order constrains the other operand
    add = _nodes(g, ops.add)[0]
    (read,) = _nodes(g, ops.read)
    p = pat(ops.add, pat(ops.mul, lit(), any_("r")), pat(ops.exp, pat(ops.mul, any_("r"), any_("r"))),
            commutative=True)
    caps = match(p, add, prod)
    assert caps is not None and caps["r"] is read.outputs[0]
    assert len(list(matches(attrs.evolve(p.operands[0], commutative=True), _nodes(g, ops.mul)[1], prod))) == 1


def test_trait_sets_and_op_sets_select_ops():
    g = square_exp.trace()
    prod = producers(g.body)
    pointwise = [n.op for n in g.walk() if match(pat(POINTWISE), n, prod) is not None]
    assert pointwise == [ops.mul, ops.exp, ops.mul, ops.add]
    assert [n.op for n in g.walk() if match(pat({ops.exp, ops.read}), n, prod) is not None] == [ops.read, ops.exp]
    rs = row_sums.trace()
    assert [n.op for n in rs.walk() if match(pat(LOOPING), n, producers(rs.body)) is not None] == [ops.reduce]
    with pytest.raises(TypeError):
        pat("add")


def test_dtype_shape_and_attribute_constraints():
    g = row_sums.trace()
    prod = producers(g.body)
    (reduce,) = _nodes(g, ops.reduce)
    (read,) = _nodes(g, ops.read)
    n_dim = g.param("x").type.shape[1]
    assert match(pat(ops.reduce, attrs={"axes": (0,)}, dtype=T.f32, shape=()), reduce, prod) is not None
    assert match(pat(ops.reduce, attrs={"axes": (1,)}), reduce, prod) is None
    assert match(pat(ops.reduce, attrs={"axes": lambda a: len(a) == 1}), reduce, prod) is not None
    assert match(pat(ops.reduce, dtype={T.f16, T.f64}), reduce, prod) is None
    assert match(pat(ops.read, shape=(n_dim,)), read, prod) is not None
    assert match(pat(ops.read, shape=(g.param("x").type.shape[0],)), read, prod) is None  # Dims by identity
    assert match(pat(ops.read, shape=lambda s: len(s) == 1), read, prod) is not None
    # closed: no attribute besides those named (and the result-type / helper bookkeeping)
    assert match(pat(ops.reduce, attrs={"axes": (0,)}, closed=True), reduce, prod) is not None
    assert match(pat(ops.read, closed=True), read, prod) is None  # read has its index attribute
    # an absent attribute reads as None
    (mul,) = _nodes(g, ops.mul)
    assert match(pat(ops.mul, attrs={"approximate": None}), mul, prod) is not None
    # where: a predicate over the node itself (its regions, here)
    sums = pat(ops.reduce, where=lambda n: n.regions[0].nodes[0].op is ops.add)
    assert match(sums, reduce, prod) is not None
    assert match(attrs.evolve(sums, where=lambda n: n.regions[0].nodes[0].op is ops.maximum), reduce, prod) is None


def test_values_are_named_by_their_producer_and_parameters_by_identity():
    g = row_sums.trace()
    prod = producers(g.body)
    (write,) = _nodes(g, ops.write)
    # the written value is the reduce's result (a nested region's node: producers walks nested regions)
    p = pat(ops.write, any_("view"), pat(ops.reduce, pat(ops.mul, any_(), lit()), pat(ops.constant)), more=True)
    assert match(p, write, prod)["view"] is g.param("out").var
    assert match(p, write, producers(g.body, nested=False)) is None
    # a region parameter has no producer: an op pattern never matches it, any_ does
    (par,) = _nodes(g, ops.parallel)
    (point,) = par.regions[0].params
    assert match(pat(ops.domain), point, prod) is None and match(any_("p"), point, prod) == {"p": point}


def test_alternatives_are_tried_in_order():
    g = square_exp.trace()
    prod = producers(g.body)
    add = _nodes(g, ops.add)[0]
    left = any_of(pat(ops.exp, any_("e")), pat(ops.mul, name="m", more=True), name="either")
    caps = match(pat(ops.add, left, any_()), add, prod)
    assert set(caps) == {"either", "e"}  # the first alternative matched
    caps = match(pat(ops.add, any_(), left), add, prod)
    assert set(caps) == {"either", "m"}


# --- rewriting -------------------------------------------------------------------------------------------------

def _double_to_add(c):
    """x * 2.0 (either order) -> x + x."""
    x, node = c["x"], c["node"]
    return Node(ops.add, (x, x), (), node.outputs, loc=node.loc)


DOUBLE = pat(ops.mul, any_("x"), lit(2.0), commutative=True, name="node",
             guard=lambda c: not isinstance(c["x"], Literal))


def _run(graph, *arrays):
    outs = [np.array(a, copy=True) for a in arrays]
    GenericExecutable(graph)(*outs)
    return outs


def test_a_rewrite_builds_a_new_equivalent_graph_and_leaves_the_input_alone():
    g = square_exp.trace()
    before = str(g)
    new = rewrite(g, [(DOUBLE, _double_to_add)])
    assert new is not g and str(g) == before
    assert [n.op for n in g.body.nodes].count(ops.mul) == 2
    assert [n.op for n in new.body.nodes].count(ops.mul) == 1 and [n.op for n in new.body.nodes].count(ops.add) == 2
    x = np.linspace(-2.0, 1.5, 13, dtype=np.float32)
    want = np.exp(x.astype(np.float64) ** 2) + 2.0 * x.astype(np.float64)
    for graph in (g, new):
        _, out = _run(graph, x, np.zeros_like(x))
        np.testing.assert_allclose(out, want, rtol=2e-6)


def test_a_rewrite_that_changes_nothing_returns_the_same_graph():
    g = axpy.trace()
    assert rewrite(g, [(pat(ops.exp), lambda c: pytest.fail("no exp here"))]) is g
    assert rewrite(g, [(pat(ops.mul, name="n"), lambda c: None)]) is g  # a build may decline


def test_replacing_a_value_renames_its_uses_in_nested_regions():
    # x[i, n] * 2.0 -> its read (drop the doubling), inside the parallel loop's region
    g = row_sums.trace()
    new = rewrite(g, [(pat(ops.mul, any_("x"), lit(2.0)), lambda c: c["x"])])
    assert not _nodes(new, ops.mul) and _nodes(g, ops.mul)
    (reduce,) = _nodes(new, ops.reduce)
    (read,) = _nodes(new, ops.read)
    assert reduce.inputs[0] is read.outputs[0]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    _, doubled = _run(g, x, np.zeros(3, np.float32))
    _, plain = _run(new, x, np.zeros(3, np.float32))
    np.testing.assert_array_equal(doubled, 2 * x.sum(axis=1))
    np.testing.assert_array_equal(plain, x.sum(axis=1))


def test_rewrites_run_to_a_fixed_point_over_the_nodes_they_build():
    # mul(a, 2.0) -> add(a, a), then add(a, a) -> sub(add2...) chain: each built node is rewritten in turn
    g = axpy.trace()
    adds_to_sub = pat(ops.add, any_("a"), any_("a"), name="node")

    def twice_via_sub(c):
        a, node = c["a"], c["node"]
        neg = Var(a.type)
        return (Node(ops.neg, (a,), (), (neg,)), Node(ops.sub, (a, neg), (), node.outputs))

    new = rewrite(g, [(DOUBLE, _double_to_add), (adds_to_sub, twice_via_sub)])
    assert [n.op for n in new.body.nodes] == [ops.domain, ops.read, ops.neg, ops.sub, ops.read, ops.add, ops.write]
    x, y = np.float32([1.5, -2.0, 0.25]), np.float32([3.0, 4.0, -1.0])
    _, _, out = _run(new, x, y, np.zeros(3, np.float32))
    np.testing.assert_array_equal(out, 2 * x + y)


def test_rules_that_never_settle_are_refused(monkeypatch):
    from intent_trace.graph import patterns

    monkeypatch.setattr(patterns, "REWRITE_BUDGET", 50)
    g = axpy.trace()
    again = pat(ops.mul, name="node")
    with pytest.raises(RuntimeError, match="fixed point"):
        rewrite(g, [(again, lambda c: attrs.evolve(c["node"]))])


def test_a_build_with_the_wrong_number_of_results_is_refused():
    g = axpy.trace()
    with pytest.raises(ValueError, match="results"):
        rewrite(g, [(pat(ops.write), lambda c: Literal(0.0, T.ScalarType(T.f32)))])


def test_pattern_nodes_are_frozen():
    p = pat(ops.add, any_("a"), any_("b"))
    assert isinstance(p, Pat)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.name = "x"
