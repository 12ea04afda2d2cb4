"""Code generation for pointwise chains of any length (once: RecursionError at ~170 ops).

A fused value's element is written by closures calling their operands' closures, one level per op; past
``MAX_FUSION_DEPTH`` fused ops the emitter materialises the value where it is defined and the chain restarts
from an array, so generating source has bounded depth whatever the chain's length.
"""
from __future__ import annotations

import numpy as np

import intent_trace as intent
from intent_trace import I

def _chain(steps: int):
    @intent.kernel
    def chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        v = x[:]
        for _ in range(steps):  # an unrolled Python loop: two ops per step
            v = v * 0.5 + x[:]
        y[:] = v
    return chain


def _reference(x, steps: int):
    v = x.copy()
    for _ in range(steps):
        v = v * np.float32(0.5) + x  # float32 after every op, as the kernel rounds
    return v


def test_cpu_generates_and_runs_a_10000_op_chain():
    """10,000 ops: the source is generated, and the generated function (run as Python: Numba's compile time
    grows faster than linearly in a function's length) gives NumPy's result bit for bit."""
    steps = 5000
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    y = np.zeros_like(x)
    exe = intent.compile(_chain(steps), target="cpu", checks=False)
    exe.function.py_func(x, y, np.int64(8), np.int64(1 << 40), np.zeros(4, np.int64))
    np.testing.assert_array_equal(y, _reference(x, steps))


def test_cpu_compiles_and_runs_a_400_op_chain():
    steps = 200
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    y = np.zeros_like(x)
    intent.compile(_chain(steps), target="cpu")(x, y)
    np.testing.assert_array_equal(y, _reference(x, steps))

