"""Masked access (spec §15) on every executable target, against NumPy references.

``I.load(target, index, valid=, fill=)``, ``I.store(target, index, value, valid=)``, ``I.gather`` of a view or
buffer and ``I.scatter_reduce(..., valid=)``: an invalid lane reads nothing (it gives the fill), writes nothing,
and is never bounds-checked, so its coordinates may lie anywhere (indices far outside the extent, at varied
positions, must neither raise nor be touched); a valid lane out of range raises as an unmasked access does, and
a failing kernel leaves the caller's arrays unchanged. The Triton tutorials' masked vector add and row softmax
(tails no block divides, ragged rows) are written the way their users write them.
"""

import math

import attrs
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from conftest import bits_equal
from intent_trace import I

RNG = np.random.default_rng(20261202)
FAR = 10 ** 12  # a coordinate far outside any extent


# --- the Triton tutorials: masked vector add, masked row softmax -------------------------------------------------

@intent.kernel
def add_blocks(x: I.In[I.f32, ("N",)], y: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("N",)],
               BLOCK: I.Constexpr[int]):
    n = x.shape[0]
    lanes = I.indices(I.domain(0, BLOCK))
    for pid in I.parallel(I.domain(0, (n + (BLOCK - 1)) // BLOCK)):
        offs = pid * BLOCK + lanes
        m = offs < n
        a = I.load(x, offs, valid=m)
        b = I.load(y, offs, valid=m)
        I.store(out, offs, a + b, valid=m)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 100, 257])
def test_masked_add_covers_tails_no_block_divides(run, n):
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    run(add_blocks, x, y, out, BLOCK=32)
    np.testing.assert_array_equal(out, x + y)  # one rounding per element: exact


@intent.kernel
def softmax_rows(x: I.In[I.f32, ("R", "C")], y: I.Out[I.f32, ("R", "C")], BLOCK: I.Constexpr[int]):
    cols = I.domain(0, BLOCK)
    m = I.indices(cols) < x.shape[1]
    for r in I.parallel(I.domain(0, x.shape[0])):
        row = I.load(x, (r, cols), valid=m, fill=-math.inf)
        z = row - I.reduce.max(row, axis=0)
        e = I.exp(z)
        I.store(y, (r, cols), e / I.reduce.sum(e, axis=0), valid=m)


@pytest.mark.parametrize("shape", [(3, 1), (4, 37), (2, 64), (5, 50), (0, 10)])
def test_masked_row_softmax_of_rows_shorter_than_the_block(run, shape):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    if shape[0] and shape[1] > 1:
        x[0, 0] = -np.inf  # one element that exp maps to zero, as a masked lane
    y = np.full(shape, np.nan, np.float32)
    run(softmax_rows, x, y, BLOCK=64)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True, initial=-np.inf))
    ref = ref / ref.sum(axis=1, keepdims=True)
    # T5: exp within a few ulps, a sum of C terms in any order, one division
    np.testing.assert_allclose(y, ref, rtol=(shape[1] + 8) * 2.0 ** -23, atol=1e-30)


# --- far-out coordinates in masked lanes are neither checked nor touched -------------------------------------------

@intent.kernel
def load_at(x: I.In[I.f32, ("N",)], idx: I.In[I.i64, ("K",)], y: I.Out[I.f32, ("K",)], fill: I.f32):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    y[k] = I.load(x, i, valid=(i >= 0) & (i < I.cast(x.shape[0], I.i64)), fill=fill)


def _far_indices(n: int, k: int) -> np.ndarray:
    idx = RNG.integers(0, max(n, 1), k).astype(np.int64)
    bad = RNG.random(k) < 0.5
    idx[bad] = RNG.choice([-FAR, FAR, -1, n, n + 1, 2 ** 62], int(bad.sum()))
    return idx


@pytest.mark.parametrize("n,k", [(7, 40), (1, 9), (0, 6), (13, 0)])
def test_masked_load_gives_the_fill_where_invalid(run, n, k):
    x = RNG.standard_normal(n).astype(np.float32)
    idx = _far_indices(n, k)
    y = np.zeros(k, np.float32)
    run(load_at, x, idx, y, -3.25)
    valid = (idx >= 0) & (idx < n)
    np.testing.assert_array_equal(y, np.where(valid, x[np.where(valid, idx, 0)] if n else 0.0, -3.25))


