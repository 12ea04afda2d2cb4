"""Row group values recomputed by each use instead of held in a row buffer (oracle/numba/rows.py, issue 19).

A cheap pointwise value of a row group used twice (layer norm's ``x - mean``) is computed again by each consumer;
one whose element costs more than :data:`~intent_trace.oracle.numba.rows.MAX_RECOMPUTED_OPS` cheap ops, or that
divides, keeps its row buffer. Either way each element is the same scalar code, so on kernels without a
transcendental function the cpu target matches generic bit for bit (NaN payloads, infinities, signed zeros), in
both builds, and every target gives NumPy's float64 answer within T5's bound.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import bits_equal
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import rows as cpu_rows
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.rows import row_groups

ZOO = benchmark_module("zoo_kernels")
rows, layer_norm = ZOO.rows, ZOO.layer_norm


@intent.kernel
def centre_twice(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """``c`` (one subtraction) is used by a reduction and by the output: recomputed."""
    c = x[:, :] - rows(I.reduce.max(x[:, :], axis=1), x)
    y[:, :] = c * rows(I.reduce.sum(c * c, axis=1), x)


@intent.kernel
def long_chain_twice(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """``c`` costs four ops an element (above the limit): kept in a row buffer."""
    m = rows(I.reduce.max(x[:, :], axis=1), x)
    c = ((x[:, :] - m) * 3.0 + 1.0) * x[:, :] - m
    y[:, :] = c - rows(I.reduce.sum(c, axis=1), x)


@intent.kernel
def quotient_twice(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """``c`` divides: kept in a row buffer."""
    c = x[:, :] / rows(I.reduce.max(I.abs(x[:, :]), axis=1), x)
    y[:, :] = c - rows(I.reduce.sum(c, axis=1), x)


def _ref(kernel, x):
    """(float64 result, per row the magnitude its rounding errors scale with: the largest result and the sum of
    the magnitudes of the row sum's terms)."""
    x = x.astype(np.float64)
    if kernel is centre_twice:
        c = x - x.max(axis=1, keepdims=True)
        want = c * (c * c).sum(axis=1, keepdims=True)
        return want, np.abs(want).max(axis=1, keepdims=True)
    if kernel is long_chain_twice:
        m = x.max(axis=1, keepdims=True)
        c = ((x - m) * 3.0 + 1.0) * x - m
    else:
        c = x / np.abs(x).max(axis=1, keepdims=True)
    want = c - c.sum(axis=1, keepdims=True)
    return want, np.abs(want).max(axis=1, keepdims=True) + np.abs(c).sum(axis=1, keepdims=True)


def _recomputed(kernel) -> list:
    """The names of the values each row group of ``kernel`` recomputes, by the nodes that make them."""
    (group,) = row_groups(intent.compile(kernel, target="cpu").graph.body).values()
    return [n.op.name for n in group.members for v in n.outputs if v in group.recomputed]


def _row_buffers(kernel) -> int:
    source = intent.compile(kernel, target="cpu", checks=False).source
    body = source.split("def kernel(", 1)[1].split("\n@njit", 1)[0]
    return len(re.findall(r"R\.alloc_empty\(\(ext1", body))


def test_which_values_are_recomputed():
    assert _recomputed(centre_twice) == ["sub"] and _row_buffers(centre_twice) == 0
    assert _recomputed(layer_norm) == ["sub"] and _row_buffers(layer_norm) == 0
    assert _recomputed(long_chain_twice) == [] and _row_buffers(long_chain_twice) == 1
    assert _recomputed(quotient_twice) == [] and _row_buffers(quotient_twice) == 1
    assert cpu_rows.MAX_RECOMPUTED_OPS == 3  # long_chain_twice's four ops are one past it


KERNELS = [centre_twice, long_chain_twice, quotient_twice]
SHAPES = [(1, 1), (3, 7), (5, 64), (4, 65), (2, 300)]  # 1-element rows, a lane block (64) and past it, a long row


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_numpy_on_every_target(run, kernel, shape):
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    y = np.full(shape, np.nan, np.float32)
    run(kernel, x, y)
    want, scale = _ref(kernel, x)
    n = shape[1]
    # T5: each row sum within about n roundings of its terms' magnitudes, then a few more roundings per element
    assert float((np.abs(y - want) / (scale + 1e-30)).max()) <= (n + 16) * 2.0**-24


def _specials(rng, shape):
    """Small integers (every sum, product and quotient below is exact, so the summation order cannot show) with
    each row holding 8 or -8 (``quotient_twice`` divides by 8), and at most one special value a row: an
    infinity, a signed zero or a NaN with a payload; the last row all -inf."""
    x = rng.integers(-7, 8, shape).astype(np.float32)
    x[:, 0] = np.where(rng.random(shape[0]) < 0.5, -8.0, 8.0)
    payload = np.array([0x7FC12345, 0xFFA00001], np.uint32).view(np.float32)  # NaNs with payloads, both signs
    specials = [np.inf, -np.inf, -0.0, payload[0], payload[1], 0.0]
    for r in range(shape[0] - 1):
        x[r, rng.integers(shape[1])] = specials[r % len(specials)]
    x[-1, :] = -np.inf
    return x


@pytest.mark.parametrize("build", ["serial", "parallel"])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
@pytest.mark.parametrize("shape", [(7, 9), (7, 70), (3, 1)])
def test_bit_for_bit_generic_with_specials(monkeypatch, build, kernel, shape):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if build == "parallel" else 1 << 62)
    x = _specials(np.random.default_rng(shape[1]), shape)
    outs = {}
    for target in ("generic", "cpu"):
        y = np.zeros(shape, np.float32)
        exe = intent.compile(kernel, target=target)
        exe(x, y)
        outs[target] = y
    if build == "parallel":
        assert exe.module.kernel_parallel.signatures
    assert bits_equal(outs["cpu"], outs["generic"])


@intent.kernel
def scaled_centre(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], t: I.f32):
    """``s = x * t`` depends on no member (hoisted) and is read by the max and by the output: recomputed by each
    use in the rows' loop, not materialised whole before it (a temperature-scaled softmax's first step)."""
    s = x[:, :] * t
    y[:, :] = s - rows(I.reduce.max(s, axis=1), x)


def test_a_hoisted_cheap_value_read_twice_is_recomputed_not_materialised():
    (group,) = row_groups(intent.compile(scaled_centre, target="cpu").graph.body).values()
    assert [n.op.name for n in group.hoisted for v in n.outputs if v in group.recomputed] == ["mul"]
    source = intent.compile(scaled_centre, target="cpu", checks=False).source
    body = source.split("def kernel(", 1)[1].split("\n@njit", 1)[0]
    assert not re.search(r"R\.alloc_empty\(\(ext0, ext1", body) and _row_buffers(scaled_centre) == 0


@pytest.mark.parametrize("build", ["serial", "parallel"])
@pytest.mark.parametrize("t", [0.5, -3.0, -0.0, np.inf, np.uint32(0x7FC00abc).view(np.float32)],
                         ids=["half", "minus-three", "minus-zero", "inf", "nan-payload"])
def test_the_hoisted_value_matches_generic_bit_for_bit(monkeypatch, build, t):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if build == "parallel" else 1 << 62)
    x = _specials(np.random.default_rng(11), (7, 70))
    outs = {}
    for target in ("generic", "cpu"):
        y = np.zeros(x.shape, np.float32)
        exe = intent.compile(scaled_centre, target=target)
        exe(x, y, np.float32(t))
        outs[target] = y
    if build == "parallel":
        assert exe.module.kernel_parallel.signatures
    assert bits_equal(outs["cpu"], outs["generic"])
