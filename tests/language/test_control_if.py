"""Language §5-6: I.if_ (run-time branch choice, branch schemas), I.select, Python truth values of proxies."""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from graph_nodes import _nodes
from intent_trace import I


# --- I.if_ --------------------------------------------------------------------------------------------------------

def test_if_chooses_branch_at_run_time(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(x[0] > 0.0, lambda: x[d] * 2.0, lambda: x[d] - 1.0)

    y = np.zeros(3, np.float32)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x * 2)
    run(k, -x, y)
    np.testing.assert_array_equal(y, -x - 1)


def test_if_traces_both_branches():
    calls = []

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])

        def then():
            calls.append("then")
            return I.exp(x[d])

        def other():
            calls.append("else")
            return I.log(x[d])

        y[d] = I.if_(x[0] > 0.0, then, other)

    g = k.trace()
    assert calls == ["then", "else"]
    (node,) = _nodes(g, "if")
    assert [[n.op.name for n in r.nodes] for r in node.regions] == [["read", "exp"], ["read", "log"]]


def test_if_effect_only_without_else(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        for i in I.domain(0, x.shape[0]):
            def store():
                y[i] = x[i]

            I.if_(x[i] > 0.0, store)

    x = np.array([1.0, -2.0, 3.0], np.float32)
    y = np.full(3, 9.0, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, [1.0, 9.0, 3.0])


def test_if_branch_schema_mismatch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(x[0] > 0.0, lambda: x[d], lambda: x[0])

    with pytest.raises(intent.TraceError, match="different schemas") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


def test_if_scalar_and_rank0_tensor_are_different_schemas():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        v = I.if_(x[0] > 0.0, lambda: x[0], lambda: I.full((), 1.0, I.f32))
        y[0] = v

    with pytest.raises(intent.TraceError, match="different schemas"):
        k.trace()


def test_if_only_one_branch_returning_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(x[0] > 0.0, lambda: x[d])

    with pytest.raises(intent.TraceError, match="both"):
        k.trace()


def test_if_tensor_predicate_is_a_trace_error_pointing_to_select():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(x[d] > 0.0, lambda: x[d], lambda: -x[d])

    with pytest.raises(intent.TraceError, match=r"I\.select") as e:
        k.trace()
    assert isinstance(e.value, TypeError)


def test_if_python_bool_predicate_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(True, lambda: x[d], lambda: -x[d])

    with pytest.raises(intent.TraceError, match="Python `if`"):
        k.trace()


def test_if_value_escaping_branch_is_a_trace_error():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        box = []
        I.if_(x[0] > 0.0, lambda: box.append(x[d] * 2.0))
        y[d] = box[0]

    with pytest.raises(intent.TraceError, match="I.if_"):
        k.trace()


def test_select_is_the_elementwise_choice(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        v = x[d]
        y[d] = I.select(v > 0.0, v, v * -10.0)

    x = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.where(x > 0, x, x * -10))


# --- Python truth values of proxies ---------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["if", "bool", "and", "not", "while"])
def test_proxy_truth_value_is_a_trace_error_pointing_to_if_and_select(form):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        p = x[0] > 0.0
        if form == "if":
            if p:
                pass
        elif form == "bool":
            bool(p)
        elif form == "and":
            p and p  # noqa: B018
        elif form == "not":
            not p  # noqa: B018
        else:
            while p:
                break
        y[d] = x[d]

    with pytest.raises(intent.TraceError) as e:
        k.trace()
    msg = str(e.value)
    assert isinstance(e.value, TypeError)
    assert "I.if_" in msg and "I.select" in msg
