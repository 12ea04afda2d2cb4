"""The everyday kernels of the GPU zoo (``benchmarks/gpu.py``), written the way a user writes them: whole-tensor
expressions where that is natural, no tiles, threads or layouts. (The `parallel`-loop softmax is
``examples/row_softmax.py``; the attention kernels are ``examples/flash_attention.py``; the Mamba scan is
``examples/mamba_state_passing.py``.)

Each kernel has a float64 (or exact) NumPy reference here too, so ``tests/test_zoo_kernels.py`` checks every
zoo kernel on every executable target at small shapes: the benchmark times only kernels the suite trusts.
"""
from __future__ import annotations

import math

import numpy as np

import intent_trace as intent
from intent_trace import I


def rows(v, like):
    """[M] -> [M, 1]: a per-row value broadcast across the rows of ``like``."""
    return I.reshape(v, (like.shape[0], 1))


@intent.kernel
def softmax_whole(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    e = I.exp(x[:, :] - rows(I.reduce.max(x[:, :], axis=1), x))
    y[:, :] = e / rows(I.reduce.sum(e, axis=1), x)


@intent.kernel
def log_softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    shifted = x[:, :] - rows(I.reduce.max(x[:, :], axis=1), x)
    y[:, :] = shifted - rows(I.log(I.reduce.sum(I.exp(shifted), axis=1)), x)


@intent.kernel
def layer_norm(x: I.In[I.f32, ("M", "N")], g: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)],
               y: I.Out[I.f32, ("M", "N")]):
    n = I.cast(x.shape[1], I.f32)
    mean = I.reduce.sum(x[:, :], axis=1) / n
    centred = x[:, :] - rows(mean, x)
    var = I.reduce.sum(centred * centred, axis=1) / n
    y[:, :] = centred * rows(I.rsqrt(var + 1e-5), x) * g[:] + b[:]


@intent.kernel
def rms_norm_f16(x: I.In[I.f16, ("M", "N")], w: I.In[I.f16, ("N",)], y: I.Out[I.f16, ("M", "N")]):
    xf = I.cast(x[:, :], I.f32)
    mean_square = I.reduce.sum(xf * xf, axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = I.cast(xf * rows(I.rsqrt(mean_square + 1e-6), x) * I.cast(w[:], I.f32), I.f16)


@intent.kernel
def row_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def full_sum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    y[0] = I.reduce.sum(x[:], axis=0)


@intent.kernel
def argmax_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.i64, ("M",)]):
    _, where = I.arg_reduce.max(x[:, :], axis=1)
    y[:] = I.cast(where, I.i64)


@intent.kernel
def cumsum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0)


@intent.kernel
def gelu(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    v = x[:]
    y[:] = 0.5 * v * (1.0 + I.erf(v * 0.7071067811865476))


@intent.kernel
def histogram256(v: I.In[I.u8, ("N",)], counts: I.Out[I.i64, (256,)]):
    counts[:] = I.histogram(v[:], bins=256, count_dtype=I.i64)


@intent.kernel
def embedding_f16(table: I.In[I.f16, ("V", "D")], ids: I.In[I.i64, ("T",)], out: I.Out[I.f16, ("T", "D")]):
    token = I.reshape(ids[:], (ids.shape[0], 1))
    feature = I.reshape(I.indices(I.domain(0, table.shape[1])), (1, table.shape[1]))
    out[:, :] = I.gather(table[:, :], (token, feature))


@intent.kernel
def scatter_add(idx: I.In[I.i64, ("K",)], v: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)]):
    I.scatter_reduce(dest, idx[:], v[:], combine=lambda a, b: a + b)


@intent.kernel
def matmul_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.cast(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32), I.f16)


@intent.kernel
def batched_matmul_f16(a: I.In[I.f16, ("B", "M", "K")], b: I.In[I.f16, ("B", "K", "N")],
                       c: I.Out[I.f16, ("B", "M", "N")]):
    product = I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32)
    c[:, :, :] = I.cast(product, I.f16)


@intent.kernel
def matmul_bias_relu_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], bias: I.In[I.f16, ("N",)],
                         c: I.Out[I.f16, ("M", "N")]):
    acc = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) + I.cast(bias[:], I.f32)
    c[:, :] = I.cast(I.maximum(acc, 0.0), I.f16)


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)


# ---- float64 / exact references (NumPy), used by the tests and by nothing on the GPU path ----

def _softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _log_softmax(x):
    x = x.astype(np.float64)
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def _layer_norm(x, g, b):
    x = x.astype(np.float64)
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * g + b


def _rms_norm(x, w):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float64)


def _gelu(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


REFERENCES = {
    softmax_whole: _softmax, log_softmax: _log_softmax, layer_norm: _layer_norm,
    rms_norm_f16: _rms_norm, row_sum: lambda x: x.astype(np.float64).sum(axis=1),
    full_sum: lambda x: np.array([x.astype(np.float64).sum()]),
    argmax_rows: lambda x: x.argmax(axis=1).astype(np.int64),
    cumsum: lambda x: np.cumsum(x.astype(np.float64)), gelu: _gelu,
    histogram256: lambda v: np.bincount(v, minlength=256).astype(np.int64),
    embedding_f16: lambda table, ids: table[ids],
    matmul_f16: lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
    batched_matmul_f16: lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
    matmul_bias_relu_f16: lambda a, b, bias: np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0),
    matmul_f32: lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
}