@intent.kernel
def store_at(v: I.In[I.i32, ("K",)], idx: I.In[I.i64, ("K",)], y: I.InOut[I.i32, ("N",)]):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    I.store(y, i, v[k], valid=(i >= 0) & (i < I.cast(y.shape[0], I.i64)))


@pytest.mark.parametrize("n,k", [(20, 30), (5, 5), (0, 4), (3, 0)])
def test_masked_store_writes_only_valid_lanes(run, n, k):
    idx = _far_indices(n, k)
    valid = (idx >= 0) & (idx < n)
    # valid lanes address distinct elements (a masked store is a unique store); the lanes put there vary
    distinct = RNG.permutation(n)[:int(valid.sum())] if n else np.zeros(0, np.int64)
    idx[np.flatnonzero(valid)[:distinct.size]] = distinct
    idx[np.flatnonzero(valid)[distinct.size:]] = FAR
    valid = (idx >= 0) & (idx < n)
    v = RNG.integers(-1000, 1000, k).astype(np.int32)
    y = RNG.integers(-9, 9, n).astype(np.int32)
    ref = y.copy()
    ref[idx[valid]] = v[valid]
    run(store_at, v, idx, y)
    np.testing.assert_array_equal(y, ref)


# --- outer index spellings: domains, points, tensors, whole axes ----------------------------------------------------

@intent.kernel
def load_outer(x: I.In[I.f64, ("A", "B", "C")], rows: I.In[I.i32, ("K",)], y: I.Out[I.f64, ("K", "W")],
               plane: I.index):
    k = I.domain(0, rows.shape[0])
    w = I.domain(0, y.shape[1])  # wider than C: the tail is masked
    r = rows[k]
    ok = I.reshape((r >= 0) & (I.cast(r, I.index) < x.shape[1]), (rows.shape[0], 1)) & \
        (I.indices(w) < x.shape[2]) & (plane < x.shape[0])
    y[k, w] = I.load(x, (plane, r, w), valid=ok, fill=0.5)


@pytest.mark.parametrize("plane", [0, 2, 3, FAR])
def test_masked_load_with_a_point_a_tensor_and_a_domain(run, plane):
    x = RNG.standard_normal((3, 4, 5))
    rows = np.array([3, -2, 0, 4, 1, 1, 2 ** 30], np.int32)
    y = np.zeros((7, 8))
    run(load_outer, x, rows, y, plane)
    ok = ((rows >= 0) & (rows < 4))[:, None] & (np.arange(8) < 5)[None, :] & (plane < 3)
    got = x[min(plane, 2)][np.clip(rows, 0, 3)][:, np.clip(np.arange(8), 0, 4)]
    np.testing.assert_array_equal(y, np.where(ok, got, 0.5))


@intent.kernel
def store_rows(x: I.In[I.f32, ("R", "C")], y: I.InOut[I.f32, ("R", "C")], lengths: I.In[I.i32, ("R",)]):
    rows = I.domain(0, x.shape[0])
    keep = I.indices(I.domain(0, x.shape[1])) < I.reshape(I.cast(lengths[rows], I.index), (x.shape[0], 1))
    I.store(y, (rows, slice(None)), x[rows, :] * 2.0, valid=keep)


def test_masked_store_of_ragged_rows_keeps_the_rest(run):
    x = RNG.standard_normal((6, 9)).astype(np.float32)
    lengths = np.array([0, 9, 3, 1, 8, 20], np.int32)
    y = np.full((6, 9), 7.0, np.float32)
    run(store_rows, x, y, lengths)
    keep = np.arange(9)[None, :] < lengths[:, None]
    np.testing.assert_array_equal(y, np.where(keep, x * 2.0, 7.0))


@intent.kernel
def load_scalar(x: I.In[I.i64, ("N",)], y: I.Out[I.i64, ("M",)]):
    for i in I.parallel(I.domain(0, y.shape[0])):
        y[i] = I.load(x, i, valid=i < x.shape[0], fill=-1)


