"""Language §1: tuple and record components keep their source identity through nested selection.

``r.pair[1]`` of ``I.record(idx=ix, pair=(ix, ix))`` must carry the relation ``ix`` carries, as ``r.idx``
does; so must every path through nested tuples and records, directly and through a helper's result. The
reference is the relation of the packed value itself (read from the trace before packing)."""
from __future__ import annotations

import numpy as np

import intent_trace as intent
from intent_trace import I


def _trace_with(build):
    """Trace a kernel whose body calls ``build(ix, shifted)`` and return (expected, got) relations."""
    got = {}

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        sub = d[1:3]
        ix = I.indices(sub)
        shifted = ix + 1
        got["ix"], got["shifted"] = ix._var.provenance, shifted._var.provenance
        got["paths"] = {name: v._var.provenance for name, v in build(ix, shifted).items()}
        y[d] = x[d]

    k.trace()
    assert got["ix"] is not None and got["shifted"] is not None and got["ix"] != got["shifted"]
    return got


def test_record_with_a_tuple_field_keeps_both_paths():
    def build(ix, shifted):
        r = I.record(idx=ix, pair=(ix, shifted))
        return {"idx": r.idx, "pair0": r.pair[0], "pair1": r.pair[1]}

    got = _trace_with(build)
    assert got["paths"] == {"idx": got["ix"], "pair0": got["ix"], "pair1": got["shifted"]}


def test_deep_nesting_of_tuples_and_records():
    def build(ix, shifted):
        inner = I.record(a=shifted, b=(ix, (shifted, ix)))
        outer = (ix, I.record(inner=inner, t=((shifted,),)))
        a, rec = outer
        return {"a": a, "inner.a": rec.inner.a, "inner.b0": rec.inner.b[0], "inner.b1.0": rec.inner.b[1][0],
                "inner.b1.1": rec.inner.b[1][1], "t00": rec.t[0][0]}

    got = _trace_with(build)
    ix, sh = got["ix"], got["shifted"]
    assert got["paths"] == {"a": ix, "inner.a": sh, "inner.b0": ix, "inner.b1.0": sh, "inner.b1.1": ix,
                            "t00": sh}


def test_nested_selection_through_a_helper_result():
    @intent.fn
    def pack(ix, shifted):
        return I.record(idx=ix, pair=(ix, shifted)), (shifted, (ix,))

    def build(ix, shifted):
        r, t = pack(ix, shifted)
        return {"pair1": r.pair[1], "pair0": r.pair[0], "t10": t[1][0], "t0": t[0]}

    got = _trace_with(build)
    ix, sh = got["ix"], got["shifted"]
    assert got["paths"] == {"pair1": sh, "pair0": ix, "t10": ix, "t0": sh}


def test_a_component_without_provenance_stays_without(run):
    # The nested component is data (x's values), not a coordinate: no relation appears on selection.
    got = {}

    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        ix = I.indices(d)
        v = x[d]
        r = I.record(idx=ix, pair=(v, ix))
        got["v"] = r.pair[0]._var.provenance
        got["ix"] = r.pair[1]._var.provenance
        y[d] = r.pair[0] + I.cast(r.pair[1], I.f32)

    k.trace()
    assert got["v"] is None and got["ix"] == ix_relation(k)
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x + np.arange(5, dtype=np.float32))


def ix_relation(kernel):
    (node,) = [n for n in kernel.trace().walk() if n.op.name == "indices"]
    return node.outputs[0].provenance
