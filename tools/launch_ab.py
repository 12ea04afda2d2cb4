"""A/B of launch's host path and the flat pointwise kernels on one GPU: several source trees side by side, one JSON
line per (tree, case, variant).

    python tools/launch_ab.py main=/tmp/ab/main gpupoint=/tmp/ab/gpupoint [--kernels]

First every program the children run is compiled at once into TileLang's disk cache (worker processes, as
``precompile`` does). Each tree then runs in a child process of its own (``PYTHONPATH`` = the TileLang site, then
the tree), and the last tree once more with its flat nests' element accesses (``cuda_kernels.GROUP`` 1, label
``<tree>_elements``: its host path alone on GELU and the chain); torch is timed in each child, so each tree's
ratios are against torch in the same process. Per case (the zoo's GELU, full sum and cumsum at 16M f32, the
pointwise chain of ``benchmarks/gpu.py`` at 64M): the result is checked against torch first, also launched
from a second stream (a case that fails reports its error, never a time), then ``single_ms`` (one call per
CUDA-event pair, as the zoo's ``ratio``: the host's launch path counts), ``stream_ms`` (20 back-to-back calls a
timing, per call) and ``host_us`` (the host's time to enqueue a call), for ours and for torch. In a tree whose
executable has the knobs (``executable.DIRECT_ENTRY``, ``REUSED_WORKSPACE_BYTES``, ``ZERO_AFTER``), ours also runs
with each off, so each change is timed apart, and the full sum also runs as one kernel (:func:`one_kernel`).

``--kernels`` (in the ``_elements`` child): GELU's (16M) and the chain's (64M) flat programs alone, through the
module's entry: element accesses (main's), 16-byte groups (:mod:`intent_trace.backends.tilelang.cuda_groups`) at
128 threads and 8/16 elements a thread, and a hand-written 16-byte form (:func:`vector_variant`); each checked
against torch on whole groups, tails no group of 4 divides and starts off a 16-byte boundary.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


CASES = ("gelu_erf_f32_16M", "full_sum_f32_16M", "cumsum_f32_16M")


def one_kernel(kernel):
    """``kernel`` built for tilelang-cuda with its full reduction in one kernel (``cuda_reduce.ONE_KERNEL``: the last
    block folds the partials, a ticket zeroed per call), the form main measured slower because of that zero fill."""
    from intent_trace.backends.tilelang import cuda_reduce as CR
    from intent_trace.backends.tilelang import target as TG

    old, cache = CR.ONE_KERNEL, TG._EXECUTABLES
    CR.ONE_KERNEL, TG._EXECUTABLES = True, {}
    try:
        return TG.build(kernel.trace(), target="tilelang-cuda")
    finally:
        CR.ONE_KERNEL, TG._EXECUTABLES = old, cache


def _child(root: str, kernels: bool, label: str | None = None, elements: bool = False) -> None:
    sys.path[:0] = [os.path.join(root, "benchmarks"), os.path.join(root, "examples"), root]
    import torch

    import gpu_zoo
    import intent_trace as intent
    from gpu import chain4
    from intent_trace.backends.tilelang import executable as E

    tree = label or os.path.basename(root.rstrip("/"))
    device = torch.cuda.get_device_name()
    if elements:  # flat nests with element accesses (main's), this tree's host path
        from intent_trace.backends.tilelang import cuda_kernels as CK

        CK.GROUP = 1

    def host_us(fn, calls: int = 200) -> float:
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        spent = time.perf_counter() - start
        torch.cuda.synchronize()
        return spent / calls * 1e6

    def timings(fn) -> dict:
        return {"single_ms": gpu_zoo.cuda_time(fn, 30) * 1e3, "stream_ms": gpu_zoo.cuda_time(fn, 10, inner=20) * 1e3,
                "host_us": host_us(fn)}

    def chain_case(n):
        def make(shape):
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            out = torch.empty_like(x)
            return (x, y, out), (out,), lambda: (torch.maximum(x * 1.5 + y, x) - 0.25,)
        return make

    def compiled(kernel):
        return intent.compile(kernel, target="tilelang-cuda")

    zoo = {c.name: c for c in gpu_zoo.cases() if c.name in CASES}
    knobs = hasattr(E, "DIRECT_ENTRY") and not elements
    cases = {}  # the host path's cases first, the flat nests' last (a fault in a new kernel then loses least)
    for name in ("full_sum_f32_16M", "cumsum_f32_16M", "full_sum_f32_16M_one_kernel", "gelu_erf_f32_16M"):
        c = zoo[name.replace("_one_kernel", "")]
        if name.endswith("_one_kernel") and not knobs:  # whose ticket's zero fill ZERO_AFTER moves behind it
            continue
        cases[name] = (c.kernel, c.make, c.shape, c.tol, one_kernel if name.endswith("_one_kernel") else compiled)
    cases["chain4_f32_64M"] = (chain4, chain_case(1 << 26), (1 << 26,), 0.0, compiled)
    for name, (kernel, make, shape, tol, build) in cases.items():
        line = {"tree": tree, "case": name, "device": device}
        try:
            exe = build(kernel)
            made = make(shape)
            args, outputs, torch_fn = made[:3]
            timed = made[3] if len(made) > 3 else torch_fn

            def error() -> float:
                for o in outputs:
                    o.fill_(float("nan"))
                exe.launch(*args)
                torch.cuda.synchronize()
                want = torch_fn()
                mass = made[4]() if len(made) > 4 else tuple(w.double().abs() for w in want)
                return max(float(((o.double() - w.double()).abs() / (m + 1)).max())
                           for o, w, m in zip(outputs, want, mass))

            err = error()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for o in outputs:
                    o.fill_(float("nan"))
                exe.launch(*args)
            side.synchronize()
            want = torch_fn()
            mass = made[4]() if len(made) > 4 else tuple(w.double().abs() for w in want)
            err_side = max(float(((o.double() - w.double()).abs() / (m + 1)).max())
                           for o, w, m in zip(outputs, want, mass))
            line.update(max_err=err, max_err_side_stream=err_side, ok=err <= tol and err_side <= tol)
            if not line["ok"]:
                print(json.dumps(line), flush=True)
                continue
            line["ours"] = timings(lambda: exe.launch(*args))
            line["torch"] = timings(timed)
            if knobs:
                for variant, attr, value in (("ours_tilelang_wrapper", "DIRECT_ENTRY", False),
                                             ("ours_fresh_workspaces", "REUSED_WORKSPACE_BYTES", -1),
                                             ("ours_zero_before", "ZERO_AFTER", False)):
                    old = getattr(E, attr)
                    setattr(E, attr, value)
                    exe.__dict__.pop("_launches", None)
                    try:
                        line[variant] = timings(lambda: exe.launch(*args))
                    finally:
                        setattr(E, attr, old)
                        exe.__dict__.pop("_launches", None)
            line["ratio_single"] = line["torch"]["single_ms"] / line["ours"]["single_ms"]
            line["ratio_stream"] = line["torch"]["stream_ms"] / line["ours"]["stream_ms"]
        except Exception as exc:  # noqa: BLE001 (report and go on)
            line.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        print(json.dumps(line), flush=True)
    if kernels and hasattr(E, "DIRECT_ENTRY"):
        _kernel_variants(tree, device, timings)


def vector_variant(flat: str, threads: int, groups: int) -> str:
    """A hand-written 16-byte-access form of a rank-1 flat program (the emitter's text for the zoo's GELU or the
    chain): each thread takes ``groups`` groups of 4 consecutive elements, ``threads`` groups apart; a whole group
    is loaded with one float4 load per read view into registers, the same element code runs on them and the results
    leave with one float4 store; a group the extent cuts runs the element code per element, bounds-checked. An
    experiment (the 16-byte accesses need each view's start 16-byte aligned, as torch's allocations are)."""
    import re

    lines = flat.splitlines()
    at = next(k for k, line in enumerate(lines) if "f3 = T.alloc_var" in line)
    head = [line.strip() for line in lines if re.match(r"\s+K\d+ = ", line)]
    body = [line.strip() for line in lines[at + 1:] if line.strip()]
    reads = [m for line in body for m in [re.fullmatch(r"(\w+) = (p\d+)\[f3\]", line)] if m]
    store = re.fullmatch(r"(p\d+)\[f3\] = (\w+)", body[-1])
    params = re.search(r"def kernel\((.*)\):", flat).group(1)
    prelude = re.search(r"PRELUDE = '''(.*?)'''", flat, re.S).group(1)
    views = sorted({m.group(2) for m in reads})
    per = groups * 4
    out = ["import tilelang.language as T", "", f"PRELUDE = {prelude!r}", "", "d0 = T.dynamic('d0', 'int64')", "",
           "", "@T.prim_func", f"def kernel({params}):",
           f"    with T.Kernel(T.max(T.ceildiv(d0, {threads * per}), 1), threads={threads}, prelude=PRELUDE) as bx:"]
    ind = " " * 8
    out += [ind + line for line in head]
    out.append(ind + "tx = T.get_thread_binding()")
    for v in views:
        out.append(ind + f"L{v} = T.alloc_local(({per},), 'float32')")
    out.append(ind + f"S = T.alloc_local(({per},), 'float32')")
    q = f"((T.Cast('int64', bx) * {groups} + g) * {threads} + T.Cast('int64', tx)) * 4"
    out += [ind + f"for g in T.unroll({groups}):", ind + f"    q = {q}", ind + "    if q + 4 <= d0:"]
    for v in views:
        out += [ind + "        for v in T.vectorized(4):", ind + f"            L{v}[g * 4 + v] = {v}[q + v]"]
    out.append(ind + f"for e in T.unroll({per}):")
    for line in body[:-1]:
        out.append(ind + "    " + re.sub(r"(p\d+)\[f3\]", lambda m: f"L{m.group(1)}[e]", line))
    out.append(ind + f"    S[e] = {store.group(2)}")
    out += [ind + f"for g in T.unroll({groups}):", ind + f"    q = {q}", ind + "    if q + 4 <= d0:",
            ind + "        for v in T.vectorized(4):", ind + f"            {store.group(1)}[q + v] = S[g * 4 + v]",
            ind + "    else:", ind + "        for v in T.serial(4):", ind + "            if q + v < d0:",
            ind + "                f3 = q + v"]
    out += [ind + " " * 16 + line for line in body]
    return "\n".join(out) + "\n"


def _variant_programs() -> list:
    """(case, variant, program text) of ``--kernels``: GELU's and the chain's flat programs with element accesses
    (``cuda_kernels.GROUP`` 1: main's), in 16-byte groups (this tree's) at 128 and 256 threads and 8 or 16 elements
    a thread, and the hand-written 16-byte form (:func:`vector_variant`) as a cross-check."""
    import zoo_kernels as zoo
    from gpu import chain4
    from intent_trace.backends.tilelang import cuda_kernels as CK
    from intent_trace.backends.tilelang import target as TG

    old = CK.THREADS_PER_BLOCK, CK.VECTOR, CK.UNROLL, getattr(CK, "GROUP", 1)
    programs = []
    for case, kernel in (("gelu", zoo.gelu), ("chain4", chain4)):
        for name, threads, vector, group in (("elements_128x8", 128, 8, 1), ("grouped_128x8", 128, 8, 4),
                                             ("grouped_128x16", 128, 16, 4)):
            CK.THREADS_PER_BLOCK, CK.VECTOR, CK.GROUP = threads, vector, group
            try:
                programs.append((case, name, TG.generate(kernel.trace(), "tilelang-cuda")))
            finally:
                CK.THREADS_PER_BLOCK, CK.VECTOR, CK.UNROLL, CK.GROUP = old
            if name == "elements_128x8":
                programs.append((case, "handwritten_float4_128x16", vector_variant(programs[-1][2], 128, 4)))
    return programs


def _warm(root: str) -> None:
    """Compile every program the children run (the zoo cases' in both forms of the flat nests, and ``--kernels``'
    variants) into TileLang's disk cache at once, in worker processes (intent_trace.backends.tilelang.precompile's):
    nvcc's seconds per program otherwise add up one after another inside the device time."""
    sys.path[:0] = [os.path.join(root, "benchmarks"), os.path.join(root, "examples"), root]
    import concurrent.futures
    import multiprocessing
    import tempfile

    import gpu_zoo
    from gpu import chain4
    from intent_trace import caches
    from intent_trace.backends.tilelang import cuda_kernels as CK
    from intent_trace.backends.tilelang import precompile as P
    from intent_trace.backends.tilelang import target as TG

    jobs = []
    kernels = [c.kernel for c in gpu_zoo.cases() if c.name in CASES] + [chain4]
    for group in (1, 4):
        old, CK.GROUP, TG._EXECUTABLES = CK.GROUP, group, {}
        try:
            for kernel in kernels:
                exe = TG.build(kernel.trace(), target="tilelang-cuda")
                jobs += [("tilelang-cuda", t) for t in (exe.program, *(s.program for s in exe.specializations))]
        finally:
            CK.GROUP, TG._EXECUTABLES = old, {}
    jobs += [("tilelang-cuda", text) for _, _, text in _variant_programs()]
    jobs.append(("tilelang-cuda", one_kernel(next(c.kernel for c in gpu_zoo.cases() if c.name == CASES[1])).program))
    jobs = list(dict.fromkeys(jobs))
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(len(jobs), 15), mp_context=context, initializer=P._start,
                                                initargs=(caches.cache_root(), tempfile.gettempdir(), {})) as pool:
        errors = [e for e in pool.map(P._compile, jobs) if e]
    print(json.dumps({"warm": len(jobs), "seconds": time.perf_counter() - start, "errors": errors[:3]}), flush=True)


