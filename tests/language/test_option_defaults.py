"""Numeric options at their defaults are no options (issue 15, item 11): ``I.fdiv(a, b)`` is the same canonical
node as ``a / b``, ``I.exp2(x, approximate=False)`` the same as ``I.exp2(x)``; only a chosen option is recorded."""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops


def _kernel(body):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], d: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        y[:] = body(x[:], d[:])

    return k


def _only(graph, op):
    (node,) = [n for n in graph.body.nodes if n.op is op]
    return node


@pytest.mark.parametrize("spelled, plain, op", [
    (lambda x, d: I.fdiv(x, d), lambda x, d: x / d, ops.div),
    (lambda x, d: I.fdiv(x, d, approximate=False, flush_to_zero=False), lambda x, d: x / d, ops.div),
    (lambda x, d: I.exp2(x, approximate=False), lambda x, d: I.exp2(x), ops.exp2),
    (lambda x, d: I.tanh(x, approximate=False), lambda x, d: I.tanh(x), ops.tanh),
], ids=["fdiv", "fdiv-explicit-defaults", "exp2", "tanh"])
def test_default_options_build_the_plain_node(spelled, plain, op):
    a, b = _kernel(spelled).trace(), _kernel(plain).trace()
    assert _only(a, op).attrs == _only(b, op).attrs == ()
    strip = lambda g: [line.split("  #")[0] for line in str(g).splitlines()]  # noqa: E731 (source lines differ)
    assert strip(a) == strip(b)


def test_a_chosen_option_is_recorded_alone():
    g = _kernel(lambda x, d: I.fdiv(x, d, approximate=True)).trace()
    assert _only(g, ops.div).attrs == (("approximate", True),)
    g = _kernel(lambda x, d: I.fdiv(x, d, approximate=True, flush_to_zero=True)).trace()
    assert _only(g, ops.div).attrs == (("approximate", True), ("flush_to_zero", True))


def test_fdiv_with_defaults_divides_correctly_rounded(run):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(37).astype(np.float32)
    d = rng.standard_normal(37).astype(np.float32)
    d[[0, 5, 36]] = (0.0, -0.0, np.inf)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        want = x / d  # f32 division is correctly rounded (T3)
    run(_kernel(lambda a, b: I.fdiv(a, b)), x, d, y)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
