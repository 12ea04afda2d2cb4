"""How much of a zoo case's time is the host's launch path, not the device's work (one GPU call, JSON lines).

``benchmarks/gpu.py`` times one call per CUDA-event pair (``inner=1``): the device's queue is idle when the start
event is recorded, so what the host does between that event and the kernel's launch (``exe.launch``: the argument
views, the per-call workspaces, TileLang's launcher; torch's dispatcher) is counted with the kernel. A stream of
calls hides it as long as the host enqueues faster than the device drains. For each case this prints, for ours and
for torch: ``single_ms`` (one call a timing, as the zoo), ``stream_ms`` (``inner`` back-to-back calls a timing,
per call) and ``host_us`` (the host's time per call to enqueue, from ``perf_counter`` over a burst without a
synchronisation); ``kernel_only`` and ``entry_only``: TileLang's launcher and the module's entry alone on
prepared arguments. Usage: ``python tools/launch_overhead.py [case-substring ...]``.
"""
from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples"), ROOT]

import gpu_zoo  # noqa: E402


def host_us(fn, calls: int = 200) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    spent = time.perf_counter() - start
    torch.cuda.synchronize()
    return spent / calls * 1e6


def main(argv) -> int:
    import torch

    import intent_trace as intent

    for case in gpu_zoo.cases():
        if argv and not any(a in case.name for a in argv):
            continue
        exe = intent.compile(case.kernel, target="tilelang-cuda")
        made = case.make(case.shape)
        args, timed = made[0], (made[3] if len(made) > 3 else made[2])

        def ours():
            exe.launch(*args)

        line = {"case": case.name, "device": torch.cuda.get_device_name()}
        for name, fn in (("ours", ours), ("torch", timed)):
            line[name] = {"single_ms": gpu_zoo.cuda_time(fn, 20) * 1e3,
                          "stream_ms": gpu_zoo.cuda_time(fn, 10, inner=20) * 1e3, "host_us": host_us(fn)}
        # the compiled kernel alone on prepared arguments (workspaces made once: only where none is zeroed, since
        # a ticket or flags left by the previous call would break the next): TileLang's launcher without ours, and
        # the module's entry that launch calls (executable._entry) without the plan's lookup
        shapes = tuple(getattr(a, "shape", None) for a in args)
        entry, views, extra, _ = exe._launches[shapes]
        if not any(getattr(w, "zeroed", False) for w in exe.workspaces):
            ready = list(args) if views is None else [a.view(v[0]) if v is not None and a.dtype == v[1] else a
                                                      for a, v in zip(args, views)]
            ready += extra(args) if extra is not None else []
            kernel = exe._kernel_for({e: n for p, a in zip(exe.graph.params, args) if p.kind == "view"
                                      for e, n in zip(p.type.shape, a.shape) if not isinstance(e, int)})[0]
            line["kernel_only"] = {"single_ms": gpu_zoo.cuda_time(lambda: kernel(*ready), 20) * 1e3,
                                   "host_us": host_us(lambda: kernel(*ready))}
            line["entry_only"] = {"single_ms": gpu_zoo.cuda_time(lambda: entry(*ready), 20) * 1e3,
                                  "host_us": host_us(lambda: entry(*ready))}
        line["ratio_single"] = line["torch"]["single_ms"] / line["ours"]["single_ms"]
        line["ratio_stream"] = line["torch"]["stream_ms"] / line["ours"]["stream_ms"]
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
