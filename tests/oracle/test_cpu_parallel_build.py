"""Every kernel family on the cpu target's parallel build, above the size at which a call switches to it.

The cpu target compiles a second build with Numba's parfors (``kernel_parallel``) and runs it once a call
touches ``PARALLEL_THRESHOLD`` (65,536) elements. The parfor pass transforms code the serial build never sees
(allocation hoisting once turned loop carries inside ``I.parallel`` into wrong answers above the threshold and
exact ones below it), so each family runs here once just above the threshold, against NumPy or a hand
formula (generic, the semantic authority, where no NumPy formula exists), and the test asserts that the
parallel build is the one that ran. Shapes are the smallest above the threshold: each parallel compile costs
seconds once, then Numba's disk cache serves it.

``force_parallel`` (the threshold lowered to 0 for one test) is the cheap way to run a small call on the
parallel build; it does not replace the runs above the threshold, which exercise the decision itself.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from example_modules import example

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

THRESHOLD = cpu_target.PARALLEL_THRESHOLD


def run_parallel(kernel, *args, parallel_build: bool = True, **constexprs):
    """Call ``kernel`` on cpu with arrays totalling at least the threshold; assert the parallel build ran
    (``parallel_build``: the kernel has one; a kernel without a parallel loop has only the serial build)."""
    assert sum(a.size for a in args if isinstance(a, np.ndarray)) >= THRESHOLD
    exe = intent.compile(kernel, target="cpu", **constexprs)
    exe(*args)
    parallel = getattr(exe.module, "kernel_parallel", None)
    assert (parallel is not None) == parallel_build
    if parallel is not None:
        assert parallel.signatures, "the call above the threshold did not run the parallel build"
    return exe


@pytest.fixture
def force_parallel(monkeypatch):
    """Every call of this test runs the parallel build, whatever its size."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)


def _ints(rng, shape, lo=-8, hi=8, dtype=np.int64):
    return rng.integers(lo, hi, shape).astype(dtype)


# --- the threshold decision --------------------------------------------------------------------------------------

