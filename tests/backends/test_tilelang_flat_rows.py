"""Flat nests of rank 2 or more spread row by row (cuda_kernels.FlatNest, emitter._flat_loop).

Where the last axis fills a block's elements (threads x vector, 1024 on CUDA), a block is a chunk of one row: the
row's coordinates are found once per thread and the last coordinate is the thread's offset, so no element divides;
shorter rows keep the flat mapping (an element's coordinates by division). One uniform test chooses, on the row
length, at run time. Both sides of it, rows no chunk divides, rank 3 and empty nests run on every executable target
through the shared ``target`` fixture against NumPy; on tilelang-c the CUDA mapping is emulated (a block's threads
one after another).
"""
import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import mapped_compiler, widening_lookup
from intent_trace.backends.tilelang import cuda_kernels, targets

RNG = np.random.default_rng(2027)
#: the C target running tilelang-cuda's flat nests, a block's threads one after another
EMULATED = attrs.evolve(targets.C, flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True))
#: below, at and past one block's elements (1024), a row no chunk divides, and short rows (the flat mapping)
ROWS = [(3, 1030), (2, 1024), (1, 2049), (4, 1023), (5, 7), (1, 1), (0, 2000), (3, 0)]


@intent.kernel
def scale2d(x: I.In[I.f16, ("M", "N")], out: I.Out[I.f32, ("M", "N")], s: I.f32):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    out[m, n] = I.cast(x[m, n], I.f32) * s


@intent.kernel
def shift3d(x: I.In[I.i32, ("A", "B", "C")], out: I.Out[I.i32, ("A", "B", "C")]):
    out[:, :, :] = x[:, :, :] * 3 - 1


embedding = widening_lookup  # an embedding lookup that stays a flat nest (a plain one is a row gather: cuda_gather)


@pytest.fixture
def compiled(target, monkeypatch):
    mapped = mapped_compiler(target, monkeypatch, EMULATED, "flat_nest")

    def compiled(kernel):
        exe = mapped(kernel)
        if target in ("tilelang-c", "tilelang-cuda") and kernel is not shift3d:  # both mappings, one uniform test
            assert "T.if_then_else(d1 >= T.int64(1024)" in exe.program
        return exe

    return compiled


@pytest.mark.parametrize("shape", ROWS, ids=str)
def test_a_rank_2_nest_at_any_row_length(compiled, shape):
    x = RNG.standard_normal(shape).astype(np.float16)
    out = np.full(shape, np.nan, np.float32)
    compiled(scale2d)(x, out, np.float32(1.5))
    np.testing.assert_array_equal(out, x.astype(np.float32) * np.float32(1.5))


@pytest.mark.parametrize("shape", [(2, 3, 1100), (2, 3, 5), (1, 2, 1024), (2, 0, 1500)], ids=str)
def test_a_rank_3_nest_finds_the_row_s_coordinates(compiled, shape):
    x = RNG.integers(-1000, 1000, shape).astype(np.int32)
    out = np.full(shape, 7, np.int32)
    compiled(shift3d)(x, out)
    np.testing.assert_array_equal(out, x * 3 - 1)


@pytest.mark.parametrize("d", [1030, 2048, 9], ids=str)
def test_an_embedding_lookup_row_by_row(compiled, d):
    table = RNG.standard_normal((50, d)).astype(np.float16)
    ids = RNG.integers(0, 50, 13).astype(np.int64)
    ids[[0, 5, 12]] = (49, 0, ids[3])  # the last row, the first, a repeat
    out = np.zeros((13, d), np.float32)
    compiled(embedding)(table, ids, out)
    np.testing.assert_array_equal(out, table[ids].astype(np.float32))


@pytest.mark.parametrize("bad", [0, 6, 12], ids=lambda b: f"id{b}")
def test_an_out_of_range_id_is_an_index_error_and_the_output_is_unchanged(compiled, bad):
    table = RNG.standard_normal((50, 1030)).astype(np.float16)
    ids = RNG.integers(0, 50, 13).astype(np.int64)
    ids[bad] = 50
    out = np.full((13, 1030), 3.0, np.float32)
    with pytest.raises(IndexError):
        compiled(embedding)(table, ids, out)
    assert (out == 3.0).all()
