"""Full reductions written as a user writes them (a reduction over every axis of its source, the source a pointwise
expression of whole-axis reads, scalar consumers, point writes), and near misses the recogniser must refuse.
Shared by tests/schedule/test_reduce.py and the backend tests (tests/backends/test_tilelang_cuda_reduce.py)."""
import intent_trace as intent
from intent_trace import I


@intent.kernel
def full_sum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    y[0] = I.reduce.sum(x[:], axis=0)


@intent.kernel
def full_sum_2d(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, (1,)]):
    y[0] = I.reduce.sum(x[:, :], axis=(0, 1))


@intent.kernel
def weighted_norm(x: I.In[I.f32, ("N",)], w: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)], s: I.f32):
    y[0] = I.sqrt(I.abs(I.reduce.sum(x[:] * w[:] * s, axis=0))) + s


@intent.kernel
def full_sum_i32(x: I.In[I.i32, ("N",)], y: I.Out[I.i64, (1,)]):
    y[0] = I.reduce.sum(x[:], axis=0)  # accumulates in i64 (T5)


@intent.kernel
def sum_and_max(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (2,)]):
    v = x[:]
    y[0] = I.reduce.sum(v, axis=0)
    y[1] = I.reduce.max(v, axis=0)


@intent.kernel
def argmax_all(x: I.In[I.f32, ("N",)], i: I.Out[I.i64, (1,)]):
    _, at = I.arg_reduce.max(x[:], axis=0)
    i[0] = I.cast(at, I.i64)


@intent.kernel
def argmin_all(x: I.In[I.f32, ("N",)], i: I.Out[I.i64, (1,)]):
    _, at = I.arg_reduce.max(-x[:], axis=0)
    i[0] = I.cast(at, I.i64)


@intent.kernel
def any_nan(x: I.In[I.f32, ("N",)], y: I.Out[I.bool, (1,)]):
    v = x[:]
    y[0] = I.reduce.any(v != v, axis=0)


@intent.kernel
def full_max_f16(x: I.In[I.f16, ("N",)], y: I.Out[I.f16, (1,)]):
    y[0] = I.reduce.max(x[:], axis=0)


@intent.fn
def _min(a, b):
    return I.minimum(a, b)


@intent.kernel
def min_bf16(x: I.In[I.bf16, ("N",)], y: I.Out[I.bf16, (1,)]):
    y[0] = I.reduce(x[:], axis=0, identity=I.cast(float("inf"), I.bf16), combine=_min)


@intent.kernel
def mean_f64(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, (1,)]):
    y[0] = I.reduce.sum(x[:], axis=0) / I.cast(x.shape[0], I.f64)


@intent.fn
def _mul(a, b):
    return a * b


@intent.kernel
def prod_f64(x: I.In[I.f64, ("N",)], y: I.Out[I.f64, (1,)]):
    y[0] = I.reduce(x[:], axis=0, identity=I.cast(1.0, I.f64), combine=_mul)


@intent.fn
def _max(a, b):
    return I.maximum(a, b)


@intent.kernel
def custom_max_i32(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ()]):
    y[()] = I.reduce(x[:], axis=0, identity=I.cast(-5000, I.i32), combine=_max)


# --- near misses ----------------------------------------------------------------------------------------------

@intent.kernel
def row_sums(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)  # keeps an axis: a row group


@intent.kernel
def two_levels(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    v = x[:]
    m = I.reduce.max(v, axis=0)
    y[0] = I.reduce.sum(I.exp(v - m), axis=0)  # a second pass over the source


@intent.kernel
def written_whole(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = x[:] * I.reduce.sum(x[:], axis=0)  # the result broadcast over the source


@intent.kernel
def partial_read(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    d = I.domain(1, x.shape[0])
    y[0] = I.reduce.sum(x[d], axis=0)  # not a whole-axis read
