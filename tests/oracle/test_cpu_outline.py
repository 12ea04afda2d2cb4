"""Parallel loop bodies outlined into functions the parallel cpu build calls (oracle/numba/outline.py, issue 19).

The rewrite on small functions, run as Python against the loop it replaces: free variables become arguments,
globals and builtins do not, a loop whose body assigns a name used outside it (a carried value) or returns stays
as it is, loops inside branches and several loops in one function are each outlined, the iterations are split
into at most CHUNKS consecutive chunks, a buffer every iteration allocates is allocated once per chunk (once before the loop in the serial build, and
none when the loop has no iteration). Then a kernel of two parallel loops over rows fewer than, not divisible by and more than
the chunks, against NumPy, on the serial and parallel builds.
"""
from __future__ import annotations

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.outline import CHUNKS, hoist_buffers, outline

GLOBALS = {"np", "R", "prange", "K0"}


class Runtime:
    """The runtime helpers the outlined form calls, in Python."""

    min2 = staticmethod(min)

    @staticmethod
    def call_outlined(body, *args):
        return body(*args)


def _run(source: str, **env):
    """Execute generated function source (the serial or parallel form) with ``prange`` as ``range``."""
    scope = {"np": np, "prange": range, "K0": 10, "R": Runtime, **env}
    exec(source, scope)  # noqa: S102 (test-built source)
    return scope


def _counting_runtime(calls: list):
    """:class:`Runtime` whose ``alloc_empty`` appends each shape it allocates to ``calls``."""
    class CountingRuntime(Runtime):
        @staticmethod
        def alloc_empty(shape, dtype):
            calls.append(shape)
            return np.empty(shape, dtype)

    return CountingRuntime


def _forms(out, lines, params="a, y, n"):
    """The function as written (``prange`` is ``range`` here) and as outlined."""
    helpers = "\n\n".join(out.helpers)
    return {"loop": f"def f({params}):\n" + "\n".join(lines),
            "outlined": f"{helpers}\n\ndef f({params}):\n" + "\n".join(out.parallel)}


def test_free_variables_become_arguments_and_chunks_cover_every_iteration():
    lines = ["    s = K0 + 1", "    for i in prange(n):", "        t = a[i] * s", "        y[i] = t + len(a)"]
    out = outline("f", ["a", "y", "n"], lines, GLOBALS)
    assert out is not None and len(out.helpers) == 1
    assert out.helpers[0].startswith("def body_0(_lo, _hi, a, s, y):")  # K0, len: global and builtin
    assert "for i in prange(_chunks0):" in "\n".join(out.parallel)
    for n in (0, 1, 5, CHUNKS, CHUNKS + 1, 3 * CHUNKS + 7):
        a = np.arange(n, dtype=np.int64)
        for form, source in _forms(out, lines).items():
            y = np.full(n, -1, np.int64)
            _run(source)["f"](a, y, n)
            assert np.array_equal(y, a * 11 + n), (form, n)


@pytest.mark.parametrize("body", [
    ["    c = 0", "    for i in prange(n):", "        c = c + a[i]", "    y[0] = c"],  # carried out of the loop
    ["    for i in prange(n):", "        t = a[i]", "    y[0] = t"],  # a body value used after it
    ["    for i in prange(n):", "        return"],
    ["    for i in prange(0, n):", "        y[i] = a[i]"],  # two arguments
])
def test_loops_whose_meaning_would_change_stay(body):
    assert outline("f", ["a", "y", "n"], body, GLOBALS) is None


def test_loops_in_branches_and_several_loops_are_each_outlined():
    lines = ["    for i in prange(n):", "        y[i] = a[i]",
             "    if n > 2:", "        for j in prange(n):", "            y[j] = y[j] * 2",
             "    else:", "        c = 0", "        for m in prange(n):", "            c = c + 1", "        y[0] = c",
             "    for k in prange(n):", "        y[k] = y[k] + 1"]
    out = outline("f", ["a", "y", "n"], lines, GLOBALS)
    assert [h.split("(")[0] for h in out.helpers] == ["def body_0", "def body_1", "def body_3"]  # not body_2
    for n in (2, 5, 300):
        a = np.arange(n, dtype=np.int64)
        want = a * (2 if n > 2 else 1) + 1
        if n <= 2:
            want[0] = n + 1
        for form, source in _forms(out, lines).items():
            y = np.zeros(n, np.int64)
            _run(source)["f"](a, y, n)
            assert np.array_equal(y, want), (form, n)


@intent.kernel
def two_loops(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], z: I.Out[I.f32, ("M",)]):
    cols = I.domain(0, x.shape[1])
    rows = I.domain(0, x.shape[0])
    for r in I.parallel(rows):
        y[r, cols] = x[r, cols] * 2.0
    for r in I.parallel(rows):
        z[r] = I.reduce.sum(x[r, cols], axis=0)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("m", [1, 7, CHUNKS + 3, 3 * CHUNKS + 1])
def test_kernels_with_outlined_loops(monkeypatch, parallel, m):
    if parallel:
        monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    x = np.random.default_rng(m).integers(-8, 8, (m, 5)).astype(np.float32)  # small integers: sums exact
    y, z = np.full_like(x, np.nan), np.full(m, np.nan, np.float32)
    exe = intent.compile(two_loops, target="cpu")
    exe(x, y, z)
    assert exe.source.count("def body_") == 2 and exe._pick([x, y, z]) is (
        exe.module.kernel_parallel if parallel else exe.module.kernel)
    assert np.array_equal(y, x * 2) and np.array_equal(z, x.sum(axis=1))


