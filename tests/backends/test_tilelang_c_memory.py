"""tilelang-c against generic: storage (snapshots, tensor carries, buffers), structured ops and run-time checks."""

import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import TARGET, run_both
from intent_trace.backends.tilelang import storage
from intent_trace.backends.tilelang.target import build

RNG = np.random.default_rng(5)


# --- storage: snapshots, tensor carries and branch results ----------------------------------------------------

@intent.kernel
def dynamic_snapshot(x: I.InOut[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    """``old`` is read after x is overwritten: held in a buffer of run-time size (also run with host workspaces)."""
    d = I.domain(0, x.shape[0])
    old = x[d] + 1
    x[d] = x[d] * 3
    y[d] = old


def test_dynamic_snapshot_lives_on_the_heap():
    exe = build(dynamic_snapshot.trace(), target=TARGET)
    assert "itw_alloc" in exe.program and "itw_free" in exe.program
    for n in (0, 1, 7):
        run_both(dynamic_snapshot, np.arange(n, dtype=np.int32) - 3, np.zeros(n, np.int32))


def test_tensor_loop_carries_swap_reverse_and_break():
    @intent.kernel
    def k(x: I.In[I.f64, ("N",)], a: I.Out[I.f64, ("N",)], b: I.Out[I.f64, ("N",)], n: I.Out[I.i64, (1,)],
          limit: I.f64):
        d = I.domain(0, x.shape[0])
        size = x.shape[0]

        def body(i, carry):
            p, q, count = carry
            rev = I.reshape(I.gather(p, size - 1 - I.indices(d)), (size,))  # reads other elements of p
            I.break_(when=I.reduce.sum(q, axis=0) > limit, carry=(p, q, count))
            return q + 1.0, rev, count + 1  # q and p swap places

        p, q, count = I.loop(I.domain(0, 6), (x[d], x[d] * 2.0, I.cast(0, I.i64)), body)
        a[d] = p
        b[d] = q
        n[0] = count

    x = np.arange(5, dtype=np.float64) - 1.5
    for limit in (1e9, 20.0, -100.0):
        run_both(k, x, np.zeros(5), np.zeros(5), np.zeros(1, np.int64), limit)


def test_tensor_results_of_if_and_while_in_a_parallel_body():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], steps: I.Out[I.i32, ("M",)]):
        cols = I.domain(0, x.shape[1])
        for r in I.parallel(I.domain(0, x.shape[0])):
            row = x[r, cols]
            chosen = I.if_(x[r, 0] > 0.0, lambda: row * 2.0, lambda: -row)
            count, halved = I.while_(lambda c: I.reduce.max(I.abs(c[1]), axis=0) > 1.0,
                                     lambda c: (c[0] + 1, c[1] * 0.5), (I.cast(0, I.i32), chosen))
            y[r, cols] = halved
            steps[r] = count

    x = (RNG.standard_normal((4, 6)) * 8).astype(np.float32)
    run_both(k, x, np.zeros((4, 6), np.float32), np.zeros(4, np.int32))


def test_large_static_buffers_live_on_the_heap_and_small_ones_on_the_stack():
    @intent.kernel
    def k(x: I.In[I.i64, (3000,)], y: I.Out[I.i64, (3000,)], z: I.Out[I.i64, (4,)]):
        big = I.buffer((3000,), I.i64, init=x[:])
        small = I.buffer((4,), I.i64, init=0)
        for i in I.domain(1, 3000):
            big[i] = big[i] + big[i - 1]
        small[I.domain(0, 4)] = big[I.domain(0, 4)]
        y[:] = big[:]
        z[:] = small[:]

    program = build(k.trace(), target=TARGET).program
    assert program.count("'itw_alloc'") == 1 and "T.alloc_local((4,)" in program
    run_both(k, RNG.integers(-9, 9, 3000), np.zeros(3000, np.int64), np.zeros(4, np.int64))


@intent.kernel
def loop_body_buffer(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], stop: I.i32):
    """A buffer allocated in a loop body that ``continue`` and ``break`` leave (also run with host workspaces)."""
    d = I.domain(0, x.shape[0])
    y[d] = I.zeros((x.shape[0],), I.i32)

    def body(i, total):
        scratch = I.buffer((x.shape[0],), I.i32, init=x[d])
        scratch[i] = scratch[i] * 2
        I.continue_(when=x[i] < 0, carry=total)
        I.break_(when=total > stop, carry=total)
        y[i] = scratch[i] + total
        return total + I.cast(I.reduce.sum(scratch[d], axis=0), I.i32)

    y[0] = I.loop(d, I.cast(0, I.i32), body)


def run_loop_body_buffer() -> None:
    x = np.array([3, -1, 4, 1, -5, 9, 2], np.int32)
    for stop in (10, 1000, -1):
        run_both(loop_body_buffer, x, np.zeros(7, np.int32), stop)


def test_buffers_in_a_loop_body_with_break_and_continue():
    run_loop_body_buffer()


# --- structured ops ------------------------------------------------------------------------------------------

@intent.fn
def _pick(a, b):
    """Keep the pair with the larger key; ties keep the left one (a control-flow combine: folded)."""
    return I.if_(b[0] > a[0], lambda: b, lambda: a)


