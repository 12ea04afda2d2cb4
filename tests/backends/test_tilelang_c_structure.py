"""tilelang-c against generic: domains, views, control flow, reduce, contract, and the executable itself."""

import ml_dtypes
import numpy as np
import pytest
from conftest import bits_equal

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import LoweringError

pytest.importorskip("tilelang")
from backends.tilelang_support import (
    TARGET,
    run_both,
)
from intent_trace.backends.tilelang.target import build, generate, require_runtime


# --- shapes, domains, views ---------------------------------------------------------------------------------

def test_domains_subregions_indices_and_multi_dim_views():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.InOut[I.f32, ("M", "N")], z: I.Out[I.index, ("N",)],
          t: I.Out[I.f32, ("N", "M")], begin: I.index, end: I.index, step: I.index):
        rows = I.domain(0, x.shape[0])
        cols = I.domain(0, x.shape[1])
        strided = I.domain(begin, end, step)
        y[rows, strided] = x[rows, strided] * 2.0 + y[rows, strided]
        z[cols] = I.indices(cols) * 10
        z[cols[1:3]] = I.indices(cols[1:3]) + 100
        t[cols, rows] = I.transpose(x[rows, cols], (1, 0))
        y[0, cols] = x[x.shape[0] - 1, cols]

    x = np.arange(20, dtype=np.float32).reshape(4, 5) - 7.5
    for begin, end, step in ((1, 5, 2), (0, 5, 1), (4, 2, 1), (0, 5, 7), (3, 4, 1)):
        run_both(k, x, np.ones((4, 5), np.float32), np.zeros(5, np.int64), np.zeros((5, 4), np.float32),
                 begin, end, step)


def test_broadcast_full_reshape_slice_join():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", 4)], v: I.In[I.f32, (4,)], out: I.Out[I.f32, ("M", 4)],
          flat: I.Out[I.f32, (8,)], sl: I.Out[I.f32, (2, 2)], pair: I.Out[I.f32, (4, 2)], s: I.f32):
        rows = I.domain(0, x.shape[0])
        cols = I.domain(0, 4)
        out[rows, cols] = x[rows, cols] + v[cols] + s  # right-aligned broadcasts of a row and a scalar
        flat[I.domain(0, 8)] = I.reshape(x[I.domain(0, 2), cols], (8,))
        sl[I.domain(0, 2), I.domain(0, 2)] = x[I.domain(0, 2), cols][0:2, 1:3] + I.full((2, 2), 0.5, I.f32)
        pair[cols, I.domain(0, 2)] = I.join(v[cols], x[0, cols])

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([0.25, -1.0, np.nan, -0.0], np.float32)
    run_both(k, x, v, np.zeros((3, 4), np.float32), np.zeros(8, np.float32), np.zeros((2, 2), np.float32),
             np.zeros((4, 2), np.float32), 1.5)


def test_gathered_reads_and_in_place_update():
    @intent.kernel
    def k(idx: I.In[I.i32, ("N",)], x: I.In[I.f64, ("M",)], y: I.InOut[I.f64, ("N",)]):
        d = I.domain(0, idx.shape[0])
        y[d] = y[d] * 2.0 + x[idx[d]]

    run_both(k, np.array([3, 0, 0, 2], np.int32), np.array([1.0, 2.0, 3.0, 4.5]), np.array([1.0, -0.0, 2.0, 3.0]))


def test_value_read_before_overwrite_is_snapshotted():
    @intent.kernel
    def k(x: I.InOut[I.i32, (4,)], y: I.Out[I.i32, (4,)]):
        d = I.domain(0, 4)
        old = x[d] + 1
        x[d] = x[d] * 3
        y[d] = old  # the values x held before the write
        x[d] = I.reshape(I.transpose(I.reshape(x[d], (2, 2)), (1, 0)), (4,))  # reads other elements than it writes

    run_both(k, np.array([1, 2, 3, 4], np.int32), np.zeros(4, np.int32))


