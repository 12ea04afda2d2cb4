"""Programs compiled ahead of their calls in worker processes (backends/tilelang/precompile.py), as verification's
Stage Two does: the workers fill TileLang's disk cache of this run, the calls find their kernels there, and a program
a worker cannot compile is compiled again by its call, which raises the error it always raised."""
import os

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang import executable as tl_executable
from intent_trace.backends.tilelang import precompile as P
from intent_trace.backends.tilelang.executable import TileLangExecutable
from intent_trace.backends.tilelang.targets import C
from intent_trace.caches import verification_caches
from intent_trace.errors import LoweringError


@intent.kernel
def triple(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = x[:] * 3.0 + 0.25


@intent.kernel
def halve(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    y[:] = x[:] // 2


def _entries(root: str) -> int:
    return sum(len(files) for _, _, files in os.walk(os.path.join(root, "tilelang")))


def test_the_workers_fill_the_run_s_cache_and_the_calls_use_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tl_executable, "_KERNELS", {})  # nothing compiled in this process
    with verification_caches(tmp_path) as use:
        exes = [TileLangExecutable(k.trace(), C) for k in (triple, halve, triple)]
        assert len(P.programs(exes)) == 2  # each program once
        assert P.precompile(exes, workers=2) == 2
        assert _entries(use.root) > 0  # the workers wrote this run's cache
        x = np.arange(-5, 6, dtype=np.float32)
        y = np.zeros_like(x)
        exes[0](x, y)  # compiled in this process from the cache the workers filled
        np.testing.assert_array_equal(y, x * np.float32(3.0) + np.float32(0.25))
        xi = np.array([-7, -1, 0, 1, 7], np.int32)
        yi = np.zeros_like(xi)
        exes[1](xi, yi)
        np.testing.assert_array_equal(yi, [-3, 0, 0, 0, 3])  # truncated toward zero, as C divides (T2)
        assert P.programs(exes) == []  # compiled here now: nothing is handed out again
        assert P.precompile(exes, workers=2) == 0


def test_one_program_or_one_core_needs_no_pool(tmp_path, monkeypatch):
    monkeypatch.setattr(tl_executable, "_KERNELS", {})
    with verification_caches(tmp_path) as use:
        exes = [TileLangExecutable(triple.trace(), C)]
        assert P.precompile(exes, workers=4) == 0 and P.precompile(exes * 2, workers=1) == 0
        assert _entries(use.root) == 0


def test_a_program_a_worker_cannot_compile_fails_in_its_call(tmp_path, monkeypatch):
    monkeypatch.setattr(tl_executable, "_KERNELS", {})
    with verification_caches(tmp_path):
        good, bad = TileLangExecutable(triple.trace(), C), TileLangExecutable(halve.trace(), C)
        bad.program = bad.program.replace("@T.prim_func", "@T.prim_func\ndef broken(:\n    pass\n\n@T.prim_func")
        assert P.precompile([good, bad], workers=2) == 2  # no error here
        with pytest.raises(Exception) as e:
            bad(np.zeros(3, np.int32), np.zeros(3, np.int32))
        assert isinstance(e.value, (LoweringError, SyntaxError))