@pytest.mark.parametrize("n,m", [(4, 9), (0, 3), (5, 5)])
def test_masked_load_of_one_element_per_point(run, n, m):
    x = RNG.integers(-2 ** 62, 2 ** 62, n)
    y = np.zeros(m, np.int64)
    run(load_scalar, x, y)
    np.testing.assert_array_equal(y, np.concatenate([x[:m], np.full(max(m - n, 0), -1)]))


# --- dtypes: f16/bf16 bits, bool, a tensor fill ----------------------------------------------------------------------

def _copy_kernel(dtype):
    @intent.kernel
    def k(x: I.In[dtype, ("N",)], ok: I.In[I.bool, ("M",)], alt: I.In[dtype, ("M",)], y: I.InOut[dtype, ("M",)]):
        d = I.domain(0, y.shape[0])
        v = I.load(x, d, valid=ok[d], fill=alt[d])
        I.store(y, d, v, valid=ok[d] | (I.indices(d) % 2 == 0))

    return k


_COPIES = {name: _copy_kernel(getattr(I, name)) for name in ("f16", "bf16", "bool", "u8")}


@pytest.mark.parametrize("name,np_dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16), ("bool", np.bool_),
                                           ("u8", np.uint8)])
def test_masked_copy_keeps_bit_patterns_and_takes_a_tensor_fill(run, name, np_dtype):
    n, m = 6, 11
    if name in ("f16", "bf16"):
        x = np.array([1.5, -0.0, np.inf, np.nan, -np.inf, 3e-5], np_dtype)
        alt = (RNG.standard_normal(m) * 100).astype(np_dtype)
    else:
        x = RNG.integers(0, 2, n).astype(np_dtype) if name == "bool" else RNG.integers(0, 256, n).astype(np_dtype)
        alt = RNG.integers(0, 2, m).astype(np_dtype)
    ok = RNG.random(m) < 0.6
    ok[n:] = False  # past the end of x: never valid
    y = np.zeros(m, np_dtype)
    run(_COPIES[name], x, ok, alt, y)
    loaded = np.where(ok, np.concatenate([x, np.zeros(m - n, np_dtype)]), alt)
    written = ok | (np.arange(m) % 2 == 0)
    assert bits_equal(y, np.where(written, loaded, np.zeros(m, np_dtype)).astype(np_dtype))


# --- buffers and gather of a view --------------------------------------------------------------------------------

