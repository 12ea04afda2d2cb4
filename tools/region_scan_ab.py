"""The segmented scan (cuda_region_scan) against the one-thread program it replaces and PyTorch, on one GPU: causal
linear attention (examples/causal_linear_attention.py), one JSON line per measurement.

1. the zoo case (benchmarks/gpu_zoo.py, ``causal_linear_attention_f32_bh32_l4096_d64``): ours vs PyTorch's chunked
   form;
2. where the zoo case's time goes: each of the segmented scan's three kernels (transitions, prefixes, outputs) timed by
   torch.profiler (CUPTI), ms a call;
3. at batch 1, L=4096, D=64: the segmented scan, the one-thread program (the CUDA target without the segmented-scan
   plan: what main runs) and PyTorch, each checked against PyTorch first.

Run from the repository root with the examples and benchmarks importable: ``python tools/region_scan_ab.py``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

import attrs  # noqa: E402

import intent_trace as intent  # noqa: E402
from intent_trace.backends.tilelang import cuda_scan, targets  # noqa: E402
from intent_trace.backends.tilelang import target as tl_target  # noqa: E402
from intent_trace.cli import quiet_third_party_logs  # noqa: E402


def main() -> int:
    import torch

    import gpu_zoo
    from causal_linear_attention import linear_attention_batched

    (case,) = [c for c in gpu_zoo.cases() if c.name.startswith("causal_linear_attention")]
    print(json.dumps(case.run(), default=str), flush=True)
    print(json.dumps(phases(linear_attention_batched, case.shape)), flush=True)
    shape = (1, 4096, 64)
    args, outputs, theirs, _, mass = gpu_zoo._linear_attention(shape)
    want, scale = theirs(), mass()
    line = {"case": "causal_linear_attention_f32_1x4096x64", "device": torch.cuda.get_device_name()}
    programs = [("segmented_scan", None), ("one_thread", attrs.evolve(targets.CUDA, multi_block=cuda_scan.multi_block))]
    for name, spec in programs:
        if spec is not None:  # the CUDA target without the segmented-scan plan: main's one-thread program
            targets.TARGETS["tilelang-cuda"] = spec
            tl_target._EXECUTABLES.clear()
        try:
            exe = intent.compile(linear_attention_batched, target="tilelang-cuda")
            line[f"{name}_schedule"] = str(exe.schedule.general.mapping)
            exe.launch(*args)
            torch.cuda.synchronize()
            line[f"{name}_err"] = max(float(((o.double() - w.double()).abs() / (m.double() + 1)).max())
                                      for o, w, m in zip(outputs, want, scale))
            line[f"{name}_ms"] = gpu_zoo.cuda_time(lambda: exe.launch(*args), 1 if spec is not None else 20) * 1e3
        except Exception as exc:  # noqa: BLE001 (report and go on: the other program's numbers still count)
            line[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:600]
    targets.TARGETS["tilelang-cuda"] = targets.CUDA
    line["torch_ms"] = gpu_zoo.cuda_time(theirs, 20) * 1e3
    if "segmented_scan_ms" in line:
        line["segmented_vs_torch"] = line["torch_ms"] / line["segmented_scan_ms"]
        if "one_thread_ms" in line:
            line["segmented_vs_one_thread"] = line["one_thread_ms"] / line["segmented_scan_ms"]
    print(json.dumps(line), flush=True)
    return 0


def phases(kernel, shape) -> dict:
    """ms a call of each CUDA kernel one launch of ``kernel`` runs at ``shape`` (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import gpu_zoo

    line = {"case": "causal_linear_attention_phases", "shape": list(shape)}
    try:
        exe = intent.compile(kernel, target="tilelang-cuda")
        args = gpu_zoo._linear_attention(shape)[0]
        exe.launch(*args)
        torch.cuda.synchronize()
        calls = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                exe.launch(*args)
            torch.cuda.synchronize()
        for e in prof.key_averages():
            total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if total:
                line[e.key[:60]] = total / calls / 1e3  # us -> ms a call
        line["schedule"] = str(exe.schedule.general.describe())[:300]
    except Exception as exc:  # noqa: BLE001 (report and go on)
        line["error"] = f"{type(exc).__name__}: {exc}"[:600]
    return line


if __name__ == "__main__":
    with quiet_third_party_logs():
        sys.exit(main())
