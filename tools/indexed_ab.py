"""A/B the indexed grid programs on the GPU machine (issue 17): the embedding gather's mappings and the scatter-add's
atomics, each side by side with torch on the zoo's shapes and data (benchmarks/gpu_zoo.py), one JSON line per
variant. Every variant's program is compiled first in worker processes (TileLang's disk cache keeps them), then
each runs through ``exe.launch`` as the zoo does, is checked against torch (bit for bit: the gather copies bits,
the scatter's values are small integers, so every order of the sums is exact) and is timed.

    python3 tools/indexed_ab.py                 # every variant below (about 2 minutes cold on one H100)
    python3 tools/indexed_ab.py --cases embedding

Variants: ``embedding``: ``flat`` (main's flat nest: every element loads, checks and may leave on its row's id),
``rows`` (cuda_gather's element copy: 8 elements a thread, loads before stores, each load's column clamped into
the row: 70 registers), ``rows_guarded`` (a branch around each load instead: 54 registers), ``rows4``/``rows16`` (4 or 16 a
thread), ``units``/``units4`` (16-byte copies, 8 or 4 units a thread; ``units4`` is CUDA's default,
cuda_indexed.VECTOR_GATHER). ``scatter_add``: ``cas`` (the CAS loop for
every update), ``screened`` (the default: a screen kernel, then atomicAdd), ``screened_refused`` (the same program
on values holding one subnormal: the screen raises its flag and every update takes the CAS loop; torch's
index_add_ flushes that value, so this line is timed, not checked).
"""
import argparse
import concurrent.futures
import functools
import json
import multiprocessing
import pathlib
import sys

import attrs

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import gpu_zoo  # noqa: E402
from gpu_zoo import cuda_time  # noqa: E402
from zoo_kernels import embedding_f16, scatter_add  # noqa: E402

from intent_trace.backends.tilelang import cuda_gather, cuda_indexed, cuda_scatter, targets  # noqa: E402
from intent_trace.backends.tilelang import target as tl_target  # noqa: E402
from intent_trace.backends.tilelang.program import lower  # noqa: E402


def _no_gather(graph):
    """The indexed planner without the row gather: the embedding keeps main's flat nest."""
    return None if cuda_gather.gather_plan(graph) is not None else cuda_indexed.indexed_plan(graph)


GATHER = {
    "flat": _no_gather,
    "rows": cuda_gather.gather_plan,
    "rows_guarded": functools.partial(cuda_gather.gather_plan, clamp=False),
    "rows4": functools.partial(cuda_gather.gather_plan, per_thread=4),
    "rows16": functools.partial(cuda_gather.gather_plan, per_thread=16),
    "units": functools.partial(cuda_gather.gather_plan, vector=True),
    "units4": cuda_indexed.indexed_plan,
}
SCATTER = {"cas": cuda_scatter.scatter_plan, "screened": cuda_indexed.indexed_plan,
           "screened_refused": cuda_indexed.indexed_plan}
CASES = {"embedding": (embedding_f16, GATHER, (32000, 4096, 8192)), "scatter_add": (scatter_add, SCATTER,
                                                                                    (1 << 20, 1 << 24))}


def _spec(planner):
    return attrs.evolve(targets.CUDA, indexed_grid=planner)


def _compile(job) -> str | None:
    """In a worker: the variant's program compiled (TileLang's disk cache keeps it); the error, if any."""
    case, variant = job
    kernel, variants, _ = CASES[case]
    try:
        tl_target.compile_program(lower(kernel.trace(), _spec(variants[variant])).text, "tilelang-cuda")
    except Exception as e:  # noqa: BLE001 (reported on the variant's line)
        return f"{type(e).__name__}: {str(e)[-300:]}"
    return None


def _executable(kernel, planner):
    targets.TARGETS["tilelang-cuda"] = _spec(planner)
    tl_target._EXECUTABLES.clear()
    try:
        return tl_target.build(kernel.trace(), "tilelang-cuda")
    finally:
        targets.TARGETS["tilelang-cuda"] = targets.CUDA


def _data(case, variant, shape):
    made = gpu_zoo._embedding(shape) if case == "embedding" else gpu_zoo._scatter_add(shape)
    if variant == "screened_refused":
        made[0][1][0] = 2.0 ** -140  # one subnormal value: the screen's flag goes up
    return made


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    chosen = parser.parse_args().cases
    jobs = [(c, v) for c in chosen for v in CASES[c][1]]
    with concurrent.futures.ProcessPoolExecutor(8, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(jobs, pool.map(_compile, jobs)))
    for case, variant in jobs:
        kernel, variants, shape = CASES[case]
        line = {"case": case, "variant": variant, "shape": list(shape), "device": torch.cuda.get_device_name()}
        if errors[(case, variant)]:
            print(json.dumps({**line, "error": errors[(case, variant)]}), flush=True)
            continue
        exe = _executable(kernel, variants[variant])
        args, outputs, torch_fn, *rest = _data(case, variant, shape)
        timed = rest[0] if rest else torch_fn
        exe.launch(*args)
        torch.cuda.synchronize()
        if variant != "screened_refused":
            (want,) = torch_fn()
            (got,) = outputs
            line["exact"] = bool(torch.equal(got.view(torch.int16) if got.dtype == torch.float16 else got,
                                             want.view(torch.int16) if want.dtype == torch.float16 else want))
        ours, theirs = cuda_time(lambda: exe.launch(*args)), cuda_time(timed)
        line.update(mapping=exe.schedule.general.mapping, ours_ms=ours * 1e3, torch_ms=theirs * 1e3,
                    ratio=theirs / ours)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
