"""Kernels whose row reductions feed a broadcast (test_tilelang_fusion.py): whole-tensor softmax, layer norm and
causal attention, written as users write them."""
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I

ZOO = benchmark_module("zoo_kernels")


rows = ZOO.rows  # [M] -> [M, 1], broadcast across the rows of ``like``


softmax = ZOO.softmax_whole  # the GPU zoo's kernels (benchmarks/zoo_kernels.py), written once
layer_norm = ZOO.layer_norm


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
