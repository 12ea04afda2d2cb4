"""Host workspaces (storage.py): buffers the kernel cannot allocate are hidden parameters the executable sizes.

tilelang-cuda and tilelang-metal use them; here the C target is switched to them so the mechanism runs on this
machine against generic, bit for bit (sizes from the call's extents, zero fills, one buffer per site reused by
each loop iteration, checks that fail with a workspace live)."""
import re

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import LoweringError

pytest.importorskip("tilelang")
from backends.test_tilelang_c_memory import dynamic_snapshot, loop_body_buffer, run_loop_body_buffer
from backends.tilelang_support import TARGET, run_both
from intent_trace.backends.tilelang import targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.target import build

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def host_workspaces(monkeypatch):
    monkeypatch.setitem(targets.TARGETS, TARGET, attrs.evolve(targets.C, host_workspaces=True))
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})


def test_dynamic_snapshot_is_a_workspace_sized_by_the_call():
    k = dynamic_snapshot
    exe = build(k.trace(), target=TARGET)
    assert "itw_alloc" not in exe.program and re.search(r"W0: T\.Tensor\(\(d0,\), 'int32'\)", exe.program)
    assert [w.shape for w in exe.workspaces] == [("d0",)]
    for n in (0, 1, 7, 300):
        out = run_both(k, np.arange(n, dtype=np.int32) - 3, np.zeros(n, np.int32))
        np.testing.assert_array_equal(out["y"], np.arange(n) - 2)


def test_a_buffer_in_a_loop_body_is_one_workspace_refilled_each_iteration():
    assert len(build(loop_body_buffer.trace(), target=TARGET).workspaces) == 1
    run_loop_body_buffer()


def test_large_static_and_zero_filled_buffers_are_workspaces():
    @intent.kernel
    def k(x: I.In[I.i64, (3000,)], idx: I.In[I.i32, ("K",)], y: I.Out[I.i64, (3000,)], h: I.Out[I.i64, (1500,)]):
        big = I.buffer((3000,), I.i64, init=x[:])
        for i in I.domain(1, 3000):
            big[i] = big[i] + big[i - 1]
        y[:] = big[:]
        h[:] = I.histogram(idx[:], bins=1500, count_dtype=I.i64)

    exe = build(k.trace(), target=TARGET)
    assert sorted(w.shape for w in exe.workspaces) == [("1500",), ("3000",)]
    x = RNG.integers(-9, 9, 3000)
    idx = RNG.integers(0, 1500, 5000).astype(np.int32)
    out = run_both(k, x, idx, np.zeros(3000, np.int64), np.full(1500, 7, np.int64))
    np.testing.assert_array_equal(out["y"], np.cumsum(x))
    np.testing.assert_array_equal(out["h"], np.bincount(idx, minlength=1500))
    out = run_both(k, x, idx[:10], np.zeros(3000, np.int64), np.full(1500, 7, np.int64))  # the zero fill reran
    np.testing.assert_array_equal(out["h"], np.bincount(idx[:10], minlength=1500))


def test_scans_and_region_scans_over_two_extents():
    @intent.kernel
    def k(x: I.In[I.i64, ("N", "M")], prefix: I.Out[I.i64, ("N", "M")], rows: I.Out[I.i64, ("N", "M")]):
        d = I.domain(0, x.shape[0])
        outs, _ = I.region_scan(source=x[d, :], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                                combine=lambda a, b: a + b, identity=I.zeros((x.shape[1],), I.i64),
                                initial_state=I.zeros((x.shape[1],), I.i64), apply=lambda t, s: s + t,
                                emit=lambda s, state: I.cumsum(s, axis=0) + state)
        prefix[d, :] = outs
        rows[:, :] = I.cumsum(x[:, :], axis=1)

    assert build(k.trace(), target=TARGET).workspaces
    for n, m in ((0, 3), (1, 1), (257, 3), (5, 40)):
        x = RNG.integers(-50, 50, (n, m))
        out = run_both(k, x, np.zeros((n, m), np.int64), np.zeros((n, m), np.int64))
        np.testing.assert_array_equal(out["prefix"], np.cumsum(x, axis=0))
        np.testing.assert_array_equal(out["rows"], np.cumsum(x, axis=1))


