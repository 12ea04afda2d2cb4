"""Sweep tile configurations of the tilelang-cuda segmented-fold program of the flash-attention example (run on the
GPU machine; cuda_region.Tiling: head, block_M, block_N, stages, threads).

``python3 tools/attention_sweep.py [D,block_M,block_N,stages,threads ...]``: each configuration's program is
compiled in its own process first (filling TileLang's disk cache), then timed at batch*heads=32, L=S=4096 against
``torch.nn.functional.scaled_dot_product_attention`` on the same data; one JSON line per configuration.
"""
import concurrent.futures
import json
import math
import multiprocessing
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples")]

from flash_attention import attention_f16  # noqa: E402

from intent_trace.backends.tilelang import cuda_region, targets  # noqa: E402
from intent_trace.backends.tilelang.target import compile_program  # noqa: E402

CONFIGS = ((128, 128, 128, 1, 256), (128, 128, 128, 2, 256), (128, 128, 64, 1, 256), (128, 128, 128, 3, 256),
           (64, 128, 128, 1, 256), (64, 128, 128, 2, 256))


def _program(config) -> str:
    return cuda_region.program_for(attention_f16.trace(), targets.CUDA, cuda_region.Tiling(*config))


def _compile(config):
    try:
        compile_program(_program(config), "tilelang-cuda")
    except Exception as e:  # reported, and the configuration skipped
        return f"{type(e).__name__}: {str(e)[:300]}"
    return None


def main() -> None:
    import torch
    from gpu import cuda_time

    configs = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or list(CONFIGS)
    with concurrent.futures.ProcessPoolExecutor(len(configs), mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(configs, pool.map(_compile, configs)))
    bh, n = 32, 4096
    for d in sorted({c[0] for c in configs}):
        q, k, v = (torch.randn(bh, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        out = torch.empty_like(q)
        scale = 1.0 / math.sqrt(d)

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale)

        ref = sdpa()[0].float()
        theirs = cuda_time(sdpa)
        flops = 4.0 * bh * n * n * d
        for config in (c for c in configs if c[0] == d):
            if errors[config]:
                print(json.dumps({"config": config, "error": errors[config]}), flush=True)
                continue
            kernel = compile_program(_program(config), "tilelang-cuda")
            kernel(q, k, v, out, scale)
            err = float((out.float() - ref).abs().max())
            ours = cuda_time(lambda: kernel(q, k, v, out, scale))
            print(json.dumps({"config": config, "ours_ms": ours * 1e3, "torch_ms": theirs * 1e3, "ratio": theirs / ours,
                              "ours_tflops": flops / ours / 1e12, "max_abs_err_vs_torch": err}), flush=True)


if __name__ == "__main__":
    main()
