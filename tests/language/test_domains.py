"""Language §3: domains, source-derived subregions, I.indices, and coordinate provenance (IndexRelation)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.graph.provenance import AxisPos, BinExpr, Const, Coord, IndexRelation, NegExpr, Ordinal, Ref


def _nodes(graph, name):
    return [n for n in graph.walk() if n.op.name == name]


def _eval(expr, axes=(), ordinal=None, c=None, refs=None):
    """Evaluate a provenance expression at one position (``axes``) / iteration ordinal / coordinate ``c``."""
    if isinstance(expr, AxisPos):
        return axes[expr.k]
    if isinstance(expr, Ordinal):
        return ordinal
    if isinstance(expr, Coord):
        return c
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Ref):
        return refs[expr.value]
    if isinstance(expr, NegExpr):
        return -_eval(expr.arg, axes, ordinal, c, refs)
    assert isinstance(expr, BinExpr), expr
    a, b = _eval(expr.lhs, axes, ordinal, c, refs), _eval(expr.rhs, axes, ordinal, c, refs)
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__, "%": int.__mod__}
    return ops[expr.op](int(a), int(b))


def _check_relation_values(rel: IndexRelation, root_coords: np.ndarray, values: np.ndarray, refs=None):
    """The relation says which root member each element stands for and how its value derives from that
    member's source coordinate; check both against the values the kernel computed."""
    values = np.asarray(values)
    for pos in itertools.product(*(range(n) for n in values.shape)):
        member = _eval(rel.member, pos, refs=refs)
        coord = int(root_coords[member])
        assert _eval(rel.coord, pos, c=coord, refs=refs) == values[pos], (pos, member, coord)


# --- domains ------------------------------------------------------------------------------------------------

def test_domain_iteration_yields_source_coordinates(run):
    @intent.kernel
    def k(y: I.Out[I.index, (20,)]):
        for i in I.domain(3, 17, 4):
            y[i] = i * 10

    y = np.full(20, -1, np.int64)
    run(k, y)
    want = np.full(20, -1, np.int64)
    want[3:17:4] = np.arange(3, 17, 4) * 10
    np.testing.assert_array_equal(y, want)


def test_domain_static_bounds_give_static_extent():
    @intent.kernel
    def k(y: I.Out[I.f32, (20,)]):
        a = I.domain(3, 17, 4)
        b = I.domain(5)
        c = I.domain(7, 7)
        y[a] = I.full((4,), 1.0, I.f32)
        y[b] = I.full((5,), 2.0, I.f32)
        y[c] = I.full((0,), 3.0, I.f32)

    g = k.trace()
    assert [n.outputs[0].type.extent for n in _nodes(g, "domain")] == [4, 5, 0]


def test_domain_over_view_extent_keeps_its_identity():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    g = k.trace()
    (dom,) = _nodes(g, "domain")
    assert dom.outputs[0].type.extent is g.param("x").type.shape[0]


@pytest.mark.parametrize("step", [0, -1])
def test_domain_static_nonpositive_step_is_a_trace_error(step):
    @intent.kernel
    def k(y: I.Out[I.f32, (4,)]):
        for i in I.domain(0, 4, step):
            y[i] = 0.0

    with pytest.raises(intent.TraceError, match="step must be positive") as e:
        k.trace()
    assert isinstance(e.value, ValueError)
    assert "ordinal" in str(e.value)  # points to the forward-counter idiom


@pytest.mark.parametrize("step", [0, -2])
def test_domain_runtime_nonpositive_step_is_a_value_error_at_run_time(run, step):
    @intent.kernel
    def k(y: I.InOut[I.i32, ("N",)], s: I.index):
        for i in I.domain(0, y.shape[0], s):
            y[i] = 1

    y = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="step"):
        run(k, y, step)
    np.testing.assert_array_equal(y, 0)


def test_domain_runtime_step_and_bounds(run):
    @intent.kernel
    def k(y: I.InOut[I.i32, ("N",)], b: I.index, e: I.index, s: I.index):
        for i in I.domain(b, e, s):
            y[i] = I.cast(i, I.i32)

    y = np.full(10, -1, np.int32)
    run(k, y, 1, 10, 3)
    want = np.full(10, -1, np.int32)
    want[1:10:3] = np.arange(1, 10, 3)
    np.testing.assert_array_equal(y, want)


