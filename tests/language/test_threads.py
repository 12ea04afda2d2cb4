"""Tracing, printing and compiling from several threads at once: each thread has its own trace state,
so concurrent traces give the graphs a lone trace gives (compared as printed KIR), the caches hand out
one graph and one executable per key, and results match a NumPy reference."""
import sys
import threading

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.proxies import context

OPS = 3000
THREADS = 4


def _chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], n: I.Constexpr[int] = OPS):
    """``n`` pointwise ops, unrolled by Python: y = x + n * 0.5 (each 0.5 step is exact in f32)."""
    d = I.domain(0, x.shape[0])
    v = x[d]
    for _ in range(n // 2):
        v = (v + 1.0) - 0.5
    y[d] = v


@intent.fn
def _twice(v):
    return v * 2.0


def _helpers(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    v = x[d]
    for _ in range(200):
        v = _twice(v) * 0.5
    y[d] = I.reduce.sum(v, axis=0) + v


def _in_threads(fn, count=THREADS):
    """Run ``fn(i)`` in ``count`` threads started together (switching often); their results, or the first error."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def work(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as e:  # reported in the test's thread
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("fn", [_chain, _helpers], ids=["chain", "helpers"])
def test_threads_tracing_distinct_kernels_give_the_lone_trace_graph(fn):
    expected = str(intent.kernel(fn).trace())
    kernels = [intent.kernel(fn) for _ in range(THREADS)]
    printed = _in_threads(lambda i: str(kernels[i].trace()))
    assert printed == [expected] * THREADS


def test_threads_printing_one_graph_give_the_same_text():
    """The printer names values and derived extents per print: concurrent prints do not mix their names."""
    graph = intent.kernel(_helpers).trace()
    expected = str(graph)
    assert _in_threads(lambda i: [str(graph) for _ in range(3)]) == [[expected] * 3] * THREADS


def test_threads_tracing_one_kernel_share_one_graph():
    k = intent.kernel(_chain)
    graphs = _in_threads(lambda i: k.trace())
    assert all(g is graphs[0] for g in graphs)


@pytest.mark.parametrize("target", ["generic", "cpu"])
def test_threads_compiling_and_calling_one_kernel(target):
    k = intent.kernel(_chain)
    x = np.arange(5, dtype=np.float32)

    def work(i):
        y = np.zeros(5, np.float32)
        k(x, y, target=target, n=100)
        return y

    for y in _in_threads(work):
        np.testing.assert_array_equal(y, x + np.float32(25.0))
    assert len({id(e) for e in k._compiled.values()}) == 1


def test_trace_state_is_per_thread():
    """A thread started while tracing does not see the trace (its I.* calls are outside any kernel)."""
    seen = []

    def probe():
        seen.append(context.tracing())

    def kernel_fn(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        t = threading.Thread(target=probe)
        t.start()
        t.join()
        seen.append(context.tracing())
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    intent.kernel(kernel_fn).trace()
    assert seen == [False, True]


@pytest.mark.parametrize("target", ["generic", "cpu"])
def test_threads_compiling_distinct_kernels(target):
    kernels = [intent.kernel(_chain) for _ in range(THREADS)]
    x = np.arange(5, dtype=np.float32)

    def work(i):
        exe = intent.compile(kernels[i], target=target, n=60)
        y = np.zeros(5, np.float32)
        exe(x, y)
        return str(exe.graph), y

    results = _in_threads(work)
    assert {text for text, _ in results} == {str(intent.kernel(_chain).trace(n=60))}
    for _, y in results:
        np.testing.assert_array_equal(y, x + np.float32(15.0))


def test_asyncio_tasks_trace_on_their_own_and_a_coroutine_run_while_tracing_sees_the_trace():
    """Trace state is a context variable: each asyncio task runs in a copy of its creator's context, so a
    coroutine run from inside a kernel (its helpers) records into that kernel's trace, and tasks started
    outside any trace trace their own kernels."""
    import asyncio

    async def scaled(v):
        return v * 2.0

    def kernel_fn(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = asyncio.run(scaled(x[d]))

    k = intent.kernel(kernel_fn)
    assert [n.op.name for n in k.trace().walk()][-2:] == ["mul", "write"]

    async def trace_both():
        kernels = [intent.kernel(_chain) for _ in range(2)]
        return await asyncio.gather(*(asyncio.to_thread(lambda k=k: str(k.trace(n=50))) for k in kernels))

    texts = asyncio.run(trace_both())
    assert texts == [str(intent.kernel(_chain).trace(n=50))] * 2
    assert not context.tracing()
