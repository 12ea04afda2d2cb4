"""The CPU oracle against NumPy, measured side by side in one run. Prints one JSON line.

- fused 4-op elementwise chain over 16M f32 (cpu: one parallel loop, no temporaries);
- cold compile of a 20-op kernel (fresh on-disk cache), in-process cache hit, and a new process
  loading the compiled kernel from the on-disk cache (against a process that imports Numba and
  calls one function from Numba's own cache), both started several times in alternation; measured
  with a bytecode cache (as for an installed package: the target figure) and without one (intent_trace
  compiled from source at every start, as in a checkout with PYTHONDONTWRITEBYTECODE=1).

- f32 row-sum of 4096x4096 with f64 accumulation (cpu: partial accumulators + parallel rows).

Each kernel's compile record (``compile``: cold compile and first call, then the in-process cache's) is
given apart from its steady-state times. ``--quick`` runs smaller sizes (1M elements, 1024x1024) and
fewer process starts, naming the cases by those sizes; ``--plot FILE.png`` draws the ratios
(benchmarks/plot.py).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.bench import compile_times
from plot import add_plot_argument, finish


@intent.kernel
def chain4(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    a = x[d]
    out[d] = I.maximum(a * 1.5 + y[d], a) - 0.25


@intent.kernel
def rowsum(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f64, ("M",)]):
    r = I.domain(0, x.shape[0])
    c = I.domain(0, x.shape[1])
    out[r] = I.reduce.sum(x[r, c], axis=1, acc_dtype=I.f64)


def numpy_chain4(x, y, out):
    t = x * np.float32(1.5)
    t += y
    np.maximum(t, x, out=t)
    np.subtract(t, np.float32(0.25), out=out)


def best(fn, repeat=7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


KERNEL_20 = textwrap.dedent("""
    import intent_trace as intent
    from intent_trace import I

    @intent.kernel
    def k20(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)], s: I.f32):
        d = I.domain(0, x.shape[0])
        v = x[d]
        w = y[d]
        for k in range(6):
            v = I.maximum(v * s + w, v - 1.0) + 0.5
        out[d] = v
""")


NUMBA_BASELINE = textwrap.dedent("""
    import numba, numpy as np
    @numba.njit(cache=True)
    def f(x):
        return x + 1.0
    f(np.ones(8, np.float32))