def test_domain_backwards_with_forward_counter(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        n = x.shape[0]
        for ordinal in I.domain(0, n):
            i = n - 1 - ordinal
            y[ordinal] = x[i]

    x = np.arange(5, dtype=np.float32)
    y = np.zeros_like(x)
    run(k, x, y)
    np.testing.assert_array_equal(y, x[::-1])


def test_domain_point_provenance_names_the_domain():
    @intent.kernel
    def k(y: I.Out[I.f32, (8,)]):
        d = I.domain(0, 8, 2)
        for i in I.parallel(d):
            y[i] = 1.0

    g = k.trace()
    (dom,) = _nodes(g, "domain")
    (par,) = _nodes(g, "parallel")
    (point,) = par.regions[0].params
    rel = point.provenance
    assert rel == IndexRelation("point", dom.outputs[0], 0, Ordinal())


def test_domain_indexing_with_an_integer_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.f32, (8,)]):
        d = I.domain(0, 8)
        y[d[2]] = 1.0

    with pytest.raises(intent.TraceError, match="subregion"):
        k.trace()


# --- subregions ----------------------------------------------------------------------------------------------

def test_subregion_iteration_yields_source_coordinates(run):
    @intent.kernel
    def k(y: I.Out[I.index, (30,)]):
        d = I.domain(3, 23, 2)  # coordinates 3, 5, ..., 21
        y[d] = I.full((10,), 0, I.index)
        for i in d[2:5]:  # members 2..4 -> coordinates 7, 9, 11
            y[i] = i

    y = np.full(30, -1, np.int64)
    run(k, y)
    want = np.full(30, -1, np.int64)
    want[3:23:2] = 0
    want[[7, 9, 11]] = [7, 9, 11]
    np.testing.assert_array_equal(y, want)


def test_subregion_reads_and_writes_at_source_coordinates(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        window = d[2:5]
        y[window] = x[window] * 100.0

    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    run(k, x, y)
    want = np.zeros(8, np.float32)
    want[2:5] = x[2:5] * 100
    np.testing.assert_array_equal(y, want)


def test_subregion_relation_source_is_the_root_domain():
    @intent.kernel
    def k(y: I.Out[I.index, (30,)]):
        d = I.domain(3, 23, 2)
        sub = d[2:8]
        inner = sub[1:3]
        y[inner] = I.indices(inner)
        for i in inner:
            y[i] = i

    g = k.trace()
    root = _nodes(g, "domain")[0].outputs[0]
    subs = _nodes(g, "subregion")
    (idx,) = _nodes(g, "indices")
    (loop,) = _nodes(g, "for")
    (point,) = loop.regions[0].params
    for v in [s.outputs[0] for s in subs] + [idx.outputs[0], point]:
        assert v.provenance.source is root
        assert v.provenance.source_axis == 0
    assert subs[0].outputs[0].provenance.kind == "subregion"
    assert idx.outputs[0].provenance.kind == "indices"
    assert point.provenance.kind == "point"
    # Nested subregions compose offsets: inner member k is root member k + 1 + 2.
    assert [_eval(subs[1].outputs[0].provenance.member, (k,)) for k in range(2)] == [3, 4]
    assert [_eval(point.provenance.member, ordinal=o) for o in range(2)] == [3, 4]


def test_subregion_nested_offsets_compose_in_values(run):
    @intent.kernel
    def k(y: I.Out[I.index, (30,)], z: I.Out[I.index, (2,)]):
        d = I.domain(3, 23, 2)
        inner = d[2:8][1:3]
        y[d] = I.full((10,), 0, I.index)
        y[inner] = I.indices(inner)
        z[:] = I.indices(inner)

    y, z = np.zeros(30, np.int64), np.zeros(2, np.int64)
    run(k, y, z)
    coords = np.arange(3, 23, 2)
    np.testing.assert_array_equal(z, coords[2:8][1:3])
    want = np.zeros(30, np.int64)
    want[coords[3:5]] = coords[3:5]
    np.testing.assert_array_equal(y, want)


def test_subregion_open_bounds():
    @intent.kernel
    def k(y: I.Out[I.f32, (10,)]):
        d = I.domain(0, 10)
        y[d[:3]] = I.full((3,), 1.0, I.f32)
        y[d[3:]] = I.full((7,), 2.0, I.f32)

    g = k.trace()
    assert [n.outputs[0].type.extent for n in _nodes(g, "subregion")] == [3, 7]


@pytest.mark.parametrize("bounds", [(3, 3), (5, 2), (12, 11)], ids=["equal", "reversed", "reversed-past-end"])
def test_subregion_static_empty(run, bounds):
    b, e = bounds

    @intent.kernel
    def k(y: I.InOut[I.f32, (10,)]):
        d = I.domain(0, 10)
        window = d[b:e]
        y[window] = I.full((0,), 5.0, I.f32)
        for i in window:
            y[i] = 9.0

    g = k.trace()
    assert _nodes(g, "subregion")[0].outputs[0].type.extent == 0
    y = np.zeros(10, np.float32)
    run(k, y)
    np.testing.assert_array_equal(y, 0)


def test_subregion_runtime_bounds_and_runtime_empty(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], b: I.index, e: I.index):
        d = I.domain(0, x.shape[0])
        for i in d[b:e]:
            y[i] = x[i] + 1.0

    x = np.arange(6, dtype=np.float32)
    y = np.zeros(6, np.float32)
    run(k, x, y, 1, 4)
    np.testing.assert_array_equal(y, [0, 2, 3, 4, 0, 0])
    y = np.zeros(6, np.float32)
    run(k, x, y, 4, 1)  # begin >= end: empty, never an error, even past the extent
    run(k, x, y, 9, 7)
    np.testing.assert_array_equal(y, 0)


