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