def test_a_failed_check_with_a_live_workspace_raises_and_commits_nothing():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("K",)]):
        d = I.domain(0, idx.shape[0])
        scratch = I.buffer((idx.shape[0],), I.f32, init=y[d])
        for i in d:
            scratch[i] = scratch[i] + x[idx[i]]
        y[d] = scratch[d]

    exe = build(k.trace(), target=TARGET)
    assert exe.workspaces and exe.error_sites
    x = np.arange(4, dtype=np.float32)
    y = np.ones(3, np.float32)
    exe(x, np.array([3, 0, 1], np.int32), y)
    np.testing.assert_array_equal(y, [4.0, 1.0, 2.0])
    with pytest.raises(IndexError, match="x: coordinate 9 on axis 0 is outside its extent 4"):
        exe(x, np.array([3, 9, 1], np.int32), y)
    np.testing.assert_array_equal(y, [4.0, 1.0, 2.0])


def test_a_buffer_sized_by_a_scalar_parameter_is_sized_by_its_argument():
    @intent.kernel
    def k(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, (1,)], n: I.i64):
        scratch = I.buffer((n,), I.i32, init=2000)  # over the stack limit only for large n
        d = I.domain(0, n)
        scratch[d] = scratch[d] + I.cast(I.indices(d), I.i32)
        y[0] = I.cast(I.reduce.sum(scratch[d], axis=0), I.i32) + x[0]

    exe = build(k.trace(), target=TARGET)
    assert [w.shape for w in exe.workspaces] == [("p2",)] and "W0_0 = T.dynamic('W0_0', 'int64')" in exe.program
    for n in (0, 1, 5000):
        out = run_both(k, np.array([7], np.int32), np.zeros(1, np.int32), n)
        assert out["y"][0] == 7 + sum(2000 + i for i in range(n))
    y = np.zeros(1, np.int32)
    with pytest.raises(ValueError, match=r"extent -3 \(axis 0\) is negative"):  # the host sized it max(0, n)
        exe(np.array([7], np.int32), y, -3)
    assert y[0] == 0


def test_a_size_computed_from_data_is_a_lowering_error_naming_op_and_target():
    @intent.kernel
    def k(x: I.In[I.i64, ("N",)], y: I.Out[I.i64, (1,)]):
        n = x[0] * 2
        scratch = I.buffer((n,), I.i64, init=1)
        y[0] = I.reduce.sum(scratch[I.domain(0, n)], axis=0)

    with pytest.raises(LoweringError, match=r"target tilelang-c cannot lower op `\w+`.*size depends on data"):
        build(k.trace(), target=TARGET)


def test_a_bool_workspace_is_bytes_seen_as_bools():
    # TileLang's C wrapper mistypes a bool buffer parameter (bool* for int8_t*): the host passes bytes
    @intent.kernel
    def flags(idx: I.In[I.i32, ("K",)], seen: I.Out[I.bool, ("N",)]):
        marks = I.buffer((seen.shape[0],), I.bool, init=False)
        for i in I.domain(0, idx.shape[0]):
            marks[idx[i]] = True
        seen[:] = marks[:]

    exe = build(flags.trace(), target=TARGET)
    assert [(w.shape, w.dtype) for w in exe.workspaces] == [(("d1",), "uint8")]
    for n in (1, 8, 3000):
        idx = RNG.integers(0, n, 7).astype(np.int32)
        out = run_both(flags, idx, np.ones(n, bool))
        np.testing.assert_array_equal(out["seen"], np.isin(np.arange(n), idx))
