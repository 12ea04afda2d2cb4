"""Row kernels written as a user writes them, in both spellings where both are usual: the tensor form (whole
tensors, ``reshape`` to broadcast a row's result back) and the parallel form (``for r in I.parallel(rows)``), and the
near misses the row-group recogniser must refuse (with its reason). Shared by tests/schedule and the row-group
backend tests (tests/backends/test_tilelang_cuda_rows.py)."""
import numpy as np

import intent_trace as intent
from example_modules import example
from intent_trace import I

softmax_rows = example("row_softmax").softmax_rows  # the parallel form


@intent.kernel
def softmax_tensor(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    v = x[:, :]
    e = I.exp(v - I.reshape(I.reduce.max(v, axis=1), (x.shape[0], 1)))
    y[:, :] = e / I.reshape(I.reduce.sum(e, axis=1), (x.shape[0], 1))


@intent.kernel
def layer_norm(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)],
               y: I.Out[I.f32, ("M", "N")]):
    cols = I.domain(0, x.shape[1])
    n = I.cast(x.shape[1], I.f32)
    for r in I.parallel(I.domain(0, x.shape[0])):
        row = x[r, cols]
        d = row - I.reduce.sum(row, axis=0) / n
        var = I.reduce.sum(d * d, axis=0) / n
        y[r, cols] = d / I.sqrt(var + 1e-5) * w[cols] + b[cols]


@intent.kernel
def rms_norm(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M", "N")]):
    v = x[:, :]
    ms = I.reduce.sum(v * v, axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = v / I.reshape(I.sqrt(ms + 1e-6), (x.shape[0], 1)) * w[:]


@intent.kernel
def logsumexp(x: I.In[I.f64, ("M", "N")], y: I.Out[I.f64, ("M",)]):
    v = x[:, :]
    m = I.reduce.max(v, axis=1)
    y[:] = I.log(I.reduce.sum(I.exp(v - I.reshape(m, (x.shape[0], 1))), axis=1)) + m


@intent.kernel
def row_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def row_sum_f64_rows(x: I.In[I.f64, ("M", "N")], y: I.Out[I.f64, ("M",)]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        y[r] = I.reduce.sum(x[r, cols], axis=0)


@intent.kernel
def row_sum_i32(x: I.In[I.i32, ("M", "N")], y: I.Out[I.i64, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)  # accumulates in i64 (T5)


@intent.kernel
def row_argmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.index, ("M",)]):
    _, i = I.arg_reduce.max(x[:, :], axis=1)
    y[:] = i


@intent.kernel
def row_argmax_rows(x: I.In[I.i32, ("M", "N")], y: I.Out[I.index, ("M",)]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        _, i = I.arg_reduce.max(x[r, cols], axis=0)
        y[r] = i


@intent.kernel
def row_max_min(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """Each element minus its row's minimum, over the row's maximum span: a max and a min reduction of one level
    (the min a generic reduce with I.minimum), consumed together."""
    v = x[:, :]
    lo = I.reduce(v, axis=1, identity=I.full((x.shape[0],), np.float32(np.inf), I.f32),
                  combine=lambda a, b: I.minimum(a, b))
    hi = I.reduce.max(v, axis=1)
    y[:, :] = (v - I.reshape(lo, (x.shape[0], 1))) / I.reshape(hi - lo, (x.shape[0], 1))


@intent.kernel
def rms_norm_f16(x: I.In[I.f16, ("M", "N")], y: I.Out[I.f16, ("M", "N")]):
    v = I.cast(x[:, :], I.f32)
    ms = I.reduce.sum(v * v, axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = I.cast(v / I.reshape(I.sqrt(ms + 1e-6), (x.shape[0], 1)), I.f16)


@intent.kernel
def row_max_f16(x: I.In[I.f16, ("M", "N")], y: I.Out[I.f16, ("M",)]):
    y[:] = I.reduce.max(x[:, :], axis=1)


@intent.kernel
def row_max_bf16(x: I.In[I.bf16, ("M", "N")], y: I.Out[I.bf16, ("M",)]):
    y[:] = I.reduce.max(x[:, :], axis=1)


@intent.kernel
def softmax_read_twice(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """The whole-tensor softmax with ``x[:, :]`` spelled at each use (two reads of one value)."""
    e = I.exp(x[:, :] - I.reshape(I.reduce.max(x[:, :], axis=1), (x.shape[0], 1)))
    y[:, :] = e / I.reshape(I.reduce.sum(e, axis=1), (x.shape[0], 1))


ROW_KERNELS = (softmax_rows, softmax_tensor, softmax_read_twice, layer_norm, rms_norm, logsumexp, row_sum, row_sum_f64_rows, row_sum_i32,
               row_argmax, row_argmax_rows, row_max_min, rms_norm_f16, row_max_f16, row_max_bf16)


# --- near misses: not row groups ------------------------------------------------------------------------------

@intent.kernel
def row_cumsum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = I.cumsum(x[:, :], axis=1)


@intent.kernel
def column_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N",)]):
    y[:] = I.reduce.sum(x[:, :], axis=0)


@intent.kernel
def scale_only(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = x[:, :] * 2.0


@intent.kernel
def square_sum(x: I.In[I.f32, ("N", "N")], y: I.Out[I.f32, ("N",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def shifted_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    cols = I.domain(1, x.shape[1])  # not the whole row
    for r in I.parallel(I.domain(0, x.shape[0])):
        y[r] = I.reduce.sum(x[r, cols], axis=0)


@intent.kernel
def two_outputs(x: I.In[I.f32, ("M", "N")], s: I.Out[I.f32, ("M",)], m: I.Out[I.f32, ("M",)]):
    s[:] = I.reduce.sum(x[:, :], axis=1)
    m[:] = I.reduce.max(x[:, :], axis=1)


@intent.kernel
def transposed_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("N", "M")]):
    v = x[:, :]
    y[:, :] = I.reshape(v - I.reshape(I.reduce.max(v, axis=1), (x.shape[0], 1)), (x.shape[1], x.shape[0]))


@intent.kernel
def rows_with_a_loop(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    cols = I.domain(0, x.shape[1])
    for r in I.parallel(I.domain(0, x.shape[0])):
        # an ordered loop: its carry depends on the previous iteration (and a sum that makes it a near miss)
        y[r] = I.loop(cols, I.cast(0.0, I.f32), lambda j, acc: acc * 0.5 + x[r, j]) + I.reduce.sum(x[r, cols], axis=0)


@intent.kernel
def rows_in_a_while(x: I.In[I.f32, ("N", "M")], y: I.Out[I.f32, ("N",)]):
    v, _ = I.while_(lambda c: c[1] < 4, lambda c: (I.cumsum(c[0], axis=1), c[1] + 1), (x[:, :], I.cast(0, I.i32)))
    y[:] = I.reduce.sum(v, axis=1)


#: (kernel, a phrase of the reason it is refused)
NEAR_MISSES = (
    (row_cumsum, "scan is ordered"),
    (column_sum, "not along the last axis"),
    (scale_only, "no reduction"),
    (square_sum, "one extent"),
    (shifted_rows, "not domain(0, E, 1)"),
    (two_outputs, "effects"),
    (transposed_rows, "moves elements between axes"),
    (rows_with_a_loop, "has effects (control)"),
    (rows_in_a_while, "depends on the row and the column but has shape ()"),  # a tuple of a row and a scalar
)
