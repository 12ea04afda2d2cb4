"""Constexprs at call time (issue 15 item 6): ``kernel(a, b, c, ACTIVATION="relu")`` and
``exe(a, b, c, ACTIVATION="relu")`` run that value's specialisation, built once per value (the same object, no
second trace), on every executable target; ``intent.compile`` of a kernel whose constexpr has no value yet gives
an executable that takes it per call. The references are NumPy's.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I, specialize
from intent_trace.targets import builder_for

TRACES: list = []  # (ACTIVATION, SCALE) of every trace of _bias_act


class Side(I.Enum):
    LEFT = "left"
    RIGHT = "right"


@intent.kernel
def _bias_act(x: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)],
              ACTIVATION: I.Constexpr[str], SCALE: I.Constexpr[int] = 1, SIDE: I.Constexpr[Side] = Side.LEFT):
    TRACES.append((ACTIVATION, SCALE))
    v = x[:] + b[:] if SIDE == Side.LEFT else b[:] - x[:]
    if ACTIVATION == "relu":
        v = I.maximum(v, 0.0)
    elif ACTIVATION == "neg":
        v = -v
    y[:] = v * float(SCALE)


def reference(x, b, activation, scale=1, side=Side.LEFT):
    v = x + b if side == Side.LEFT else b - x
    v = {"relu": np.maximum(v, np.float32(0)), "neg": -v}.get(activation, v)
    return v * np.float32(scale)


X = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], np.float32)
B = np.array([0.5, 0.25, -1.0, 0.0, -4.0], np.float32)


def _run(fn, **kw):
    y = np.full_like(X, np.nan)
    fn(X, B, y, **kw)
    return y


@pytest.mark.parametrize("kw", [{"ACTIVATION": "relu"}, {"ACTIVATION": "neg", "SCALE": 3},
                                {"ACTIVATION": "none", "SIDE": Side.RIGHT}])
def test_direct_call_specialises_on_keywords(target, kw):
    got = _run(lambda *a, **k: _bias_act(*a, target=target, **k), **kw)
    np.testing.assert_array_equal(got, reference(X, B, kw["ACTIVATION"], kw.get("SCALE", 1), kw.get("SIDE", Side.LEFT)))


def test_compiled_executable_specialises_on_keywords(target):
    exe = intent.compile(_bias_act, target=target, ACTIVATION="none")
    np.testing.assert_array_equal(_run(exe), reference(X, B, "none"))
    np.testing.assert_array_equal(_run(exe, ACTIVATION="relu"), reference(X, B, "relu"))
    np.testing.assert_array_equal(_run(exe, SCALE=2), reference(X, B, "none", 2))  # the others stay exe's
    np.testing.assert_array_equal(_run(exe, ACTIVATION="neg", SIDE=Side.RIGHT), reference(X, B, "neg", 1, Side.RIGHT))
    np.testing.assert_array_equal(_run(exe), reference(X, B, "none"))  # exe itself is unchanged


def test_compile_without_a_value_takes_it_per_call(target):
    exe = intent.compile(_bias_act, target=target, SCALE=2)
    assert isinstance(exe, specialize.Deferred) and "ACTIVATION" in repr(exe)
    for act in ("relu", "neg", "none"):
        np.testing.assert_array_equal(_run(exe, ACTIVATION=act), reference(X, B, act, 2))
    np.testing.assert_array_equal(_run(exe, ACTIVATION="relu", SCALE=5), reference(X, B, "relu", 5))


_FRESH = itertools.count(100)  # a SCALE no earlier test traced (traces are cached per kernel, across targets)


def test_a_value_is_traced_and_built_once(target):
    scale = next(_FRESH)
    exe = intent.compile(_bias_act, target=target, ACTIVATION="none", SCALE=scale)
    TRACES.clear()
    first = specialize.respecialize(exe, {"ACTIVATION": "relu"})
    for _ in range(3):
        np.testing.assert_array_equal(_run(exe, ACTIVATION="relu"), reference(X, B, "relu", scale))
        _run(lambda *a, **k: _bias_act(*a, target=target, **k), ACTIVATION="relu", SCALE=scale)
    assert specialize.respecialize(exe, {"ACTIVATION": "relu"}) is first
    assert specialize.specialization(_bias_act, target, {"ACTIVATION": "relu", "SCALE": scale}, {}) is first
    assert specialize.respecialize(exe, {"ACTIVATION": "none"}) is exe  # its own values: itself
    assert TRACES == [("relu", scale)]  # one trace for the new value, none for repeats
    deferred = intent.compile(_bias_act, target=target)
    assert specialize.respecialize(deferred, {"ACTIVATION": "relu", "SCALE": scale}) is first


@pytest.mark.parametrize("target_name", ["cpu", "tilelang-c"])
def test_respecialisation_keeps_the_target_options(target_name):
    exe = intent.compile(_bias_act, target=target_name, ACTIVATION="none", checks=False)
    other = specialize.respecialize(exe, {"ACTIVATION": "relu"})
    assert other is not exe and other.checks is False and exe.checks is False
    np.testing.assert_array_equal(_run(exe, ACTIVATION="relu"), reference(X, B, "relu"))


@pytest.mark.parametrize("kw, words", [({"ACTIVATON": "relu"}, "no constexpr parameter ACTIVATON"),
                                       ({"ACTIVATION": 1}, "constexpr ACTIVATION must be a str"),
                                       ({"SIDE": "left"}, "constexpr SIDE must be a Side"),
                                       ({"x": 1.0}, "no constexpr parameter x")])
def test_bad_keywords_are_type_errors_naming_them_and_change_nothing(target, kw, words):
    exe = intent.compile(_bias_act, target=target, ACTIVATION="none")
    deferred = intent.compile(_bias_act, target=target)
    calls = [lambda y: exe(X, B, y, **kw), lambda y: deferred(X, B, y, ACTIVATION="relu", **kw)
             if "ACTIVATION" not in kw else deferred(X, B, y, **kw),
             lambda y: _bias_act(X, B, y, target=target, ACTIVATION="relu", **kw)
             if "ACTIVATION" not in kw else _bias_act(X, B, y, target=target, **kw)]
    for call in calls:
        y = np.full_like(X, 7.0)
        with pytest.raises(TypeError, match=words):
            call(y)
        assert (y == 7.0).all()  # nothing ran
    (name,) = kw  # at compile a name that is no constexpr is a target option: the target refuses it, naming it
    with pytest.raises(TypeError, match=words if name in _bias_act.constexpr_params else f"'{name}'"):
        intent.compile(_bias_act, target=target, **({"ACTIVATION": "none"} | kw))


def test_a_missing_constexpr_keeps_its_error(target):
    deferred = intent.compile(_bias_act, target=target)
    for call in (lambda y: deferred(X, B, y), lambda y: deferred(X, B, y, SCALE=2),
                 lambda y: _bias_act(X, B, y, target=target)):
        y = np.full_like(X, 7.0)
        with pytest.raises(TypeError, match="constexpr ACTIVATION needs a value"):
            call(y)
        assert (y == 7.0).all()
    with pytest.raises(TypeError, match="constexpr ACTIVATION needs a value"):
        _bias_act.trace()


def test_an_executable_built_from_a_graph_takes_no_keywords(target):
    @intent.kernel
    def copy(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], FLIP: I.Constexpr[bool] = False):
        y[:] = -x[:] if FLIP else x[:]

    exe = builder_for(target)(copy.trace())  # the target's builder, not intent.compile: no kernel behind it
    y = np.full_like(X, 7.0)
    with pytest.raises(TypeError, match="takes runtime arguments only"):
        exe(X, y, FLIP=True)
    assert (y == 7.0).all()
    exe(X, y)
    np.testing.assert_array_equal(y, X)


def test_a_positional_constexpr_is_still_a_runtime_argument_count_error(target):
    exe = intent.compile(_bias_act, target=target, ACTIVATION="none")
    with pytest.raises(TypeError, match="takes 3 runtime arguments"):
        exe(X, B, np.zeros_like(X), "relu")