@intent.kernel
def buffer_shift(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    c = I.indices(d)
    b = I.buffer((x.shape[0],), I.f32, init=-1.0)
    I.store(b, c + 1, x[d], valid=c + 1 < x.shape[0])  # a shift by one: the last lane would be out of range
    j = I.cast(idx[d], I.index)
    y[d] = I.gather(b, j, valid=j < x.shape[0], fill=9.0) + I.gather(x, j % I.maximum(x.shape[0], 1))


@pytest.mark.parametrize("n", [1, 2, 10])
def test_masked_buffer_store_and_gathers_of_a_buffer_and_a_view(run, n):
    x = RNG.standard_normal(n).astype(np.float32)
    idx = RNG.integers(0, n, n).astype(np.int32)
    idx[::3] = 2 ** 31 - 1
    y = np.zeros(n, np.float32)
    run(buffer_shift, x, idx, y)
    b = np.concatenate([[-1.0], x[:-1]]).astype(np.float32)
    j = idx.astype(np.int64)
    ref = np.where(j < n, b[np.minimum(j, n - 1)], np.float32(9.0)) + x[j % n]
    np.testing.assert_array_equal(y, ref.astype(np.float32))


@intent.kernel
def gather_view_2d(x: I.In[I.i32, ("A", "B")], r: I.In[I.i64, ("K",)], c: I.In[I.i64, ("K",)],
                   y: I.Out[I.i32, ("K",)]):
    k = I.domain(0, r.shape[0])
    rr, cc = r[k], c[k]
    ok = (rr >= 0) & (rr < I.cast(x.shape[0], I.i64)) & (cc >= 0) & (cc < I.cast(x.shape[1], I.i64))
    y[k] = I.gather(x, (rr, cc), valid=ok, fill=-7)


def test_gather_of_a_view_reads_paired_coordinates(run):
    x = RNG.integers(-100, 100, (4, 6)).astype(np.int32)
    r = np.array([0, 3, FAR, 2, -FAR, 1, 3], np.int64)
    c = np.array([5, 0, 1, -1, 2, 6, 4], np.int64)
    y = np.zeros(7, np.int32)
    run(gather_view_2d, x, r, c, y)
    ok = (r >= 0) & (r < 4) & (c >= 0) & (c < 6)
    np.testing.assert_array_equal(y, np.where(ok, x[np.clip(r, 0, 3), np.clip(c, 0, 5)], -7))


# --- scatter_reduce with valid ----------------------------------------------------------------------------------

@intent.kernel
def scatter_masked(v: I.In[I.i64, ("K",)], idx: I.In[I.i64, ("K",)], y: I.InOut[I.i64, ("N",)]):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    I.scatter_reduce(y, i, v[k], combine="add", valid=(i >= 0) & (i < I.cast(y.shape[0], I.i64)))


@pytest.mark.parametrize("n,k", [(5, 40), (1, 3), (0, 5)])
def test_scatter_reduce_combines_only_valid_lanes(run, n, k):
    idx = _far_indices(n, k)
    v = RNG.integers(-50, 50, k)
    y = RNG.integers(-5, 5, n)
    ref = y.copy()
    valid = (idx >= 0) & (idx < n)
    np.add.at(ref, idx[valid], v[valid])
    run(scatter_masked, v, idx, y)
    np.testing.assert_array_equal(y, ref)


# --- errors at run time ----------------------------------------------------------------------------------------

def _raises_unchanged(run, kernel, args, exc, match, **constexprs):
    before = [np.array(a, copy=True) for a in args]
    with pytest.raises(exc, match=match):
        run(kernel, *args, **constexprs)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


@intent.kernel
def load_unmasked(x: I.In[I.f32, ("N",)], idx: I.In[I.i64, ("K",)], y: I.InOut[I.f32, ("K",)]):
    k = I.domain(0, idx.shape[0])
    y[k] = I.load(x, idx[k], fill=1.0)  # no valid: every lane is checked, as x[idx[k]]


@pytest.mark.parametrize("bad", [5, -1, FAR])
def test_unmasked_lanes_out_of_range_still_raise(run, bad):
    idx = np.array([0, 1, bad, 2], np.int64)
    _raises_unchanged(run, load_unmasked, [np.ones(5, np.float32), idx, np.zeros(4, np.float32)], IndexError,
                      f"x: coordinate {bad} on axis 0 is outside its extent 5")


@intent.kernel
def load_partly_masked(x: I.In[I.f32, ("N",)], idx: I.In[I.i64, ("K",)], y: I.InOut[I.f32, ("K",)]):
    k = I.domain(0, idx.shape[0])
    y[k] = I.load(x, idx[k], valid=idx[k] != 3, fill=0.0)


def test_a_valid_lane_out_of_range_raises_naming_the_view_and_leaves_outputs(run):
    idx = np.array([3, 0, 7, 3], np.int64)
    _raises_unchanged(run, load_partly_masked, [np.ones(5, np.float32), idx, np.zeros(4, np.float32)], IndexError,
                      "x: coordinate 7 on axis 0 is outside its extent 5")
    y = np.zeros(4, np.float32)
    run(load_partly_masked, np.arange(5, dtype=np.float32), np.array([3, 0, 4, 3], np.int64), y)
    np.testing.assert_array_equal(y, [0.0, 0.0, 4.0, 0.0])


def test_a_masked_store_whose_valid_lanes_collide_is_refused(run):
    idx = np.array([1, FAR, 1], np.int64)
    _raises_unchanged(run, store_at, [np.array([4, 5, 6], np.int32), idx, np.zeros(3, np.int32)], RuntimeError,
                      "y: a masked store writes one element twice")
    y = np.zeros(3, np.int32)  # an invalid lane at the same coordinate is no collision
    run(store_at, np.array([4, 5, 6], np.int32), np.array([1, FAR, -1], np.int64), y)
    np.testing.assert_array_equal(y, [0, 4, 0])


# --- the CUDA program lowers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,constexprs", [(add_blocks, {"BLOCK": 32}), (softmax_rows, {"BLOCK": 64}),
                                               (store_at, {}), (buffer_shift, {}), (scatter_masked, {})])