@intent.kernel
def scale_add(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * 3.0 + 1.0


def test_cpu_threshold_picks_the_serial_build_below_and_the_parallel_build_at_it():
    exe = intent.compile(scale_add, target="cpu")
    below = [np.zeros(THRESHOLD // 2, np.float32), np.zeros(THRESHOLD // 2 - 1, np.float32)]
    at = [np.zeros(THRESHOLD // 2, np.float32), np.zeros(THRESHOLD // 2, np.float32)]
    assert exe._pick(below) is exe.module.kernel
    assert exe._pick(at) is exe.module.kernel_parallel


def test_cpu_one_thread_runs_the_serial_build_at_any_size(monkeypatch):
    """With one thread (``numba.set_num_threads(1)``, or ``NUMBA_NUM_THREADS=1`` before Numba's pool starts) the
    parallel build would only add its scheduling: the serial build runs, with the same results; two threads
    again, the parallel build."""
    import numba
    from numba.np.ufunc import parallel

    exe = intent.compile(scale_add, target="cpu")
    x = np.arange(THRESHOLD, dtype=np.float32)
    before = numba.get_num_threads()  # starts the pool
    try:
        numba.set_num_threads(1)
        assert exe._pick([x, x]) is exe.module.kernel
        y = np.zeros_like(x)
        exe(x, y)
        assert np.array_equal(y, x * np.float32(3) + np.float32(1))
        numba.set_num_threads(2 if numba.config.NUMBA_NUM_THREADS >= 2 else 1)
        assert (exe._pick([x, x]) is exe.module.kernel_parallel) == (numba.config.NUMBA_NUM_THREADS >= 2)
    finally:
        numba.set_num_threads(before)
    monkeypatch.setattr(parallel, "_is_initialized", False)  # as before the pool starts: NUMBA_NUM_THREADS decides
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    assert exe._pick([x, x]) is exe.module.kernel


def test_cpu_pointwise_nest_above_the_threshold():
    x = np.arange(THRESHOLD // 2 + 16, dtype=np.float32) - 1000
    y = np.zeros_like(x)
    run_parallel(scale_add, x, y)
    np.testing.assert_array_equal(y, x * np.float32(3) + np.float32(1))


# --- loop carries inside I.parallel (allocation hoisting) ---------------------------------------------------------

@intent.kernel
def carried_cumsum(x: I.In[I.i64, ("B", "N", "M")], y: I.Out[I.i64, ("B", "M")]):
    for b in I.parallel(I.domain(0, x.shape[0])):
        def body(i, acc):
            return I.cumsum(acc, axis=0) - acc[0] + x[b, i, :]  # each element of the carry reads others
        y[b, :] = I.loop(I.domain(0, x.shape[1]), I.zeros((x.shape[2],), I.i64), body)


def _carried_cumsum_reference(x):
    acc = np.zeros((x.shape[0], x.shape[2]), np.int64)
    for i in range(x.shape[1]):
        acc = np.cumsum(acc, axis=1) - acc[:, :1] + x[:, i, :]
    return acc


def test_cpu_loop_carry_inside_parallel_above_the_threshold():
    x = _ints(np.random.default_rng(1), (8, 65, 128), -2, 3)  # 66,560 elements: the failing size
    y = np.zeros((8, 128), np.int64)
    run_parallel(carried_cumsum, x, y)
    np.testing.assert_array_equal(y, _carried_cumsum_reference(x))


def test_cpu_loop_carry_inside_parallel_forced_parallel_at_a_small_size(force_parallel):
    x = _ints(np.random.default_rng(2), (3, 5, 7), -2, 3)
    y = np.zeros((3, 7), np.int64)
    intent.compile(carried_cumsum, target="cpu")(x, y)
    assert intent.compile(carried_cumsum, target="cpu").module.kernel_parallel.signatures
    np.testing.assert_array_equal(y, _carried_cumsum_reference(x))


@intent.kernel
def carried_while(x: I.In[I.i64, ("B", "M")], y: I.Out[I.i64, ("B", "M")], n: I.Out[I.i32, ("B",)]):
    for b in I.parallel(I.domain(0, x.shape[0])):
        row = x[b, :]
        v, count = I.while_(lambda c: c[1] < 3,
                            lambda c: (I.cumsum(c[0], axis=0) - c[0][0] + row, c[1] + 1),
                            (row, I.cast(0, I.i32)))
        y[b, :] = v
        n[b] = count


def test_cpu_while_carry_inside_parallel_above_the_threshold():
    x = _ints(np.random.default_rng(3), (256, 128), -3, 4)
    y = np.zeros_like(x)
    n = np.zeros(256, np.int32)
    run_parallel(carried_while, x, y, n)
    want = x.copy()
    for _ in range(3):
        want = np.cumsum(want, axis=1) - want[:, :1] + x
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(n, 3)


@intent.kernel
def branch_rows(x: I.In[I.i64, ("B", "M")], y: I.Out[I.i64, ("B", "M")]):
    for b in I.parallel(I.domain(0, x.shape[0])):
        row = x[b, :]
        y[b, :] = I.if_(x[b, 0] > 0, lambda: I.cumsum(row, axis=0), lambda: row * 2)


def test_cpu_if_inside_parallel_above_the_threshold():
    x = _ints(np.random.default_rng(4), (256, 256))
    y = np.zeros_like(x)
    run_parallel(branch_rows, x, y)
    np.testing.assert_array_equal(y, np.where(x[:, :1] > 0, np.cumsum(x, axis=1), x * 2))


# --- reductions, scans, contract ----------------------------------------------------------------------------------

@intent.kernel
def row_sums(x: I.In[I.i64, ("M", "K")], y: I.Out[I.i64, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


def test_cpu_reduce_above_the_threshold():
    x = _ints(np.random.default_rng(5), (256, 256))
    y = np.zeros(256, np.int64)
    run_parallel(row_sums, x, y)
    np.testing.assert_array_equal(y, x.sum(axis=1))


@intent.kernel
def row_argmax(x: I.In[I.f32, ("M", "K")], v: I.Out[I.f32, ("M",)], i: I.Out[I.index, ("M",)]):
    values, where = I.arg_reduce.max(x[:, :], axis=1)
    v[:] = values
    i[:] = where


def test_cpu_arg_reduce_above_the_threshold():
    x = np.random.default_rng(6).standard_normal((256, 256)).astype(np.float32)
    v, i = np.zeros(256, np.float32), np.zeros(256, np.int64)
    run_parallel(row_argmax, x, v, i)
    np.testing.assert_array_equal(i, np.argmax(x, axis=1))
    np.testing.assert_array_equal(v, x.max(axis=1))


@intent.kernel
def row_cumsum(x: I.In[I.i64, ("M", "K")], y: I.Out[I.i64, ("M", "K")]):
    y[:, :] = I.cumsum(x[:, :], axis=1)


def test_cpu_scan_above_the_threshold():
    x = _ints(np.random.default_rng(7), (256, 130))
    y = np.zeros_like(x)
    run_parallel(row_cumsum, x, y)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))


@intent.kernel
def matmul_f64(a: I.In[I.f64, ("M", "K")], b: I.In[I.f64, ("K", "N")], c: I.Out[I.f64, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f64)


@intent.kernel
def matmul_i32(a: I.In[I.i32, ("M", "K")], b: I.In[I.i32, ("K", "N")], c: I.Out[I.i32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.i32)


@pytest.mark.parametrize("kernel,dtype", [(matmul_f64, np.float64), (matmul_i32, np.int32)], ids=["blas", "loops"])
def test_cpu_contract_above_the_threshold(kernel, dtype):
    rng = np.random.default_rng(8)
    a, b = _ints(rng, (128, 200), dtype=dtype), _ints(rng, (200, 128), dtype=dtype)
    c = np.zeros((128, 128), dtype)
    run_parallel(kernel, a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))  # small integers: exact


# --- region_fold / region_scan ------------------------------------------------------------------------------------

def test_cpu_region_fold_attention_inside_parallel_above_the_threshold():
    fa = example("flash_attention")
    attention_f16, reference_f16 = fa.attention_f16, fa.reference_f16
    rng = np.random.default_rng(9)
    B, L, S, D = 7, 16, 300, 16  # 70,784 elements; S spans two region slices
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
    out = np.zeros((B, L, D), np.float16)
    run_parallel(attention_f16, q, k, v, out, 1 / math.sqrt(D))
    bound = 2.0**-9 * float(np.abs(v).max())  # the example's bound (P in f16, output rounded to f16)
    assert np.abs(out - reference_f16(q, k, v, 1 / math.sqrt(D))).max() < bound


@intent.kernel
def region_cumsum_rows(x: I.In[I.i64, ("B", "N")], y: I.Out[I.i64, ("B", "N")], total: I.Out[I.i64, ("B",)]):
    for b in I.parallel(I.domain(0, x.shape[0])):
        outs, final = I.region_scan(
            source=x[b, :], axis=0,
            summarize=lambda s: I.reduce.sum(s, axis=0), combine=lambda a, c: a + c, identity=I.cast(0, I.i64),
            initial_state=I.cast(0, I.i64), apply=lambda t, state: state + t,
            emit=lambda s, state: I.cumsum(s, axis=0) + state)
        y[b, :] = outs
        total[b] = final


def test_cpu_region_scan_inside_parallel_above_the_threshold():
    x = _ints(np.random.default_rng(10), (64, 520))  # three slices per row
    y, total = np.zeros_like(x), np.zeros(64, np.int64)
    run_parallel(region_cumsum_rows, x, y, total)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))
    np.testing.assert_array_equal(total, x.sum(axis=1))


# --- memory: gather, histogram, scatter_reduce, unique store, buffers, atomics ---------------------------------

@intent.kernel
def gather_1d(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("K",)]):
    d = I.domain(0, idx.shape[0])
    y[d] = I.gather(x[:], idx[d])


def test_cpu_gather_above_the_threshold():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(20000).astype(np.float32)
    idx = rng.integers(0, 20000, 30000).astype(np.int32)
    y = np.zeros(30000, np.float32)
    run_parallel(gather_1d, x, idx, y)
    np.testing.assert_array_equal(y, x[idx])


@intent.kernel
def histogram_16(v: I.In[I.i64, ("R", "C")], out: I.Out[I.i64, (16,)]):
    out[:] = I.histogram(v[:, :], bins=16, count_dtype=I.i64)


def test_cpu_histogram_above_the_threshold():
    v = np.random.default_rng(12).integers(0, 16, (256, 256))
    out = np.zeros(16, np.int64)
    run_parallel(histogram_16, v, out)
    np.testing.assert_array_equal(out, np.bincount(v.ravel(), minlength=16))


@intent.kernel
def scatter_add(idx: I.In[I.i32, ("K",)], v: I.In[I.i64, ("K",)], dest: I.InOut[I.i64, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine=lambda a, b: a + b)


def test_cpu_scatter_reduce_above_the_threshold():
    rng = np.random.default_rng(13)
    idx = rng.integers(0, 1000, 33000).astype(np.int32)
    v = _ints(rng, 33000)
    dest = _ints(rng, 1000)
    want = dest.copy()
    np.add.at(want, idx, v)
    run_parallel(scatter_add, idx, v, dest, parallel_build=False)
    np.testing.assert_array_equal(dest, want)


@intent.kernel
def permute_into_buffer(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("N",)]):
    b = I.buffer((x.shape[0],), I.f32, init=-1.0)
    k = I.domain(0, idx.shape[0])
    b[idx[k]] = x[idx[k]] * 2.0  # a unique store at data-derived coordinates
    y[:] = b[:]


def test_cpu_unique_store_into_a_buffer_above_the_threshold():
    rng = np.random.default_rng(14)
    x = rng.standard_normal(30000).astype(np.float32)
    idx = rng.permutation(30000)[:20000].astype(np.int32)
    y = np.zeros_like(x)
    run_parallel(permute_into_buffer, x, idx, y)
    want = np.full_like(x, -1.0)
    want[idx] = x[idx] * np.float32(2)
    np.testing.assert_array_equal(y, want)


@intent.kernel
def prefix_in_row_buffers(x: I.In[I.i64, ("R", "C")], y: I.Out[I.i64, ("R", "C")]):
    for r in I.parallel(I.domain(0, x.shape[0])):
        b = I.buffer((x.shape[1],), I.i64, init=x[r, :])  # one buffer per row, allocated in the parallel body
        for c in I.domain(1, x.shape[1]):
            b[c] = b[c] + b[c - 1]
        y[r, :] = b[:]


def test_cpu_buffers_inside_parallel_above_the_threshold():
    x = _ints(np.random.default_rng(15), (256, 130))
    y = np.zeros_like(x)
    run_parallel(prefix_in_row_buffers, x, y)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))


@intent.kernel
def atomic_counts(v: I.In[I.i32, ("K",)], counts: I.Out[I.i32, ("N",)]):
    counts[I.domain(0, counts.shape[0])] = 0
    for i in I.parallel(I.domain(0, v.shape[0])):
        I.atomic.add(counts[v[i]], 1, order="relaxed")


def test_cpu_atomics_above_the_threshold():
    v = np.random.default_rng(16).integers(0, 64, THRESHOLD).astype(np.int32)
    counts = np.full(64, 7, np.int32)
    run_parallel(atomic_counts, v, counts)
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=64))


