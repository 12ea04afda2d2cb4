"""Long pointwise chains (an unrolled Python loop) lower on every TileLang target without recursion, and the
program handed to TileLang has bounded loop bodies: a chain of ~170 ops was a RecursionError, and a loop body of
10,000 bound values crashed TileLang's front end (a C++ stack overflow)."""
import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.emitter import CHAIN_LENGTH
from intent_trace.backends.tilelang.target import build, generate


def chain_kernel(n: int):
    @intent.kernel
    def chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        v = x[:]
        for k in range(n):
            v = v * 0.5 if k % 3 == 0 else (v + 1.25 if k % 3 == 1 else v - 0.75)
        y[:] = v

    return chain


def chain_reference(x: np.ndarray, n: int) -> np.ndarray:
    v = x.copy()
    for k in range(n):
        v = v * np.float32(0.5) if k % 3 == 0 else (v + np.float32(1.25) if k % 3 == 1 else v - np.float32(0.75))
    return v


def longest_body(program: str) -> int:
    """The most statements directly in one loop body (or the kernel's top level)."""
    counts: dict = {}
    stack = [(0, "top")]
    for k, line in enumerate(program.splitlines()):
        if not line.strip() or line.lstrip().startswith(("#", "@", "import", "def ")):
            continue
        indent = len(line) - len(line.lstrip())
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        counts[stack[-1][1]] = counts.get(stack[-1][1], 0) + 1
        if re.match(r"\s*(for|if|else|while|with)\b.*:$", line):
            stack.append((indent, k))
    return max(counts.values())


@pytest.mark.parametrize("target", ["tilelang-c", "tilelang-cuda", "tilelang-metal"])
def test_chain_of_10000_ops_lowers_with_bounded_loop_bodies(target):
    program = generate(chain_kernel(10_000).trace(), target)
    assert longest_body(program) <= CHAIN_LENGTH + 16


def test_chain_longer_than_one_loop_body_matches_numpy():
    n = 2 * CHAIN_LENGTH + 100  # split into three loop nests
    exe = build(chain_kernel(n).trace(), target="tilelang-c")
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    y = np.zeros_like(x)
    exe(x, y)
    np.testing.assert_array_equal(y, chain_reference(x, n))  # every step is one correctly rounded f32 op
