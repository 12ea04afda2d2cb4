"""The CPU oracle on the row kernels users write, against NumPy and PyTorch's CPU kernels in one run (issue 19).

Prints one JSON line: for each case and each thread count (``--threads``, default 1 and 2) the times of ours
(cpu target, checked and ``checks=False``), NumPy and torch, and the ratios ``vs_numpy``/``vs_torch`` = their
time / ours (above 1: we are faster). Each thread count runs in its own process whose environment limits every
thread pool before import (:data:`THREAD_ENV`: Numba's, torch's and both OpenBLAS copies'; the JSON's
``thread_limits`` reads them back), and its calls are taken in interleaved rounds (:func:`interleaved`): the JSON
gives the median and minimum of wall and process CPU time, and ``ratio_statistic`` says which the ratios use.
Every implementation's result is first checked against a float64 NumPy reference within a
T5-style bound (a sum of K rounded terms is off by at most about K units of its accumulator's rounding, plus
the output's own rounding), so a fast wrong answer fails the run instead of being timed.

Cases (full size; ``--quick`` runs small shapes, still above the parallel threshold, and 3 rounds):
softmax in the whole-tensor spelling (``benchmarks/zoo_kernels.py``) and the ``for r in I.parallel(rows)``
spelling (``examples/row_softmax.py``), layer norm, RMSNorm, a row sum (4096x1024 f32 each); softmax and layer
norm over the same rows as a batch of 4 in the ``for b in I.parallel(B)`` form (a row group in each iteration:
``oracle/numba/rows.py``); f32 and f16 matmul +
leaky-ReLU 1024^3 (f32 accumulation); causal attention B8 L1024 D64 f32. Also the first parallel-build
compile of ``attention_f16`` (``examples/flash_attention.py``) in fresh processes with fresh caches
(:func:`attention_f16_parallel_compile`) and each case's compile record.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.bench import compile_times

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from plot import add_plot_argument, finish  # noqa: E402
from row_softmax import softmax_rows as softmax_parallel  # noqa: E402
from zoo_kernels import REFERENCES, layer_norm, rms_norm_f16, rows, softmax_whole  # noqa: E402

NEG_INF = float("-inf")
LEAK = 0.01


@intent.kernel
def rms_norm(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M", "N")]):
    mean_square = I.reduce.sum(x[:, :] * x[:, :], axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = x[:, :] * rows(I.rsqrt(mean_square + 1e-6), x) * w[:]


@intent.kernel
def row_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


@intent.kernel
def matmul_leaky_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    acc = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)
    c[:, :] = I.select(acc > 0.0, acc, acc * LEAK)


@intent.kernel
def matmul_leaky_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    acc = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)
    c[:, :] = I.cast(I.select(acc > 0.0, acc, acc * LEAK), I.f16)


@intent.kernel
def causal_attention(q: I.In[I.f32, ("B", "L", "D")], k: I.In[I.f32, ("B", "L", "D")],
                     v: I.In[I.f32, ("B", "L", "D")], out: I.Out[I.f32, ("B", "L", "D")], scale: I.f32):
    for b in I.parallel(I.domain(0, q.shape[0])):
        s = I.matmul(q[b, :, :], k[b, :, :], transpose_rhs=True, acc_dtype=I.f32) * scale
        n = s.shape[0]
        pos = I.indices(I.domain(0, n))
        causal = I.reshape(pos, (n, 1)) >= I.reshape(pos, (1, n))
        masked = I.select(causal, s, I.full(s.shape, NEG_INF, I.f32))
        p = I.exp(masked - rows(I.reduce.max(masked, axis=1), masked))
        p = p / rows(I.reduce.sum(p, axis=1), p)
        out[b, :, :] = I.matmul(p, v[b, :, :], acc_dtype=I.f32)


@intent.kernel
def batched_softmax(x: I.In[I.f32, ("B", "L", "N")], y: I.Out[I.f32, ("B", "L", "N")]):
    """A batch of row softmaxes in the ``I.parallel`` form over the batch (its rows a row group inside the loop)."""
    for b in I.parallel(I.domain(0, x.shape[0])):
        v = x[b, :, :]
        e = I.exp(v - rows(I.reduce.max(v, axis=1), v))
        y[b, :, :] = e / rows(I.reduce.sum(e, axis=1), e)


@intent.kernel
def batched_layer_norm(x: I.In[I.f32, ("B", "L", "N")], y: I.Out[I.f32, ("B", "L", "N")]):
    """A batch of layer norms (no affine part) in the ``I.parallel`` form over the batch."""
    for b in I.parallel(I.domain(0, x.shape[0])):
        v = x[b, :, :]
        n = I.cast(v.shape[1], I.f32)
        c = v - rows(I.reduce.sum(v, axis=1) / n, v)
        y[b, :, :] = c / rows(I.sqrt(I.reduce.sum(c * c, axis=1) / n + 1e-5), c)


# ---- float64 references --------------------------------------------------------------------------------------

ref_softmax, ref_layer_norm, ref_rms_norm = REFERENCES[softmax_whole], REFERENCES[layer_norm], REFERENCES[rms_norm_f16]


def ref_matmul_leaky(a, b):
    c = a.astype(np.float64) @ b.astype(np.float64)
    return np.where(c > 0, c, c * LEAK)


def ref_batched_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_batched_layer_norm(x):
    x = x.astype(np.float64)
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)


def ref_causal_attention(q, k, v, scale):
    s = np.einsum("bld,bsd->bls", q.astype(np.float64), k.astype(np.float64)) * scale
    n = s.shape[1]
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    return np.einsum("bls,bsd->bld", p / p.sum(axis=2, keepdims=True), v.astype(np.float64))


# ---- NumPy and torch spellings --------------------------------------------------------------------------------

def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def np_layer_norm(x, g, b):
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + np.float32(1e-5)) * g + b


def np_rms_norm(x, w):
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + np.float32(1e-6)) * w


def np_batched_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def np_batched_layer_norm(x):
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + np.float32(1e-5))


def np_matmul_leaky(a, b):
    c = a @ b
    return np.where(c > 0, c, c * np.float32(LEAK))


def np_causal_attention(q, k, v, scale):
    s = (q @ k.transpose(0, 2, 1)) * np.float32(scale)
    n = s.shape[1]
    s[:, ~np.tril(np.ones((n, n), bool))] = -np.inf
    p = np.exp(s - s.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    return p @ v


def torch_cases():
    import torch
    F = torch.nn.functional
    return torch, {
        "softmax": lambda x: torch.softmax(x, dim=1),
        "layer_norm": lambda x, g, b: F.layer_norm(x, (x.shape[1],), g, b, eps=1e-5),
        "rms_norm": lambda x, w: F.rms_norm(x, (x.shape[1],), w, eps=1e-6),
        "row_sum": lambda x: torch.sum(x, dim=1),
        "softmax_last": lambda x: torch.softmax(x, dim=-1),
        "layer_norm_plain": lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5),
        "matmul_leaky": lambda a, b: F.leaky_relu(a @ b, LEAK),
        "causal_attention": lambda q, k, v, scale: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                  scale=scale),
    }


# ---- the run -------------------------------------------------------------------------------------------------

# Thread limits, set in each thread count's own process before anything imports a thread pool: Numba's (its
# OpenMP layer reads OMP_NUM_THREADS too), torch's (OpenMP and MKL) and the two OpenBLAS copies (NumPy's, and
# SciPy's, which Numba's ``np.dot`` calls). ``numba.set_num_threads`` and ``torch.set_num_threads`` alone leave
# the BLAS pools at the core count: a "one thread" run of a matmul then ran BLAS on two (process time = 2x wall).
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")

RATIO_STATISTIC = ("the minimum over interleaved rounds: of process CPU time with 1 thread (time others held the "
                   "core is not counted), of wall time with more (CPU time would add up the threads)")


def interleaved(fns: dict, rounds: int, budget_s: float, threads: int, settle_s: float) -> dict:
    """{name: {wall/process median and minimum, ms}} of calls of ``fns`` (name -> callable) taken round by round:
    every round times one call of each function, in an order shuffled per round (seeded), so a period in which
    others held the shared cores slows every implementation alike instead of one. ``rounds`` rounds, fewer (at
    least 5) where they would take more than ``budget_s``. ``ms`` is the statistic the ratios use
    (:data:`RATIO_STATISTIC`).

    Each timed call follows an untimed call of the same function (with more than one thread, untimed calls for
    ``settle_s``), so each library is timed as a program calling it in a loop runs it, its own data and thread
    pool warm: in a fixed rotation one implementation always came right after NumPy's, whose temporaries had
    pushed the inputs out of the cache (ours then read 10% slower than the same code timed after itself), and an
    OpenBLAS pool spins about 0.1 s after a call before it sleeps (OpenMP pools spin too), so right after another
    library's call its threads would still hold the cores (a NumPy matmul then ran 28 ms instead of 0.6)."""
    import random

    order = random.Random(0)
    names = list(fns)
    for fn in fns.values():
        fn()  # warm: caches, thread pools, lazily compiled code
    walls: dict = {n: [] for n in names}
    cpus: dict = {n: [] for n in names}
    spent, r = 0.0, 0
    while r < rounds:
        start = time.perf_counter()
        for name in order.sample(names, len(names)):
            settled = time.perf_counter() + (settle_s if threads > 1 else 0.0)
            fns[name]()
            while time.perf_counter() < settled:
                fns[name]()
            t0, c0 = time.perf_counter(), time.process_time()
            fns[name]()
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
        spent += time.perf_counter() - start
        r += 1
        if r == 1:
            rounds = max(5, min(rounds, int(budget_s / max(spent, 1e-9))))
    stats = {}
    for n in names:
        s = {"wall_ms_median": statistics.median(walls[n]) * 1e3, "wall_ms_min": min(walls[n]) * 1e3,
             "process_ms_median": statistics.median(cpus[n]) * 1e3, "process_ms_min": min(cpus[n]) * 1e3}
        s["ms"] = s["process_ms_min"] if threads == 1 else s["wall_ms_min"]
        stats[n] = {k: round(v, 4) for k, v in s.items()}
        stats[n]["rounds"] = r
    return stats


