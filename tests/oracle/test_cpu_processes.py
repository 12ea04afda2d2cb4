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


def _run(script: str, tmp_path, first: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", first + PRELUDE + textwrap.dedent(script)], env=env, cwd=ROOT,
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


def test_cpu_matmul_inside_parallel_prints_nothing_to_fd_2(tmp_path):
    """Library noise (OpenBLAS's "Detect OpenMP Loop and this application may hang", written to fd 2 by C
    code, past Python's sys.stderr) never reaches the user's terminal. OpenBLAS sees the OpenMP loop when
    a GNU OpenMP runtime is loaded globally before it, as importing torch does."""
    out = _run("""
        @intent.kernel
        def batched(a: I.In[I.f32, ("B", "M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("B", "M", "N")]):
            for i in I.parallel(I.domain(0, a.shape[0])):
                c[i, :, :] = I.matmul(a[i, :, :], b[:, :], acc_dtype=I.f32)

        rng = np.random.default_rng(0)
        a = rng.integers(-4, 4, (4, 256, 256)).astype(np.float32)  # large enough for OpenBLAS's threads
        b = rng.integers(-4, 4, (256, 256)).astype(np.float32)
        c = np.zeros((4, 256, 256), np.float32)
        exe = intent.compile(batched, target="cpu")
        exe(a, b, c)
        assert exe.module.kernel_parallel.signatures
        print("exact", bool((c == a @ b).all()))
    """, tmp_path, first="import torch\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["exact", "True"]
    assert out.stderr == ""