# --- control ------------------------------------------------------------------------------------------------

def test_parallel_and_for_loops():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)], z: I.InOut[I.i32, ("N",)]):
        rows = I.domain(0, x.shape[0])
        cols = I.domain(0, x.shape[1])
        for r in I.parallel(rows):
            y[r] = x[r, 0] * 100.0 + x[r, x.shape[1] - 1]
        for c in cols:
            z[c] = z[c] + I.cast(c, I.i32) * 2

    run_both(k, np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros(3, np.float32), np.arange(4, dtype=np.int32))


def test_loop_with_carries_break_and_continue():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (3,)], n: I.Out[I.i64, (2,)], limit: I.f32):
        d = I.domain(0, x.shape[0])

        def body(i, carry):
            total, count = carry
            I.break_(when=total > limit, carry=(total, count))
            I.continue_(when=x[i] < 0.0, carry=(total, count + 1))
            return total + x[i], count

        total, skipped = I.loop(d, (I.cast(0.0, I.f32), I.cast(0, I.i64)), body)
        y[0] = total
        n[0] = skipped
        swapped = I.loop(d, (x[0], x[1]), lambda i, c: (c[1], c[0]))  # both carries read before either changes
        y[1] = swapped[0] - swapped[1]
        y[2] = I.loop(d, limit, lambda i, c: c * 0.5 + x[i])
        n[1] = I.loop(d, I.cast(1, I.i64), lambda i, c: c * 3 + I.cast(i, I.i64))

    x = np.array([1.0, -2.0, 3.0, -0.5, 4.0, 100.0, 5.0], np.float32)
    for limit in (4.5, 1000.0, -1.0):
        run_both(k, x, np.zeros(3, np.float32), np.zeros(2, np.int64), limit)


def test_if_and_while():
    @intent.kernel
    def k(x: I.In[I.i64, ("N",)], y: I.Out[I.i64, ("N",)], s: I.i64):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d):
            v = x[i]
            y[i] = I.if_(v > s, lambda: v * 2, lambda: I.if_(v < 0, lambda: -v, lambda: v + s))
        steps, value = I.while_(lambda c: c[1] > 1, lambda c: (c[0] + 1, I.select(c[1] % 2 == 0, c[1] // 2,
                                                                                   c[1] * 3 + 1)),
                                (I.cast(0, I.i64), s))
        y[0] = steps * 1000 + value

    for s in (27, 1, 6):
        run_both(k, np.array([5, -3, 40, 0, 7], np.int64), np.zeros(5, np.int64), s)


def test_while_with_break_and_continue():
    @intent.kernel
    def k(out: I.Out[I.i32, (2,)], start: I.i32):
        def body(c):
            i, acc = c
            I.break_(when=acc > 50, carry=(i, acc))
            I.continue_(when=i % 3 == 0, carry=(i + 1, acc))
            return i + 1, acc + i

        i, acc = I.while_(lambda c: c[0] < 20, body, (start, I.cast(0, I.i32)))
        out[0] = i
        out[1] = acc

    for start in (0, 5, 30):
        run_both(k, np.zeros(2, np.int32), start)


# --- reduce and contract ------------------------------------------------------------------------------------

def test_reduce_sum_max_and_arg_reduce():
    @intent.kernel
    def k(x: I.In[I.f32, ("M", "N")], s64: I.Out[I.f64, ("M",)], mx: I.Out[I.f32, ("N",)],
          arg: I.Out[I.index, ("M",)], total: I.Out[I.f32, (1,)], isum: I.Out[I.i64, ("M",)]):
        rows = I.domain(0, x.shape[0])
        cols = I.domain(0, x.shape[1])
        s64[rows] = I.reduce.sum(x[rows, cols], axis=1, acc_dtype=I.f64)
        mx[cols] = I.reduce.max(x[rows, cols], axis=0)
        arg[rows] = I.arg_reduce.max(x[rows, cols], axis=1)[1]
        total[0] = I.reduce.sum(x[rows, cols], axis=(0, 1))
        isum[rows] = I.reduce.sum(I.cast(x[rows, cols], I.i32), axis=1)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = -0.0
    x[3, 2] = 0.0
    run_both(k, x, np.zeros(5), np.zeros(7, np.float32), np.zeros(5, np.int64), np.zeros(1, np.float32),
             np.zeros(5, np.int64))
    run_both(k, np.zeros((0, 3), np.float32), np.zeros(0), np.zeros(3, np.float32), np.zeros(0, np.int64),
             np.zeros(1, np.float32), np.zeros(0, np.int64))


