"""The cpu oracle runs the graphs TileLang maps after an extent equality (``I.assume_equal``) in parallel too. A
prologue check stands before anything that may fail (schedule.prologue), so it is made where it stands, before the
cpu's row loop (oracle/numba/rows.py) and its parallel build's loops; a statement made between a chain's members is
not a prologue check and stays in place on every target, with the body's order of errors. References: NumPy; a
failed statement raises EXTENT_EQUAL's ValueError with the output unchanged.
"""
import re

import numpy as np
import pytest

import intent_trace as intent
from backends.prologue_kernels import layer_norm_after, layer_norm_ref, softmax_after, softmax_ref
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.rows import row_groups
from intent_trace.schedule.prologue import prologue

RNG = np.random.default_rng(1517)
U32 = 2.0 ** -24


@intent.kernel
def layer_norm_stated_between(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("K",)], b: I.In[I.f32, ("K",)],
                              y: I.Out[I.f32, ("M", "N")]):
    """A whole-tensor layer norm with the statement between its row members (after the mean, before the
    variance)."""
    v = x[:, :]
    n = I.cast(x.shape[1], I.f32)
    d = v - I.reshape(I.reduce.sum(v, axis=1) / n, (x.shape[0], 1))
    I.assume_equal(w.shape[0], x.shape[1])
    var = I.reduce.sum(d * d, axis=1) / n
    y[:, :] = d / I.reshape(I.sqrt(var + 1e-5), (x.shape[0], 1)) * w[:] + b[:]


def _kernel_source(source: str, function: str) -> str:
    """The text of one top-level function of the generated module."""
    body = source[source.index(f"def {function}("):]
    end = re.search(r"^\S", body[body.index("\n"):], re.M)
    return body if end is None else body[:body.index("\n") + end.start()]


def test_a_leading_statement_is_made_before_the_one_row_loop():
    exe = intent.compile(layer_norm_after, target="cpu")
    (group,) = row_groups(exe.graph.body).values()
    assert not any("check" in n.op.effects for n in (*group.hoisted, *group.members))
    body = _kernel_source(exe.source, "kernel")
    loops = [m.start() for m in re.finditer(r"^ *for \w+ in prange\(", body, re.M)]
    assert len(loops) == 1, body  # one loop nest over the rows
    check = re.search(r"^    if (n\d+) != (n\d+):\n        err\[0\] = 1$", body, re.M)
    assert check is not None and check.start() < loops[0], body


def test_a_statement_between_row_members_is_not_the_prologue():
    """A member before it may fail (the reshape's element count, an allocation): made first, it could be reported
    instead; so it stays where it stands."""
    assert not prologue(layer_norm_stated_between.trace())


def _layer_norm_bound(x, w, b):
    """tests/backends/test_tilelang_cuda_rows.py's layer norm bound (T5 for the row sums; the cpu's sums are
    serial, well inside it)."""
    n = x.shape[1]
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    norm = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    spread = np.max(np.abs(x64), axis=1, keepdims=True) / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    return (4 * (n + 2) * (1 + spread) + 8) * U32 * (np.abs(norm * w) + np.abs(w)) + U32 * np.abs(b) * 2


@pytest.mark.parametrize("threshold", [cpu_target.PARALLEL_THRESHOLD, 0], ids=["serial", "parallel"])
@pytest.mark.parametrize("kernel", [layer_norm_after, layer_norm_stated_between], ids=lambda k: k.name)
def test_layer_norm_after_a_statement_on_both_builds(monkeypatch, threshold, kernel):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", threshold)
    x = (RNG.standard_normal((7, 45)) * 2 + 1).astype(np.float32)
    w, b = RNG.standard_normal((2, 45)).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe = intent.compile(kernel, target="cpu")
    exe(x, w, b, y)
    assert bool(getattr(exe.module, "kernel_parallel").signatures) == (threshold == 0)
    assert np.all(np.abs(y - layer_norm_ref(x, w, b)) <= _layer_norm_bound(x, w, b))
    y[:] = 5.0
    with pytest.raises(ValueError) as e:
        exe(x, np.ones(44, np.float32), np.ones(44, np.float32), y)
    assert re.fullmatch(r"I\.assume_equal: the sides differ: K \(.*\) is 44, but N \(.*\) is 45", str(e.value))
    assert np.all(y == 5.0)


def test_softmax_rows_behind_a_statement_run_on_the_parallel_build():
    """Above the threshold (65,536 elements) the call runs the parallel build over the rows of the loop."""
    m, n = 64, 1025
    x = (RNG.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe = intent.compile(softmax_after, target="cpu")
    exe(x, np.zeros(m // 2, np.float32), y)
    assert exe.module.kernel_parallel.signatures
    want = softmax_ref(x)
    spread = np.max(np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True)), axis=1, keepdims=True)
    assert np.all(np.abs(y - want) <= (n + 2 * spread + 10) * U32 * want)
    y[:] = 1.5
    with pytest.raises(ValueError, match=r"the sides differ: M \(.*\) is 64, but 2\*H \(.*\) is 62"):
        exe(x, np.zeros(31, np.float32), y)
    assert np.all(y == 1.5)