def _kernel_variants(tree: str, device: str, timings) -> None:
    """The kernels of :func:`_variant_programs` alone (through the module's entry), each checked against torch at
    its size and at sizes no group of 4 divides (tails), then timed."""
    import torch

    from intent_trace.backends.tilelang import executable as E
    from intent_trace.backends.tilelang import targets

    spec = targets.TARGETS["tilelang-cuda"]
    made = {}
    for case, name, text in _variant_programs():
        n = 1 << 24 if case == "gelu" else 1 << 26
        if case not in made:
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            if case == "gelu":
                made[case] = ((x,), torch.empty_like(x), lambda m, x=x: torch.nn.functional.gelu(x[:m]))
            else:
                made[case] = ((x, y), torch.empty_like(x), lambda m, x=x, y=y: torch.maximum(x[:m] * 1.5 + y[:m],
                                                                                             x[:m]) - 0.25)
        ins, out, ref = made[case]
        line = {"tree": tree, "case": f"{case}_f32_{n >> 20}M", "variant": name, "device": device}
        try:
            entry = E._entry(E.compile_with(text, spec))
            errs = []
            for m in (n, n - 3, 1001):  # whole groups, then tails no group of 4 divides
                o = torch.full((m,), float("nan"), device="cuda")
                entry(*[a[:m].clone() for a in ins], o)
                want = ref(m)
                errs.append(float(((o.double() - want.double()).abs() / (want.double().abs() + 1)).max()))
            if "handwritten" not in name:  # starts off a 16-byte boundary: element accesses, still right
                m = n - 5
                o = torch.full((m + 1,), float("nan"), device="cuda")
                entry(*[a[1:m + 1] for a in ins], o[1:])
                want = torch.nn.functional.gelu(ins[0][1:m + 1]) if case == "gelu" else \
                    torch.maximum(ins[0][1:m + 1] * 1.5 + ins[1][1:m + 1], ins[0][1:m + 1]) - 0.25
                errs.append(float(((o[1:].double() - want.double()).abs() / (want.double().abs() + 1)).max()))
                errs.append(0.0 if bool(torch.isnan(o[0])) else float("inf"))
            line["max_err"] = max(errs)
            line["kernel"] = timings(lambda: entry(*ins, out))
        except Exception as exc:  # noqa: BLE001
            line["error"] = f"{type(exc).__name__}: {exc}"[:500]
        print(json.dumps(line), flush=True)


def main(argv) -> int:
    if argv and argv[0] == "--child":
        _child(argv[1], "--kernels" in argv, argv[argv.index("--label") + 1] if "--label" in argv else None,
               "--elements" in argv)
        return 0
    if argv and argv[0] == "--warm":
        _warm(argv[1])
        return 0
    trees = [a.split("=", 1) for a in argv if "=" in a]
    site = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and not any(os.path.abspath(p) == os.path.abspath(root) for _, root in trees)]
    me = os.path.abspath(__file__)
    last = trees[-1][1]
    env_last = dict(os.environ, PYTHONPATH=os.pathsep.join([*site, last]))
    subprocess.run([sys.executable, me, "--warm", last], env=env_last, check=False)
    for _, root in trees:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([*site, root]))
        subprocess.run([sys.executable, me, "--child", root], env=env, check=False)
    # the last tree again with element accesses in its flat nests (its host path alone), then the kernel variants:
    # a child of its own, so that a fault there cannot take the lines above with it
    label = os.path.basename(last.rstrip("/")) + "_elements"
    extra = ["--kernels"] if "--kernels" in argv else []
    subprocess.run([sys.executable, me, "--child", last, "--label", label, "--elements", *extra], env=env_last,
                   check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
