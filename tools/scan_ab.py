"""Time the single-pass cumsum's variants (cuda_scan.Lookback: tile, staging, window, poll back-off) and the
two-kernel reduce-then-scan side by side with torch.cumsum, and the one-kernel full sum beside the two-kernel one
and torch.sum, on the GPU machine: one JSON line per variant (issue 17: the single pass measured ~2x slower than the
two kernels it replaced).

    python3 tools/scan_ab.py                 # every variant at 16M (--sizes 16777993: a tail no tile divides)
    python3 tools/scan_ab.py --sizes 16777216 --variants module two_kernels cub_sm90   # a few, one size
    python3 tools/scan_ab.py --ptxas         # no GPU: each variant's registers and spills (nvcc)

Each program is compiled in a worker process first (in parallel: TileLang's disk cache keeps them), then each runs on
the same data as torch and is checked against float64 before it is timed: a cumsum per prefix within T5's bound
(``max_err_over_t5_bound`` <= 1), a sum within (n - 1) u sum |x|. ``ours_ms`` is a call as the executable makes
it: the zero fill of the ticket-and-status workspace (a memset) and the kernel; ``memset_ms`` is the fill alone.
``module`` marks the variant the programs use now (cuda_scan.LOOKBACK; the full sum's one kernel).
"""
import argparse
import concurrent.futures
import json
import multiprocessing
import pathlib
import re
import sys
import tempfile

import attrs

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT), str(ROOT / "tests")]

from zoo_kernels import cumsum, full_sum  # noqa: E402

from intent_trace.backends.tilelang import cuda_reduce, cuda_scan, targets  # noqa: E402
from intent_trace.backends.tilelang.program import lower  # noqa: E402

L = cuda_scan.Lookback
#: name -> the single pass's knobs, or None for the two-kernel reduce-then-scan (Metal's program); the names without
#: a tile ("unstaged", "nearest", "backoff_50", ...) change one knob of the module's
SCANS = {
    "module": cuda_scan.LOOKBACK,
    "two_kernels": None,
    "256x8": L(256, 8),  # gpuscan1's single pass (issue 17's 0.28 ms)
    "256x16": L(256, 16), "512x8": L(512, 8), "256x32": L(256, 32), "128x16": L(128, 16), "512x16": L(512, 16),
    "unstaged": attrs.evolve(cuda_scan.LOOKBACK, staged=False),
    "nearest": attrs.evolve(cuda_scan.LOOKBACK, nearest=True),
    "backoff_50": attrs.evolve(cuda_scan.LOOKBACK, backoff_ns=50),
    "backoff_200": attrs.evolve(cuda_scan.LOOKBACK, backoff_ns=200),
    "256x16_nearest_backoff_100": L(256, 16, nearest=True, backoff_ns=100),
    "256x32_nearest_backoff_100": L(256, 32, nearest=True, backoff_ns=100),
    "512x16_nearest_backoff_100": L(512, 16, nearest=True, backoff_ns=100),
    "256x16_unstaged_nearest": L(256, 16, staged=False, nearest=True),
    "cub_sm90": L(128, 24, backoff_ns=688, delay_ns=1140),  # CUB's sm_90 tuning of a float sum
    "cub_sm90_tile_only": L(128, 24), "128x24_backoff_688": L(128, 24, backoff_ns=688),
    "512x8_backoff_688_delay_1140": L(512, 8, backoff_ns=688, delay_ns=1140),
    "128x24_delay_1140": L(128, 24, delay_ns=1140),
    "256x8_backoff_688_delay_1140": L(256, 8, backoff_ns=688, delay_ns=1140),
}
SCANS = {k: v for k, v in SCANS.items() if k == "module" or v != cuda_scan.LOOKBACK}  # the module's once
#: diagnostics, made from the module's program text (``diagnostic`` in their lines): how much of a call the
#: look-back and the ticket take. ``no_lookback``: each tile scanned alone (wrong from tile 1 on: its numbers are
#: not checked), nothing waits; ``block_index``: the tile is the block's index, not a ticket (CUB's choice: right
#: as long as blocks start in index order, which CUDA does not promise, so not a candidate)
_NO_LOOKBACK = (r"T\.serial\(T\.ceildiv\((t\d+), T\.int64\(32\)\)\)", r"T.serial(T.min(\1, T.int64(0)))")
_BLOCK_INDEX = (r"T\.call_extern\('int32', 'itg_ticket64', T\.access_ptr\(W0\[0\], 'rw'\)\)", "bx")
DIAGNOSTICS = {"no_lookback": (_NO_LOOKBACK,), "block_index": (_BLOCK_INDEX,),
               "no_lookback_block_index": (_NO_LOOKBACK, _BLOCK_INDEX)}  # a tile-local scan: the floor
#: name -> the full sum's plan: one kernel (the last block folds the partials) or two
SUMS = {"module": True, "two_kernels": False}


def scan_target(lookback):
    if lookback is None:
        return attrs.evolve(targets.CUDA, multi_block=lambda g: cuda_scan.multi_block(g, single_pass=False))
    return attrs.evolve(targets.CUDA, multi_block=lambda g: cuda_scan.multi_block(g, lookback=lookback))


