"""A/B of cpu's first-NaN add and mul (scalar_rules.first_nan_arith: a compare and a blend per element; with a
loop-invariant operand, invariant_first_nan_arith: one test LLVM hoists) against the plain ops they replaced (LLVM
may swap a plain op's operands, so two NaNs gave either payload). Each variant runs in its own process with its own
kernel cache, the two alternating; one JSON line per kernel with both times, NumPy's and torch's (when installed)
beside them.

- chain4: benchmarks/cpu_oracle.py's fused chain (``a * 1.5 + y``: one guarded add; memory-bound);
- chain_s: six rounds of ``maximum(v * s + w, v - 1) + 0.5`` with a scalar ``s`` (a round: ``v * s`` tested once
  outside the loop, ``+ w`` blended; compute-bound);
- layer_norm, rms_norm: benchmarks/zoo_kernels / cpu_rows (the row's scale tested once a row; ``* g`` and ``+ b``
  blended);
  softmax_whole: the control (its ops are sub, exp and div: nothing guarded).

    python3 tools/nan_pick_ab.py [--quick] [--rounds N]

``--rounds``: alternating rounds of the two processes (default 2); each case's time is the best over all of them, so
more rounds wash out a shared machine's load (softmax_whole, whose code is the same in both, measures the noise).

``--interleaved [--reps N]``: both spellings built in one process (the plain one under a key of its own) and called
in turn, N times each (default 41): a shared machine's load then falls on both alike. Reports each one's median and
best, and the ratio of the medians.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import numpy as np  # noqa: E402

import intent_trace as intent  # noqa: E402


def _chain_s():
    """cpu_oracle's 20-op kernel (``k20``): six rounds of ``maximum(v * s + w, v - 1) + 0.5``."""
    from cpu_oracle import KERNEL_20
    namespace: dict = {}
    exec(KERNEL_20, namespace)  # noqa: S102 (the benchmark's own kernel text)
    return namespace["k20"]


def _cases(quick: bool):
    from cpu_oracle import chain4, numpy_chain4
    from zoo_kernels import layer_norm, softmax_whole
    from cpu_rows import np_layer_norm, np_rms_norm, np_softmax, rms_norm
    rng = np.random.default_rng(0)
    n = 1 << (20 if quick else 24)
    m, k = (256, 1024) if quick else (4096, 1024)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    r = rng.standard_normal((m, k)).astype(np.float32)
    g, b = (rng.standard_normal(k).astype(np.float32) for _ in range(2))

    def np_chain_s(x, y, out, s):
        v = x
        for _ in range(6):
            v = np.maximum(v * s + y, v - np.float32(1)) + np.float32(0.5)
        out[:] = v

    return [("chain4", chain4, (x, y), (n,), lambda: numpy_chain4(x, y, np.empty(n, np.float32))),
            ("chain_s", _chain_s(), (x, y), (n,), lambda: np_chain_s(x, y, np.empty(n, np.float32), np.float32(0.75)),
             0.75),
            ("layer_norm", layer_norm, (r, g, b), (m, k), lambda: np_layer_norm(r, g, b)),
            ("rms_norm", rms_norm, (r, g), (m, k), lambda: np_rms_norm(r, g)),
            ("softmax_whole", softmax_whole, (r,), (m, k), lambda: np_softmax(r))]


def _best(fn, rounds=9) -> float:
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def child(variant: str, quick: bool) -> dict:
    if variant == "plain":  # the ops as main spelled them
        from intent_trace.oracle.numba import elementwise as E, scalar_rules as S
        for op in S.COMMUTED:
            S.SCALAR_RULES[op] = S.arith
        E.invariant_first_nan_arith = lambda node, d, a, b, k: S.arith(node, d, a, b)
    out = {}
    for name, kernel, inputs, shape, _, *scalar in _cases(quick):
        exe = intent.compile(kernel, target="cpu")
        result = np.empty(shape, np.float32)
        out[name] = _best(lambda: exe(*inputs, result, *scalar))
    return out


