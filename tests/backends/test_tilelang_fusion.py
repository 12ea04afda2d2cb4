"""A row reduction under a broadcast is computed once per row on every TileLang target, not once per element.

The emitter keeps tensors lazy: a reduce result fused under a broadcast re-ran its loop for every element of the
row (N^3 per row for a whole-tensor softmax; causal attention at L=128 took 57 s). The count here is the work
degree of the lowered program: the most loops over run-time extents (a launch grid counts one per extent it
covers) nested in one another. Softmax and layer norm are degree 2 (rows x columns), attention degree 3 (its
matmuls); each recomputation of a reduction inside its consumer's loops adds one.
"""
import re

import numpy as np
import pytest

import intent_trace as intent
from backends import fusion_kernels as F
from intent_trace.backends.tilelang.target import generate

TARGETS = ("tilelang-c", "tilelang-cuda", "tilelang-metal")
_LOOP = re.compile(r"^(\s*)for \w+ in T\.(?:serial|unroll|Parallel)\((.*)\):$")
_LAUNCH = re.compile(r"^(\s*)with T\.Kernel\((.*)\) as \w+:$")
_EXTENT = re.compile(r"\bd\d+\b")


def work_degree(program: str) -> int:
    """The most run-time-sized loop levels nested in one another (a static loop is 0, a grid over d0*d1 is 2)."""
    stack: list = []  # (indent, degree of this level)
    best = 0
    for line in program.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        loop, launch = _LOOP.match(line), _LAUNCH.match(line)
        if loop:
            extent = loop.group(2).split(",")[0].strip()
            level = 0 if re.fullmatch(r"(T\.int64\()?\d+\)?", extent) else 1
        elif launch:
            level = len(set(_EXTENT.findall(launch.group(2).split(", threads")[0].split(", prelude")[0])))
        else:
            continue
        stack.append((indent, level))
        best = max(best, sum(d for _, d in stack))
    return best


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel, degree", [(F.softmax, 2), (F.layer_norm, 2), (F.causal_attention, 3)],
                         ids=["softmax", "layer_norm", "causal_attention"])
def test_each_reduction_runs_once_per_row(kernel, degree, target):
    assert work_degree(generate(kernel.trace(), target)) == degree


def test_work_degree_counts_nested_run_time_loops():
    text = "\n".join(["with T.Kernel(T.max(T.ceildiv(d0 * d1, 128), 1), threads=128) as bx:",
                      "    for u in T.serial(4):", "        for i in T.serial(d1):", "            x = 1",
                      "    for j in T.serial(d0):", "        y = 2"])
    assert work_degree(text) == 3
    assert work_degree("with T.Kernel(1) as _:\n    for i in T.serial(d0):\n        for j in T.serial(d0):\n"
                       "            pass\n    for k in T.serial(n7):\n        pass") == 2


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_layer_norm_and_attention_match_numpy(run):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = np.zeros_like(x)
    run(F.softmax, x, y)
    np.testing.assert_allclose(y, _softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    g, b = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    run(F.layer_norm, x, g, b, y)
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=1, keepdims=True)
    ref = centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    q, k, v = (rng.standard_normal((6, 4)).astype(np.float32) for _ in range(3))
    out = np.zeros((6, 4), np.float32)
    run(F.causal_attention, q, k, v, out, np.float32(0.5))
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) * 0.5
    s[np.triu_indices(6, 1)] = -np.inf
    np.testing.assert_allclose(out, _softmax(s) @ v.astype(np.float64), rtol=1e-4, atol=1e-5)