# --- random -------------------------------------------------------------------------------------------------------

@intent.kernel
def bits_of_indices(y: I.Out[I.u32, ("N",)], seed: I.u64):
    d = I.domain(0, y.shape[0])
    y[d] = I.random.bits(seed, I.indices(d))


def _philox_bits(seed: int, counters: np.ndarray) -> np.ndarray:
    """T8 in NumPy: word counter % 4 of Philox4x32-10((lo32(block), hi32(block), 0, 0), (lo32, hi32 of seed))."""
    m32 = np.uint64(0xFFFFFFFF)
    block, word = counters // 4, counters % 4
    c = [block & m32, block >> np.uint64(32), np.zeros_like(block), np.zeros_like(block)]
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m32, (k1 + np.uint64(0xBB67AE85)) & m32
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & m32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & m32]
    return np.choose(word.astype(np.int64), c).astype(np.uint32)


def test_cpu_random_bits_above_the_threshold():
    y = np.zeros(THRESHOLD, np.uint32)
    seed = 0x0123456789ABCDEF
    run_parallel(bits_of_indices, y, seed)
    np.testing.assert_array_equal(y, _philox_bits(seed, np.arange(THRESHOLD, dtype=np.uint64)))


# --- quantize, quantized_dot, scaled and sparse contract (generic is the authority) ----------------------------

