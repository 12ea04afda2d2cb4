"""The cpu target's contractions inside a parallel loop, and its contraction loop nests (oracle/numba/contract.py,
blas_threads.py, issue 19).

Contractions inside a parallel loop (attention's two matmuls per batch) call BLAS where this machine's BLAS can be
kept to one thread while the parallel build runs (blas_threads.py: a pthreads or sequential OpenBLAS), else run as
the loop nests integer and f16/bf16 accumulators run anywhere: over operands packed and converted once, each output
row accumulating ``x * rhs[k, :]`` in reduction order. Checked against float64 NumPy within T5's bound (gamma_K of
the sum of |products|, plus the one final rounding of a narrow accumulator) or exactly modulo 2^32 for integers, on
every target, over shapes with a reduction of length 0 and 1, transposed operands, a batch, and above the parallel
threshold on both paths; the loop nests' sums bit for bit; BLAS's thread count one during the parallel build's call
and restored after it, across threads calling at once and after a failing call.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import blas_threads, runtime, target as cpu_target

U32, U16 = 2.0**-24, 2.0**-11


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def _assert_within(got, lhs, rhs, u_acc: float, u_out: float = 0.0):
    """|got - exact| <= g + u_out * (|exact| + g), g = gamma_K(u_acc) * sum|products|, per element: the sum's bound,
    then one rounding to the output (float64 stands in for exact: its own error is 2^-29 of the f32 bound)."""
    lhs, rhs = lhs.astype(np.float64), rhs.astype(np.float64)
    exact = lhs @ rhs
    g = _gamma(lhs.shape[-1], u_acc) * (np.abs(lhs) @ np.abs(rhs))
    bound = g + u_out * (np.abs(exact) + g) + 1e-300
    err = np.abs(np.asarray(got, np.float64) - exact)
    assert (err <= bound * (1 + 2.0**-20)).all(), float((err / bound).max())


def _force_loop_nests(monkeypatch):
    """This machine's BLAS taken as one that cannot be kept to one thread: contractions in prange bodies run as the
    loop nests (a new executable and module: the capability is part of both keys)."""
    monkeypatch.setattr(blas_threads, "_openblas", lambda: (blas_threads.NONE, None, None))


@pytest.fixture(params=["blas", "loops"])
def inner_path(request, monkeypatch):
    """How a contraction inside a ``prange`` body runs: BLAS kept to one thread (this machine's BLAS permitting:
    :mod:`blas_threads`), or the loop nests (:func:`_force_loop_nests`)."""
    if request.param == "loops":
        _force_loop_nests(monkeypatch)
    elif not blas_threads.available():
        pytest.skip(f"this machine's BLAS cannot be kept to one thread ({blas_threads.capability()})")
    return request.param


@intent.kernel
def attention_scores(q: I.In[I.f32, ("B", "L", "D")], k: I.In[I.f32, ("B", "S", "D")],
                     v: I.In[I.f32, ("B", "S", "E")], s: I.Out[I.f32, ("B", "L", "S")],
                     o: I.Out[I.f32, ("B", "L", "E")]):
    for b in I.parallel(I.domain(0, q.shape[0])):
        t = I.matmul(q[b, :, :], k[b, :, :], transpose_rhs=True, acc_dtype=I.f32)
        s[b, :, :] = t
        o[b, :, :] = I.matmul(t, v[b, :, :], acc_dtype=I.f32)


# Short output rows (at most 1 KiB: 256 f32, 128 f64 values; oracle/numba/lane_contract.py) run in whole blocks of
# the lane width (64 f32, 32 f64 values) summed in registers, then the rest in the scalar loop's order; longer rows
# by lane_row's row-streaming loop (the same order): rows (S, E) below, at and above one and two blocks and the
# short-row limit, and a reduction (D = 70) longer than a block.
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 3, 5, 7, 2), (3, 17, 9, 33, 4), (2, 4, 3, 0, 5)] +
                         [(2, 3, n, 70, n) for n in (31, 32, 33, 63, 64, 65, 129, 256, 257)],
                         ids=lambda s: "B{}L{}S{}D{}E{}".format(*s))
def test_contractions_inside_a_parallel_loop(run, shape):
    b, l, s_, d, e = shape
    rng = np.random.default_rng(sum(shape))
    q, k = (rng.standard_normal((b, n, d)).astype(np.float32) for n in (l, s_))
    v = rng.standard_normal((b, s_, e)).astype(np.float32)
    s, o = np.full((b, l, s_), np.nan, np.float32), np.full((b, l, e), np.nan, np.float32)
    run(attention_scores, q, k, v, s, o)
    for j in range(b):
        _assert_within(s[j], q[j], k[j].T, U32)
        _assert_within(o[j], s[j], v[j], U32)  # of the scores as computed: each contraction's own bound
    if d == 0:
        assert (s == 0).all() and not np.signbit(s).any()


@intent.kernel
def matmul_f16_acc(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f16)


@intent.kernel
def batched_i8(a: I.In[I.i8, ("B", "M", "K")], b: I.In[I.i8, ("B", "K", "N")], c: I.Out[I.i32, ("B", "M", "N")]):
    for j in I.parallel(I.domain(0, a.shape[0])):
        c[j, :, :] = I.matmul(a[j, :, :], b[j, :, :], acc_dtype=I.i32)


@pytest.mark.parametrize("mkn", [(1, 1, 1), (5, 9, 3), (7, 40, 17)], ids=str)
def test_f16_accumulator_and_integers_inside_a_parallel_loop(run, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(m * k * n)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
    c = np.full((m, n), np.nan, np.float16)
    run(matmul_f16_acc, a, b, c)
    _assert_within(c, a, b, U32, U16)  # summed in float32, rounded once to f16
    ai = rng.integers(-128, 128, (2, m, k)).astype(np.int8)
    bi = rng.integers(-128, 128, (2, k, n)).astype(np.int8)
    ci = np.zeros((2, m, n), np.int32)
    run(batched_i8, ai, bi, ci)
    assert np.array_equal(ci, (ai.astype(np.int64) @ bi.astype(np.int64)).astype(np.int32))


def test_contractions_above_the_parallel_threshold(inner_path):
    rng = np.random.default_rng(9)
    m = 160  # three 160 x 160 arrays: 76,800 elements
    a, b = (rng.standard_normal((m, m)).astype(np.float16) for _ in range(2))
    c = np.zeros((m, m), np.float16)
    assert a.size + b.size + c.size >= cpu_target.PARALLEL_THRESHOLD
    exe = intent.compile(matmul_f16_acc, target="cpu")
    exe(a, b, c)
    assert exe._pick([a, b, c]) is exe.module.kernel_parallel
    _assert_within(c, a, b, U32, U16)
    bb, ll, dd = 4, 64, 64  # attention: 5 arrays of 16,384 elements
    q, kk, v = (rng.standard_normal((bb, ll, dd)).astype(np.float32) for _ in range(3))
    s, o = np.zeros((bb, ll, ll), np.float32), np.zeros((bb, ll, dd), np.float32)
    exe = intent.compile(attention_scores, target="cpu")
    exe(q, kk, v, s, o)
    assert exe._pick([q, kk, v, s, o]) is exe.module.kernel_parallel
    assert exe.module.BLAS_IN_PRANGE == (inner_path == "blas")
    for j in range(bb):
        _assert_within(s[j], q[j], kk[j].T, U32)
        _assert_within(o[j], s[j], v[j], U32)


@intent.kernel
def batched_f64_acc(a: I.In[I.f32, ("B", "M", "K")], b: I.In[I.f32, ("B", "K", "N")],
                    c: I.Out[I.f64, ("B", "M", "N")]):
    for j in I.parallel(I.domain(0, a.shape[0])):
        c[j, :, :] = I.matmul(a[j, :, :], b[j, :, :], acc_dtype=I.f64)


def _ordered(a, b, dtype):
    """Each output element's products summed in reduction order from zero, one rounding per product and per sum,
    in ``dtype`` (NumPy elementwise arithmetic: no FMA, no reassociation): what the loop nests compute."""
    a, b = a.astype(dtype), b.astype(dtype)
    c = np.zeros(a.shape[:-1] + b.shape[-1:], dtype)
    for k in range(a.shape[-1]):
        c = c + a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return c


@pytest.mark.parametrize("n", [1, 31, 32, 33, 65, 128, 129], ids=lambda n: f"f64-N{n}")  # "f64" in the id: not on Metal
def test_lane_blocks_of_an_f64_accumulator(run, n):
    rng = np.random.default_rng(n)
    a, w = rng.standard_normal((2, 3, 40)).astype(np.float32), rng.standard_normal((2, 40, n)).astype(np.float32)
    c = np.full((2, 3, n), np.nan, np.float64)
    run(batched_f64_acc, a, w, c)
    for j in range(2):
        _assert_within(c[j], a[j], w[j], 2.0**-53)


@pytest.mark.parametrize("build", ["serial", "parallel"])
def test_lane_blocks_sum_in_reduction_order(build, monkeypatch):
    """The loop nests' sums are the ordered sums bit for bit, in f32 and f64, on both sides of a block, in both
    builds (the parallel one forced at this size, as ``force_parallel`` in test_cpu_parallel_build.py does; the
    loop nests forced where BLAS would run)."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if build == "parallel" else 1 << 62)
    _force_loop_nests(monkeypatch)
    rng = np.random.default_rng(3)
    for n in (63, 64, 65, 128, 129, 256, 257):
        q, k = (rng.standard_normal((2, m, 70)).astype(np.float32) for m in (5, n))
        v = rng.standard_normal((2, n, n)).astype(np.float32)
        s, o = np.empty((2, 5, n), np.float32), np.empty((2, 5, n), np.float32)
        exe = intent.compile(attention_scores, target="cpu")
        exe(q, k, v, s, o)
        assert (exe._pick([q, k, v, s, o]) is exe.module.kernel_parallel) == (build == "parallel")
        assert np.array_equal(s, _ordered(q, k.transpose(0, 2, 1), np.float32))
        assert np.array_equal(o, _ordered(s, v, np.float32))
        c = np.empty((2, 70, n), np.float64)
        b = rng.standard_normal((2, 70, n)).astype(np.float32)
        a = rng.standard_normal((2, 70, 70)).astype(np.float32)
        intent.compile(batched_f64_acc, target="cpu")(a, b, c)
        assert np.array_equal(c, _ordered(a, b, np.float64))
    assert runtime.lane_row.signatures  # the short rows ran through the register blocks