def test_subregion_static_end_past_static_extent_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.f32, (10,)]):
        d = I.domain(0, 4)
        y[d[1:6]] = I.full((5,), 1.0, I.f32)

    with pytest.raises(intent.TraceError, match="clamp") as e:
        k.trace()
    assert isinstance(e.value, ValueError)
    assert "6" in str(e.value) and "4" in str(e.value)


def test_subregion_negative_static_bound_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.f32, (10,)]):
        d = I.domain(0, 10)
        y[d[-3:]] = I.full((3,), 1.0, I.f32)

    with pytest.raises(intent.TraceError, match="negative"):
        k.trace()


def test_subregion_with_step_is_a_trace_error():
    @intent.kernel
    def k(y: I.Out[I.f32, (10,)]):
        d = I.domain(0, 10)
        for i in d[0:10:2]:
            y[i] = 1.0

    with pytest.raises(intent.TraceError, match="step"):
        k.trace()


def test_subregion_static_end_past_dynamic_extent_is_an_index_error_at_run_time(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d[2:6]] = x[d[2:6]]

    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    run(k, x, y)  # N = 8: fine
    np.testing.assert_array_equal(y[2:6], x[2:6])
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    with pytest.raises(IndexError, match="6") as e:
        run(k, x, y)
    assert "4" in str(e.value)
    np.testing.assert_array_equal(y, 0)


def test_subregion_runtime_end_past_extent_is_an_index_error(run):
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], b: I.index, e: I.index):
        d = I.domain(0, x.shape[0])
        for i in d[b:e]:
            y[i] = x[i]

    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(IndexError, match="clamp"):
        run(k, x, y, 2, 5)
    with pytest.raises(IndexError):
        run(k, x, y, 5, 6)
    np.testing.assert_array_equal(y, 0)


def test_subregion_runtime_bounds_relation_refers_to_the_begin_value():
    @intent.kernel
    def k(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], b: I.index, e: I.index):
        d = I.domain(0, x.shape[0])
        w = d[b:e]
        y[w] = x[w]

    g = k.trace()
    sub = _nodes(g, "subregion")[0]
    rel = sub.outputs[0].provenance
    assert rel.source is _nodes(g, "domain")[0].outputs[0]
    b = g.param("b").var
    assert _eval(rel.member, (2,), refs={b: 5}) == 7


# --- I.indices ---------------------------------------------------------------------------------------------

def test_indices_of_subregion_are_source_coordinates(run):
    @intent.kernel
    def k(z: I.Out[I.index, (4,)]):
        d = I.domain(5, 25, 3)  # 5, 8, 11, 14, 17, 20, 23
        z[:] = I.indices(d[2:6])

    z = np.zeros(4, np.int64)
    run(k, z)
    np.testing.assert_array_equal(z, np.arange(5, 25, 3)[2:6])


