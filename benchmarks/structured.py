"""The CPU oracle's structured operations against NumPy, measured side by side in one run. Prints one JSON line.

Each entry is a function decorated with ``@entry`` that returns ``(name, measurements)``; add an entry
by writing one more such function (softmax, cumsum and flash attention are planned).

- matmul_1024_f32: ``I.matmul`` of two 1024x1024 f32 matrices with an f32 accumulator, against NumPy's
  BLAS (``np.matmul``); cpu packs the operands and calls BLAS gemm from the generated Numba code.
  Target: at least 0.8x NumPy's speed.
"""
from __future__ import annotations

import json
import time

import numpy as np

import intent_trace as intent
from intent_trace import I

ENTRIES: list = []


def entry(fn):
    ENTRIES.append(fn)
    return fn


def side_by_side(numpy_fn, cpu_fn, rounds: int = 4, calls: int = 5, pause: float = 0.3) -> tuple:
    """Best-of times (seconds) of two functions measured in alternating blocks of calls.

    Blocks, not single calls, alternate, with a pause between them: NumPy and Numba call different
    OpenBLAS builds whose idle worker threads spin for a while after each call, and on a small machine a
    spinning pool of one library slows the other down. The pause lets each pool go to sleep first.
    """
    best_np = best_cpu = float("inf")
    for _ in range(rounds):
        for fn, which in ((numpy_fn, 0), (cpu_fn, 1)):
            time.sleep(pause)
            fn()  # wakes the library's threads up
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                if which == 0:
                    best_np = min(best_np, dt)
                else:
                    best_cpu = min(best_cpu, dt)
    return best_np, best_cpu


def comparison(t_np: float, t_cpu: float, target: float) -> dict:
    return {"numpy_ms": round(t_np * 1e3, 3), "cpu_ms": round(t_cpu * 1e3, 3),
            "speed_vs_numpy": round(t_np / t_cpu, 3), "target_speed_vs_numpy": target}


# --- entries ----------------------------------------------------------------------------------------------------

@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)


@entry
def matmul_1024_f32():
    n = 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c_np = np.empty((n, n), np.float32)
    c_cpu = np.empty((n, n), np.float32)
    exe = intent.compile(matmul_f32, target="cpu")
    exe(a, b, c_cpu)
    np.matmul(a, b, out=c_np)
    # T5: |computed - exact| <= gamma_n * sum|t_i|; checked against a float64 product (itself far tighter).
    exact = a.astype(np.float64) @ b.astype(np.float64)
    mags = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    u = 2.0 ** -24
    bound = (n * u / (1 - n * u) + 2 * n * 2.0 ** -53) * mags
    assert np.all(np.abs(c_cpu - exact) <= bound)
    t_np, t_cpu = side_by_side(lambda: np.matmul(a, b, out=c_np), lambda: exe(a, b, c_cpu))
    return "matmul_1024_f32", {**comparison(t_np, t_cpu, 0.8), "gflops_cpu": round(2 * n ** 3 / t_cpu / 1e9, 1)}


def main() -> None:
    results = {"benchmark": "structured"}
    for fn in ENTRIES:
        name, measured = fn()
        results[name] = measured
    print(json.dumps(results))


if __name__ == "__main__":
    main()