def test_contract_matmul_and_batched():
    @intent.kernel
    def k(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")],
          p: I.In[I.i32, ("B", "M", "K")], q: I.In[I.i32, ("B", "K")], r: I.Out[I.i64, ("B", "M")]):
        m, kk, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
        c[m, n] = I.matmul(a[m, kk], b[kk, n], acc_dtype=I.f32)
        bb = I.domain(0, p.shape[0])
        r[bb, m] = I.contract(p[bb, m, kk], q[bb, kk], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.i64)

    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, (3, 4)).astype(np.float32)  # exact products and sums: any order gives these bits
    b = rng.integers(-8, 8, (4, 5)).astype(np.float32)
    p = rng.integers(-2**31, 2**31, (2, 3, 4)).astype(np.int32)
    q = rng.integers(-2**31, 2**31, (2, 4)).astype(np.int32)
    run_both(k, a, b, np.zeros((3, 5), np.float32), p, q, np.zeros((2, 3), np.int64))


# --- the executable -----------------------------------------------------------------------------------------

@intent.kernel
def _scale(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], w: I.Out[I.f32, ("N",)], s: I.f32):
    rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[rows, cols] = x[rows, cols] * s
    w[cols] = x[0, cols]


def test_one_compilation_serves_every_shape_and_zero_sizes():
    exe = build(_scale.trace(), target=TARGET)
    for shape in ((2, 3), (5, 1), (1, 7), (3, 0)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        y, w = np.zeros_like(x), np.zeros(shape[1], np.float32)
        exe(x, y, w, 3.0)
        np.testing.assert_array_equal(y, x * 3)
        np.testing.assert_array_equal(w, x[0])
    assert build(_scale.trace(), target=TARGET) is exe
    assert len(exe.program.split("@T.prim_func")) == 2


def test_torch_tensors_are_accepted_and_written_in_place():
    torch = pytest.importorskip("torch")
    exe = build(_scale.trace(), target=TARGET)
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y, w = torch.zeros(2, 3), torch.zeros(3)
    exe(x, y, w, 0.5)
    assert torch.equal(y, x * 0.5) and torch.equal(w, x[0])
    yt = torch.zeros(3, 2).t()  # a non-contiguous output is written through its strides
    exe(x, yt, w, 2.0)
    assert torch.equal(yt, x * 2)


def test_bad_arguments_raise_before_anything_is_written():
    exe = build(_scale.trace(), target=TARGET)
    x = np.ones((2, 3), np.float32)
    y, w = np.full((2, 3), 7.0, np.float32), np.full(3, 7.0, np.float32)
    with pytest.raises(TypeError, match="x"):
        exe(x.astype(np.float64), y, w, 1.0)
    with pytest.raises(ValueError, match="N"):
        exe(x, y, np.zeros(4, np.float32), 1.0)
    with pytest.raises(ValueError):
        exe(x, np.zeros((2, 3, 1), np.float32), w, 1.0)
    with pytest.raises(TypeError):
        exe(x, y, w)
    with pytest.raises(TypeError):
        exe(x, y, w, "1")
    assert (y == 7.0).all() and (w == 7.0).all()


def test_unsupported_ops_raise_lowering_error_naming_op_and_target(monkeypatch):
    from intent_trace.backends.tilelang import rules
    from intent_trace.graph import ops

    @intent.kernel
    def uses_histogram(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, (4,)]):
        d = I.domain(0, x.shape[0])
        y[I.domain(0, 4)] = I.histogram(x[d], bins=4, count_dtype=I.i32)

    # Every op lowers today: take one away, as a target without it would be.
    monkeypatch.delitem(rules.RULES, ops.histogram)
    monkeypatch.setitem(rules.REJECTED, ops.histogram, "not on this test's target")
    with pytest.raises(LoweringError, match=r"tilelang-c.*`histogram`.*not on this test's target"):
        build(uses_histogram.trace(), target=TARGET)
    with pytest.raises(ValueError, match="tilelang-nope"):
        build(uses_histogram.trace(), target="tilelang-nope")


