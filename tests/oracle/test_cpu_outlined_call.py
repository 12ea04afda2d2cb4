"""Outlined loop bodies called through a symbol of their own (oracle/numba/outlined_call.py, issue 19).

The parallel build's code holds a call of the body, not a copy of it; an error the body raises reaches the caller;
a new process loads the parallel build from Numba's disk cache (the body's symbol defined by the cached entry's
reload hook), also when the body's own cache entry is gone. The new process's first compile resolves an intrinsic
(``R.max2``) as the first attribute of the lazily imported runtime (runtime.py refreshes Numba's typing context
on import). Results against NumPy.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import njit

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.outlined_call import call_outlined, symbol

ROOT = Path(__file__).resolve().parents[2]


@intent.kernel
def rows_scaled(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        y[r, cols] = x[r, cols] * 3.0 + 1.0


def test_the_parallel_build_calls_the_body_and_holds_no_copy(monkeypatch, tmp_path):
    monkeypatch.setenv("INTENT_TRACE_CACHE_DIR", str(tmp_path))  # compiled here, not loaded: its IR is inspectable
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    x = np.random.default_rng(0).standard_normal((300, 7)).astype(np.float32)
    y = np.zeros_like(x)
    exe = intent.compile(rows_scaled, target="cpu")
    exe(x, y)
    assert np.array_equal(y, x * np.float32(3) + np.float32(1))
    (body_cres,) = exe.module.body_0.overloads.values()
    (kernel_cres,) = exe.module.kernel_parallel.overloads.values()
    ir = kernel_cres.library.get_llvm_str()
    name = symbol(exe.module.__name__, "body_0", tuple(body_cres.signature.args))
    assert re.search(rf'declare i32 @"?{re.escape(name)}"?\(', ir)  # the body, called by its symbol
    assert "fmul" in body_cres.library.get_llvm_str() and "fmul" not in ir  # its arithmetic is not linked in


@njit(cache=False)
def _store_or_raise(out, i):
    if i < 0:
        raise ValueError("negative index")
    out[0] = i


@njit(cache=False)
def _caller(out, i):
    call_outlined(_store_or_raise, out, i)
    out[1] = 7


def test_an_error_the_body_raises_reaches_the_caller():
    out = np.zeros(2, np.int64)
    _caller(out, 5)
    assert out.tolist() == [5, 7]
    with pytest.raises(ValueError, match="negative index"):
        _caller(out, -1)
    out = np.zeros(2, np.int64)
    _caller(out, np.int32(3))  # an int32 argument: the body was compiled for int64, the call converts
    assert out.tolist() == [3, 7]


SCRIPT = textwrap.dedent("""
    import numpy as np
    import intent_trace as intent
    from intent_trace import I

    @intent.kernel
    def rows_scaled(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        cols = I.domain(0, x.shape[1])
        for r in I.parallel(I.domain(0, x.shape[0])):
            y[r, cols] = x[r, cols] * 3.0 + 1.0

    x = np.arange(600 * 120, dtype=np.float32).reshape(600, 120) / 7
    y = np.zeros_like(x)
    exe = intent.compile(rows_scaled, target="cpu")
    exe(x, y)
    print("exact", bool((y == x * np.float32(3) + np.float32(1)).all()))
    print("hits", len(exe.module.kernel_parallel.stats.cache_hits), len(exe.module.body_0.stats.cache_hits))
""")


def _run(cache: Path) -> list:
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_new_process_loads_the_parallel_build_from_the_disk_cache(tmp_path):
    assert 600 * 120 * 2 >= cpu_target.PARALLEL_THRESHOLD
    assert _run(tmp_path) == ["exact", "True", "hits", "0", "0"]
    assert _run(tmp_path) == ["exact", "True", "hits", "1", "1"]  # both from Numba's cache: the hook loaded the body
    body_entries = glob.glob(str(tmp_path / "**" / "*.body_0-*"), recursive=True)
    assert body_entries
    for path in body_entries:
        os.unlink(path)
    assert _run(tmp_path) == ["exact", "True", "hits", "1", "0"]  # the body compiled again, its symbol redefined
