"""A/B of the tilelang-cuda segmented-fold programs of the flash-attention example (run on the GPU machine): the
accurate, approximate (FlashAttention spelling), ``I.fma`` and causal kernels, each as program-text variants, every
one checked against and timed beside ``torch.nn.functional.scaled_dot_product_attention`` on the same data
(``is_causal`` for the causal kernel) in one process, at batch*heads=32, L=S=4096 (head 128 unless a tiling says
otherwise).

A variant is ``KERNEL:NAME`` with NAME ``head,block_M,block_N,stages,threads`` (cuda_region.Tiling) and, for the
causal kernel, an optional ``/outside`` suffix: the program without the blocks-inside-the-mask branches
(cuda_region_inside: the causal program as on main before it, every block evaluating the comparison per element).
A ``/accumulate`` suffix (any kernel) measures what FlashAttention's form of the combine would buy, NOT the fold's
numerics: the block's P scaled by the combine's beta before its f16 rounding and accumulated by the second product
into the running output after one rescale by alpha (``acc = acc * alpha; acc += (beta P) V``: one multiply per
output element a block instead of two multiplies and an add, and no separate product fragment -- 64 registers a
thread), where the fold computes ``acc * alpha + (P V) * beta``. Its error against SDPA is printed like the others.
The programs are this branch's: the source loop overlapped (cuda_region_overlap: block kb's QK^T and block kb-1's PV
issued with ``T.wgmma_gemm``, kb's element work while PV runs, FlashAttention's combine form; two stages of loads
at least, whatever the tiling says). A ``/sync`` suffix overlaps none (``Spelling.overlap`` off: every ``T.gemm``
waits, the fold's combine form: the waiting loop). ``/accumulate`` applies to a ``/sync`` program only.
A ``/pingpong`` suffix adds FlashAttention-3's ping-pong between the two consumer warpgroups
(``cuda_region_overlap.PINGPONG``: each issues its products in turn, named barriers), ``/solo`` leaves it out.
Workspaces (the causal skip's flags) are allocated here. One JSON line per variant. ``--watchdog S`` (first
argument): a variant whose first launch and timing take more than S seconds (a program that deadlocks)
prints an error line and ends the process (exit status 3), so a command can go on with the next.

    python3 tools/attention_sweep.py                      # the default set (DEFAULT)
    python3 tools/attention_sweep.py --watchdog 25 causal:128,128,128,1,256/pingpong fast:128,128,128,1,256/pingpong

Measured (one H100): eighth session, ping-pong +3-5% for unmasked folds, none for causal
(``docs/gpu-attention-pingpong-2026-12-07-h100-session8.jsonl``); tenth session, the exp2-flushing spellings and
``causal_fast`` (``docs/gpu-attention-ftz-2026-12-07-h100-session10.jsonl``): every unmasked variant at 440-475
TFLOPS, the overlapped loop with two stages best (fma 0.743 of SDPA against 0.697 for the waiting loop). Programs
that come out identical (a flag that changes nothing for that kernel) are refused: list each once. Main's programs
first, then the ping-pong variants under the watchdog:

    timeout 45 python3 tools/attention_sweep.py --watchdog 25 {accurate,fast,fma}:128,128,128,1,256/sync \
        causal:128,128,128,1,256 {accurate,fma}:128,128,128,1,256
    timeout 65 python3 tools/attention_sweep.py --watchdog 25 {causal,fast,accurate,fma}:128,128,128,1,256/pingpong \
        {fast,fma,accurate}:128,128,176,2,256/pingpong {fast,fma,causal,accurate}:128,128,128,3,256/pingpong \
        {fast,causal}:128,128,64,2,256/pingpong
    python3 tools/attention_sweep.py causal:128,128,128,1,256/outside causal:128,128,128,1,256
"""
import concurrent.futures
import json
import math
import multiprocessing
import os
import pathlib
import re
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples")]

