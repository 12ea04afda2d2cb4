"""Kernels whose extents are stated equal (``I.assume_equal``) in front of the work a grid maps: a softmax, a layer
norm, a flat write nest, a histogram and a full reduction, each with the NumPy reference of its result. Shared by
tests/backends/test_prologue.py (every target, the grid mappings) and tests/schedule/test_prologue.py."""
import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def softmax_after(x: I.In[I.f32, ("M", "N")], h: I.In[I.f32, ("H",)], y: I.Out[I.f32, ("M", "N")]):
    """The row softmax of issue 15's example: its rows are stated to be twice ``h``'s length."""
    n = I.assume_equal(x.shape[0], 2 * h.shape[0])
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, n)):
        row = x[r, cols]
        e = I.exp(row - I.reduce.max(row, axis=0))
        y[r, cols] = e / I.reduce.sum(e, axis=0)


@intent.kernel
def layer_norm_after(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("K",)], b: I.In[I.f32, ("K",)],
                     y: I.Out[I.f32, ("M", "N")]):
    """A layer norm whose weights' length ``K`` is stated to be the row length ``N``."""
    I.assume_equal(w.shape[0], x.shape[1])
    v = x[:, :]
    n = I.cast(x.shape[1], I.f32)
    d = v - I.reshape(I.reduce.sum(v, axis=1) / n, (x.shape[0], 1))
    var = I.reduce.sum(d * d, axis=1) / n
    y[:, :] = d / I.reshape(I.sqrt(var + 1e-5), (x.shape[0], 1)) * w[:] + b[:]


@intent.kernel
def scale_add_after(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.Out[I.f32, ("N",)]):
    """A flat write nest over two inputs stated to be one length."""
    I.assume_equal(y.shape[0], x.shape[0])
    out[:] = x[:] * 2.0 + y[:]


@intent.kernel
def histogram_after(v: I.In[I.i32, ("N",)], ok: I.In[I.bool, ("K",)], counts: I.Out[I.i32, (300,)]):
    """A histogram whose valid mask is stated to be as long as its values."""
    I.assume_equal(ok.shape[0], v.shape[0])
    x = v[:]
    counts[:] = I.histogram(x, bins=300, valid=ok[:] & (x >= 0) & (x < 300), count_dtype=I.i32)


@intent.kernel
def dot_after(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.Out[I.f32, (1,)]):
    """A full reduction (a dot product) of two inputs stated to be one length."""
    I.assume_equal(x.shape[0], y.shape[0])
    out[0] = I.reduce.sum(x[:] * y[:], axis=0)


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_ref(x, w, b):
    x = x.astype(np.float64)
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * w + b


@intent.kernel
def gather_rows_after(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("M", "K")], w: I.In[I.f32, ("J",)],
                      y: I.Out[I.f32, ("M",)]):
    """A top-level parallel loop (from row 1: not a row group) whose weights are stated one per row."""
    I.assume_equal(w.shape[0], idx.shape[0])
    ks = I.domain(0, idx.shape[1])
    for r in I.parallel(I.domain(1, idx.shape[0])):
        y[r] = I.reduce.sum(I.gather(x[:], idx[r, ks]), axis=0) * w[r]


@intent.kernel
def matmul_after(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("J", "N")], c: I.Out[I.f32, ("M", "N")]):
    """An f16 matmul + ReLU whose operands' K extents are stated equal: a tiled matmul (its epilogue fused) behind
    its prologue."""
    I.assume_equal(a.shape[1], b.shape[0])
    c[:, :] = I.maximum(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32), 0.0)


@intent.kernel
def scale_add_over_value(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("H",)], out: I.Out[I.f32, ("N",)]):
    """The same nest written over the statement's value: a domain of ``n`` is one of the extent it equals."""
    n = I.assume_equal(y.shape[0], x.shape[0])
    d = I.domain(0, n)
    out[d] = x[d] * 2.0 + y[d]