def _openblas_threads() -> dict:
    """{library: its OpenBLAS thread count} for every OpenBLAS copy this process has loaded (the evidence that
    the limit took): NumPy's ``libscipy_openblas64_`` and SciPy's ``libscipy_openblas``."""
    import ctypes

    found = {}
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line and line.rstrip().endswith(".so")})
    except OSError:
        return found
    for path in paths:
        lib = ctypes.CDLL(path)
        for symbol in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                       "openblas_get_num_threads"):
            if hasattr(lib, symbol):
                found[os.path.basename(path)] = getattr(lib, symbol)()
                break
    return found


def check(name: str, who: str, got, want, bound: float) -> float:
    """The normwise error max|got - want| / max|want|, which must stay within ``bound``."""
    got = np.asarray(got, dtype=np.float64)
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-300))
    if not err <= bound:
        raise SystemExit(f"{name}: {who} is off by {err:.3g} (normwise), more than the bound {bound:.3g}")
    return err


def cases(quick: bool, rng) -> list:
    """(name, kernel, inputs, output shape and dtype, reference, numpy fn, torch fn key, bound, input dtypes)."""
    m, n = (256, 256) if quick else (4096, 1024)
    side = 256 if quick else 1024
    B, L, D = (4, 256, 32) if quick else (8, 1024, 64)
    eps32, eps16 = 2.0**-24, 2.0**-11
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    xb = x.reshape(4, m // 4, n)  # the same rows as a batch of 4 (the I.parallel form over the batch)
    g = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a32 = rng.standard_normal((side, side)).astype(np.float32)
    b32 = rng.standard_normal((side, side)).astype(np.float32)
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    q, k, v = (rng.standard_normal((B, L, D)).astype(np.float32) for _ in range(3))
    scale = 1 / math.sqrt(D)
    row_bound = (n + 32) * eps32  # a sum of n terms, exp/rsqrt within a few ulp, the final rounding
    # a row sum: T5's n units of rounding of the sum of magnitudes, normwise against the largest row sum
    sum_bound = (n + 1) * eps32 * float(np.max(np.abs(x).sum(axis=1, dtype=np.float64))) / float(
        np.max(np.abs(x.astype(np.float64).sum(axis=1))))
    mm_bound = 4 * math.sqrt(side) * side * eps32  # normwise: K terms of magnitude ~1, products ~sqrt(K)
    return [
        ("softmax_whole", softmax_whole, (x,), ((m, n), np.float32), ref_softmax(x), np_softmax, "softmax",
         row_bound),
        ("softmax_parallel", softmax_parallel, (x,), ((m, n), np.float32), ref_softmax(x), np_softmax, "softmax",
         row_bound),
        ("layer_norm", layer_norm, (x, g, b), ((m, n), np.float32), ref_layer_norm(x, g, b), np_layer_norm,
         "layer_norm", row_bound),
        ("rms_norm", rms_norm, (x, g), ((m, n), np.float32), ref_rms_norm(x, g), np_rms_norm, "rms_norm",
         row_bound),
        ("softmax_batched_parallel", batched_softmax, (xb,), (xb.shape, np.float32), ref_batched_softmax(xb),
         np_batched_softmax, "softmax_last", row_bound),
        ("layer_norm_batched_parallel", batched_layer_norm, (xb,), (xb.shape, np.float32),
         ref_batched_layer_norm(xb), np_batched_layer_norm, "layer_norm_plain", row_bound),
        ("row_sum", row_sum, (x,), ((m,), np.float32), x.astype(np.float64).sum(axis=1),
         lambda x: x.sum(axis=1), "row_sum", sum_bound),
        (f"matmul_leaky_relu_f32_{side}", matmul_leaky_f32, (a32, b32), ((side, side), np.float32),
         ref_matmul_leaky(a32, b32), np_matmul_leaky, "matmul_leaky", mm_bound),
        (f"matmul_leaky_relu_f16_{side}", matmul_leaky_f16, (a16, b16), ((side, side), np.float16),
         ref_matmul_leaky(a16, b16), None, "matmul_leaky", eps16 + mm_bound),
        (f"causal_attention_B{B}_L{L}_D{D}", causal_attention, (q, k, v, scale), ((B, L, D), np.float32),
         ref_causal_attention(q, k, v, scale), np_causal_attention, "causal_attention", (L + D + 64) * eps32),
    ]


# The first parallel-build call of attention_f16, in a fresh process (what a user's first call costs: Numba's own
# start-up included). Printed as JSON: the process CPU seconds of the call, the generated module's lines.
_FIRST_CALL = """
import json, math, os, sys, time
import numpy as np
sys.path.insert(0, {examples!r})
import intent_trace as intent
from flash_attention import attention_f16
from intent_trace.oracle.numba import target as cpu_target
rng = np.random.default_rng(1)
B, L, S, D = 7, 16, 300, 16
q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((B, L, D), (B, S, D), (B, S, D)))
out = np.zeros((B, L, D), np.float16)
assert q.size + k.size + v.size + out.size >= cpu_target.PARALLEL_THRESHOLD
exe = intent.compile(attention_f16, target="cpu")
source = exe.source
t0, c0 = time.perf_counter(), time.process_time()
exe(q, k, v, out, 1 / math.sqrt(D))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
assert exe.module.kernel_parallel.signatures, "the call did not run the parallel build"
print(json.dumps({{"cpu_s": cpu, "wall_s": wall, "source_lines": source.count(chr(10))}}))
"""


def attention_f16_parallel_compile(quick: bool) -> dict:
    """The first call of ``attention_f16`` above the parallel threshold, each in a fresh process with a fresh
    intent_trace cache (it compiles the parallel build): ``cold`` with a fresh Numba cache as well (the runtime
    helpers compiled too: a first kernel on a new machine), ``numba_warm`` with the runtime helpers in Numba's
    cache already (any later kernel). Median of 3 runs each (1 with ``--quick``) of process CPU seconds:
    compiling is single-threaded, so on a machine shared with other work the process's CPU time is what the
    compile costs, where the wall clock also counts the time others had the cores."""
    import json
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = _FIRST_CALL.format(examples=os.path.join(root, "examples"))
    # the package this process imported, first on the child's path
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(intent.__file__)))
    runs = 1 if quick else 3
    result = {"target_s": 5.0}
    for label, fresh_numba in (("cold", True), ("numba_warm", False)):
        rows = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, INTENT_TRACE_CACHE_DIR=os.path.join(cache, "intent_trace"),
                           PYTHONPATH=os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH")))))
                if fresh_numba:
                    env["NUMBA_CACHE_DIR"] = os.path.join(cache, "numba")
                done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      timeout=900, check=True)
                rows.append(json.loads(done.stdout.splitlines()[-1]))
        result[f"first_parallel_call_cpu_s_{label}"] = round(statistics.median(r["cpu_s"] for r in rows), 3)
        result[f"first_parallel_call_wall_s_{label}"] = round(statistics.median(r["wall_s"] for r in rows), 3)
        result["source_lines"] = rows[0]["source_lines"]
    return result