@intent.kernel
def quantize_q8(x: I.In[I.f32, ("R", 256)], d: I.Out[I.f32, ("R", 1)], qs: I.Out[I.i8, ("R", 1, 256)],
                bsums: I.Out[I.i16, ("R", 1, 16)]):
    q = I.quantize(x[:, :], format=I.quant.q8_k)
    d[:, :], qs[:, :, :], bsums[:, :, :] = q.d, q.qs, q.bsums


@intent.kernel
def q4_dot(x: I.In[I.f32, ("M", 256)], w: I.In[I.f32, ("M", 256)], o: I.Out[I.f32, ("M",)]):
    a = I.quantize(x[:, :], format=I.quant.q4_k)
    b = I.quantize(w[:, :], format=I.quant.q8_k)
    o[:] = I.quantized_dot(a, b, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)


def _same_as_generic(kernel, args, outputs, parallel_build=True):
    """Run on cpu (parallel build) and on generic with copies; the outputs (indices into args) agree bit for bit."""
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    intent.compile(kernel, target="generic")(*theirs)
    run_parallel(kernel, *args, parallel_build=parallel_build)
    for k in outputs:
        np.testing.assert_array_equal(np.asarray(args[k]).view(np.uint8), np.asarray(theirs[k]).view(np.uint8))


