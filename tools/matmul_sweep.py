"""Sweep tile configurations of the tilelang-cuda matmul specialisation (run on the GPU machine)."""
import json
import sys

import torch

import intent_trace as intent
from intent_trace.backends.tilelang import cuda_kernels as CK
sys.path.insert(0, "benchmarks")
from gpu import cuda_time, matmul_f16  # noqa: E402

configs = [(128, 256, 64, 3, 256), (128, 128, 64, 3, 128), (128, 128, 64, 4, 256), (256, 128, 64, 3, 256),
           (128, 256, 32, 4, 256), (128, 128, 32, 4, 128)]
graph = matmul_f16.trace()
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = torch.matmul(a, b)
    theirs = cuda_time(lambda: torch.matmul(a, b, out=ref))
    for cfg in configs:
        try:
            spec = CK._matmul(graph, cfg)
            kern = intent.backends.tilelang.target.compile_program(spec.program, "tilelang-cuda")
            kern(a, b, c)
            ok = bool(torch.allclose(c.float(), ref.float(), rtol=1e-2, atol=1e-1))
            t = cuda_time(lambda: kern(a, b, c))
            print(json.dumps({"n": n, "config": cfg, "ratio": theirs / t, "tflops": 2 * n**3 / t / 1e12, "ok": ok}))
        except Exception as e:
            print(json.dumps({"n": n, "config": cfg, "error": str(e)[:200]}))
