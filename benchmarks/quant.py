"""quantized_dot (q4_k x q8_k) as a matrix-vector product on the cpu oracle, against NumPy
dequantize-then-matvec, measured side by side in one run. Prints one JSON line.

The weight is a 4096x4096 f32 matrix quantized to q4_k once (with I.quantize on cpu), passed to the
kernel as the record's logical fields (records are not kernel parameters, spec §4) and reassembled
with I.record. Bandwidth is reported in GB/s of *ggml-packed* q4_K bytes (144 bytes per 256 weights),
the size a GGUF file stores; the logical fields the kernel reads are larger (one byte per 4-bit
quant).

``compile`` holds each kernel's cold compile and first call, then the in-process cache's
(intent_trace.bench.compile_times); ``--plot FILE.png`` draws the speed vs NumPy (benchmarks/plot.py).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.bench import compile_times
from plot import add_plot_argument, finish

M = K = 4096
B = K // 256


@intent.kernel
def quantize_rows(w: I.In[I.f32, ("M", K)], d: I.Out[I.f16, ("M", B)], dmin: I.Out[I.f16, ("M", B)],
                  scales: I.Out[I.u8, ("M", B, 8)], mins: I.Out[I.u8, ("M", B, 8)],
                  q: I.Out[I.u8, ("M", B, 256)]):
    r = I.quantize(w[:, :], format=I.quant.q4_k)
    d[:, :] = r.d
    dmin[:, :] = r.dmin
    scales[:, :, :] = r.scales
    mins[:, :, :] = r.mins
    q[:, :, :] = r.q


@intent.kernel
def q4k_matvec(d: I.In[I.f16, ("M", B)], dmin: I.In[I.f16, ("M", B)], scales: I.In[I.u8, ("M", B, 8)],
               mins: I.In[I.u8, ("M", B, 8)], q: I.In[I.u8, ("M", B, 256)], x: I.In[I.f32, (K,)],
               y: I.Out[I.f32, ("M",)]):
    w = I.record(d=d[:, :], dmin=dmin[:, :], scales=scales[:, :, :], mins=mins[:, :, :], q=q[:, :, :])
    xq = I.quantize(x[:], format=I.quant.q8_k)
    y[:] = I.quantized_dot(w, xq, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)


def numpy_dequantize_matvec(d, dmin, scales, mins, q, x):
    """Dequantize the q4_k weight to f32 (Q1's formula), then BLAS matvec."""
    dd = d.astype(np.float32)[:, :, None] * scales.astype(np.float32)  # (M, B, 8)
    mm = dmin.astype(np.float32)[:, :, None] * mins.astype(np.float32)
    w = dd[:, :, :, None] * q.reshape(M, B, 8, 32).astype(np.float32) - mm[:, :, :, None]
    return w.reshape(M, K) @ x


def best(fn, repeat=5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> None:
    args = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0])).parse_args(argv)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((M, K), dtype=np.float32)
    x = rng.standard_normal(K, dtype=np.float32)
    fields = [np.zeros((M, B), np.float16), np.zeros((M, B), np.float16), np.zeros((M, B, 8), np.uint8),
              np.zeros((M, B, 8), np.uint8), np.zeros((M, B, 256), np.uint8)]
    compiles = {}
    _, compiles["quantize_rows"] = compile_times(quantize_rows, "cpu", lambda e: e(w, *fields))
    y = np.zeros(M, np.float32)
    exe, compiles["q4k_matvec"] = compile_times(q4k_matvec, "cpu", lambda e: e(*fields, x, y))
    want = numpy_dequantize_matvec(*fields, x)
    # The dot of q8_k-quantized activations differs from the f32 matvec by the activation quantization.
    rel = float(np.max(np.abs(y - want)) / np.max(np.abs(want)))
    assert rel < 2e-2, rel
    t_cpu = best(lambda: exe(*fields, x, y))
    t_np = best(lambda: numpy_dequantize_matvec(*fields, x))
    packed = M * B * 144
    finish({
        "benchmark": "quant",
        "q4k_x_q8k_matvec_4096x4096": {
            "cpu_ms": round(t_cpu * 1e3, 2), "numpy_dequantize_matvec_ms": round(t_np * 1e3, 2),
            "cpu_gb_per_s_packed_weight": round(packed / t_cpu / 1e9, 2),
            "numpy_gb_per_s_packed_weight": round(packed / t_np / 1e9, 2),
            "speedup_vs_numpy": round(t_np / t_cpu, 2), "max_rel_diff_vs_f32_matvec": round(rel, 5)},
        "compile": compiles,
    }, args)


if __name__ == "__main__":
    main()