import flash_attention as FA  # noqa: E402

from intent_trace.backends.tilelang import cuda_region, cuda_region_inside, targets  # noqa: E402
from intent_trace.backends.tilelang import cuda_region_overlap as OVERLAP  # noqa: E402
from intent_trace.backends.tilelang.target import compile_program  # noqa: E402

KERNELS = {"accurate": FA.attention_f16, "fast": FA.attention_f16_fast, "fma": FA.attention_f16_fma,
           "causal": FA.attention_f16_causal, "causal_fast": FA.attention_f16_causal_fast}
BASE = "128,128,128,1,256"
TWO = "128,128,128,2,256"
DEFAULT = tuple(f"{kernel}:{BASE}{flag}" for kernel in ("accurate", "fast", "fma", "causal") for flag in ("/sync", ""))


def _parse(variant: str) -> tuple:
    kernel, rest = variant.split(":")
    tiling, _, flag = rest.partition("/")
    if flag not in ("", "sync", "accumulate", "outside", "pingpong", "solo"):
        raise SystemExit(f"unknown variant suffix /{flag} in {variant!r}")
    return kernel, tuple(int(x) for x in tiling.split(",")), flag


def _program(variant: str):
    """(the program text, its Specialization's workspaces)."""
    kernel, tiling, flag = _parse(variant)
    graph = KERNELS[kernel].trace()
    plan = cuda_region.schedule_region.recognise(graph)
    known, overlap = cuda_region_inside.Inside.known, cuda_region.Spelling.overlap
    pingpong = OVERLAP.PINGPONG
    if flag == "outside":  # every block as if it straddled the mask
        cuda_region_inside.Inside.known = lambda self, var: None
    cuda_region.Spelling.overlap = flag not in ("sync", "accumulate")
    OVERLAP.PINGPONG = {"pingpong": True, "solo": False}.get(flag, pingpong)
    try:
        spec = cuda_region.specialization(graph, targets.CUDA, plan, cuda_region.Tiling(*tiling),
                                          cuda_region.Spelling)
    finally:
        cuda_region_inside.Inside.known, cuda_region.Spelling.overlap = known, overlap
        OVERLAP.PINGPONG = pingpong
    return (accumulated(spec.program) if flag == "accumulate" else spec.program), spec.workspaces


def accumulated(program: str) -> str:
    """The ``/accumulate`` text (see the module docstring) of a fold program: the per-row combine moved before P's
    cast, P scaled by its beta there, the wide combine a rescale before the product, the product accumulating."""
    lines = program.splitlines()
    gemms = [k for k, line in enumerate(lines) if line.strip().startswith("T.gemm(")]
    pv = gemms[-1]
    a, b, acc = re.match(r"\s*T\.gemm\((\w+), (\w+), (\w+), clear_accum=True", lines[pv]).groups()
    indent = lines[pv][:len(lines[pv]) - len(lines[pv].lstrip())]
    top = [k for k in range(pv + 1, len(lines))
           if lines[k].startswith(indent) and not lines[k].startswith(indent + " ")]
    rows_at, wide_at = top[0], top[1]
    wide_end = next(k for k in range(wide_at + 1, len(lines)) if not lines[k].startswith(indent + " "))
    wide = "\n".join(lines[wide_at:wide_end])
    old_row = re.search(rf"{acc}\[(\w+), \w+\], (\w+)\[\1\]", wide).group(2)  # beta
    run, new_row = next((m.group(1), m.group(3)) for m in re.finditer(  # the running output and alpha
        r"'it_mul_f32', (\w+)\[(\w+), \w+\], (\w+)\[\2\]\)", wide) if m.group(1) != acc)
    cast_at = max(k for k in range(pv) if lines[k].strip().startswith("T.reduce_sum(")) + 1
    cast = [re.sub(r"T\.Cast\('float16', (\w+)\[(\w+), (\w+)\]\)", rf"T.Cast('float16', \1[\2, \3] * {old_row}[\2])", x)
            for x in lines[cast_at:pv]]
    extents = re.search(r"T\.Parallel\((.*)\):", wide).group(1)
    rescale = [f"{indent}for ri, rj in T.Parallel({extents}):",
               f"{indent}    {run}[ri, rj] = {run}[ri, rj] * {new_row}[ri]"]
    gemm = lines[pv].replace(f", {acc}, clear_accum=True", f", {run}, clear_accum=False")
    body = [*lines[:cast_at], *lines[rows_at:wide_at], *cast, *rescale, gemm, *lines[wide_end:]]
    return "\n".join(x for x in body if not x.strip().startswith(f"{acc} = T.alloc_fragment(")) + "\n"


