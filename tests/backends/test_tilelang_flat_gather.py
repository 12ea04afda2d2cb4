"""Gathers in flat nests with bad indices: the run raises the site's IndexError and commits nothing.

A flat nest (cuda_kernels.FlatNest) checks each data-derived coordinate; a failed check claims the error record and
leaves the kernel. Checked on every executable target through the shared ``target`` fixture against NumPy (tilelang-c
runs tilelang-cuda's mapping, a block's threads one after another; the emulated Metal target runs Metal's), with
the bad index at the first, a middle and the last element (the last one is also what the tail threads past the end
recompute), negative, several at once, and on an empty table. (A variant that recorded the failure and went on,
so that no exit stood between two elements' loads, ran 16% slower on the H100: 64-66 registers a thread instead of 32.)
"""

import attrs
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import mapped_compiler
from backends.tilelang_support import widening_lookup as embedding  # a flat nest (a plain lookup: cuda_gather)
from conftest import EMULATED_METAL
from intent_trace.backends.tilelang import cuda_kernels, targets

RNG = np.random.default_rng(2031)
EMULATED = attrs.evolve(targets.C, flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True))



@intent.kernel
def gather2(x: I.In[I.bf16, ("N", "M")], r: I.In[I.i32, ("K",)], c: I.In[I.i32, ("K",)], y: I.Out[I.bf16, ("K",)]):
    y[:] = I.gather(x[:, :], (r[:], c[:]))


@intent.kernel
def take_masked(x: I.In[I.f32, ("N",)], idx: I.In[I.i64, ("K",)], y: I.Out[I.f32, ("K",)]):
    k = I.domain(0, idx.shape[0])
    y[k] = I.load(x, idx[k], valid=idx[k] != 3, fill=-2.0)


@pytest.fixture
def compiled(target, monkeypatch):
    return mapped_compiler(target, monkeypatch, EMULATED, "flat_nest",
                           mapped_targets=("tilelang-c", "tilelang-cuda", EMULATED_METAL))


def _raises_unchanged(call, args, outputs, pattern):
    before = [o.copy() for o in outputs]
    with pytest.raises(IndexError, match=pattern):
        call(*args, *outputs)
    for o, b in zip(outputs, before):
        np.testing.assert_array_equal(o.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("d", [1030, 9], ids=["row-by-row", "flat"])
def test_an_embedding_lookup_with_a_bad_id_anywhere_raises_and_writes_nothing(compiled, d):
    # 13 tokens: the first, a middle and the last token's rows; rows of 1030 are two chunks (the second mostly tail
    # threads), rows of 9 one flat block whose threads past the end all recompute the last element
    exe = compiled(embedding)
    table = RNG.standard_normal((50, d)).astype(np.float16)
    for position, bad in [(0, 50), (6, -1), (12, 50), (12, 2**40)]:
        ids = RNG.integers(0, 50, 13).astype(np.int64)
        ids[position] = bad
        _raises_unchanged(exe, (table, ids), [np.full((13, d), 3.0, np.float32)],
                          rf"coordinate {bad} on axis 0 is outside its extent 50")
    ids = RNG.integers(0, 50, 13).astype(np.int64)
    ids[[1, 11]] = (77, -5)  # two bad ids: either one is reported
    _raises_unchanged(exe, (table, ids), [np.full((13, d), 3.0, np.float32)],
                      r"coordinate (77|-5) on axis 0 is outside its extent 50")
    ids[[1, 11]] = (49, 0)
    out = np.zeros((13, d), np.float32)
    exe(table, ids, out)  # the same executable, good ids: the rows, widened exactly
    np.testing.assert_array_equal(out, table[ids].astype(np.float32))


def test_an_embedding_lookup_in_an_empty_table_raises_and_reads_nothing(compiled):
    # no coordinate is in range: the read is TileLang's guarded one (nothing is read; the emulated Metal target
    # reports any access outside a buffer)
    exe = compiled(embedding)
    _raises_unchanged(exe, (np.zeros((0, 1030), np.float16), np.zeros(3, np.int64)),
                      [np.full((3, 1030), 3.0, np.float32)], r"coordinate 0 on axis 0 is outside its extent 0")


def test_a_two_axis_gather_reports_the_failing_axis_and_writes_nothing(compiled):
    exe = compiled(gather2)
    x = RNG.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    for axis, position, bad, extent in [(0, 0, 4, 4), (1, 520, 6, 6), (1, 1029, -3, 6), (0, 1029, -1, 4)]:
        r = RNG.integers(0, 4, 1030).astype(np.int32)  # two blocks: the second mostly tail threads
        c = RNG.integers(0, 6, 1030).astype(np.int32)
        (r, c)[axis][position] = bad
        _raises_unchanged(exe, (x, r, c), [np.full(1030, 5.0, ml_dtypes.bfloat16)],
                          rf"coordinate {bad} on axis {axis} is outside its extent {extent}")
    y = np.zeros(1030, ml_dtypes.bfloat16)
    r, c = RNG.integers(0, 4, 1030).astype(np.int32), RNG.integers(0, 6, 1030).astype(np.int32)
    exe(x, r, c, y)
    np.testing.assert_array_equal(y.view(np.uint16), x[r, c].view(np.uint16))


def test_a_masked_load_checks_its_valid_lanes_only(compiled):
    exe = compiled(take_masked)
    x = RNG.standard_normal(5).astype(np.float32)
    for position in (0, 500, 1099):
        idx = RNG.integers(0, 5, 1100).astype(np.int64)
        idx[position] = 7
        _raises_unchanged(exe, (x, idx), [np.full(1100, 9.0, np.float32)], r"x: coordinate 7 on axis 0 is outside")
    idx = RNG.integers(0, 5, 1100).astype(np.int64)
    y = np.zeros(1100, np.float32)
    exe(x, idx, y)
    np.testing.assert_array_equal(y, np.where(idx != 3, x[np.minimum(idx, 4)], np.float32(-2.0)))