def _plain_executable(kernel):
    """The cpu executable of ``kernel`` with add and mul spelled as main did (its own cache key and module)."""
    from intent_trace.oracle.numba import elementwise as E, scalar_rules as S
    from intent_trace.oracle.numba.target import CpuExecutable
    exe = CpuExecutable(kernel.trace())
    exe.key += "_plain"
    saved = dict(S.SCALAR_RULES), E.invariant_first_nan_arith
    try:
        for op in S.COMMUTED:
            S.SCALAR_RULES[op] = S.arith
        E.invariant_first_nan_arith = lambda node, d, a, b, k: S.arith(node, d, a, b)
        exe.module  # noqa: B018 (generated and loaded while the plain spelling is in place)
    finally:
        S.SCALAR_RULES.update(saved[0])
        E.invariant_first_nan_arith = saved[1]
    return exe


def interleaved(quick: bool, reps: int) -> None:
    for name, kernel, inputs, shape, _, *scalar in _cases(quick):
        pick = intent.compile(kernel, target="cpu")
        plain = _plain_executable(kernel)
        assert plain.source != pick.source or name == "softmax_whole", name
        result = np.empty(shape, np.float32)
        times: dict = {"plain": [], "pick": []}
        for exe in (plain, pick):
            exe(*inputs, result, *scalar)  # compiled (or loaded) before the clock starts
        for rep in range(reps):
            for variant, exe in (("plain", plain), ("pick", pick)) if rep % 2 == 0 else (("pick", pick),
                                                                                        ("plain", plain)):
                t0 = time.perf_counter()
                exe(*inputs, result, *scalar)
                times[variant].append((time.perf_counter() - t0) * 1e3)
        med = {v: float(np.median(t)) for v, t in times.items()}
        print(json.dumps({"case": name, "threads": os.cpu_count(), "reps": reps,
                          "plain_median_ms": round(med["plain"], 3), "first_nan_median_ms": round(med["pick"], 3),
                          "plain_best_ms": round(min(times["plain"]), 3),
                          "first_nan_best_ms": round(min(times["pick"]), 3),
                          "ratio_median": round(med["pick"] / med["plain"], 3)}), flush=True)


def _torch_times(quick: bool) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    rng = np.random.default_rng(0)
    m, k = (256, 1024) if quick else (4096, 1024)
    r = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
    g, b = (torch.from_numpy(rng.standard_normal(k).astype(np.float32)) for _ in range(2))
    return {"layer_norm": _best(lambda: torch.nn.functional.layer_norm(r, (k,), g, b, 1e-5)),
            "rms_norm": _best(lambda: r * torch.rsqrt((r * r).mean(1, keepdim=True) + 1e-6) * g),
            "softmax_whole": _best(lambda: torch.softmax(r, 1))}


def main(argv) -> None:
    quick = "--quick" in argv
    if "--interleaved" in argv:
        interleaved(quick, int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 41)
        return
    if "--child" in argv:
        print(json.dumps(child(argv[argv.index("--child") + 1], quick)))
        return
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 2
    runs = {"plain": [], "pick": []}
    with tempfile.TemporaryDirectory() as cache:
        for rnd in range(rounds):
            for variant in ("plain", "pick") if rnd % 2 == 0 else ("pick", "plain"):
                env = dict(os.environ, INTENT_TRACE_CACHE_DIR=os.path.join(cache, variant))
                done = subprocess.run([sys.executable, __file__, "--child", variant, *(["--quick"] if quick else [])],
                                      env=env, check=True, capture_output=True, text=True)
                runs[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    torch_ms = _torch_times(quick)
    for name, *_rest in _cases(quick):
        plain = min(r[name] for r in runs["plain"])
        pick = min(r[name] for r in runs["pick"])
        print(json.dumps({"case": name, "threads": os.cpu_count(), "plain_ms": round(plain, 3),
                          "first_nan_ms": round(pick, 3), "ratio": round(pick / plain, 3),
                          "numpy_ms": round(_best(_rest[3], 5), 3),
                          "torch_ms": round(torch_ms[name], 3) if name in torch_ms else None}))


if __name__ == "__main__":
    main(sys.argv[1:])