""")
NEW_PROCESS_ROUNDS = 9


def _process_env(bytecode_cache: str | None) -> dict:
    """The environment of the measured processes.

    With ``bytecode_cache`` (a folder), Python reads and writes the bytecode of every module there, as it
    does for an installed package; without it, bytecode writing is off (PYTHONDONTWRITEBYTECODE=1), so
    intent_trace is compiled from source at every start while numpy and Numba keep the bytecode that pip
    installed. Both processes of a comparison run in the same environment.
    """
    env = dict(os.environ)
    if bytecode_cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode_cache
    return env


def _wall(args, env) -> tuple:
    t0 = time.perf_counter()
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, out.stdout


def new_process_load(cache: str, bytecode_cache: str | None, rounds: int = NEW_PROCESS_ROUNDS) -> dict:
    """A new process that traces k20 and runs it from the on-disk cache, against a process that imports
    Numba and calls one function from Numba's own cache (Numba's one-time initialisation of its typing and
    target registries is in both).

    One start is noisy (other processes, the moment the garbage collector runs), so the two are started
    in alternation, ``rounds`` times each after a warm-up, and the overhead is the median of the per-round
    differences (also given: the difference of the fastest starts).
    """
    script = KERNEL_20 + textwrap.dedent("""
        import time, numpy as np
        t0 = time.perf_counter()
        exe = intent.compile(k20, target="cpu")
        x = np.ones(8, np.float32); out = np.zeros(8, np.float32)
        exe(x, x, out, 2.0)
        t1 = time.perf_counter()
        print(t1 - t0, len(exe.function.stats.cache_hits))
    """)
    env = _process_env(bytecode_cache)
    kernel_env = dict(env, INTENT_TRACE_CACHE_DIR=cache)
    kernel_args = [sys.executable, "-c", script]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "numba_baseline.py")
        with open(path, "w") as fh:
            fh.write(NUMBA_BASELINE)
        baseline_args = [sys.executable, path]
        for _ in range(2):  # fill the disk caches (and the bytecode cache)
            _wall(kernel_args, kernel_env)
            _wall(baseline_args, env)
        walls, baselines, loads, hits = [], [], [], []
        for r in range(rounds):
            if r % 2:
                baseline, _ = _wall(baseline_args, env)
                wall, stdout = _wall(kernel_args, kernel_env)
            else:
                wall, stdout = _wall(kernel_args, kernel_env)
                baseline, _ = _wall(baseline_args, env)
            load_s, hit = stdout.split()
            walls.append(wall)
            baselines.append(baseline)
            loads.append(float(load_s))
            hits.append(int(hit))
    median = statistics.median
    return {"compile_and_first_call_s": median(loads), "disk_cache_hits": min(hits),
            "process_wall_s": median(walls), "process_wall_min_s": min(walls),
            "numba_import_and_cached_call_process_s": median(baselines),
            "numba_import_and_cached_call_process_min_s": min(baselines),
            "overhead_ms": round(median([w - b for w, b in zip(walls, baselines)]) * 1e3, 1),
            "overhead_of_fastest_ms": round((min(walls) - min(baselines)) * 1e3, 1), "rounds": rounds}


def main(argv=None) -> None:
    parser = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer process starts")
    args = parser.parse_args(argv)
    n = (1 if args.quick else 16) * 1024 * 1024
    side = 1024 if args.quick else 4096
    rounds = 3 if args.quick else NEW_PROCESS_ROUNDS
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out_np = np.empty_like(x)
    out_cpu = np.empty_like(x)
    compiles = {}
    exe, compiles["chain4"] = compile_times(chain4, "cpu", lambda e: e(x[:8], y[:8], out_cpu[:8]), checks=False)
    exe(x, y, out_cpu)
    numpy_chain4(x, y, out_np)
    assert np.array_equal(out_np, out_cpu)
    t_np = best(lambda: numpy_chain4(x, y, out_np))
    t_cpu = best(lambda: exe(x, y, out_cpu))
    checked = intent.compile(chain4, target="cpu")
    t_checked = best(lambda: checked(x, y, out_cpu))

    m = rng.standard_normal((side, side), dtype=np.float32)
    rows_np = np.empty(side)
    rows_cpu = np.empty(side)
    rs, compiles["rowsum"] = compile_times(rowsum, "cpu", lambda e: e(m[:2, :8], rows_cpu[:2]))
    rs(m, rows_cpu)
    np.sum(m, axis=1, dtype=np.float64, out=rows_np)
    assert np.allclose(rows_np, rows_cpu, rtol=1e-12, atol=1e-9)
    t_rows_np = best(lambda: np.sum(m, axis=1, dtype=np.float64, out=rows_np))
    t_rows_cpu = best(lambda: rs(m, rows_cpu))

    with tempfile.TemporaryDirectory() as cache:
        os.environ["INTENT_TRACE_CACHE_DIR"] = cache
        ns: dict = {}
        exec(KERNEL_20, ns)
        k20 = ns["k20"]
        t0 = time.perf_counter()
        exe20 = intent.compile(k20, target="cpu")
        exe20(x[:8], y[:8], out_cpu[:8], 2.0)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        intent.compile(k20, target="cpu")(x[:8], y[:8], out_cpu[:8], 2.0)
        hit = time.perf_counter() - t0
        del os.environ["INTENT_TRACE_CACHE_DIR"]
        with tempfile.TemporaryDirectory() as pycache:
            disk = new_process_load(cache, bytecode_cache=pycache, rounds=rounds)
        disk_source = new_process_load(cache, bytecode_cache=None, rounds=rounds)

    chain_name = f"chain4_{n >> 20}M_f32"
    rows_name = f"rowsum_{side}x{side}_f32_to_f64"
    finish({
        "benchmark": "cpu_oracle",
        chain_name: {"numpy_ms": round(t_np * 1e3, 2), "cpu_ms": round(t_cpu * 1e3, 2),
                           "cpu_checked_ms": round(t_checked * 1e3, 2),
                           "speedup_vs_numpy": round(t_np / t_cpu, 2),
                           "checked_speedup_vs_numpy": round(t_np / t_checked, 2), "target_speedup": 2.0},
        rows_name: {"numpy_ms": round(t_rows_np * 1e3, 2), "cpu_ms": round(t_rows_cpu * 1e3, 2),
                                         "speedup_vs_numpy": round(t_rows_np / t_rows_cpu, 2), "target_speedup": 1.0},
        "cold_compile_20_op_s": round(cold, 3), "target_cold_compile_s": 1.0,
        "in_process_cache_hit_ms": round(hit * 1e3, 3), "target_cache_hit_ms": 10.0,
        "new_process_disk_cache": {k: round(v, 3) if isinstance(v, float) else v for k, v in disk.items()},
        "new_process_overhead_over_numba_ms": disk["overhead_ms"],
        "new_process_disk_cache_no_bytecode_cache": {k: round(v, 3) if isinstance(v, float) else v
                                                     for k, v in disk_source.items()},
        "new_process_overhead_over_numba_no_bytecode_cache_ms": disk_source["overhead_ms"],
        "target_overhead_ms": 50.0,
        "compile": {k: {f: round(v, 4) if isinstance(v, float) else v for f, v in r.items()}
                    for k, r in compiles.items()},
        "quick": args.quick,
    }, args)


if __name__ == "__main__":
    main()
