"""The shared structural rules (intent_trace.codegen.structural, access, control, folds): one rule per op for both
code generators, and the rules' behaviour on every executable target against NumPy, where the operand dtypes or
sizes select another path (unsigned slice and subregion bounds, empty ranges)."""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.codegen import access, control, structural


def _u64_slice(dt):
    @intent.kernel
    def k(x: I.In[I.f32, ("N", "M")], b: dt, e: dt, y: I.InOut[I.f32, (2,)]):
        s = x[:, :][:, b:e]
        y[0] = I.reduce.sum(I.reduce.sum(s, axis=1), axis=0)
        y[1] = I.cast(s.shape[1], I.f32)

    return k


SLICES = {dt.name: _u64_slice(dt) for dt in (I.u64, I.u8, I.i32)}


@pytest.mark.parametrize("dt", sorted(SLICES))
@pytest.mark.parametrize("b, e", [(1, 3), (0, 4), (3, 1), (2, 2)])
def test_slice_bounds_of_any_integer_dtype_index_as_int64(run, dt, b, e):
    # An unsigned stop below its start is an empty slice (its length is computed in int64, never as a wrapped
    # unsigned difference); cpu once failed to compile u64 bounds (max(0, u64) is a float in Numba).
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    y = np.full(2, -1.0, np.float32)
    run(SLICES[dt], x, b, e, y)
    want = x[:, b:e]
    assert y[0] == want.sum() and y[1] == want.shape[1], (y, want)


@intent.kernel
def _subregion_u64(x: I.In[I.f32, ("N",)], y: I.InOut[I.f32, ("N",)], b: I.u64, e: I.u64):
    d = I.domain(0, x.shape[0])
    for i in d[b:e]:
        y[i] = x[i] * 2.0


@pytest.mark.parametrize("b, e", [(1, 4), (0, 5), (4, 2)])
def test_subregion_bounds_unsigned(run, b, e):
    x = np.arange(5, dtype=np.float32) + 1
    y = np.zeros(5, np.float32)
    run(_subregion_u64, x, y, b, e)
    want = np.zeros(5, np.float32)
    want[b:e] = x[b:e] * 2
    np.testing.assert_array_equal(y, want)


def test_each_shared_rule_is_both_backends_rule():
    from intent_trace.backends.tilelang import rules as tilelang
    from intent_trace.oracle.numba import emitter as numba

    shared = {**structural.RULES, **access.RULES, **control.RULES}
    assert shared, "no shared rules"
    for op, fn in shared.items():
        assert numba.RULES[op] is fn, f"cpu overrides the shared rule of {op.name}"
        assert tilelang.RULES[op] is fn, f"TileLang overrides the shared rule of {op.name}"


@intent.kernel
def _same_count(x: I.In[I.f32, ("M",)], y: I.InOut[I.f32, ("M",)]):
    y[:] = I.reshape(x[:], (x.shape[0],)) * 2.0


@intent.kernel
def _unit_axis(x: I.In[I.f32, ("M",)], y: I.InOut[I.f32, ("M",)]):
    column = I.reshape(x[:], (x.shape[0], 1))  # [M] -> [M, 1], as every row kernel's keepdims spells it
    y[:] = I.reshape(column * 2.0, (x.shape[0],))


@pytest.mark.parametrize("kernel", [_same_count, _unit_axis], ids=lambda k: k.name)
def test_a_reshape_whose_counts_are_one_expression_makes_no_check(kernel):
    # Both element counts are the one expression M (a unit axis multiplies by nothing): a check between them could
    # never fail, so no target makes it (no error site: cpu then writes the caller's arrays without staging them).
    from intent_trace.backends.tilelang.target import generate_program

    graph = kernel.trace()
    assert "reshape" in str(graph)
    assert intent.compile(kernel, target="cpu").source.count("ERROR_SITES = []") == 1
    for target in ("tilelang-c", "tilelang-cuda", "tilelang-metal"):
        assert generate_program(graph, target).error_sites == (), target


@pytest.mark.parametrize("kernel", [_same_count, _unit_axis], ids=lambda k: k.name)
@pytest.mark.parametrize("m", [0, 1, 5])
def test_a_reshape_of_the_same_count_moves_the_values(run, kernel, m):
    x = np.arange(m, dtype=np.float32) - 2
    y = np.zeros(m, np.float32)
    run(kernel, x, y)
    np.testing.assert_array_equal(y, x * 2)


@intent.fn
def _pick_max_first(a, b):
    """The larger key, and the earlier position of equal keys. The I.if_ is control flow (a region): the combine is
    not pointwise, so the reduce and scan that use it are folded over whole accumulators."""
    take = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
    return I.if_(take, lambda: b, lambda: a)


@intent.kernel
def _folded(key: I.In[I.f32, ("N",)], best: I.InOut[I.i64, (1,)], run_key: I.InOut[I.f32, ("N",)],
            run_at: I.InOut[I.i64, ("N",)]):
    d = I.domain(0, key.shape[0])
    at = I.cast(I.indices(d), I.i64)
    ident = (I.cast(-np.inf, I.f32), I.cast(key.shape[0], I.i64))
    best[0] = I.reduce((key[d], at), axis=0, identity=ident, combine=_pick_max_first)[1]
    rk, ra = I.scan((key[d], at), axis=0, identity=ident, combine=_pick_max_first, inclusive=False, reverse=True)
    run_key[d] = rk
    run_at[d] = ra


def test_folded_reduce_and_scan_with_control_flow_in_the_combine(run):
    # The general fold (codegen.folds.fold) on every target, against a Python fold in source order.
    key = np.array([1.0, 3.0, -2.0, 3.0, 0.5, 3.0, -1.0], np.float32)
    n = len(key)
    best, run_key, run_at = np.zeros(1, np.int64), np.zeros(n, np.float32), np.zeros(n, np.int64)
    run(_folded, key, best, run_key, run_at)

    def pick(a, b):
        return b if b[0] > a[0] or (b[0] == a[0] and b[1] < a[1]) else a

    acc = (-np.inf, n)
    for item in zip(key, range(n)):
        acc = pick(acc, item)
    assert best[0] == acc[1] == 1
    acc, want_key, want_at = (-np.inf, n), np.zeros(n, np.float32), np.zeros(n, np.int64)
    for i in reversed(range(n)):  # exclusive, reverse: each position gets the fold of those after it
        want_key[i], want_at[i] = acc
        acc = pick((key[i], i), acc)
    np.testing.assert_array_equal(run_key, want_key)
    np.testing.assert_array_equal(run_at, want_at)
