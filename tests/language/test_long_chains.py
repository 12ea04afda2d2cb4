"""Kernels of 10,000 ops written as unrolled Python loops trace, print, validate and run on generic
without RecursionError: every pass over KIR is iterative or bounded in depth (coordinate provenance
folds constant offsets and stops tracking expressions deeper than provenance.MAX_DEPTH).

(The cpu and TileLang code generators' side of long chains is theirs; these run on generic.)"""
import numpy as np

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import provenance
from intent_trace.graph.provenance import BinExpr, Const, Coord, IndexRelation
from intent_trace.graph.validate import validate

OPS = 10_000
MAX_DEPTH = getattr(provenance, "MAX_DEPTH", 64)


def _run_generic(kernel, *args):
    intent.compile(kernel, target="generic")(*args)


def _count(graph, name) -> int:
    return sum(1 for n in graph.walk() if n.op.name == name)


@intent.kernel
def float_chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    v = x[d]
    for _ in range(OPS // 2):
        v = (v + 1.0) - 0.5
    y[d] = v


def test_float_chain_of_ten_thousand_ops_traces_prints_validates_and_runs():
    g = float_chain.trace()
    assert _count(g, "add") + _count(g, "sub") == OPS
    text = str(g)
    assert text.count("\n") > OPS
    validate(g)
    x = np.array([0, 1, -3], np.float32)
    y = np.zeros(3, np.float32)
    _run_generic(float_chain, x, y)
    np.testing.assert_array_equal(y, x + np.float32(OPS // 4))  # every step is exact in f32


@intent.kernel
def index_chain(x: I.In[I.f32, ("N",)], y: I.Out[I.index, ("N",)]):
    d = I.domain(0, x.shape[0])
    i = I.indices(d)
    for _ in range(OPS // 2):
        i = i * 3 + 1  # affine, not foldable: the expression would grow by two ops per step
    y[d] = i


def test_index_chain_of_ten_thousand_ops_traces_prints_validates_and_runs():
    g = index_chain.trace()
    validate(g)
    text = str(g)
    assert text.count("\n") > OPS
    assert max(len(line) for line in text.splitlines()) < 40 * MAX_DEPTH  # no line prints the whole chain
    y = np.zeros(4, np.int64)
    _run_generic(index_chain, np.zeros(4, np.float32), y)
    ref = np.arange(4, dtype=np.int64)
    with np.errstate(over="ignore"):
        for _ in range(OPS // 2):
            ref = ref * np.int64(3) + np.int64(1)  # wraps modulo 2^64 (T2)
    np.testing.assert_array_equal(y, ref)


def test_index_chain_keeps_provenance_while_shallow_and_folds_offsets():
    g = index_chain.trace()
    rels = [n.outputs[0].provenance for n in g.walk() if n.op.name in ("mul", "add")]
    assert all(isinstance(r, IndexRelation) for r in rels[:MAX_DEPTH // 2])
    assert all(r is None for r in rels[MAX_DEPTH + 2:])

    @intent.kernel
    def offsets(x: I.In[I.f32, ("N",)], y: I.Out[I.index, ("N",)]):
        d = I.domain(0, x.shape[0])
        i = I.indices(d)
        for _ in range(OPS // 2):
            i = (i + 2) - 1
        y[d] = i

    g = offsets.trace()
    last = [n for n in g.walk() if n.op.name == "sub"][-1].outputs[0].provenance
    assert last.coord == BinExpr("+", Coord(), Const(OPS // 2))
    y = np.zeros(3, np.int64)
    _run_generic(offsets, np.zeros(3, np.float32), y)
    np.testing.assert_array_equal(y, np.arange(3) + OPS // 2)


@intent.kernel
def subregion_chain(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    for _ in range(OPS // 2):
        d = d[1:]
    y[d] = x[d] * 2.0


def test_subregion_chain_traces_prints_validates_and_runs():
    g = subregion_chain.trace()
    assert _count(g, "subregion") == OPS // 2
    validate(g)
    str(g)
    n = OPS // 2 + 3
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, -1, np.float32)
    _run_generic(subregion_chain, x, y)
    np.testing.assert_array_equal(y[-3:], x[-3:] * 2)
    np.testing.assert_array_equal(y[:-3], -1)