def measure_threads(args, threads: int) -> dict:
    """Every case at one thread count (this process's: its environment holds :data:`THREAD_ENV`'s limits):
    {case: {"bound", "errors", "compile", "threads_N": timings}, "limits": the thread counts in effect}."""
    import numba

    torch, torch_fns = torch_cases()
    numba.set_num_threads(threads)
    torch.set_num_threads(threads)
    rounds = args.rounds or (3 if args.quick else 31)
    out: dict = {}
    rng = np.random.default_rng(0)
    for name, kernel, inputs, (out_shape, out_dtype), want, np_fn, torch_key, bound in cases(args.quick, rng):
        if args.only and args.only not in name:
            continue
        ours_out = np.full(out_shape, np.nan, out_dtype)
        arrays = [a for a in inputs if isinstance(a, np.ndarray)]
        scalars = [a for a in inputs if not isinstance(a, np.ndarray)]

        def call(e):
            e(*arrays, ours_out, *scalars)

        exe, compiled = compile_times(kernel, "cpu", call)
        errors = {"ours": check(name, "cpu", ours_out, want, bound)}
        fast = intent.compile(kernel, target="cpu", checks=False)
        call(fast)
        errors["ours_unchecked"] = check(name, "cpu (checks=False)", ours_out, want, bound)
        t_inputs = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in inputs]
        errors["torch"] = check(name, "torch", torch_fns[torch_key](*t_inputs).numpy(), want, bound)
        fns = {"ours": lambda: call(exe), "ours_unchecked": lambda: call(fast),
               "torch": lambda: torch_fns[torch_key](*t_inputs)}
        if np_fn is not None:
            errors["numpy"] = check(name, "numpy", np_fn(*inputs), want, bound)
            fns["numpy"] = lambda: np_fn(*inputs)
        stats = interleaved(fns, rounds, args.budget_s, threads, args.settle_s)
        entry = {f"{who}_ms": s["ms"] for who, s in stats.items()}
        entry["vs_torch"] = round(stats["torch"]["ms"] / stats["ours"]["ms"], 2)
        entry["vs_numpy"] = round(stats["numpy"]["ms"] / stats["ours"]["ms"], 2) if np_fn is not None else None
        entry["stats"] = stats
        out[name] = {"bound": bound, "errors": errors, "compile": compiled, f"threads_{threads}": entry}
        print(name, threads, {k: v for k, v in entry.items() if k != "stats"}, file=sys.stderr, flush=True)
    out["limits"] = {"numba": numba.get_num_threads(), "torch": torch.get_num_threads(),
                     "openblas": _openblas_threads(), "env": {k: os.environ.get(k) for k in THREAD_ENV}}
    return out


