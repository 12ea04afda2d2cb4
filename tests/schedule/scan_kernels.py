"""Scans along the only axis written as a user writes them (cumsum, cummax, exclusive, a custom associative but not
commutative combine), and near misses the scan recogniser must refuse. Shared by tests/schedule/test_scan.py and
tests/backends/test_tilelang_cuda_scan.py."""
import intent_trace as intent
from intent_trace import I


@intent.kernel
def cumsum_f32(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0)


@intent.kernel
def cumsum_f64_scaled(x: I.In[I.f64, ("N",)], w: I.In[I.f64, ("N",)], y: I.Out[I.f64, ("N",)], s: I.f64):
    y[:] = I.cumsum(x[:] * w[:] + s, axis=0)  # the producers fused


@intent.kernel
def cumsum_i32(x: I.In[I.i32, ("N",)], y: I.Out[I.i64, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0)  # accumulates in i64 (T5)


@intent.kernel
def exclusive_cumsum_i64(x: I.In[I.i64, ("N",)], y: I.Out[I.i64, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0, inclusive=False)


@intent.kernel
def cummax_f32(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cummax(x[:], axis=0)


@intent.fn
def _latest(a, b):
    return I.where(b == -1, a, b)  # the later value unless it is missing: associative, not commutative


@intent.kernel
def forward_fill(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    y[:] = I.scan(x[:], axis=0, identity=I.cast(-1, I.i32), combine=_latest)


# --- near misses ----------------------------------------------------------------------------------------------

@intent.kernel
def reverse_cumsum(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0, reverse=True)


@intent.kernel
def row_cumsum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    y[:, :] = I.cumsum(x[:, :], axis=1)


@intent.kernel
def scaled_after(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[:] = I.cumsum(x[:], axis=0) * 2.0  # a consumer after the scan
