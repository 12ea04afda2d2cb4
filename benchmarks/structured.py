"""The CPU oracle's structured operations against NumPy, measured side by side in one run. Prints one JSON line.

Each entry is a function decorated with ``@entry`` that returns ``(name, measurements)``; add an entry
by writing one more such function.

- matmul_1024_f32: ``I.matmul`` of two 1024x1024 f32 matrices with an f32 accumulator, against NumPy's
  BLAS (``np.matmul``); cpu packs the operands and calls BLAS gemm from the generated Numba code.
  Target: at least 0.8x NumPy's speed.
- softmax_4096x1024_f32: a row softmax (max, exp, sum, divide) against the same in NumPy.
- cumsum_16M_f32: ``I.cumsum`` (f32 accumulator) against ``np.cumsum``.
- flash_attention_1024x1024x64: examples/flash_attention.py against a NumPy softmax(QK^T)V.

Each entry's ``compile`` is its kernel's cold compile and first call, then the in-process cache's
(intent_trace.bench.compile_times); ``--plot FILE.png`` draws the speeds vs NumPy (benchmarks/plot.py).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.bench import compile_times
from plot import add_plot_argument, finish

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
    exe, compiled = compile_times(matmul_f32, "cpu", lambda e: e(a, b, c_cpu))
    np.matmul(a, b, out=c_np)
    # T5: |computed - exact| <= gamma_n * sum|t_i|; checked against a float64 product (itself far tighter).
    exact = a.astype(np.float64) @ b.astype(np.float64)
    mags = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    u = 2.0 ** -24
    bound = (n * u / (1 - n * u) + 2 * n * 2.0 ** -53) * mags
    assert np.all(np.abs(c_cpu - exact) <= bound)
    t_np, t_cpu = side_by_side(lambda: np.matmul(a, b, out=c_np), lambda: exe(a, b, c_cpu))
    return "matmul_1024_f32", {**comparison(t_np, t_cpu, 0.8), "gflops_cpu": round(2 * n ** 3 / t_cpu / 1e9, 1),
                               "compile": compiled}


@intent.kernel
def softmax_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    v = x[:, :]
    m = I.reduce.max(v, axis=1)
    e = I.exp(v - I.reshape(m, (v.shape[0], 1)))
    y[:, :] = e / I.reshape(I.reduce.sum(e, axis=1), (v.shape[0], 1))


def numpy_softmax(x, out):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.divide(e, e.sum(axis=1, keepdims=True), out=out)


@entry
def softmax_4096x1024_f32():
    x = np.random.default_rng(1).standard_normal((4096, 1024), dtype=np.float32)
    y_np, y_cpu = np.empty_like(x), np.empty_like(x)
    exe, compiled = compile_times(softmax_rows, "cpu", lambda e: e(x, y_cpu))
    numpy_softmax(x, y_np)
    assert np.allclose(y_cpu, y_np, rtol=1e-5, atol=1e-7)
    t_np, t_cpu = side_by_side(lambda: numpy_softmax(x, y_np), lambda: exe(x, y_cpu), rounds=3, pause=0.1)
    return "softmax_4096x1024_f32", {**comparison(t_np, t_cpu, None), "compile": compiled}


@intent.kernel
def cumsum_1d(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.cumsum(x[d], axis=0)


@entry
def cumsum_16M_f32():
    x = np.random.default_rng(2).standard_normal(16 * 1024 * 1024, dtype=np.float32)
    y_np, y_cpu = np.empty_like(x), np.empty_like(x)
    exe, compiled = compile_times(cumsum_1d, "cpu", lambda e: e(x, y_cpu))
    np.cumsum(x, out=y_np)
    assert np.array_equal(y_cpu, y_np)  # both sequential f32 prefix sums
    t_np, t_cpu = side_by_side(lambda: np.cumsum(x, out=y_np), lambda: exe(x, y_cpu), rounds=3, pause=0.1)
    return "cumsum_16M_f32", {**comparison(t_np, t_cpu, None), "compile": compiled}


@entry
def flash_attention_1024x1024x64():
    import importlib.util
    import math
    import pathlib

    path = pathlib.Path(__file__).parent.parent / "examples" / "flash_attention.py"
    spec = importlib.util.spec_from_file_location("flash_attention_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    L = S = 1024
    D = 64
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((L, D), (S, D), (S, D)))
    scale = 1.0 / math.sqrt(D)
    out = np.empty((L, D), np.float32)
    exe, compiled = compile_times(example.attention, "cpu", lambda e: e(q, k, v, out, scale))
    assert np.max(np.abs(out - example.reference(q, k, v, scale))) < 1e-4

    def numpy_attention():
        s = (q @ k.T) * np.float32(scale)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        return (p / p.sum(axis=1, keepdims=True)) @ v

    t_np, t_cpu = side_by_side(numpy_attention, lambda: exe(q, k, v, out, scale), rounds=3, pause=0.1)
    return "flash_attention_1024x1024x64", {**comparison(t_np, t_cpu, None), "compile": compiled}


def main(argv=None) -> None:
    args = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0])).parse_args(argv)
    results = {"benchmark": "structured"}
    for fn in ENTRIES:
        name, measured = fn()
        results[name] = measured
    finish(results, args)


if __name__ == "__main__":
    main()
