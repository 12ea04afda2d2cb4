"""The matmul A/Bs in one GPU run (about two minutes on one H100): the f32 SGEMM's candidate tilings
(tools/simt_ab.py, cuda_matmul_simt.CANDIDATES) at 2048^3 and 2044^3 (16-byte variant; 2044: tails of M, N and K)
and 2047^3 (element variant) against torch.matmul with TF32 off, and the fused epilogue (tools/epilogue_ab.py: the
program, the same program with the shared helpers' max and two roundings, the plain matmul) at 4096^3 f16 against
torch's addmm + relu. Every program is compiled first, all at once in one pool of processes (TileLang's disk cache
keeps them), then each is checked and timed beside torch in this process: one JSON line each.

    python3 tools/matmul_ab.py
"""
import argparse
import concurrent.futures
import multiprocessing
import os

import epilogue_ab
import simt_ab
from matmul_sweep import compile_error

EPILOGUE = ("rolled", "shared_helpers", "plain")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[2048, 2044, 2047])
    sizes = parser.parse_args().sizes
    simt, epilogue = simt_ab.programs(sizes), epilogue_ab.variants(EPILOGUE)
    jobs = {**{("simt", k): v for k, v in simt.items()}, **{("epilogue", k): v for k, v in epilogue.items()}}
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count(), mp_context=spawn) as pool:
        errors = dict(zip(jobs, pool.map(compile_error, jobs.values())))
    simt_ab.measure(sizes, {k: e for (tool, k), e in errors.items() if tool == "simt"})
    epilogue_ab.measure(epilogue, {k: e for (tool, k), e in errors.items() if tool == "epilogue"})


if __name__ == "__main__":
    main()
