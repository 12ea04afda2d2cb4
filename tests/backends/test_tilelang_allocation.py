"""Allocations that cannot fit are refused with limits.py's ValueError naming what, its shape and its size: heap
buffers inside a tilelang-c kernel (an element count that overflows int64 included, which once wrapped to a tiny
malloc the kernel then overran), staging copies and host workspaces on the host before the call."""
import os
import subprocess
import sys

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.target import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@intent.kernel
def sized(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], n: I.i64, m: I.i64):
    b = I.buffer((n, m), I.f32, init=2.0)  # a heap buffer sized by the call's scalars
    y[:] = x[:] + b[0, 0]


def test_heap_buffer_over_the_limit_is_a_value_error_and_commits_nothing(monkeypatch):
    exe = intent.compile(sized, target="tilelang-c")
    y = np.zeros(3, np.float32)
    exe(np.ones(3, np.float32), y, 4, 5)
    np.testing.assert_array_equal(y, np.full(3, 3.0, np.float32))
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", str(1 << 20))
    y[:] = -1.0
    with pytest.raises(ValueError) as e:
        exe(np.ones(3, np.float32), y, 1 << 18, 2)
    assert str(e.value).startswith("a local buffer for op `buffer` at test_tilelang_allocation.py:22 of shape "
                                   "(262144, 2) needs 524288 elements (2097152 bytes), more than the 1048576 bytes")
    np.testing.assert_array_equal(y, np.full(3, -1.0, np.float32))
    exe(np.ones(3, np.float32), y, 1 << 10, 2)  # under the limit: runs
    np.testing.assert_array_equal(y, np.full(3, 3.0, np.float32))


_OVERFLOW = """
import numpy as np, intent_trace as intent
from backends.test_tilelang_allocation import sized
exe = intent.compile(sized, target="tilelang-c")
y = np.full(3, -1.0, np.float32)
for n, m in ((1 << 33, 1 << 33), (1 << 62, 4), (1 << 31, 1 << 31)):
    try:
        exe(np.ones(3, np.float32), y, n, m)
        print("no error", n, m)
    except ValueError as e:
        assert f"of shape ({n}, {m}) needs {n * m} elements" in str(e), str(e)
assert (y == -1.0).all()
print("ok")
"""


def test_element_count_overflow_is_refused_not_wrapped():
    """(2^33)^2 elements wrapped to 0 in int64: malloc(1), then the fill overran it. In a subprocess: the old
    behaviour crashed the process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
           "INTENT_TRACE_MAX_ALLOCATION": str(1 << 30)}
    done = subprocess.run([sys.executable, "-c", _OVERFLOW], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.splitlines()[-1:] == ["ok"], \
        f"exit status {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@intent.kernel
def copy(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, ("N",)]):
    y[:] = x[:] * 2.0


def test_staging_copy_over_the_limit_is_refused_before_the_call(monkeypatch):
    exe = intent.compile(copy, target="tilelang-c")
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "1000")
    y = np.full(200, 7.0)
    with pytest.raises(ValueError, match=r"the staging copy of view y of shape \(200,\) needs 200 elements \(1600 "
                                         r"bytes\), more than the 1000 bytes"):
        exe(np.ones(200), y)
    assert (y == 7.0).all()
    small = np.zeros(100)
    exe(np.ones(100), small)
    assert (small == 2.0).all()


@pytest.mark.parametrize("target", ["tilelang-cuda", "tilelang-metal"])
def test_host_workspace_over_the_limit_is_refused_before_anything_is_allocated(monkeypatch, target):
    exe = build(sized.trace(), target=target)
    assert exe.workspaces, exe.program
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", str(1 << 20))
    dims = {ev.extent: 3 for ev in exe.graph.extents}
    with pytest.raises(ValueError, match=r"workspace W0 of shape \(262144, 2\) for op `buffer` at "
                                         r"test_tilelang_allocation.py:22 needs 524288 elements \(2097152 bytes\)"):
        exe._workspace_tensors(dims, [None, None, 1 << 18, 2])