def sum_target(one_kernel: bool):
    return attrs.evolve(targets.CUDA, multi_block=lambda g: cuda_reduce.multi_block(g, single_pass=one_kernel))


def programs() -> dict:
    """(kind, name) -> the lowered program (its text and workspaces)."""
    out = {("cumsum", k): lower(cumsum.trace(), scan_target(v)) for k, v in SCANS.items()}
    module = out[("cumsum", "module")]
    for name, edits in DIAGNOSTICS.items():
        text = module.text
        for pattern, replacement in edits:
            text, count = re.subn(pattern, replacement, text)
            assert count == 1, (name, pattern)
        out[("cumsum", "diag_" + name)] = attrs.evolve(module, text=text)
    out.update({("full_sum", k): lower(full_sum.trace(), sum_target(v)) for k, v in SUMS.items()})
    for program in out.values():  # the kernel's parameters: the source, the output, then the workspaces
        head = program.text[program.text.index("def kernel("):].split(":\n")[0]
        assert "E: T.Tensor" not in head and "p2" not in head, head
    return out


def compile_error(text: str) -> str | None:
    from intent_trace.backends.tilelang.target import compile_program
    try:
        compile_program(text, "tilelang-cuda")
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[-300:]}"
    return None


def ptxas(text: str) -> dict:
    """nvcc's report for the program's CUDA source on sm_90a (no GPU): registers and spills a kernel."""
    from backends.cuda_ptx import assemble
    from backends.tilelang_support import cuda_source

    source = cuda_source(text)
    with tempfile.TemporaryDirectory() as d:
        got = assemble(source, pathlib.Path(d))
    return {"registers": got.registers, "spills": got.spills} if got else {"error": "no nvcc"}


def _zeroed(program, n, torch):
    return [torch.zeros(w.sizes({0: n}, ()), dtype=getattr(torch, w.dtype), device="cuda") if w.zeroed
            else torch.empty(w.sizes({0: n}, ()), dtype=getattr(torch, w.dtype), device="cuda")
            for w in program.workspaces]


def measure(kind: str, name: str, program, n: int, error: str | None) -> dict:
    import torch

    from gpu_zoo import cuda_time
    from intent_trace.backends.tilelang.target import compile_program

    torch.manual_seed(0)
    x = torch.randn(n, device="cuda")
    line = {"kind": kind, "variant": name, "n": n, "module": name == "module"}
    diagnostic = name.startswith("diag_")
    if diagnostic:
        line["diagnostic"] = name[len("diag_"):]
    elif kind == "cumsum":
        line["lookback"] = attrs.asdict(SCANS[name]) if SCANS[name] else "two kernels"
    if kind == "cumsum":
        y = torch.empty_like(x)
        theirs = cuda_time(lambda: torch.cumsum(x, 0, out=y))
    else:
        y = torch.empty(1, device="cuda")
        scalar = torch.empty((), device="cuda")
        theirs = cuda_time(lambda: torch.sum(x, 0, out=scalar))
    line["torch_ms"] = theirs * 1e3
    if error:
        return {**line, "error": error}
    kern = compile_program(program.text, "tilelang-cuda")
    spaces = _zeroed(program, n, torch)
    zeroed = [w for w, s in zip(spaces, program.workspaces) if s.zeroed]

    def call():
        for w in zeroed:  # per call, as the executable does
            w.zero_()
        kern(x, y, *spaces)

    y.fill_(float("nan"))
    call()
    u = 2.0 ** -24
    xd = x.double()
    if kind == "cumsum":
        exact = torch.cumsum(xd, 0)
        i = torch.arange(1, n + 1, device="cuda", dtype=torch.float64)
        bound = i * u / (1 - i * u) * torch.cumsum(xd.abs(), 0) + u * exact.abs()
        within = float(((y.double() - exact).abs() / bound).max())
    else:
        exact = xd.sum()
        within = float((y.double()[0] - exact).abs() / ((n - 1) * u * xd.abs().sum() + u * exact.abs()))
    if diagnostic and name != "diag_block_index":
        within = None  # each tile scanned alone: wrong by design
    ms = cuda_time(call)
    memset = cuda_time(lambda: [w.zero_() for w in zeroed]) if zeroed else 0.0
    return {**line, "ours_ms": ms * 1e3, "memset_ms": memset * 1e3, "ratio": theirs / ms,
            "max_err_over_t5_bound": within}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptxas", action="store_true", help="no GPU: nvcc's registers and spills per variant")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1 << 24])
    parser.add_argument("--variants", nargs="*", help="only these names (default: all)")
    args = parser.parse_args()
    found = programs()
    keys = [k for k in found if not args.variants or k[1] in args.variants]
    if args.ptxas:
        for key in keys:
            print(json.dumps({"kind": key[0], "variant": key[1], **ptxas(found[key].text)}), flush=True)
        return
    with concurrent.futures.ProcessPoolExecutor(16, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = dict(zip(keys, pool.map(compile_error, [found[k].text for k in keys])))
    for n in args.sizes:
        for key in keys:
            print(json.dumps(measure(*key, found[key], n, errors[key])), flush=True)


if __name__ == "__main__":
    main()
