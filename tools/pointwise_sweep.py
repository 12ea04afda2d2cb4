"""Sweep the flat pointwise mapping (threads, elements per thread, unroll) on the GPU machine."""
import json
import sys

import torch

import intent_trace as intent
from intent_trace.backends.tilelang import cuda_kernels as CK
from intent_trace.backends.tilelang import target as TG
sys.path.insert(0, "benchmarks")
from gpu import chain4, cuda_time  # noqa: E402

n = 1 << 26
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out, dst = torch.empty_like(x), torch.empty_like(x)
copy = cuda_time(lambda: dst.copy_(x))
for threads, vector, unroll in [(128, 8, True), (256, 8, True), (128, 16, True), (512, 4, True), (256, 4, True),
                                (1024, 4, True), (512, 8, True)]:
    CK.THREADS_PER_BLOCK, CK.VECTOR, CK.UNROLL = threads, vector, unroll
    kern = TG.compile_program(TG.generate(chain4.trace(), "tilelang-cuda"), "tilelang-cuda")
    kern(x, y, out)
    ok = bool(torch.equal(out, torch.maximum(x * 1.5 + y, x) - 0.25))
    t = cuda_time(lambda: kern(x, y, out))
    print(json.dumps({"threads": threads, "vector": vector, "unroll": unroll, "ok": ok,
                      "ratio": (3 * 4 * n / t) / (2 * 4 * n / copy)}))