def test_folded_reduce_and_scan_with_control_flow_and_tensor_combines():
    @intent.kernel
    def k(key: I.In[I.f32, ("M", "N")], val: I.In[I.i32, ("M", "N")], best: I.Out[I.i32, (1,)],
          run_key: I.Out[I.f32, ("N",)], run_val: I.Out[I.i32, ("N",)], mixed: I.Out[I.i64, ("N",)]):
        ident = (I.cast(-np.inf, I.f32), I.cast(-1, I.i32))
        best[0] = I.reduce((key[:, :], val[:, :]), axis=(1, 0), identity=ident, combine=_pick)[1]
        rk, rv = I.scan((key[0, :], val[0, :]), axis=0, identity=ident, combine=_pick, inclusive=False,
                        reverse=True)
        run_key[:] = rk
        run_val[:] = rv
        # A combine with a reduction inside: folded over whole f32[N]-shaped accumulators (a tensor carry).
        mixed[:] = I.reduce(I.cast(val[:, :], I.i64), axis=0, identity=I.zeros((key.shape[1],), I.i64),
                            combine=lambda a, b: a * 3 + b + I.reduce.max(b, axis=0))

    key = RNG.integers(-3, 3, (5, 6)).astype(np.float32)
    val = RNG.integers(0, 100, (5, 6)).astype(np.int32)
    run_both(k, key, val, np.zeros(1, np.int32), np.zeros(6, np.float32), np.zeros(6, np.int32),
             np.zeros(6, np.int64))


def test_region_fold_and_scan_across_slices():
    @intent.kernel
    def k(x: I.In[I.i64, ("N", 3)], total: I.Out[I.i64, (3,)], prefix: I.Out[I.i64, ("N", 3)]):
        d = I.domain(0, x.shape[0])
        total[:] = I.region_fold(source=x[d, :], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                                 combine=lambda a, b: a + b, identity=I.zeros((3,), I.i64))
        outs, _ = I.region_scan(source=x[d, :], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0),
                                combine=lambda a, b: a + b, identity=I.zeros((3,), I.i64),
                                initial_state=I.zeros((3,), I.i64), apply=lambda t, s: s + t,
                                emit=lambda s, state: I.cumsum(s, axis=0) + state)
        prefix[d, :] = outs

    for n in (0, 1, 255, 256, 257, 700):
        x = RNG.integers(-50, 50, (n, 3))
        out = run_both(k, x, np.zeros(3, np.int64), np.zeros((n, 3), np.int64))
        np.testing.assert_array_equal(out["prefix"], np.cumsum(x, axis=0))


def test_gather_histogram_and_scatter_reduce_on_narrow_and_bool_elements():
    @intent.kernel
    def k(x: I.In[I.f16, ("N",)], idx: I.In[I.u8, ("K",)], ok: I.In[I.bool, ("K",)], y: I.Out[I.f16, ("K",)],
          h: I.Out[I.u8, (4,)], acc: I.InOut[I.f16, ("N",)], seen: I.InOut[I.bool, ("N",)]):
        i = idx[:]
        y[:] = I.gather(x[:], i, valid=ok[:], fill=I.cast(-2.5, I.f16))
        h[:] = I.histogram(i, bins=4, valid=ok[:] & (i < 4), count_dtype=I.u8)
        I.scatter_reduce(acc, i, I.gather(x[:], i), combine="add")
        I.scatter_reduce(seen, i, ok[:], combine="or")

    x = (RNG.standard_normal(6) * 3).astype(np.float16)
    idx = RNG.integers(0, 6, 40).astype(np.uint8)
    ok = RNG.integers(0, 2, 40).astype(bool)
    run_both(k, x, idx, ok, np.zeros(40, np.float16), np.zeros(4, np.uint8), np.ones(6, np.float16),
             np.zeros(6, bool))


# --- run-time checks -------------------------------------------------------------------------------------------

@intent.kernel
def _checked(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("K",)]):
    d = I.domain(0, idx.shape[0])
    scratch = I.buffer((idx.shape[0],), I.f32, init=y[d])  # a heap buffer, live when the check fails
    for i in d:
        scratch[i] = scratch[i] + x[idx[i]]
    y[d] = scratch[d]


def test_failed_check_raises_after_freeing_and_commits_nothing():
    exe = build(_checked.trace(), target=TARGET)
    x = np.arange(4, dtype=np.float32)
    y = np.ones(3, np.float32)
    exe(x, np.array([3, 0, 1], np.int32), y)
    np.testing.assert_array_equal(y, [4.0, 1.0, 2.0])
    with pytest.raises(IndexError, match="x: coordinate 9 on axis 0 is outside its extent 4") as e:
        exe(x, np.array([3, 9, 1], np.int32), y)
    assert any("test_tilelang_c_memory.py" in note for note in getattr(e.value, "__notes__", []))
    np.testing.assert_array_equal(y, [4.0, 1.0, 2.0])
    assert re.search(r"itw_free.*\n.*T\.ret", exe.program)  # the heap buffer is freed before the early return


def test_checks_false_drops_the_error_record():
    checked = build(_checked.trace(), target=TARGET)
    unchecked = build(_checked.trace(), target=TARGET, checks=False)
    assert unchecked is not checked and storage.ERROR_PARAM + "[" in checked.program
    assert storage.ERROR_PARAM + "[" not in unchecked.program and not unchecked.error_sites
    y = np.ones(3, np.float32)
    unchecked(np.arange(4, dtype=np.float32), np.array([3, 0, 1], np.int32), y)
    np.testing.assert_array_equal(y, [4.0, 1.0, 2.0])