def test_outlined_rows_above_the_parallel_threshold():
    m = 2 * CHUNKS + 5
    x = np.random.default_rng(3).integers(-8, 8, (m, 140)).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros(m, np.float32)
    assert x.size + y.size + z.size >= cpu_target.PARALLEL_THRESHOLD
    exe = intent.compile(two_loops, target="cpu")
    exe(x, y, z)
    assert exe._pick([x, y, z]) is exe.module.kernel_parallel
    assert np.array_equal(y, x * 2) and np.array_equal(z, x.sum(axis=1))


def test_a_buffer_every_iteration_allocates_is_allocated_once_per_call():
    """Extents fixed on entry and no size check in the body before it: hoisted; otherwise left in place."""
    lines = ["    for i in prange(n):", "        b = R.alloc_empty((ext1,), np.int64)", "        b[0] = a[i]",
             "        m = i + 1000", "        c = R.alloc_empty((m,), np.int64)", "        c[0] = b[0] * 2",
             "        e = np.float64(ext1)", "        if e * 8 > limit:", "            continue",
             "        d = R.alloc_empty((ext1,), np.int64)", "        d[0] = c[0] + 1", "        y[i] = d[0]"]
    out = outline("f", ["a", "y", "n", "ext1", "limit"], lines, GLOBALS)
    (helper,) = out.helpers
    head, loop = helper.split("    for i in range(_lo, _hi):")
    assert "b = R.alloc_empty((ext1,), np.int64)" in head
    assert "c = R.alloc_empty" in loop and "d = R.alloc_empty" in loop  # a body extent; after its size check
    calls = []
    FakeRuntime = _counting_runtime(calls)

    for form, source in _forms(out, lines, "a, y, n, ext1, limit").items():
        calls.clear()
        a, y = np.arange(600, dtype=np.int64), np.zeros(600, np.int64)
        _run(source, R=FakeRuntime)["f"](a, y, 600, 3, 1 << 30)
        assert np.array_equal(y, a * 2 + 1)
        per_call = 600 if form == "loop" else CHUNKS
        assert calls.count((3,)) == per_call + 600  # b once per chunk; d (after its check) once per iteration


def test_the_serial_build_allocates_a_per_iteration_buffer_once_and_none_without_iterations():
    """hoist_buffers: the buffers outline would hoist, before the loop; the one after a size check, and every
    loop that carries a value, as they are. A loop of no iteration allocates nothing (its extents were checked
    only where a row runs)."""
    lines = ["    for i in prange(n):", "        b = R.alloc_empty((ext1,), np.int64)", "        b[0] = a[i]",
             "        e = np.float64(ext1)", "        if e * 8 > limit:", "            continue",
             "        d = R.alloc_empty((ext1,), np.int64)", "        d[0] = b[0] + 1", "        y[i] = d[0]",
             "    s = 0", "    for j in prange(n):", "        c = R.alloc_empty((ext1,), np.int64)",
             "        c[0] = j", "        s = s + c[0]", "    y[0] = y[0] + s"]
    serial = "\n".join(hoist_buffers("f", ["a", "y", "n", "ext1", "limit"], lines, GLOBALS))
    assert "    b = R.alloc_empty((ext1 if n > 0 else 0,), np.int64)\n    for i in prange(n):" in serial
    assert "        d = R.alloc_empty((ext1,), np.int64)" in serial  # after its size check
    assert "        c = R.alloc_empty((ext1,), np.int64)" in serial  # the loop carries s
    calls = []
    FakeRuntime = _counting_runtime(calls)

    for n in (0, 1, 600):
        calls.clear()
        a, y = np.arange(n, dtype=np.int64), np.zeros(max(n, 1), np.int64)
        _run(f"def f(a, y, n, ext1, limit):\n{serial}", R=FakeRuntime)["f"](a, y, n, 3, 1 << 30)
        want = a + 1
        if n:
            want[0] += n * (n - 1) // 2
        assert np.array_equal(y[:n], want), n
        assert calls.count((0,)) == (n == 0) and calls.count((3,)) == 2 * n + (n > 0)


def test_no_rows_allocate_no_row_buffer():
    """A row kernel over 0 rows of 2^40 columns: its row buffer (4 TiB) is neither checked nor allocated, on
    either build, and the call returns. (``c`` divides, so it is held in a row buffer, not recomputed by each of its
    two consumers: oracle/numba/rows.py.)"""
    @intent.kernel
    def centre(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
        c = x[:, :] / I.reshape(I.reduce.sum(x[:, :], axis=1) / I.cast(x.shape[1], I.f32), (x.shape[0], 1))
        y[:, :] = c + c * c

    x = np.empty((0, 1 << 40), np.float32)
    y = np.empty((0, 1 << 40), np.float32)
    exe = intent.compile(centre, target="cpu")
    assert "if ext0 > 0 else 0" in exe.source.split("def kernel(")[1].split("def kernel_parallel")[0]
    exe(x, y)
    exe.module.kernel_parallel(x, y, 0, 1 << 40, 1 << 62, np.zeros(4, np.int64))
