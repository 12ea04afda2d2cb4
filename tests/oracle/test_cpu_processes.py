"""The cpu target inside processes: forked children, and what reaches the terminal (fd 2).

Each case runs in a subprocess, so a child killed by a signal or a hang cannot take the test runner down.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent("""
    import multiprocessing, numpy as np
    import intent_trace as intent
    from intent_trace import I
    from intent_trace.oracle.numba import target

    @intent.kernel
    def scale_add(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 3.0 + 1.0

    N = target.PARALLEL_THRESHOLD
    x = np.arange(N, dtype=np.float32)

    def call(_=None):
        y = np.zeros(N, np.float32)
        intent.compile(scale_add, target="cpu")(x, y)
        return bool((y == x * np.float32(3) + np.float32(1)).all())
""")


def _run(script: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_cpu_forked_child_after_a_parallel_call_runs_the_kernel(tmp_path):
    out = _run("""
        assert call()  # big enough for the parallel build: the thread pool is running now
        assert intent.compile(scale_add, target="cpu").module.kernel_parallel.signatures
        ctx = multiprocessing.get_context("fork")  # Python's default on Linux
        result = ctx.Queue()
        child = ctx.Process(target=lambda: result.put(call()))
        child.start()
        child.join(300)
        print("exitcode", child.exitcode, result.get(timeout=5) if child.exitcode == 0 else None)
        print("parent", call())
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["exitcode 0 True", "parent True"], out.stderr
    assert "fork" not in out.stderr
