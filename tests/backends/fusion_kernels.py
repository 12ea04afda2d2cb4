"""Kernels whose row reductions feed a broadcast (test_tilelang_fusion.py): whole-tensor softmax, layer norm and
causal attention, written as users write them."""
import intent_trace as intent
from intent_trace import I


def rows(v, like):
    """[M] -> [M, 1], broadcast across the rows of ``like``."""
    return I.reshape(v, (like.shape[0], 1))


@intent.kernel
def softmax(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    m = I.reduce.max(x[:, :], axis=1)
    e = I.exp(x[:, :] - rows(m, x))
    y[:, :] = e / rows(I.reduce.sum(e, axis=1), x)


@intent.kernel
def layer_norm(x: I.In[I.f32, ("M", "N")], g: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)],
               y: I.Out[I.f32, ("M", "N")]):
    n = I.cast(x.shape[1], I.f32)
    mean = I.reduce.sum(x[:, :], axis=1) / n
    centred = x[:, :] - rows(mean, x)
    var = I.reduce.sum(centred * centred, axis=1) / n
    y[:, :] = centred * rows(I.rsqrt(var + 1e-5), x) * g[:] + b[:]


@intent.kernel
def causal_attention(q: I.In[I.f32, ("L", "D")], k: I.In[I.f32, ("L", "D")], v: I.In[I.f32, ("L", "D")],
                     out: I.Out[I.f32, ("L", "D")], scale: I.f32):
    s = I.matmul(q[:, :], k[:, :], transpose_rhs=True, acc_dtype=I.f32) * scale
    pos = I.indices(I.domain(0, q.shape[0]))
    keep = I.reshape(pos, (q.shape[0], 1)) >= I.reshape(pos, (1, q.shape[0]))
    s = I.select(keep, s, I.full(s.shape, -float("inf"), I.f32))
    p = I.exp(s - rows(I.reduce.max(s, axis=1), s))
    p = p / rows(I.reduce.sum(p, axis=1), s)
    out[:, :] = I.matmul(p, v[:, :], acc_dtype=I.f32)
