"""tilelang-c run-time checks: a failed check leaves the kernel cleanly (no read of freed memory, no double free),
raises the right exception and changes none of the caller's arrays."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("tilelang")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_unique_store_collisions_at_every_pair_raise_and_leave_arguments_unchanged():
    """TileLang distributes an ``if`` over the statements of its body, re-evaluating the condition before each:
    a check whose condition reads the heap mask it then frees read freed memory and freed it twice (SIGABRT).
    Every pair of positions of several sizes collides, in a subprocess a crash cannot take down."""
    probe = os.path.join(ROOT, "tests", "backends", "collision_probe.py")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    sizes = ["2", "3", "5", "7", "8", "9", "16", "33"]
    done = subprocess.run([sys.executable, probe, *sizes], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    lines = [line for line in done.stdout.splitlines() if line]
    assert done.returncode == 0 and lines and lines[-1].startswith("ok "), \
        f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


# --- error messages never read user text as a format template ------------------------------------------------

SOURCE = '''\
import intent_trace as intent
from intent_trace import I


@intent.kernel
def scatter(x: I.In[I.f32, ("K",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("N",)], n: I.i64):
    b = I.buffer((y.shape[0],), I.f32, init=0.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = x[k]
    y[:] = b[:]
    c = I.buffer((n,), I.f32, init=1.0)
    y[0] = c[0]
'''


def _module(tmp_path, filename):
    import importlib.util

    path = tmp_path / filename
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("braces_kernel_tl", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("filename", ["k{x}.py", "k{0}.py", "k{}{1}{{.py", "k}.py"])
def test_tilelang_c_bounds_error_in_a_file_named_like_a_template(tmp_path, filename):
    import numpy as np

    import intent_trace as intent

    exe = intent.compile(_module(tmp_path, filename).scatter, target="tilelang-c")
    y = np.full(4, 5.0, np.float32)
    with pytest.raises(IndexError) as e:
        exe(np.ones(2, np.float32), np.array([0, 9], np.int32), y, 1)
    assert str(e.value) == f"buffer@{filename}:7: coordinate 9 on axis 0 is outside its extent 4"
    assert e.value.__notes__ == [f"in op `store` at {filename}:9"]
    with pytest.raises(ValueError) as e:
        exe(np.ones(2, np.float32), np.array([0, 1], np.int32), y, -3)
    assert str(e.value) == f"buffer@{filename}:11: extent -3 (axis 0) is negative"
    assert (y == 5.0).all()