def test_masked_access_cuda_program_lowers_with_the_read_inside_its_branch(kernel, constexprs):
    from backends.tilelang_support import cuda_source
    from intent_trace.backends.tilelang.target import generate

    program = generate(kernel.trace(**constexprs), "tilelang-cuda")
    source = cuda_source(program)
    assert "__global__" in source and "if (" in source


# --- the CUDA grid mappings, emulated on the C target ----------------------------------------------------------------

@pytest.fixture
def emulated(monkeypatch):
    """The C target with tilelang-cuda's grid mappings (a block's threads one after another)."""
    import attrs

    from backends.tilelang_support import TARGET
    from intent_trace.backends.tilelang import cuda_kernels, targets
    from intent_trace.backends.tilelang import target as tl_target

    monkeypatch.setitem(targets.TARGETS, TARGET, attrs.evolve(
        targets.C, parallel_grid=lambda g: cuda_kernels.parallel_grid(g, emulated=True),
        flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True), host_workspaces=True))
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    return TARGET


@pytest.mark.parametrize("n", [0, 1, 33, 100])
def test_masked_accesses_on_the_emulated_cuda_grid(emulated, n):
    from intent_trace.backends.tilelang.target import build

    exe = build(softmax_rows.trace(BLOCK=64), target=emulated)
    assert "as bx:" in exe.program and "for tx" in exe.program  # the rows' loop is mapped onto threads
    x = (RNG.standard_normal((n, 37)) * 4).astype(np.float32)
    got = np.full((n, 37), np.nan, np.float32)
    exe(x, got)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True, initial=-np.inf))
    np.testing.assert_allclose(got, ref / ref.sum(axis=1, keepdims=True), rtol=45 * 2.0 ** -23, atol=1e-30)
    exe = build(load_scalar.trace(), target=emulated)
    assert "as bx:" in exe.program
    x = RNG.integers(-2 ** 62, 2 ** 62, n // 2)
    y = np.zeros(n, np.int64)
    exe(x, y)
    np.testing.assert_array_equal(y, np.concatenate([x, np.full(n - n // 2, -1)]))
    exe = build(add_blocks.trace(BLOCK=32), target=emulated)  # the block count is computed: the serial program
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    exe(x, y, out)
    np.testing.assert_array_equal(out, x + y)


@intent.kernel
def scatter_masked_even(v: I.In[I.i64, ("K",)], idx: I.In[I.i64, ("K",)], y: I.InOut[I.i64, ("N",)]):
    k = I.domain(0, idx.shape[0])
    i = idx[k]
    inside = (i >= 0) & (i < I.cast(y.shape[0], I.i64))
    I.scatter_reduce(y, i, v[k], combine="add", valid=inside & (v[k] % 2 == 0))


@pytest.mark.parametrize("checks", [True, False])
@pytest.mark.parametrize("n,k", [(5, 300), (1, 3), (0, 5), (257, 1000)])
def test_masked_scatter_on_the_emulated_cuda_atomic_grid(emulated, monkeypatch, checks, n, k):
    """The scatter's grid (one update a thread, device atomics): invalid lanes, wherever they fall, are neither
    bounds-checked nor combined, with and without run-time checks."""
    from intent_trace.backends.tilelang import cuda_indexed, targets
    from intent_trace.backends.tilelang.target import build

    monkeypatch.setitem(targets.TARGETS, emulated, attrs.evolve(
        targets.TARGETS[emulated], indexed_grid=lambda g: cuda_indexed.indexed_plan(g, emulated=True)))
    exe = build(scatter_masked.trace(), target=emulated, checks=checks)
    assert "as bx:" in exe.program and "atomic" in exe.program  # the updates are on the grid
    idx = _far_indices(n, k)
    v = RNG.integers(-50, 50, k)
    y = RNG.integers(-5, 5, n)
    ref = y.copy()
    valid = (idx >= 0) & (idx < n)
    np.add.at(ref, idx[valid], v[valid])
    exe(v, idx, y)
    np.testing.assert_array_equal(y, ref)
    # a mask that is not the bounds: odd values are invalid lanes inside the destination too
    exe = build(scatter_masked_even.trace(), target=emulated, checks=checks)
    y = RNG.integers(-5, 5, n)
    ref = y.copy()
    valid &= v % 2 == 0
    np.add.at(ref, idx[valid], v[valid])
    exe(v, idx, y)
    np.testing.assert_array_equal(y, ref)
