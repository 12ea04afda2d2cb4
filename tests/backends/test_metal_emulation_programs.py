"""The emulated tilelang-metal executable (``emulate=True``): the real Metal program TileLang generates, compiled as
host C++ against the emulation header, gives the right answers (NumPy/ml_dtypes references) and behaves as the
other TileLang executables do on failure (the same exception, the caller's arrays unchanged)."""
import re

import ml_dtypes
import numpy as np
import pytest
from conftest import bits_equal

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.metal_emulation.kernel import EmulationError  # noqa: E402

RNG = np.random.default_rng(18)


def emulated(kernel, **constexprs):
    exe = intent.compile(kernel, target="tilelang-metal", emulate=True, **constexprs)
    assert exe.target == "tilelang-metal" and exe.emulated
    return exe


@intent.kernel
def pointwise(x: I.In[I.f32, ("M", "N")], h: I.In[I.f16, ("M", "N")], y: I.Out[I.f32, ("M", "N")],
              z: I.Out[I.f16, ("M", "N")], scale: I.f32):
    r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[r, c] = I.exp(x[r, c]) * scale - x[r, c]
    z[r, c] = h[r, c] * h[r, c] + I.cast(x[r, c], I.f16)


def test_pointwise_f32_and_f16():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    h = RNG.standard_normal((3, 5)).astype(np.float16)
    y, z = np.zeros_like(x), np.zeros_like(h)
    emulated(pointwise)(x, h, y, z, 0.5)
    ref = np.exp(x.astype(np.float64)) * 0.5
    np.testing.assert_allclose(y, (ref.astype(np.float32) - x), rtol=2e-6, atol=1e-7)
    hf = h.astype(np.float32)
    square = (hf * hf).astype(np.float16).astype(np.float32)
    want = (square + x.astype(np.float16).astype(np.float32)).astype(np.float16)
    assert bits_equal(z, want)  # each f16 op rounds once (T3)


@intent.kernel
def reductions(x: I.In[I.f32, ("M", "N")], sums: I.Out[I.f32, ("M",)], maxes: I.Out[I.f32, ("N",)],
               where: I.Out[I.index, ("M",)]):
    r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    sums[r] = I.reduce.sum(x[r, c], axis=1)
    maxes[c] = I.reduce.max(x[r, c], axis=0)
    best, at = I.arg_reduce.max(x[r, c], axis=1)
    where[r] = at


def test_reductions_and_arg_reduce():
    x = RNG.integers(-8, 8, (4, 6)).astype(np.float32)  # integers: every summation order gives the same sum
    x[1, 2] = x[1, 4] = 50.0  # a tie: the lowest index wins
    sums, maxes, where = np.zeros(4, np.float32), np.zeros(6, np.float32), np.zeros(4, np.int64)
    emulated(reductions)(x, sums, maxes, where)
    assert bits_equal(sums, x.sum(axis=1)) and bits_equal(maxes, x.max(axis=0))
    assert where.tolist() == np.argmax(x, axis=1).tolist()


@intent.kernel
def scans(x: I.In[I.i32, ("N",)], fwd: I.Out[I.i64, ("N",)], rev: I.Out[I.f32, ("N",)]):
    n = I.domain(0, x.shape[0])
    fwd[n] = I.cumsum(x[n], axis=0)
    rev[n] = I.cumsum(I.cast(x[n], I.f32), axis=0, reverse=True)


def test_scans():
    x = RNG.integers(-100, 100, 9).astype(np.int32)
    fwd, rev = np.zeros(9, np.int64), np.zeros(9, np.float32)
    emulated(scans)(x, fwd, rev)
    assert fwd.tolist() == np.cumsum(x).tolist()
    assert rev.tolist() == np.cumsum(x[::-1])[::-1].astype(np.float32).tolist()


@intent.kernel
def matmul(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)


def test_contract_matmul():
    a = RNG.integers(-4, 4, (3, 7)).astype(np.float32)
    b = RNG.integers(-4, 4, (7, 5)).astype(np.float32)
    c = np.zeros((3, 5), np.float32)
    emulated(matmul)(a, b, c)
    assert bits_equal(c, a @ b)  # small integers: exact in any order


@intent.kernel
def histogram_atomics(idx: I.In[I.i32, ("K",)], v: I.In[I.i32, ("K",)], dest: I.InOut[I.i32, ("N",)],
                      old: I.Out[I.i32, ("K",)], fmax: I.InOut[I.f32, ("N",)]):
    for i in I.parallel(I.domain(0, idx.shape[0])):
        old[i] = I.atomic.add(dest[idx[i]], v[i], order="relaxed")
        I.atomic.max(fmax[idx[i]], I.cast(v[i], I.f32), order="acq_rel")


def test_atomics():
    idx = np.array([0, 2, 2, 1, 2, 0], np.int32)
    v = np.array([5, -1, 7, 3, 2, 9], np.int32)
    dest, old, fmax = np.array([1, 1, 1], np.int32), np.zeros(6, np.int32), np.full(3, -np.inf, np.float32)
    emulated(histogram_atomics)(idx, v, dest, old, fmax)
    assert dest.tolist() == [15, 4, 9]
    assert fmax.tolist() == [9.0, 3.0, 7.0]
    for e in range(3):  # the values seen chain, in whatever order the points ran: {1} + new == seen + {final}
        points = np.flatnonzero(idx == e)
        assert sorted([1, *(old[points] + v[points])]) == sorted([*old[points], dest[e]])


