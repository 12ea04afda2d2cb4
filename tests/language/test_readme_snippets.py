"""The README's language snippets run as written (issue 15 items 5, 6, 13): the spec §6 carry example in its
staged form (``I.loop``), the row softmax with keepdims, and the call-time constexprs. Each code block is taken
from README.md itself, so an edit that breaks one fails here; the results are checked against NumPy folds.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

import intent_trace as intent
from intent_trace import I

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
BLOCKS = [textwrap.dedent(body) for _, body in re.findall(r"^( *)```python\n(.*?)^\1```", README, re.S | re.M)]


def block(marker: str) -> str:
    (found,) = [b for b in BLOCKS if marker in b]
    return found


def test_control_flow_decision_comes_first_and_names_the_combinators():
    decisions = README.split("## Decisions where the specs leave room", 1)[1]
    first = decisions.split("\n- ", 2)[1]
    assert first.startswith("**Python control flow on runtime values is staged**")
    for name in ("I.if_", "I.loop", "I.while_", "I.break_"):
        assert name in first


def transition(state, value):
    return state * 0.5 + value


def test_the_spec_carry_example_in_staged_form_runs(run):
    snippet = compile(block("state = I.loop("), "README.md", "exec")

    @intent.kernel
    def carried(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
        ns = {"I": I, "N": x.shape[0], "initial": I.cast(1.0, I.f32), "x": x, "transition": transition}
        exec(snippet, ns)
        y[0] = ns["state"]

    x = np.random.default_rng(3).standard_normal(9).astype(np.float32)
    y = np.full(1, np.nan, np.float32)
    run(carried, x, y)
    state = np.float32(1.0)
    for v in x:  # the ordered left fold the loop is
        state = state * np.float32(0.5) + v
    assert y[0] == state


def test_the_keepdims_softmax_snippet_runs(run):
    snippet = compile(block("keepdims=True)"), "README.md", "exec")

    @intent.kernel
    def softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        exec(snippet, {"I": I, "v": x[:, :], "y": y})

    x = (np.random.default_rng(4).standard_normal((3, 5)) * 3).astype(np.float32)
    y = np.full_like(x, np.nan)
    run(softmax, x, y)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_the_call_time_constexpr_snippet_runs():
    x = np.array([-1.5, 2.0, -0.25], np.float32)
    b = np.array([0.5, -3.0, 0.0], np.float32)
    y = np.full_like(x, np.nan)
    exec(compile(block("ACTIVATION=\"relu\")"), "README.md", "exec"), {"I": I, "intent": intent, "x": x, "b": b, "y": y})
    np.testing.assert_array_equal(y, x + b)  # its last call: ACTIVATION="none"
