"""The generic race detector's two forms of one state machine (oracle/generic_races.py): an access of one element
(a parallel body's point: ``_record_one``, on Python ints) and of many (``_record``, array operations) must leave
the same record and raise the same conflict. Random access sequences (points, elements, kinds) run through both
from the same empty frame; the reference is the array form, which the kernel-level race tests
(tests/language/test_parallel_races.py) check against NumPy's view of which accesses collide. The index fast paths
of the generic interpreter (one element: ``generic_base._point``) are checked against the array path on every
coordinate of a small view, out-of-range ones included.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from intent_trace.oracle import generic_base as GB
from intent_trace.oracle import generic_races as GR

KINDS = (GR.READ, GR.WRITE, GR.COMBINE)
SHAPE = (3, 4)


def _run(accesses, one: bool):
    """(the frame's records, the conflict message or None) after ``accesses`` of (point, element, kind)."""
    frame = GR.Frame()
    try:
        for point, element, kind in accesses:
            frame.point = point
            if one:
                GR._record_one(frame, "v", "var", SHAPE, element, kind)
            else:
                GR._record(frame, "v", "var", SHAPE, np.array([element], np.int64), kind)
    except RuntimeError as e:
        return frame.records, str(e)
    return frame.records, None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 11), st.sampled_from(KINDS)), max_size=12))
def test_one_element_form_is_the_array_form(accesses):
    (one, one_error), (many, many_error) = _run(accesses, True), _run(accesses, False)
    assert one_error == many_error
    assert one.keys() == many.keys()
    for key in one:
        for x, y in zip(one[key], many[key]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("first,second,message", [
    ((0, GR.WRITE), (1, GR.WRITE), "parallel points 0 and 1 both write element (1, 2)"),
    ((0, GR.READ), (1, GR.WRITE), "parallel point 0 reads element (1, 2) and point 1 writes it"),
    ((0, GR.COMBINE), (1, GR.READ), "parallel point 0 updates atomically"),
    ((2, GR.COMBINE), (2, GR.WRITE), None),  # one point may mix its own accesses
    ((0, GR.COMBINE), (1, GR.COMBINE), None), ((0, GR.READ), (1, GR.READ), None)])
def test_one_element_conflicts_name_both_points(first, second, message):
    _, error = _run([(first[0], 6, first[1]), (second[0], 6, second[1])], True)
    assert (error is None) == (message is None) and (message is None or message in error), error
    assert error == _run([(first[0], 6, first[1]), (second[0], 6, second[1])], False)[1]


class _Node:
    def __init__(self, kinds):
        self.kinds = kinds

    def attr(self, name):
        assert name == "index"
        return self.kinds


class _It:
    views = {"var": "v"}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.uint8])
def test_point_indices_are_the_array_path_s(dtype):
    array = np.arange(12).reshape(SHAPE)
    node = _Node(("scalar", "tensor"))
    coords = [0, 1, 2, 3, 4, 255] + ([2**64 - 1, 2**63] if dtype == np.uint64 else [-1] if dtype != np.uint8 else [])
    for i in coords:
        for j in coords:
            ops = (np.array(i).astype(dtype), np.array(j).astype(dtype))
            try:
                got = GB.index_arrays(_It(), node, "var", array, ops)
            except Exception as e:  # the same error as the array path's
                with pytest.raises(type(e), match=str(e).replace("(", r"\(").replace(")", r"\)")):
                    _array_path(array, node, ops)
                continue
            want = _array_path(array, node, ops)
            assert [g.dtype for g in got] == [w.dtype for w in want] and got == want
            assert int(array[got]) == int(array[want])
            np.testing.assert_array_equal(GB.flat_indices(got, SHAPE), [i * 4 + j])


def _array_path(array, node, ops):
    """index_arrays with its one-element path off: the operands as 1-element arrays, the result's axes dropped."""
    idx = GB.index_arrays(_It(), node, "var", array, tuple(o.reshape(1) for o in ops))
    return tuple(i.reshape(()) for i in idx)
