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
_CHOICE = re.compile(r"T\.if_then_else\([^,]*,")  # a launch's condition: T.if_then_else(d1 <= 1024, a, b)


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
        elif launch:  # the extents the grid covers (not one that only chooses between grids: a row's length)
            grid = _CHOICE.sub("(", launch.group(2).split(", threads")[0].split(", prelude")[0])
            level = len(set(_EXTENT.findall(grid)))
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
    assert work_degree("with T.Kernel(T.if_then_else(d1 <= T.int64(8), T.ceildiv(d0, 8), d0)) as bx:\n"
                       "    for i in T.serial(d1):\n        pass") == 2
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


# --- the fusion analysis' decisions (codegen/analysis.py), on graphs whose answer is written out by hand ---------

@intent.kernel
def read_used_twice(x: intent.I.In[intent.I.f32, ("N",)], y: intent.I.In[intent.I.f32, ("N",)],
                    out: intent.I.Out[intent.I.f32, ("N",)]):
    I = intent.I
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


@intent.kernel
def read_used_across_a_write(x: intent.I.InOut[intent.I.f32, ("N",)], out: intent.I.Out[intent.I.f32, ("N",)]):
    I = intent.I
    d = I.domain(0, x.shape[0])
    a = x[d]
    x[d] = a * 2.0
    out[d] = a + 1.0


@intent.kernel
def fill_used_twice(x: intent.I.In[intent.I.f32, ("M", "N")], out: intent.I.Out[intent.I.f32, ("M", "N")]):
    I = intent.I
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    twos = I.full((x.shape[0], x.shape[1]), 2.0, I.f32)
    out[m, n] = x[m, n] * twos + twos


def _defined_by(graph, op, fused):
    from intent_trace.graph.values import walk_region

    return [node.outputs[0] in fused for node in walk_region(graph.body) if node.op is op]


def test_a_cheap_value_used_twice_is_recomputed_by_each_consumer():
    # a view read, a broadcast, a fill: recomputed per consumer (REMATERIALIZED) rather than copied into an array,
    # when nothing between its definition and its last use writes what it reads (the analysis' docstring)
    from intent_trace.codegen.analysis import fusible_values
    from intent_trace.graph import ops

    g = read_used_twice.trace()
    fused, _, _ = fusible_values(g)
    assert _defined_by(g, ops.read, fused) == [True, True]  # x[d] (used twice) and y[d] (once)
    g = fill_used_twice.trace()
    fused, _, _ = fusible_values(g)
    assert _defined_by(g, ops.full, fused) == [True]
    # x[d] is read again after x[d] was written: materialised at its definition
    g = read_used_across_a_write.trace()
    fused, _, _ = fusible_values(g)
    assert _defined_by(g, ops.read, fused) == [False]


def test_a_value_read_after_a_write_to_its_view_is_snapshotted():
    from intent_trace.codegen.analysis import fusible_values, snapshot_values
    from intent_trace.graph import ops

    g = read_used_across_a_write.trace()
    fused, reads, _ = fusible_values(g)
    (read,) = [n for n in g.body.nodes if n.op is ops.read]
    assert snapshot_values(g, fused, reads) == {read.outputs[0]}
    g = read_used_twice.trace()
    fused, reads, _ = fusible_values(g)
    assert snapshot_values(g, fused, reads) == set()


def test_the_reused_values_match_numpy(run):
    x = np.linspace(-3.0, 2.0, 11, dtype=np.float32)
    y = np.float32(0.5) - x[::-1]
    out = np.zeros_like(x)
    run(read_used_twice, x, y, out)
    np.testing.assert_array_equal(out, np.maximum(x * np.float32(1.5) + y, x) - np.float32(0.25))
    grid = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    out = np.zeros_like(grid)
    run(fill_used_twice, grid, out)
    np.testing.assert_array_equal(out, grid * 2 + 2)
    inout, out = x.copy(), np.zeros_like(x)
    run(read_used_across_a_write, inout, out)
    np.testing.assert_array_equal(inout, x * np.float32(2.0))
    np.testing.assert_array_equal(out, x + np.float32(1.0))
