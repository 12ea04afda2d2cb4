"""tilelang-cuda against PyTorch on the same GPU, measured side by side in one run. Prints one JSON line.

- f16 matmul with f32 accumulation at 4096^3 and 8192^3 vs ``torch.matmul`` (target >= 0.9x);
- the flash-attention example at batch*heads=32, L=S=4096, D=128, f16 vs
  ``torch.nn.functional.scaled_dot_product_attention`` (issue 17: >= 0.8x accurate, >= 1.0x for the FlashAttention
  spellings ``attention_f16_fast`` and ``attention_f16_fma``, >= 0.9x causal, accurate and FlashAttention-spelled),
  each the segmented fold derived from its region_fold;
- a bandwidth-bound pointwise chain vs a device-to-device copy's bandwidth (target >= 80%);
- then the zoo (benchmarks/gpu_zoo.py; causal attention is among the tiled cases above): everyday kernels -- both
  softmax spellings, log-softmax, layer norm,
  RMSNorm f16, row and full sums, argmax, cumsum, GELU, histogram, embedding gather, scatter-add, f16 matmuls at
  4000^3/1000^3/batched, matmul + bias + ReLU, a Mamba-style scan -- one JSON line each as it finishes.

Each kernel is checked against PyTorch's result before it is timed; a case with no tiled program on
this build reports null with the reason rather than timing the one-thread fallback (attention raises:
its tiled program must exist and be the one the executable chooses).
Run on a machine with an NVIDIA GPU (the ``device`` tool's H200): ``python benchmarks/gpu.py`` (``--no-zoo``:
the tiled cases only). The last line is every case together (what ``--plot`` draws).
Each case names its ``reference`` and ``target_ratio`` (null: none) and ``compile``, its kernel's cold compile and
first launch, then the in-process cache's (intent_trace.bench.compile_times); ``--plot FILE.png`` draws the
ratios (benchmarks/plot.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import intent_trace as intent
from intent_trace import I
from intent_trace.bench import compile_times
from intent_trace.cli import quiet_third_party_logs
from plot import add_plot_argument, finish

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))  # the examples' kernels
import gpu_zoo  # noqa: E402
from gpu_zoo import cuda_time  # noqa: E402
from zoo_kernels import matmul_f16, matmul_f32  # noqa: E402


@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


def bench_matmul(n: int) -> dict:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    labels = {"reference": "torch.matmul", "target_ratio": 0.9}
    # never launch the one-thread general program at this size: only a tiled one is timed
    exe, compiled = compile_times(matmul_f16, "tilelang-cuda", lambda e: e.specializations and e.launch(a, b, c))
    if not exe.specializations:
        return {"ratio": None, "reason": "no tiled program for this graph", **labels}
    ref = torch.matmul(a, b)
    err = float((c.float() - ref.float()).abs().max() / ref.float().abs().max())
    ours = cuda_time(lambda: exe.launch(a, b, c))
    theirs = cuda_time(lambda: torch.matmul(a, b, out=ref))
    flops = 2.0 * n ** 3
    return {"ours_ms": ours * 1e3, "torch_ms": theirs * 1e3, "ratio": theirs / ours,
            "ours_tflops": flops / ours / 1e12, "max_rel_err_vs_torch": err, **labels, "compile": compiled}


def bench_pointwise(n: int = 1 << 26) -> dict:
    import torch

    labels = {"reference": "copy bandwidth", "target_ratio": 0.8}
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)

    def parallel(e):
        return "T.get_thread_binding()" in e.program

    exe, compiled = compile_times(chain4, "tilelang-cuda", lambda e: parallel(e) and e.launch(x, y, out))
    if not parallel(exe):
        return {"ratio": None, "reason": "this graph gets no parallel program on tilelang-cuda (the general "
                                         "program runs in one thread)", **labels}
    assert torch.equal(out, torch.maximum(x * 1.5 + y, x) - 0.25)
    ours = cuda_time(lambda: exe.launch(x, y, out))
    dst = torch.empty_like(x)
    copy = cuda_time(lambda: dst.copy_(x))
    ours_bw, copy_bw = 3 * 4 * n / ours, 2 * 4 * n / copy
    return {"ours_gbps": ours_bw / 1e9, "copy_gbps": copy_bw / 1e9, "ratio": ours_bw / copy_bw, **labels,
            "compile": compiled}


def bench_matmul_f32(n: int = 2048) -> dict:
    """An f32 matmul (no TF32: T3) on CUDA cores (the SGEMM specialisation, ``cuda_matmul_simt``: one FMA per
    product, T10; within T5's bound) vs torch.matmul with TF32 off, target 0.8 (issue 17); ``grid_ms_2047`` is the
    same SGEMM at 2047^3, whose rows are not whole 16-byte units (its element-access variant)."""
    import torch

    exe = intent.compile(matmul_f32, target="tilelang-cuda")
    if exe.specialization_for({ev.extent: n for ev in exe.graph.extents}) is None:
        raise RuntimeError("matmul_f32 gets no tiled program on tilelang-cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    exe, compiled = compile_times(matmul_f32, "tilelang-cuda", lambda e: e.launch(a, b, c))
    ref = a.double() @ b.double()
    err = float(((c.double() - ref).abs() / (a.abs().double() @ b.abs().double())).max())
    ours, theirs = cuda_time(lambda: exe.launch(a, b, c), repeat=5), cuda_time(lambda: a @ b, repeat=5)
    m = n - 1  # 2047: K and N not multiples of 4, so the element-access variant runs
    a1, b1, c1 = a[:m, :m].contiguous(), b[:m, :m].contiguous(), c[:m, :m].contiguous()
    grid = cuda_time(lambda: exe.launch(a1, b1, c1), repeat=3)
    return {"ours_ms": ours * 1e3, "torch_ms": theirs * 1e3, "ratio": theirs / ours,
            "ours_tflops": 2.0 * n ** 3 / ours / 1e12, "max_err_over_abs_product": err, "grid_ms_2047": grid * 1e3,
            "reference": "torch.matmul (no TF32)", "target_ratio": 0.8, "compile": compiled}


def bench_attention(name: str = "attention_f16", bh: int = 32, n: int = 4096, d: int = 128,
                    target: float = 0.7) -> dict:
    """``attention_f16``, ``attention_f16_fast`` / ``_fma`` / ``_causal_fast`` (examples/flash_attention.py: the
    FlashAttention spellings, exp2 approximate and flushing with log2(e) folded into the scale) or
    ``attention_f16_causal`` at B = batch * heads vs PyTorch's SDPA
    on the same data (``is_causal`` for the causal kernel). The program the executable chooses is the segmented fold
    (cuda_region, derived from the kernel's region_fold)."""
    import math

    import torch

    import flash_attention

    attention_f16 = getattr(flash_attention, name)
    causal = "causal" in name

    exe = intent.compile(attention_f16, target="tilelang-cuda")
    sizes = {"B": bh, "L": n, "S": n, "D": d}
    # never time the one-thread general program: the tiled one must be the one the executable chooses
    spec = exe.specialization_for({ev.extent: sizes[ev.extent.name] for ev in exe.graph.extents})
    if spec is None:
        raise RuntimeError(f"{attention_f16.name} at {sizes} does not run a tiled program on tilelang-cuda "
                           f"(specialisations: {[s.name for s in exe.specializations]})")
    q, k, v = (torch.randn(bh, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)

    def sdpa():  # (batch 1, heads bh, L, D)
        return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale,
                                                                 is_causal=causal)

    exe, compiled = compile_times(attention_f16, "tilelang-cuda", lambda e: e.launch(q, k, v, out, scale))
    err = float((out.float() - sdpa()[0].float()).abs().max())
    # kernel time: 10 calls back to back per timing, so neither side's host overhead (ours: extents, the choice of
    # program, TileLang's launcher) adds to it; one call per timing too, host overhead included
    ours, theirs = cuda_time(lambda: exe.launch(q, k, v, out, scale), inner=10), cuda_time(sdpa, inner=10)
    ours_1, theirs_1 = cuda_time(lambda: exe.launch(q, k, v, out, scale)), cuda_time(sdpa)
    flops = 4.0 * bh * n * n * d * (0.5 if causal else 1.0)
    line = {"ours_ms": ours * 1e3, "torch_ms": theirs * 1e3, "ratio": theirs / ours,
            "ours_tflops": flops / ours / 1e12, "torch_tflops": flops / theirs / 1e12, "max_abs_err_vs_torch": err,
            "program": spec.name,
            "single_call": {"ours_ms": ours_1 * 1e3, "torch_ms": theirs_1 * 1e3, "ratio": theirs_1 / ours_1},
            "reference": "torch SDPA" + (" (is_causal)" if causal else ""), "target_ratio": target,
            "compile": compiled}
    return line


def main(argv=None) -> int:
    parser = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--no-zoo", action="store_true", help="the tiled cases only")
    parser.add_argument("--only", default="", help="comma-separated case names: only these, in this order (one "
                        "JSON line each, as they finish: a short run on a leased GPU measures what matters first)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print(json.dumps({"benchmark": "gpu", "error": "torch is not installed"}))
        return 1
    if not torch.cuda.is_available():
        print(json.dumps({"benchmark": "gpu", "error": "no CUDA device on this machine"}))
        return 1
    tiled = {"matmul_f16_f32acc_4096": lambda: bench_matmul(4096), "matmul_f16_f32acc_8192": lambda: bench_matmul(8192),
             "flash_attention_bh32_l4096_d128_f16": lambda: bench_attention(target=0.8),
             "flash_attention_fast_bh32_l4096_d128_f16": lambda: bench_attention("attention_f16_fast", target=1.0),
             "flash_attention_fma_bh32_l4096_d128_f16": lambda: bench_attention("attention_f16_fma", target=1.0),
             "flash_attention_causal_bh32_l4096_d128_f16": lambda: bench_attention("attention_f16_causal",
                                                                                   target=0.9),
             "flash_attention_causal_fast_bh32_l4096_d128_f16": lambda: bench_attention("attention_f16_causal_fast",
                                                                                        target=0.9),
             "pointwise_chain4_f32": bench_pointwise, "matmul_f32_2048": bench_matmul_f32}
    result = {"benchmark": "gpu", "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if args.only:
        zoo = {case.name: case for case in gpu_zoo.cases()}
        for name in args.only.split(","):
            if name not in tiled and name not in zoo:
                raise SystemExit(f"unknown case {name!r}; the cases are {', '.join([*tiled, *zoo])}")
            result[name] = tiled[name]() if name in tiled else zoo[name].run()
            print(json.dumps({"case": name, **result[name]}), flush=True)
        finish(result, args)
        return 0
    for name, bench in tiled.items():  # a line per case as it finishes (a run cut off keeps what it measured)
        result[name] = bench()
        print(json.dumps({"case": name, **result[name]}), flush=True)
    if not args.no_zoo:
        result.update(gpu_zoo.run(lambda line: print(line, flush=True)))
    finish(result, args)
    return 0


if __name__ == "__main__":
    with quiet_third_party_logs():  # stdout is the JSON lines: no compiler announcements between them
        sys.exit(main())