def run_threads(argv: list, threads: int) -> dict:
    """:func:`measure_threads` in a fresh process whose environment limits every thread pool to ``threads``."""
    import json
    import subprocess

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(intent.__file__)))
    env = dict(os.environ, **{k: str(threads) for k in THREAD_ENV},
               PYTHONPATH=os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH")))))
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--worker", str(threads)], env=env,
                          stdout=subprocess.PIPE, text=True, timeout=3600, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main(argv=None) -> None:
    import json

    parser = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--quick", action="store_true", help="small shapes and 3 rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per case (default 31; 3 with --quick)")
    parser.add_argument("--budget-s", type=float, default=20.0,
                        help="at most about this many seconds of rounds per case (at least 5 rounds)")
    parser.add_argument("--settle-s", type=float, default=0.15,
                        help="with several threads, seconds of untimed calls of the same function before each "
                             "timed one (one untimed call always)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated (default 1,2)")
    parser.add_argument("--only", help="run only the cases whose name contains this")
    parser.add_argument("--no-compile", action="store_true", help="skip the attention_f16 compile measurement")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one thread count, in its own process
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(measure_threads(args, args.worker)))
        return
    threads = [int(t) for t in args.threads.split(",")]
    passed = ["--budget-s", str(args.budget_s), "--settle-s", str(args.settle_s)] + (["--quick"] if args.quick else []) + \
        (["--rounds", str(args.rounds)] if args.rounds else []) + (["--only", args.only] if args.only else [])
    result: dict = {"benchmark": "cpu_rows", "quick": args.quick, "threads": threads,
                    "rounds": args.rounds or (3 if args.quick else 31), "budget_s": args.budget_s, "settle_s": args.settle_s,
                    "ratio": "their time / ours (above 1: we are faster)", "ratio_statistic": RATIO_STATISTIC,
                    "thread_limits": {}}
    if not args.no_compile:
        result["attention_f16_parallel_build"] = attention_f16_parallel_compile(args.quick)
    compiles = {}
    for t in threads:
        measured = run_threads(passed, t)
        result["thread_limits"][f"threads_{t}"] = measured.pop("limits")
        for name, row in measured.items():
            compiles.setdefault(name, row.pop("compile"))
            entry = result.setdefault(name, {"bound": row["bound"], "errors": row["errors"]})
            entry[f"threads_{t}"] = row[f"threads_{t}"]
    for name in compiles:
        row = result[name]
        row["ratio"] = row[f"threads_{threads[0]}"]["vs_torch"]
        row["reference"] = "torch CPU"
        row["target_ratio"] = 1.0
    whole, par = result.get("softmax_whole"), result.get("softmax_parallel")
    if whole and par:
        t = threads[0]
        result["softmax_spellings_ratio"] = round(whole[f"threads_{t}"]["ours_ms"] / par[f"threads_{t}"]["ours_ms"], 2)
    result["compile"] = {k: {f: round(v, 4) if isinstance(v, float) else v for f, v in r.items()}
                         for k, r in compiles.items()}
    finish(result, args)


if __name__ == "__main__":
    main()