@intent.kernel
def batched_scaled_e2m1(a: I.In[I.u8, ("B", "M", "G", 16)], sa: I.In[I.u8, ("B", "M", "G")],
                        b: I.In[I.u8, ("B", "G", 16, "N")], sb: I.In[I.u8, ("B", "N", "G")],
                        c: I.Out[I.f32, ("B", "M", "N")]):
    for j in I.parallel(I.domain(0, a.shape[0])):
        c[j, :, :] = I.scaled_matmul(a[j, :, :, :], sa[j, :, :], b[j, :, :, :], sb[j, :, :], lhs_format=I.e2m1,
                                     rhs_format=I.e2m1, group_size=32, acc_dtype=I.f32)


def test_scaled_contraction_inside_a_parallel_loop_above_the_threshold(inner_path):
    """scaled.py's decoded product inside a prange body: BLAS or its loop nest, within T5's bound of the exact sum
    (the decoded products are exact)."""
    from kernels.test_scaled_contract import dense_lhs, dense_rhs

    rng = np.random.default_rng(23)
    bb, m, g, n = 3, 110, 3, 130  # 110,970 elements
    args = [rng.integers(0, 256, (bb, m, g, 16), dtype=np.uint8), rng.integers(120, 134, (bb, m, g), dtype=np.uint8),
            rng.integers(0, 256, (bb, g, 16, n), dtype=np.uint8), rng.integers(120, 134, (bb, n, g), dtype=np.uint8),
            np.full((bb, m, n), np.nan, np.float32)]
    assert sum(x.size for x in args) >= cpu_target.PARALLEL_THRESHOLD
    exe = intent.compile(batched_scaled_e2m1, target="cpu")
    exe(*args)
    assert exe._pick(args) is exe.module.kernel_parallel or cpu_target._threads() == 1
    assert exe.module.BLAS_IN_PRANGE == (inner_path == "blas")
    k = g * 32
    gamma = k * U32 / (1 - k * U32)
    for j in range(bb):
        lhs, rhs = dense_lhs(args[0][j], args[1][j], I.e2m1), dense_rhs(args[2][j], args[3][j], I.e2m1)
        exact, magnitude = lhs @ rhs, np.abs(lhs) @ np.abs(rhs)
        assert np.all(np.abs(args[4][j].astype(np.float64) - exact) <= (gamma + 2.0**-44) * magnitude)