def _compile(variant: str):
    try:
        compile_program(_program(variant)[0], "tilelang-cuda")
    except Exception as e:  # reported, and the variant skipped
        return f"{type(e).__name__}: {str(e)[:300]}"
    return None


def _hung(line: dict) -> None:
    print(json.dumps({**line, "error": "watchdog: no result in time (a deadlock?)"}), flush=True)
    os._exit(3)


def main() -> None:
    import torch
    from gpu_zoo import cuda_time

    args, watchdog = sys.argv[1:], None
    if args[:1] == ["--watchdog"]:
        watchdog, args = float(args[1]), args[2:]
    variants = args or list(DEFAULT)
    programs = {v: _program(v) for v in variants}
    seen: dict = {}
    for variant, (text, _) in programs.items():  # checked before any compile: name the pair
        if text in seen:
            raise SystemExit(f"{seen[text]} and {variant} are the same program: list it once")
        seen[text] = variant
    with concurrent.futures.ProcessPoolExecutor(min(len(variants), 8),
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(variants, pool.map(_compile, variants)))
    bh, n = 32, 4096
    data, reference = {}, {}
    for variant in variants:
        kernel, (d, *_), flag = _parse(variant)
        causal = kernel.startswith("causal")
        if (d, causal) not in data:
            q, k, v = (torch.randn(bh, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            scale = 1.0 / math.sqrt(d)

            def sdpa(q=q, k=k, v=v, scale=scale, causal=causal):
                return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale,
                                                                         is_causal=causal)

            data[d, causal] = (q, k, v, scale)
            reference[d, causal] = (sdpa()[0].float(), cuda_time(sdpa, inner=10))
        q, k, v, scale = data[d, causal]
        ref, theirs = reference[d, causal]
        line = {"variant": variant, "bh": bh, "n": n, "d": d}
        if errors[variant]:
            print(json.dumps({**line, "error": errors[variant]}), flush=True)
            continue
        program, workspaces = programs[variant]
        kern = compile_program(program, "tilelang-cuda")
        timer = None
        if watchdog:  # from the first launch (the compile is the pool's, cached)
            timer = threading.Timer(watchdog, _hung, (line,))
            timer.start()
        extents = {"d0": bh, "d1": n, "d2": d, "d3": n}
        spaces = [torch.empty(*(extents.get(x) or int(x) for x in w.shape), device="cuda",
                              dtype=getattr(torch, w.dtype)) for w in workspaces]
        out = torch.empty_like(q)
        kern(q, k, v, out, scale, *spaces)
        err = float((out.float() - ref).abs().max())
        ours = cuda_time(lambda: kern(q, k, v, out, scale, *spaces), inner=10)
        if timer is not None:
            timer.cancel()
        flops = 4.0 * bh * n * n * d * (0.5 if causal else 1.0)
        print(json.dumps({**line, "ours_ms": ours * 1e3, "sdpa_ms": theirs * 1e3, "ratio": theirs / ours,
                          "ours_tflops": flops / ours / 1e12, "max_abs_err_vs_sdpa": err}), flush=True)


if __name__ == "__main__":
    main()
