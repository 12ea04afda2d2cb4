"""A quick check of the tilelang-cuda target on a GPU machine: a few kernels against NumPy, and the CUDA source."""
import time

import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def rowsum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)], s: I.f32):
    r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[r] = I.reduce.sum(x[r, c] * s, axis=1)


@intent.kernel
def fused(a: I.In[I.f32, ("N",)], b: I.In[I.f32, ("N",)], c: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, a.shape[0])
    y[d] = a[d] * b[d] + c[d]


t0 = time.time()
exe = intent.compile(rowsum, target="tilelang-cuda")
x = np.arange(12, dtype=np.float32).reshape(3, 4)
y = np.zeros(3, np.float32)
exe(x, y, 2.0)
print("rowsum", y, "expected", (x * 2).sum(1), f"{time.time() - t0:.1f} s")
a = np.array([1 + 2.0**-23], np.float32)
b = np.array([1 - 2.0**-23], np.float32)
c = np.array([-1.0], np.float32)
out = np.zeros(1, np.float32)
intent.compile(fused, target="tilelang-cuda")(a, b, c, out)
print("a*b+c unfused:", out[0], "expected", (a * b)[0] + c[0], "(an FMA would give", -2.0**-46, ")")
print(exe.source[-2500:])
