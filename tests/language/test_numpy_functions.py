"""NumPy functions on traced values: the ufuncs that are Python operators (np.multiply, np.negative,
np.float32(2) * x) trace as the operator does; every other ufunc, ufunc method and NumPy function is a
TraceError naming the user's line and the I.* spelling to write (never NumPy's own TypeError, and never a
silent wrong trace such as np.sum(x) returning x)."""
import os

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

FILE = os.path.basename(__file__)


def _kernel(body):
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        v = x[d]
        y[d] = body(v)
    return intent.kernel(k)


def _line(body) -> int:
    """The user's line: where the NumPy function is called (the body's lambda)."""
    return body.__code__.co_firstlineno


@pytest.mark.parametrize("body,spelling", [
    (lambda v: np.exp(v), "I.exp"),
    (lambda v: np.sqrt(v), "I.sqrt"),
    (lambda v: np.arcsin(v), "I.asin"),
    (lambda v: np.tanh(v), "I.tanh"),
    (lambda v: np.floor(v), "I.floor"),
    (lambda v: np.maximum(v, v), "I.maximum"),
    (lambda v: np.minimum(v, 1.0), "I.minimum"),
    (lambda v: np.sum(v), "I.reduce.sum"),
    (lambda v: np.max(v), "I.reduce.max"),
    (lambda v: np.where(v > 0.0, v, v), "I.where"),
    (lambda v: np.cumsum(v), "I.cumsum"),
    (lambda v: np.reshape(v, (-1,)), "I.reshape"),
    (lambda v: np.add.reduce(v), "I.reduce"),
    (lambda v: np.multiply.accumulate(v), "I.scan"),
], ids=["exp", "sqrt", "arcsin", "tanh", "floor", "maximum", "minimum", "sum", "max", "where", "cumsum", "reshape",
        "add.reduce", "multiply.accumulate"])
def test_numpy_function_is_a_trace_error_naming_the_line_and_the_spelling(body, spelling):
    k = _kernel(body)
    with pytest.raises(intent.TraceError, match=rf"{FILE}:{_line(body)}\b") as e:
        k.trace()
    assert spelling in str(e.value)
    assert isinstance(e.value, TypeError)


@pytest.mark.parametrize("body", [lambda v: np.concatenate([v, v]), lambda v: np.asarray(v),
                                  lambda v: np.ones(3, np.float32) * v, lambda v: np.multiply(v, v, dtype=np.float64),
                                  lambda v: np.array([v, v])],
                         ids=["concatenate", "asarray", "array-times", "ufunc-kwargs", "array-of"])
def test_numpy_without_an_intent_spelling_is_a_trace_error_naming_the_line(body):
    k = _kernel(body)
    with pytest.raises(intent.TraceError, match=rf"{FILE}:{_line(body)}\b") as e:
        k.trace()
    assert "I." in str(e.value)


def _ops(kernel) -> list:
    return [n.op.name for n in kernel.trace().walk()]


@pytest.mark.parametrize("body,op", [
    (lambda v: np.float32(2) * v, "mul"), (lambda v: v * np.float32(2), "mul"), (lambda v: np.float64(2) + v, "add"),
    (lambda v: np.int64(3) - v, "sub"), (lambda v: np.multiply(v, v), "mul"), (lambda v: np.negative(v), "neg"),
    (lambda v: np.abs(v), "abs"), (lambda v: np.true_divide(np.float32(1), v), "div"),
    (lambda v: I.cast(np.float32(2) < v, I.f32), "lt"), (lambda v: np.power(v, 2.0), "pow"),
], ids=["f32*v", "v*f32", "f64+v", "i64-v", "multiply", "negative", "abs", "true_divide", "less", "power"])
def test_numpy_operators_trace_as_the_python_operator(body, op):
    assert op in _ops(_kernel(body))


def test_numpy_scalar_operand_computes_like_a_python_number(run):
    k = _kernel(lambda v: np.float32(2) * v - np.float64(0.5) / v)
    x = np.array([1, 2, 4], np.float32)
    y = np.zeros(3, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, np.float32(2) * x - np.float32(0.5) / x)


def test_numpy_scalar_operand_first_is_in_operand_order():
    """np.float32(1) - v is 1 - v, not v - 1 (the reflected operand keeps its place)."""
    g = _kernel(lambda v: np.float32(1) - v).trace()
    (sub,) = [n for n in g.walk() if n.op.name == "sub"]
    assert type(sub.inputs[0]).__name__ == "Literal" and sub.inputs[0].value == 1


UFUNCS = sorted({getattr(np, n) for n in dir(np) if isinstance(getattr(np, n), np.ufunc)}, key=lambda u: u.__name__)


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_every_numpy_ufunc_traces_as_an_operator_or_is_a_trace_error_at_the_line(ufunc):
    """Never NumPy's own TypeError: each ufunc either traces (the Python operators) or names the user's line."""
    body = lambda v: ufunc(*([v] * ufunc.nin))  # noqa: E731
    k = _kernel(lambda v: I.cast(body(v), I.f32) if ufunc.nout == 1 else body(v)[0])
    try:
        k.trace()
    except intent.TraceError as e:  # a non-operator ufunc, or an operator on a dtype it does not take
        assert f"{FILE}:{_line(body)}," in str(e), str(e)
    else:
        from intent_trace.proxies.numpy_interop import operator_ufuncs

        assert ufunc in operator_ufuncs()
