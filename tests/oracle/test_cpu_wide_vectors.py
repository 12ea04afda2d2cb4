"""A function that sums in lanes asks LLVM for 512-bit loop vectors (intent_trace/oracle/numba/lanes.py).

LLVM vectorises loops 256 bits wide on the AVX-512 cores it tunes for unless the function carries
``"prefer-vector-width"="512"``; :func:`~intent_trace.oracle.numba.lanes.lanes_fill` adds it to the function it is
compiled into, so a row kernel's element loops run at the width of its lane sums. The attribute is checked in the
LLVM IR Numba compiles (the same on every machine), and the element loop's results against NumPy: the width must
not change a single bit (element code is not reassociated).
"""
from __future__ import annotations

import re

import numpy as np
from numba import njit

from intent_trace.oracle.numba.lanes import (WIDE_VECTORS, lanes_add, lanes_array, lanes_fill, lanes_load, lanes_store,
                                             lanes_sum)


@njit(cache=False)
def _centred_squares_sum(x, y, m):
    """``y = (x - m) * (x - m)`` elementwise and the lane sum of ``x`` (as a row kernel's passes)."""
    for i in range(x.shape[0]):
        y[i] = (x[i] - m) * (x[i] - m)
    lanes = lanes_array(m)
    lanes_store(lanes_fill(np.float32(0)), lanes, 0)
    v = lanes_load(lanes, 0)
    whole = x.shape[0] // 64
    for q in range(whole):
        v = lanes_add(v, x, q * 64)
    lanes_store(v, lanes, 0)
    for j in range(x.shape[0] - whole * 64):
        lanes[j] += x[whole * 64 + j]
    return lanes_sum(lanes_load(lanes, 0))


@njit(cache=False)
def _plain(x, y, m):
    for i in range(x.shape[0]):
        y[i] = x[i] - m


def _definitions(dispatcher) -> list:
    """The module's ``define`` lines, each with its attribute groups (``#N``, optimised IR) written out."""
    (ir,) = dispatcher.inspect_llvm().values()
    groups = dict(re.findall(r"^attributes (#\d+) = \{(.*)\}$", ir, re.M))
    return [re.sub(r"#\d+", lambda m: groups.get(m.group(0), m.group(0)), line)
            for line in ir.splitlines() if line.startswith("define ")]


def test_lane_sum_function_prefers_wide_vectors():
    x = np.linspace(-3, 5, 1000, dtype=np.float32)
    y = np.empty_like(x)
    m = np.float32(0.375)
    _centred_squares_sum(x, y, m)
    definitions = _definitions(_centred_squares_sum)
    # the function holding the loops (Numba's own symbol for it: not its CPython wrapper) carries the attribute
    assert any("_centred_squares_sum" in d and "cpython" not in d and WIDE_VECTORS in d for d in definitions), \
        definitions


def test_other_functions_keep_llvm_default():
    x = np.ones(100, np.float32)
    _plain(x, np.empty_like(x), np.float32(1))
    assert not any(WIDE_VECTORS in d for d in _definitions(_plain))


def test_wide_element_loop_same_bits_as_numpy():
    """Every length around the 16-float vector and 64-lane boundaries, values with every exponent sign: the
    element loop gives NumPy's float32 bits and the sum the lane order's (replayed in NumPy)."""
    rng = np.random.default_rng(7)
    for n in (1, 15, 16, 17, 63, 64, 65, 127, 129, 1000, 1027):
        x = (rng.standard_normal(n) * rng.choice([1e-30, 1.0, 1e30], n)).astype(np.float32)
        x[rng.integers(0, n)] = np.float32(np.nan) if n > 3 else x[0]
        m = np.float32(0.25)
        y = np.empty_like(x)
        total = _centred_squares_sum(x, y, m)
        with np.errstate(over="ignore"):
            want = (x - m) * (x - m)
        assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), n
        lanes = np.zeros(64, np.float32)
        for c in range(0, n, 64):
            chunk = x[c:c + 64]
            lanes[:chunk.size] = lanes[:chunk.size] + chunk
        while lanes.size > 1:
            lanes = lanes[:lanes.size // 2] + lanes[lanes.size // 2:]
        assert np.array_equal(np.float32(total).view(np.uint32), lanes[0].view(np.uint32)) or \
            (np.isnan(total) and np.isnan(lanes[0])), n