def test_generated_source_never_contains_user_names():
    @intent.kernel
    def sneaky_kernel_name(os_system_rm_rf: I.In[I.f32, ("EXTENT_NAME_XYZ",)],
                           __import__: I.Out[I.f32, ("EXTENT_NAME_XYZ",)], secret_scalar_q: I.f32):
        d = I.domain(0, os_system_rm_rf.shape[0])
        __import__[d] = os_system_rm_rf[d] + secret_scalar_q

    exe = build(sneaky_kernel_name.trace(), target=TARGET)
    for word in ("sneaky_kernel_name", "os_system_rm_rf", "__import__", "EXTENT_NAME_XYZ", "secret_scalar_q"):
        assert word not in exe.program
    x = np.arange(3, dtype=np.float32)
    y = np.zeros(3, np.float32)
    exe(x, y, 1.0)
    np.testing.assert_array_equal(y, x + 1)
    source = exe.source
    assert "T.prim_func" in source and "kernel_kernel" in source  # the TileLang program, then its C source
    for word in ("sneaky_kernel_name", "os_system_rm_rf", "EXTENT_NAME_XYZ", "secret_scalar_q"):
        assert word not in source


def test_require_runtime_and_generate():
    require_runtime()
    assert build.require_runtime is require_runtime
    text = generate(_scale.trace())
    assert text.startswith("# Generated by intent_trace") and "T.dynamic" in text and "T.serial" in text


def test_f16_bf16_reduce_contract_scalars_and_torch_bfloat16():
    @intent.kernel
    def k(x: I.In[I.f16, ("M", "K")], w: I.In[I.bf16, ("K", "N")], s: I.bf16, mx: I.Out[I.f16, ("M",)],
          sm: I.Out[I.f32, ("M",)], c: I.Out[I.bf16, ("M", "N")], h: I.Out[I.f16, ("M", "K")]):
        m, kk, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1]), I.domain(0, w.shape[1])
        mx[m] = I.reduce.max(x[m, kk], axis=1)
        sm[m] = I.reduce.sum(x[m, kk], axis=1)
        c[m, n] = I.matmul(I.cast(x[m, kk], I.bf16), w[kk, n], acc_dtype=I.bf16) * s
        h[m, kk] = x[m, kk] * I.cast(s, I.f16) + 1.0

    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 5)) * 4).astype(np.float16)
    x[0, 2] = np.nan
    w = rng.integers(-4, 4, (5, 2)).astype(ml_dtypes.bfloat16)
    out = run_both(k, x, w, 1.5, np.zeros(3, np.float16), np.zeros(3, np.float32), np.zeros((3, 2), ml_dtypes.bfloat16),
                   np.zeros((3, 5), np.float16))
    torch = pytest.importorskip("torch")
    exe = build(k.trace(), target=TARGET)
    tw = torch.from_numpy(w.view(np.int16)).view(torch.bfloat16)
    tc = torch.zeros(3, 2, dtype=torch.bfloat16)
    exe(torch.from_numpy(x), tw, 1.5, torch.zeros(3, dtype=torch.float16), torch.zeros(3), tc,
        torch.zeros(3, 5, dtype=torch.float16))
    assert bits_equal(tc.view(torch.int16).numpy(), out["c"].view(np.int16))