@intent.kernel
def gather(x: I.In[I.bf16, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.bf16, ("K",)], count: I.InOut[I.i32, (1,)]):
    k = I.domain(0, idx.shape[0])
    y[k] = x[idx[k]] * 2.0
    count[0] = count[0] + 1


def test_gather_bf16_and_a_failing_bounds_check_leaves_the_arrays_unchanged():
    x = RNG.standard_normal(6).astype(ml_dtypes.bfloat16)
    y, count = np.zeros(3, ml_dtypes.bfloat16), np.array([4], np.int32)
    exe = emulated(gather)
    exe(x, np.array([5, 0, 3], np.int32), y, count)
    assert bits_equal(y, (x[[5, 0, 3]].astype(np.float32) * 2).astype(ml_dtypes.bfloat16)) and count[0] == 5
    before_y, before_count = y.copy(), count.copy()
    for bad in (6, -1):  # past the end and negative, in every position
        for pos in range(3):
            idx = np.array([1, 2, 3], np.int32)
            idx[pos] = bad
            with pytest.raises(IndexError, match="extent 6"):
                exe(x, idx, y, count)
            assert bits_equal(y, before_y) and bits_equal(count, before_count)


def test_the_metal_source_is_the_one_the_emulator_runs():
    exe = emulated(matmul)
    assert "[[kernel" in exe.source and exe.kernel.source in exe.source


def test_emulate_is_only_for_metal():
    with pytest.raises(ValueError, match="no emulator"):
        intent.compile(matmul, target="tilelang-c", emulate=True)


@intent.kernel
def scatter(x: I.In[I.f32, ("K",)], idx: I.In[I.i32, ("K",)], y: I.InOut[I.f32, ("N",)]):
    k = I.domain(0, idx.shape[0])
    y[idx[k]] = x[k]


def test_an_emulator_report_raises_and_commits_nothing():
    """TileLang guards every access by the buffer's extent, so a generated program never reaches out of bounds; a
    lowering bug that did (planted here: the guard of the scatter's store removed from the Metal source) is
    reported with the buffer, the element and the line, not performed, and nothing is committed."""
    import re

    from intent_trace.backends.tilelang.metal_emulation.executable import ProgramKernel
    from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel

    exe = intent.compile(scatter, target="tilelang-metal", emulate=True, checks=False)
    kernel = ProgramKernel(exe.program)
    guard = re.compile(r"if \(\(\(\(long\)(t\d+)\) < arg\.d1\) && \(0 <= \1\)\)")
    assert guard.search(kernel.source)
    kernel.kernel = EmulatedKernel(guard.sub("if (true)", kernel.source))
    exe._kernel = kernel
    guarded = next(i + 1 for i, text in enumerate(kernel.source.split("\n")) if guard.search(text))
    y = np.array([5, 6, 7, 8], np.float32)
    with pytest.raises(EmulationError, match=rf"out-of-bounds write of device buffer p2: element 7 of 4, by thread "
                                             rf"\(0,0,0\) of threadgroup \(0,0,0\) at line {guarded + 1} "
                                             r"\(not performed\)"):
        exe(np.ones(3, np.float32), np.array([1, 7, 2], np.int32), y)
    assert y.tolist() == [5, 6, 7, 8]
    exe(np.ones(3, np.float32), np.array([1, 3, 2], np.int32), y)  # in bounds: committed
    assert y.tolist() == [5, 1, 1, 1]


SMALL_SCALARS = (I.bool, I.i8, I.i16, I.u8, I.u16)


@pytest.mark.parametrize("dt", SMALL_SCALARS, ids=str)
def test_scalar_arguments_narrower_than_32_bits(dt):
    """TVM's Metal code generator passes a scalar narrower than 32 bits through a union member it never declares
    (``arg.p.v_char`` of ``union { int v_int[2]; }``): invalid Metal. tilelang-metal passes them widened to int32."""
    @intent.kernel
    def k(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)], s: dt):
        n = I.domain(0, x.shape[0])
        y[n] = I.select(x[n] == s, s, x[n])

    exe = emulated(k)
    assert not re.search(r"\.v_(?!int\b)\w+", exe.source)  # only the union member TVM declares
    np_dt = np.dtype(dt.np).type
    info = None if dt == I.bool else np.iinfo(np_dt)
    for s in ([True, False] if dt == I.bool else [info.min, -1 if info.min else 1, info.max]):
        x = np.array([s, 0, s, 1], np_dt)
        y = np.zeros(4, np_dt)
        exe(x, y, np_dt(s))
        assert y.tolist() == x.tolist()
        exe(np.array([0, 1, 0, 1], np_dt), y, np_dt(s))
        assert y.tolist() == [s if v == s else v for v in np.array([0, 1, 0, 1], np_dt).tolist()]


def test_torch_tensors_and_launch_on_host_memory():
    import torch

    a = torch.tensor(RNG.integers(-4, 4, (2, 3)).astype(np.float32))
    b = torch.tensor(RNG.integers(-4, 4, (3, 4)).astype(np.float32))
    c = torch.zeros(2, 4)
    exe = emulated(matmul)
    exe(a, b, c)
    assert c.tolist() == (a @ b).tolist()
    d = torch.zeros(2, 4)
    exe.launch(a, b, d)  # no staging: the kernel writes the tensor it is given
    assert d.tolist() == (a @ b).tolist()
