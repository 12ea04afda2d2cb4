"""Errors: every TraceError names the user's file and line and is a TypeError or ValueError as fits;
a kernel that fails at run time names the view, coordinate and extent and leaves caller arrays unchanged."""
from __future__ import annotations

import inspect
import os
import re

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

FILE = os.path.basename(__file__)


def _marked_line(fn, marker: str = "# <-") -> int:
    """The source line of ``fn`` carrying ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, f"{fn.__name__}: expected one {marker!r} marker, found {len(hits)}"
    return hits[0]


# Each case: (kernel, the function holding the marked line, the builtin exception class(es) the error also is).

class Mode(I.Enum):
    A = 1


@intent.kernel
def mixed_dtypes(a: I.In[I.f32, ("N",)], b: I.In[I.f16, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, a.shape[0])
    y[d] = a[d] + b[d]  # <-


@intent.kernel
def literal_too_wide(x: I.In[I.i8, ("N",)], y: I.Out[I.i8, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] + 300  # <-


@intent.kernel
def write_in_view(x: I.In[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    x[d] = x[d] * 2.0  # <-


@intent.kernel
def read_out_early(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    v = y[d]  # <-
    y[d] = v + x[d]


@intent.kernel
def truth_of_proxy(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    if x[0] > 0.0:  # <-
        y[d] = x[d]


@intent.kernel
def escaping_value(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    for i in d:
        last = x[i]
    y[d] = x[d] * last  # <-


@intent.kernel
def python_break(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    for i in I.domain(0, x.shape[0]):  # <-
        y[i] = x[i]
        break


@intent.kernel
def zero_step(y: I.Out[I.f32, (4,)]):
    for i in I.domain(0, 4, 0):  # <-
        y[i] = 1.0


@intent.kernel
def subregion_past_end(y: I.Out[I.f32, (8,)]):
    d = I.domain(0, 4)
    w = d[2:6]  # <-
    y[w] = I.zeros((4,), I.f32)


@intent.kernel
def bad_permutation(x: I.In[I.f32, (2, 3)], y: I.Out[I.f32, (3, 2)]):
    y[:, :] = I.transpose(x[:, :], (0, 0))  # <-


@intent.kernel
def bad_reshape(x: I.In[I.f32, (2, 3)], y: I.Out[I.f32, (4,)]):
    y[:] = I.reshape(x[:, :], (4,))  # <-


@intent.kernel
def unknown_field(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    r = I.record(a=x[d])
    y[d] = r.b  # <-


@intent.kernel
def carry_dtype_change(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    y[0] = I.loop(I.domain(0, x.shape[0]), x[0], lambda i, c: I.cast(c, I.f64))  # <-


@intent.kernel
def tensor_predicate(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.if_(x[d] > 0.0, lambda: x[d], lambda: -x[d])  # <-


@intent.kernel
def non_float_exp(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = I.exp(x[d])  # <-


@intent.kernel
def extents_differ(x: I.In[I.f32, ("M",)], z: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
    dm, dn = I.domain(0, x.shape[0]), I.domain(0, z.shape[0])
    y[dm] = x[dm] * z[dn]  # <-


@intent.kernel
def parallel_conflict(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    for i in I.parallel(I.domain(0, x.shape[0])):
        y[0] = x[i]  # <-


@intent.kernel
def break_outside_loop(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    I.break_(when=x[0] > 0.0)  # <-
    y[d] = x[d]


@intent.kernel
def enum_arithmetic(x: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)], MODE: I.Constexpr[Mode] = Mode.A):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] + MODE  # <-


@intent.kernel
def record_mutation(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    r = I.record(a=x[d])
    r.a = x[d]  # <-
    y[d] = r.a


@intent.fn
def _mixes_in_helper(a, b):
    return a * b  # <-


@intent.kernel
def error_inside_helper(a: I.In[I.f32, ("N",)], b: I.In[I.i32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, a.shape[0])
    y[d] = _mixes_in_helper(a[d], b[d])


@intent.kernel
def runtime_capture(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], s: I.f32):
    d = I.domain(0, x.shape[0])

    @intent.fn
    def scaled(v):
        return v * s

    y[d] = scaled(x[d])  # <-


@intent.fn
def _recurse(v):
    return _recurse(v)  # <-


@intent.kernel
def recursion(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = _recurse(x[d])


@intent.kernel
def _plain_copy(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d]


@intent.kernel
def kernel_launch(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    _plain_copy(x, y)  # <-


CASES = [
    (mixed_dtypes, mixed_dtypes, TypeError),
    (literal_too_wide, literal_too_wide, ValueError),
    (write_in_view, write_in_view, ValueError),
    (read_out_early, read_out_early, ValueError),
    (truth_of_proxy, truth_of_proxy, TypeError),
    (escaping_value, escaping_value, ValueError),
    (python_break, python_break, ValueError),
    (zero_step, zero_step, ValueError),
    (subregion_past_end, subregion_past_end, ValueError),
    (bad_permutation, bad_permutation, ValueError),
    (bad_reshape, bad_reshape, ValueError),
    (unknown_field, unknown_field, ValueError),
    (carry_dtype_change, carry_dtype_change, TypeError),
    (tensor_predicate, tensor_predicate, TypeError),
    (non_float_exp, non_float_exp, TypeError),
    (extents_differ, extents_differ, ValueError),
    (parallel_conflict, parallel_conflict, ValueError),
    (break_outside_loop, break_outside_loop, ValueError),
    (enum_arithmetic, enum_arithmetic, TypeError),
    (record_mutation, record_mutation, TypeError),
    (error_inside_helper, _mixes_in_helper, TypeError),
    (runtime_capture, runtime_capture, ValueError),
    (recursion, _recurse, (TypeError, ValueError)),
    (kernel_launch, kernel_launch, (TypeError, ValueError)),
]


@pytest.mark.parametrize("kernel, marked, kind", CASES, ids=[c[0].name for c in CASES])
def test_trace_error_names_user_file_and_line(kernel, marked, kind):
    marked_fn = marked.fn if isinstance(marked, (intent.Kernel, intent.Helper)) else marked
    line = _marked_line(marked_fn)
    with pytest.raises(intent.TraceError) as e:
        kernel.trace()
    assert f"{FILE}:{line}" in str(e.value), str(e.value)


@pytest.mark.parametrize("kernel, marked, kind", CASES, ids=[c[0].name for c in CASES])
def test_trace_error_is_also_type_or_value_error(kernel, marked, kind):
    with pytest.raises(intent.TraceError) as e:
        kernel.trace()
    assert isinstance(e.value, kind), f"{type(e.value).__mro__} is not a {kind}: {e.value}"


def test_trace_error_inside_helper_names_the_helper():
    with pytest.raises(intent.TraceError) as e:
        error_inside_helper.trace()
    assert "_mixes_in_helper" in str(e.value)


def test_trace_error_where_is_the_location_prefix():
    with pytest.raises(intent.TraceError) as e:
        mixed_dtypes.trace()
    assert e.value.where is not None and f"{FILE}:{_marked_line(mixed_dtypes.fn)}" in e.value.where
    assert str(e.value).startswith(e.value.where)
    assert "I.cast" in e.value.bare_message


def test_trace_error_for_returned_value_names_the_kernel_definition():
    @intent.kernel
    def returns_value(x: I.In[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        return x[d]

    lines, start = inspect.getsourcelines(returns_value.fn)
    with pytest.raises(intent.TraceError) as e:
        returns_value.trace()
    assert any(f"{FILE}:{start + i}" in str(e.value) for i in range(len(lines))), str(e.value)
    assert isinstance(e.value, TypeError)


def test_trace_error_leaves_no_trace_in_progress():
    with pytest.raises(intent.TraceError):
        python_break.trace()
    with pytest.raises(intent.TraceError):
        escaping_value.trace()
    # A later, correct trace is unaffected by the failed ones.
    g = _plain_copy.trace()
    assert [n.op.name for n in g.walk()] == ["domain", "read", "write"]


# --- run-time errors ---------------------------------------------------------------------------------------

@intent.kernel
def _gather_rows(idx: I.In[I.i32, ("K",)], x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("K",)],
                 acc: I.InOut[I.f32, ("K",)]):
    dk = I.domain(0, idx.shape[0])
    y[dk] = I.zeros((idx.shape[0],), I.f32)
    acc[dk] = acc[dk] + 1.0
    for i in dk:
        v = x[idx[i]]  # <-
        y[i] = v
        acc[i] = acc[i] + v


def test_run_gather_in_bounds(run):
    x = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    y = np.zeros(3, np.float32)
    acc = np.array([1.0, 2.0, 3.0], np.float32)
    run(_gather_rows, np.array([3, 0, 2], np.int32), x, y, acc)
    np.testing.assert_array_equal(y, [40.0, 10.0, 30.0])
    np.testing.assert_array_equal(acc, [42.0, 13.0, 34.0])


@pytest.mark.parametrize("bad", [7, -1])
def test_run_out_of_bounds_read_is_an_index_error_naming_view_coordinate_extent(run, bad):
    x = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    y = np.full(3, 5.0, np.float32)
    acc = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(IndexError) as e:
        run(_gather_rows, np.array([1, bad, 2], np.int32), x, y, acc)
    msg = str(e.value)
    assert re.search(r"\bx\b", msg), msg  # the view
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg), msg  # the coordinate
    assert re.search(r"(?<![\d-])4(?!\d)", msg), msg  # the extent
    # Out and InOut arrays are left exactly as the caller gave them.
    np.testing.assert_array_equal(y, np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(acc, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x, [10.0, 20.0, 30.0, 40.0])


def test_run_out_of_bounds_read_names_the_source_line(run):
    x = np.zeros(4, np.float32)
    with pytest.raises(IndexError) as e:
        run(_gather_rows, np.array([9], np.int32), x, np.zeros(1, np.float32), np.zeros(1, np.float32))
    text = str(e.value) + " ".join(getattr(e.value, "__notes__", []))
    assert f"{FILE}:{_marked_line(_gather_rows.fn)}" in text


@intent.kernel
def _scatter_rows(idx: I.In[I.i32, ("K",)], x: I.In[I.f32, ("K",)], dest: I.InOut[I.f32, ("N",)],
                  done: I.Out[I.i32, ("K",)]):
    dk = I.domain(0, idx.shape[0])
    done[dk] = I.full((idx.shape[0],), 1, I.i32)
    for i in dk:
        dest[idx[i]] = x[i]


def test_run_out_of_bounds_write_is_an_index_error_and_writes_nothing(run):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    dest = np.zeros(5, np.float32)
    done = np.zeros(3, np.int32)
    with pytest.raises(IndexError) as e:
        run(_scatter_rows, np.array([0, 1, 5], np.int32), x, dest, done)
    msg = str(e.value)
    assert re.search(r"\bdest\b", msg) and re.search(r"(?<![\d-])5(?!\d)", msg), msg
    np.testing.assert_array_equal(dest, 0)  # the first two writes were not committed
    np.testing.assert_array_equal(done, 0)
    run(_scatter_rows, np.array([0, 1, 4], np.int32), x, dest, done)
    np.testing.assert_array_equal(dest, [1.0, 2.0, 0.0, 0.0, 3.0])
    np.testing.assert_array_equal(done, 1)