def test_indices_relation_maps_members(run):
    @intent.kernel
    def k(z: I.Out[I.index, (4,)]):
        d = I.domain(5, 25, 3)
        z[:] = I.indices(d[2:6])

    g = k.trace()
    (idx,) = _nodes(g, "indices")
    rel = idx.outputs[0].provenance
    root = _nodes(g, "domain")[0].outputs[0]
    assert rel.kind == "indices" and rel.source is root and rel.source_axis == 0
    z = np.zeros(4, np.int64)
    run(k, z)
    _check_relation_values(rel, np.arange(5, 25, 3), z)


@intent.fn
def _window_indices(window):
    return I.indices(window)


@intent.fn
def _middle(t):
    return t[1:3]


def test_indices_relation_survives_helpers(run):
    got = {}

    @intent.kernel
    def k(z: I.Out[I.index, (2,)]):
        d = I.domain(5, 25, 3)
        t = _window_indices(d[2:6])
        m = _middle(t)
        got["rel"] = m._var.provenance
        got["root"] = d._var
        z[:] = m

    g = k.trace()
    rel = got["rel"]
    assert rel.kind == "indices" and rel.source is got["root"]
    assert _nodes(g, "indices")[0].loc.helpers == ("_window_indices",)
    z = np.zeros(2, np.int64)
    run(k, z)
    np.testing.assert_array_equal(z, np.arange(5, 25, 3)[3:5])
    _check_relation_values(rel, np.arange(5, 25, 3), z)


# --- tensor slices and shape transforms keep the relation -----------------------------------------------------

@intent.kernel
def _transforms(r: I.Out[I.index, (2, 3)], t: I.Out[I.index, (3, 2)], f: I.Out[I.index, (6,)],
                s: I.Out[I.index, (3,)], p: I.Out[I.index, ()], a: I.Out[I.index, (2, 3)]):
    d = I.domain(3, 23, 2)  # coordinates 3, 5, ..., 21
    idx = I.indices(d[2:8])  # 7, 9, ..., 17
    r[:, :] = I.reshape(idx, (2, 3))
    t[:, :] = I.transpose(I.reshape(idx, (2, 3)))
    f[:] = I.reshape(I.transpose(I.reshape(idx, (2, 3))), (6,))
    s[:] = idx[1:4]
    p[...] = idx[4:5][0]
    a[:, :] = I.reshape(idx, (3, 2)).T * 2 - 1


def _transform_relations():
    g = _transforms.trace()
    written = {}
    for n in _nodes(g, "write"):
        name = next(p.name for p in g.params if p.var is n.inputs[0])
        written[name] = n.inputs[1].provenance
    return g, written


def test_shape_transforms_keep_source_identity():
    g, rels = _transform_relations()
    root = _nodes(g, "domain")[0].outputs[0]
    for name in "rtfspa":
        rel = rels[name]
        assert isinstance(rel, IndexRelation), name
        assert rel.kind == "indices" and rel.source is root and rel.source_axis == 0, name


def test_shape_transforms_relations_match_computed_values(run):
    _, rels = _transform_relations()
    arrays = {"r": np.zeros((2, 3), np.int64), "t": np.zeros((3, 2), np.int64), "f": np.zeros(6, np.int64),
              "s": np.zeros(3, np.int64), "p": np.zeros((), np.int64), "a": np.zeros((2, 3), np.int64)}
    run(_transforms, *arrays.values())
    idx = np.arange(3, 23, 2)[2:8]
    np.testing.assert_array_equal(arrays["r"], idx.reshape(2, 3))
    np.testing.assert_array_equal(arrays["t"], idx.reshape(2, 3).T)
    np.testing.assert_array_equal(arrays["f"], idx.reshape(2, 3).T.reshape(6))
    np.testing.assert_array_equal(arrays["s"], idx[1:4])
    np.testing.assert_array_equal(arrays["p"], idx[4])
    np.testing.assert_array_equal(arrays["a"], idx.reshape(3, 2).T * 2 - 1)
    root = np.arange(3, 23, 2)
    for name, values in arrays.items():
        _check_relation_values(rels[name], root, values)


def test_transpose_relation_permutes_axes():
    _, rels = _transform_relations()
    for i, j in itertools.product(range(3), range(2)):
        assert _eval(rels["t"].member, (i, j)) == _eval(rels["r"].member, (j, i))