# ---- BLAS inside a prange body (blas_threads.py) ----------------------------------------------------------------

@pytest.fixture
def one_thread_blas():
    if blas_threads.capability() != blas_threads.PTHREADS:
        pytest.skip(f"this machine's BLAS has no thread count to set ({blas_threads.capability()})")
    original, put = blas_threads.threads(), blas_threads._openblas()[2]
    put(3)  # a count other than one (whatever this machine's is), so that one is seen to be set
    try:
        yield 3
        assert blas_threads.threads() == 3
    finally:
        put(original)


@pytest.mark.parametrize("build", ["serial", "parallel"])
def test_blas_inside_a_parallel_loop_runs_on_one_thread(build, monkeypatch, one_thread_blas):
    """The parallel build's call runs with BLAS's count at one (its iterations are the threads), restored after
    it; the serial build's call leaves BLAS its own count (its loop runs on one thread); within T5's bound."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if build == "parallel" else 1 << 62)
    entered = []
    enter = blas_threads.one_thread

    def recording():
        entered.append(None)
        with enter():
            entered[-1] = blas_threads.threads()
            yield

    monkeypatch.setattr(blas_threads, "one_thread", contextlib.contextmanager(recording))
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((3, n, 24)).astype(np.float32) for n in (7, 40, 40))
    s, o = np.full((3, 7, 40), np.nan, np.float32), np.full((3, 7, 24), np.nan, np.float32)
    exe = intent.compile(attention_scores, target="cpu")
    exe(q, k, v, s, o)
    assert exe.module.BLAS_IN_PRANGE
    parallel = exe._pick([q, k, v, s, o]) is exe.module.kernel_parallel
    assert parallel == (build == "parallel") or cpu_target._threads() == 1
    assert entered == ([1] if parallel else [])
    assert blas_threads.threads() == one_thread_blas
    for j in range(3):
        _assert_within(s[j], q[j], k[j].T, U32)
        _assert_within(o[j], s[j], v[j], U32)


def test_a_kernel_with_blas_only_outside_parallel_loops_keeps_blas_threads():
    @intent.kernel
    def plain(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    exe = intent.compile(plain, target="cpu")
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    c = np.zeros((3, 5), np.float32)
    exe(a, b, c)
    assert not exe.module.BLAS_IN_PRANGE and (c == 4).all()


def test_one_thread_is_counted_across_threads_and_restored_after_an_error(one_thread_blas):
    """Two Python threads inside at once (their kernels release the GIL): BLAS stays at one thread until the
    last leaves, whichever order they leave in; an exception inside restores it too."""
    for last in (0, 1):
        inside, leave, seen = threading.Barrier(3, timeout=60), [threading.Event(), threading.Event()], {}

        def user(i):
            with blas_threads.one_thread():
                inside.wait()
                leave[i].wait(60)
            seen[i] = blas_threads.threads()

        workers = [threading.Thread(target=user, args=(i,)) for i in range(2)]
        for w in workers:
            w.start()
        inside.wait()
        assert blas_threads.threads() == 1
        leave[1 - last].set()
        workers[1 - last].join()
        assert seen[1 - last] == 1 and blas_threads.threads() == 1  # the other one is still inside
        leave[last].set()
        workers[last].join()
        assert blas_threads.threads() == one_thread_blas
    with pytest.raises(ZeroDivisionError):
        with blas_threads.one_thread():
            assert blas_threads.threads() == 1
            1 / 0
    assert blas_threads.threads() == one_thread_blas


@intent.kernel
def second_matrix_times(a: I.In[I.f32, ("T", "M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[1, :, :], b[:, :], acc_dtype=I.f32)


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_point_indexed_operands_are_read_in_place(run, layout):
    """``a[1, :, :]`` (a literal point) and ``q[b, :, :]`` in a batch loop are BLAS operands as they are (the
    caller's matrix, ``R.contiguous``'s copy only where it is strided), not packed copies; the values are the
    same either way (T5's bound on every target)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 4)).astype(np.float32)
    if layout == "strided":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)  # each matrix column-major
        b = rng.standard_normal((4, 18)).astype(np.float32).T[::2]
    c = np.full((6, 4), np.nan, np.float32)
    run(second_matrix_times, a, b, c)
    _assert_within(c, a[1], b, U32)
    source = intent.compile(second_matrix_times, target="cpu").source
    assert "R.contiguous(arg0[" in source
    source = intent.compile(attention_scores, target="cpu").source
    if blas_threads.available():
        assert all(f"R.contiguous(arg{k}[" in source for k in range(3))  # q[b], k[b] (transposed for BLAS), v[b]


def test_a_child_forked_while_the_count_is_held_does_not_hang():
    """Forked while another thread is inside ``one_thread`` (its lock held at that moment), the child enters and
    leaves ``one_thread`` itself (a fresh lock after the fork) and exits."""
    import multiprocessing

    inside, release = threading.Event(), threading.Event()

    def holder():
        with blas_threads._lock:
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=holder)
    worker.start()
    inside.wait(30)
    try:
        child = multiprocessing.get_context("fork").Process(target=_enter_and_leave)
        child.start()
        child.join(60)
        hung = child.is_alive()
        if hung:
            child.kill()
    finally:
        release.set()
        worker.join()
    assert not hung and child.exitcode == 0


def _enter_and_leave():
    with blas_threads.one_thread():
        pass