def test_cpu_quantize_above_the_threshold():
    x = (np.random.default_rng(17).standard_normal((240, 256)) * 4).astype(np.float32)
    args = [x, np.zeros((240, 1), np.float32), np.zeros((240, 1, 256), np.int8), np.zeros((240, 1, 16), np.int16)]
    _same_as_generic(quantize_q8, args, (1, 2, 3))


def test_cpu_quantized_dot_above_the_threshold():
    rng = np.random.default_rng(18)
    x, w = (rng.standard_normal((130, 256)).astype(np.float32) for _ in range(2))
    _same_as_generic(q4_dot, [x, w, np.zeros(130, np.float32)], (2,))


@intent.kernel
def scaled_e2m1(a: I.In[I.u8, ("M", "G", 16)], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", 16, "N")],
                sb: I.In[I.u8, ("N", "G")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e2m1,
                              group_size=32, acc_dtype=I.f32)


def test_cpu_scaled_contract_above_the_threshold():
    # An f32 contraction's summation order is free (T5; generic's einsum takes BLAS's order, which depends on
    # the host's vector width), so the result is held to T5's bound around the exact sum, not to generic's bits.
    from kernels.test_scaled_contract import dense_lhs, dense_rhs

    rng = np.random.default_rng(19)
    m, g, n = 160, 8, 160
    args = [rng.integers(0, 256, (m, g, 16), dtype=np.uint8), rng.integers(120, 134, (m, g), dtype=np.uint8),
            rng.integers(0, 256, (g, 16, n), dtype=np.uint8), rng.integers(120, 134, (n, g), dtype=np.uint8),
            np.zeros((m, n), np.float32)]
    run_parallel(scaled_e2m1, *args)
    lhs, rhs = dense_lhs(args[0], args[1], I.e2m1), dense_rhs(args[2], args[3], I.e2m1)
    k = lhs.shape[1]
    exact, magnitude = lhs @ rhs, np.abs(lhs) @ np.abs(rhs)  # products exact; float64 sums within 2^-44 of them
    gamma = k * 2.0 ** -24 / (1 - k * 2.0 ** -24)
    assert np.all(np.abs(args[4].astype(np.float64) - exact) <= (gamma + 2.0 ** -44) * magnitude)
    assert np.any(args[4] != 0)


@intent.kernel
def sparse_2of4(a: I.In[I.f64, ("M", 128)], meta: I.In[I.i32, ("M", 128)], b: I.In[I.f64, (256, "N")],
                c: I.Out[I.f64, ("M", "N")]):
    c[:, :] = I.sparse_matmul(a[:, :], meta[:, :], b[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f64)


def test_cpu_sparse_contract_above_the_threshold():
    rng = np.random.default_rng(20)
    m, k, n = 128, 256, 96
    a = _ints(rng, (m, k // 2)).astype(np.float64)
    pairs = np.array([(i, j) for i in range(4) for j in range(i + 1, 4)], np.int32)
    meta = pairs[rng.integers(0, len(pairs), (m, k // 4))].reshape(m, k // 2)
    b = _ints(rng, (k, n)).astype(np.float64)
    c = np.zeros((m, n))
    run_parallel(sparse_2of4, a, meta, b, c)
    dense = np.zeros((m, k))
    cols = 4 * (np.arange(k // 2) // 2)[None, :] + meta
    np.put_along_axis(dense, cols, a, axis=1)
    np.testing.assert_array_equal(c, dense @ b)  # small integers: exact
