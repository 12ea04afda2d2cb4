"""Time the f32 matmul's tilings on CUDA cores (cuda_matmul_simt) side by side with torch (TF32 off), on the GPU
machine: one JSON line per tiling, variant and size. Each program is compiled in its own process first (in
parallel: TileLang's disk cache keeps them), then each runs on the same data as torch.matmul and is checked against
the float64 product within T5's bound before it is timed.

    python3 tools/simt_ab.py                  # the tilings below at 2048^3, 4096^3, 2044^3 (16-byte variant; 2044:
    python3 tools/simt_ab.py --sizes 2048     # tails of M, N and K), 2047^3 (the element variant: not multiples of 4)

``module`` in a line marks the tiling the programs use now (cuda_matmul_simt.SIMT); set SIMT to the fastest.
"""
import argparse
import concurrent.futures
import json
import multiprocessing
import os
import pathlib
import sys

import attrs

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from gpu_zoo import cuda_time  # noqa: E402
from matmul_sweep import compile_error  # noqa: E402
from zoo_kernels import matmul_f32  # noqa: E402

from intent_trace.backends.tilelang import cuda_matmul_simt as S  # noqa: E402
from intent_trace.backends.tilelang.target import compile_program  # noqa: E402
from intent_trace.backends.tilelang.targets import CUDA  # noqa: E402

TILINGS = S.CANDIDATES


def _program(tiling, vector: bool) -> str:
    return S.simt(matmul_f32.trace(), CUDA, tiling)[0 if vector else 1].program


def programs(sizes) -> dict:
    """{(tiling, 16-byte variant): program text} of every tiling, the variants ``sizes`` select."""
    jobs = sorted({(t, n % 4 == 0) for t in TILINGS for n in sizes}, key=lambda j: (TILINGS.index(j[0]), j[1]))
    return {job: _program(*job) for job in jobs}


def measure(sizes, errors: dict) -> None:
    """Each compiled tiling against torch.matmul (TF32 off) at each size: one JSON line each (``errors``: the
    compile error of a program, keyed as :func:`programs` keys them)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    for n in sizes:
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        c, ref = torch.empty(n, n, device="cuda"), torch.empty(n, n, device="cuda")
        theirs = cuda_time(lambda: torch.matmul(a, b, out=ref))
        exact = a.double() @ b.double()
        bound = (n + 1) * 2.0 ** -24 * (a.abs().double() @ b.abs().double())
        for t in TILINGS:
            line = {"n": n, "tiling": attrs.asdict(t),
                    "variant": "16-byte" if n % 4 == 0 else "elements", "module": t == S.SIMT,
                    "torch_ms": theirs * 1e3}
            if errors[(t, n % 4 == 0)]:
                print(json.dumps({**line, "error": errors[(t, n % 4 == 0)]}), flush=True)
                continue
            kern = compile_program(_program(t, n % 4 == 0), "tilelang-cuda")
            c.fill_(float("nan"))
            kern(a, b, c)
            within = float(((c.double() - exact).abs() / bound).max())  # <= 1: inside T5's bound
            ms = cuda_time(lambda: kern(a, b, c))
            print(json.dumps({**line, "ours_ms": ms * 1e3, "ratio": theirs / ms, "tflops": 2 * n ** 3 / ms / 1e12,
                              "max_err_over_t5_bound": within}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[2048, 4096, 2044, 2047])
    sizes = parser.parse_args().sizes
    texts = programs(sizes)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(16, os.cpu_count() or 8), mp_context=spawn) as pool:
        errors = dict(zip(texts, pool.map(compile_error, texts.values())))
    measure(sizes, errors)


if __name__ == "__main__":
    main()
