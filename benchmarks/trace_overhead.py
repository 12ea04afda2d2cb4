"""Tracing cost: µs per traced op for a 1,000-op pointwise chain, trace+print of a 100-op kernel,
and linearity of tracing time in the op count. Prints one JSON line.

When jax is importable, the same chain is traced with jax.make_jaxpr on the same machine and the
ratio is reported (no jax -> the field is null).

Nothing is compiled here (tracing only), so there is no compile record. ``--plot FILE.png`` draws tracing
against its 5 µs/op target and against jax.make_jaxpr (benchmarks/plot.py).
"""
from __future__ import annotations

import argparse
import gc
import time

import intent_trace as intent
from intent_trace import I
from plot import add_plot_argument, finish


def chain_kernel(n_ops: int):
    @intent.kernel
    def chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        v = x[d]
        for k in range(n_ops - 1):  # n_ops - 1 arithmetic ops + the read = n_ops pointwise ops
            v = v * 1.0001 if k % 3 == 0 else (v + 0.5 if k % 3 == 1 else I.maximum(v, v))
        y[d] = v
    return chain


def best_of(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def trace_seconds(n_ops: int) -> tuple[float, int]:
    k = chain_kernel(n_ops)

    def once():
        k._traces.clear()  # measure tracing, not the trace cache
        k.trace()

    t = best_of(once)
    nodes = sum(1 for _ in k.trace().walk())
    return t, nodes


def jax_us_per_op(n_ops: int):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def f(v):
        for k in range(n_ops - 1):
            v = v * 1.0001 if k % 3 == 0 else (v + 0.5 if k % 3 == 1 else jnp.maximum(v, v))
        return v

    x = jnp.zeros(16, jnp.float32)
    t = best_of(lambda: jax.make_jaxpr(f)(x), repeat=3)
    return t / n_ops * 1e6


def main(argv=None) -> None:
    args = add_plot_argument(argparse.ArgumentParser(description=__doc__.splitlines()[0])).parse_args(argv)
    t1000, nodes1000 = trace_seconds(1000)
    us_per_op = t1000 / nodes1000 * 1e6
    k100 = chain_kernel(100)

    def trace_and_print():
        k100._traces.clear()
        str(k100.trace())

    t100_print = best_of(trace_and_print)
    scaling = {}
    for n in (250, 500, 1000, 2000, 4000):
        t, nodes = trace_seconds(n)
        scaling[n] = round(t / nodes * 1e6, 3)
    # Linear growth: µs per op stays flat; report the ratio of the largest to the smallest.
    flatness = max(scaling.values()) / min(scaling.values())
    jax_us = jax_us_per_op(1000)
    finish({
        "benchmark": "trace_overhead",
        "us_per_traced_op_1000_chain": round(us_per_op, 3),
        "target_us_per_op": 5.0,
        "trace_and_print_100_op_ms": round(t100_print * 1e3, 3),
        "us_per_op_by_op_count": scaling,
        "linearity_max_over_min_us_per_op": round(flatness, 3),
        "jax_make_jaxpr_us_per_op": None if jax_us is None else round(jax_us, 3),
        "jax_over_intent_ratio": None if jax_us is None else round(jax_us / us_per_op, 2),
        # the same two figures as ratios (higher is better), for --plot
        "trace_1000_chain_vs_target": {"ratio": round(5.0 / us_per_op, 3), "reference": "the 5 us/op target",
                                       "target_ratio": 1.0},
        "trace_1000_chain_vs_jax": {"ratio": None if jax_us is None else round(jax_us / us_per_op, 2),
                                    "reference": "jax.make_jaxpr", "target_ratio": None},
    }, args)


if __name__ == "__main__":
    main()
