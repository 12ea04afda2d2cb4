"""Error messages of the cpu target never read user text as a format template.

A run-time check's message is formatted with the values the compiled kernel recorded; the user's text in it
(a buffer's label holds its file name and line) must come out as written. Kernels here are defined in
files named ``k{x}.py`` (once: ``KeyError: 'x'``) and ``k{0}.py`` (once: the wrong label).
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import intent_trace as intent

SOURCE = '''\
import intent_trace as intent
from intent_trace import I


@intent.kernel
def scatter(x: I.In[I.f32, ("K",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("N",)]):
    b = I.buffer((y.shape[0],), I.f32, init=0.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = x[k]
    y[:] = b[:]
'''


@pytest.mark.parametrize("filename", ["k{x}.py", "k{0}.py", "k{}{1}{{.py", "k}.py"])
def test_cpu_bounds_error_in_a_file_named_like_a_template(tmp_path, filename):
    path = tmp_path / filename
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("braces_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    y = np.full(4, 5.0, np.float32)
    with pytest.raises(IndexError) as e:
        intent.compile(module.scatter, target="cpu")(
            np.ones(2, np.float32), np.array([0, 9], np.int32), y)
    assert str(e.value) == f"buffer@{filename}:7: coordinate 9 on axis 0 is outside its extent 4"
    assert e.value.__notes__ == [f"in op `store` at {filename}:9"]
    assert (y == 5.0).all()


def test_cpu_error_sites_read_back_from_the_module_keep_user_text(tmp_path):
    """The sites a later process reads from the cached module (ERROR_SITES) hold the same texts."""
    path = tmp_path / "k{0}.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("braces_kernel_sites", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exe = intent.compile(module.scatter, target="cpu")
    messages = [str(site.error([9, 4, 0])) for site in exe.error_sites]
    assert "buffer@k{0}.py:7: coordinate 9 on axis 0 is outside its extent 4" in messages
