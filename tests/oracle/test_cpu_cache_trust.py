"""The cpu target's disk cache is never trusted blindly.

A module file in the cache directory that is not exactly what the code generator writes for the kernel
(edited, truncated, planted) is regenerated with a warning, never executed, and never breaks the kernel;
nor is machine code Numba cached for such a file ever loaded. Each process runs in a subprocess with its
own cache directory (``INTENT_TRACE_CACHE_DIR``).
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import warnings, numpy as np
    import intent_trace as intent
    from intent_trace import I

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 3.0 + 1.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = np.arange(4, dtype=np.float32); y = np.zeros(4, np.float32)
        exe = intent.compile(k, target="cpu")
        exe(x, y)
    print("result", *y.tolist())
    print("warned", any("regenerated" in str(w.message) for w in caught))
    print("hits", len(exe.function.stats.cache_hits))
""")


def _run(cache: Path, script: str = SCRIPT) -> dict:
    env = dict(os.environ, INTENT_TRACE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}


def _module(cache: Path) -> Path:
    (path,) = glob.glob(str(cache / "*" / "k_*.py"))
    return Path(path)


GOOD = ["1.0", "4.0", "7.0", "10.0"]


def test_cpu_cache_untouched_is_loaded_without_warning(tmp_path):
    assert _run(tmp_path) == {"result": GOOD, "warned": ["False"], "hits": ["0"]}
    assert _run(tmp_path) == {"result": GOOD, "warned": ["False"], "hits": ["1"]}  # Numba's cache serves it


@pytest.mark.parametrize("tamper", ["planted code", "truncated", "emptied", "no error sites"])
def test_cpu_tampered_module_is_regenerated_never_executed(tmp_path, tamper):
    _run(tmp_path)
    path = _module(tmp_path)
    original = path.read_text()
    marker = tmp_path / "executed"
    if tamper == "planted code":
        text = original + f"\nopen({str(marker)!r}, 'w').close()\n"
    elif tamper == "truncated":
        text = original[: len(original) // 2]
    elif tamper == "emptied":
        text = ""
    else:
        text = original.replace("ERROR_SITES = ", "NOT_SITES = ")
    path.write_text(text)
    second = _run(tmp_path)
    assert second["result"] == GOOD and second["warned"] == ["True"]
    assert not marker.exists()
    assert path.read_text() == original  # repaired for good: the next process is quiet again
    assert _run(tmp_path)["warned"] == ["False"]
    assert not glob.glob(str(tmp_path / "*" / "*.tmp"))


def test_cpu_machine_code_numba_cached_for_a_tampered_module_is_never_loaded(tmp_path):
    """A same-size edit with the original modification time, compiled by Numba straight from the file (so
    its machine code sits in Numba's cache under the original file's stamp): the kernel must not run it."""
    _run(tmp_path)
    path = _module(tmp_path)
    original = path.read_text()
    stamp = os.stat(path)
    evil = original.replace("np.float32(float.fromhex('0x1.8000000000000p+1'))",
                            "np.float32(float.fromhex('0x1.0000000000000p+3'))")  # 3.0 -> 8.0, same length
    assert evil != original and len(evil) == len(original)
    path.write_text(evil)
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    plant = textwrap.dedent(f"""
        import importlib.util, numpy as np
        spec = importlib.util.spec_from_file_location("planted", {str(path)!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        y = np.zeros(4, np.float32)
        m.kernel(np.arange(4, dtype=np.float32), y, 4, 1 << 40, np.zeros(4, np.int64))
        print("planted", *y.tolist())
    """)
    assert _run(tmp_path, plant)["planted"] == ["1.0", "9.0", "17.0", "25.0"]  # x * 8 + 1: now in Numba's cache
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    second = _run(tmp_path)
    assert second["result"] == GOOD and second["warned"] == ["True"]


@intent.kernel
def neg(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = -x[:]


def test_cpu_failed_module_write_leaves_no_tmp_file(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_TRACE_CACHE_DIR", str(tmp_path))

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cpu_target.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        intent.compile(neg, target="cpu")(np.ones(2, np.float32), np.zeros(2, np.float32))
    monkeypatch.undo()
    assert not glob.glob(str(tmp_path / "**" / "*.tmp"), recursive=True)
