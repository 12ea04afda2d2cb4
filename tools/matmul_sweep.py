"""Sweep tilings of the tilelang-cuda matmul specialisation (run on the GPU machine): one JSON line per tiling and
size, timed against torch.matmul on the same data. Each program is compiled in its own process first (filling
TileLang's disk cache, in parallel). ``static`` tilings have the call's extents written into the program."""
import concurrent.futures
import json
import multiprocessing
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks")]

from gpu import cuda_time, matmul_f16  # noqa: E402

from intent_trace.backends.tilelang import cuda_matmul as CM  # noqa: E402
from intent_trace.backends.tilelang.target import compile_program  # noqa: E402
from intent_trace.backends.tilelang.targets import CUDA  # noqa: E402

MT = CM.MatmulTiling
SMS = 132
TILINGS = [MT(), MT(shared_epilogue=True), MT(policy="FullRow"), MT(policy="FullRow", shared_epilogue=True),
           MT(policy="FullRow", shared_epilogue=True, persistent=SMS),
           MT(256, 128, 64, 3, 256, "FullRow", True), MT(128, 256, 64, 4, 256, "FullRow", False),
           MT(128, 128, 64, 4, 256, "FullRow", True), MT(128, 256, 32, 5, 256, "FullRow", True)]
SIZES = (4096, 8192)


def _program(tiling, n: int | None) -> str:
    text = CM.tensor_core(matmul_f16.trace(), CUDA, tiling).program
    return text if n is None else re.sub(r"T\.dynamic\('d\d+', 'int32'\)", str(n), text)


def compile_error(program: str) -> str | None:
    """Compile a tilelang-cuda program text (in a worker process: TileLang's disk cache keeps it); the error, if any
    (reported, and the tiling skipped)."""
    try:
        compile_program(program, "tilelang-cuda")
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[-300:]}"
    return None


def _compile(job):
    return compile_error(_program(*job))


def main() -> None:
    import torch

    jobs = [(t, s) for t in TILINGS for s in (None, *SIZES)]
    with concurrent.futures.ProcessPoolExecutor(16, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(jobs, pool.map(_compile, jobs)))
    for n in SIZES:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a, b)
        theirs = cuda_time(lambda: torch.matmul(a, b, out=ref))
        for t in TILINGS:
            for static in (None, n):
                line = {"n": n, "tiling": [t.tm, t.tn, t.tk, t.stages, t.threads, t.policy, t.shared_epilogue,
                                           t.persistent], "static": static is not None}
                if errors[(t, static)]:
                    print(json.dumps({**line, "error": errors[(t, static)]}), flush=True)
                    continue
                kern = compile_program(_program(t, static), "tilelang-cuda")
                kern(a, b, c)
                err = float((c.float() - ref.float()).abs().max() / ref.float().abs().max())
                ms = cuda_time(lambda: kern(a, b, c))
                print(json.dumps({**line, "ratio": theirs / ms, "tflops": 2 * n**3 / ms / 1e12, "max_rel_err_vs_torch": err}),
                      flush=True)


if __name__ == "__main__":
    main()
