"""I.gather (spec §15, DESIGN §3) on every executable target, against NumPy fancy indexing.

Covers paired index tensors, broadcasting of index entries (size-one axes, scalars, runtime scalars),
index dtypes, validity masks with scalar and tensor fills, dynamic extents, exact copies of f16/bf16
bit patterns, out-of-range errors (naming axis, coordinate and extent, outputs untouched) and the
TraceErrors of the surface.
"""

import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from intent_trace.errors import TraceError

RNG = np.random.default_rng(20240601)


@intent.kernel
def gather_2d(x: I.In[I.f32, ("N", "M")], r: I.In[I.i32, ("K",)], c: I.In[I.i64, ("K",)],
              y: I.Out[I.f32, ("K",)]):
    k = I.domain(0, r.shape[0])
    y[k] = I.gather(x[:, :], (r[k], c[k]))


@pytest.mark.parametrize("shape,k", [((3, 4), 7), ((1, 1), 3), ((5, 2), 0)])
def test_gather_paired_indices_match_fancy_indexing(run, shape, k):
    x = RNG.standard_normal(shape).astype(np.float32)
    r = RNG.integers(0, shape[0], k).astype(np.int32)
    c = RNG.integers(0, shape[1], k).astype(np.int64)
    y = np.full(k, 99.0, np.float32)
    run(gather_2d, x, r, c, y)
    np.testing.assert_array_equal(y, x[r, c])


_KERNELS: dict = {}


def gather_1d_kernel(idx_dtype):
    if idx_dtype not in _KERNELS:
        @intent.kernel
        def k(x: I.In[I.i16, ("N",)], idx: I.In[idx_dtype, ("K",)], y: I.Out[I.i16, ("K",)]):
            d = I.domain(0, idx.shape[0])
            y[d] = I.gather(x[:], idx[d])

        _KERNELS[idx_dtype] = k
    return _KERNELS[idx_dtype]


@pytest.mark.parametrize("idx_dtype,np_idx", [(I.u8, np.uint8), (I.i32, np.int32), (I.index, np.int64),
                                              (I.u64, np.uint64)])
def test_gather_rank1_single_index_tensor_of_any_integer_dtype(run, idx_dtype, np_idx):
    x = RNG.integers(-30000, 30000, 11).astype(np.int16)
    idx = RNG.integers(0, 11, 40).astype(np_idx)
    y = np.zeros(40, np.int16)
    run(gather_1d_kernel(idx_dtype), x, idx, y)
    np.testing.assert_array_equal(y, x[idx])


@intent.kernel
def gather_outer(x: I.In[I.f64, ("N", "M")], r: I.In[I.i32, ("K",)], c: I.In[I.i32, ("L",)],
                 y: I.Out[I.f64, ("K", "L")]):
    rows = I.reshape(r[:], (r.shape[0], 1))  # (K, 1)
    cols = I.reshape(c[:], (1, c.shape[0]))  # (1, L)
    y[:, :] = I.gather(x[:, :], (rows, cols))


def test_gather_index_tensors_broadcast_over_size_one_axes(run):
    x = RNG.standard_normal((4, 6))
    r = np.array([3, 0, 0, 2, 1], np.int32)
    c = np.array([5, 1, 4], np.int32)
    y = np.zeros((5, 3))
    run(gather_outer, x, r, c, y)
    np.testing.assert_array_equal(y, x[r[:, None], c[None, :]])


@intent.kernel
def gather_scalar_entries(x: I.In[I.u32, ("N", "M", 3)], r: I.In[I.i64, ("K",)], col: I.index,
                          y: I.Out[I.u32, ("K",)]):
    y[:] = I.gather(x[:, :, :], (r[:], col, 2))


def test_gather_scalar_and_literal_entries_broadcast_to_the_tensor_entries(run):
    x = RNG.integers(0, 2 ** 32, (4, 5, 3), dtype=np.uint64).astype(np.uint32)
    r = np.array([1, 3, 3, 0], np.int64)
    y = np.zeros(4, np.uint32)
    run(gather_scalar_entries, x, r, 4, y)
    np.testing.assert_array_equal(y, x[r, 4, 2])


@intent.kernel
def gather_masked(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[I.f32, ("K",)], fill: I.f32):
    d = I.domain(0, idx.shape[0])
    i = idx[d]
    ok = (i >= 0) & (I.cast(i, I.index) < x.shape[0])
    y[d] = I.gather(x[:], i, valid=ok, fill=fill)


def test_gather_invalid_lanes_do_not_read_and_give_the_fill(run):
    x = np.array([10.0, 20.0, 30.0], np.float32)
    idx = np.array([2, -5, 0, 3, 1000, 1], np.int32)
    y = np.zeros(6, np.float32)
    run(gather_masked, x, idx, y, -7.5)
    np.testing.assert_array_equal(y, [30.0, -7.5, 10.0, -7.5, -7.5, 20.0])


def test_gather_every_lane_invalid_reads_nothing_even_from_an_empty_source(run):
    y = np.zeros(3, np.float32)
    run(gather_masked, np.zeros(0, np.float32), np.array([0, 1, -1], np.int32), y, 4.0)
    np.testing.assert_array_equal(y, [4.0, 4.0, 4.0])


@intent.kernel
def gather_tensor_fill(x: I.In[I.i32, ("N", "M")], r: I.In[I.i32, ("K",)], ok: I.In[I.bool, ("K", "M")],
                       alt: I.In[I.i32, ("M",)], y: I.Out[I.i32, ("K", "M")]):
    m = I.domain(0, x.shape[1])
    cols = I.indices(m)  # (M,) broadcast against (K, 1)
    rows = I.reshape(r[:], (r.shape[0], 1))
    y[:, :] = I.gather(x[:, :], (rows, cols), valid=ok[:, :], fill=alt[:])


def test_gather_tensor_fill_and_mask_broadcast_to_the_result(run):
    x = RNG.integers(-100, 100, (3, 4)).astype(np.int32)
    r = np.array([2, 0, 7], np.int32)  # row 7 is out of range but masked off below
    ok = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [0, 0, 0, 0]], bool)
    alt = np.array([-1, -2, -3, -4], np.int32)
    y = np.zeros((3, 4), np.int32)
    run(gather_tensor_fill, x, r, ok, alt, y)
    want = np.where(ok, x[np.minimum(r, 2)[:, None], np.arange(4)[None, :]], alt[None, :])
    np.testing.assert_array_equal(y, want)


@intent.kernel
def gather_scalar_valid(x: I.In[I.i8, ("N",)], idx: I.In[I.i64, ("K",)], on: I.bool, y: I.Out[I.i8, ("K",)]):
    y[:] = I.gather(x[:], idx[:], valid=on, fill=I.cast(-1, I.i8))


def test_gather_scalar_valid_switches_every_lane(run):
    x = np.array([5, 6, 7], np.int8)
    idx = np.array([2, 2, 0, 9], np.int64)
    y = np.zeros(4, np.int8)
    run(gather_scalar_valid, x, idx, False, y)
    np.testing.assert_array_equal(y, [-1, -1, -1, -1])
    with pytest.raises(IndexError):
        run(gather_scalar_valid, x, idx, True, y)
    run(gather_scalar_valid, x, idx[:3], True, y[:3])
    np.testing.assert_array_equal(y, [7, 7, 5, -1])


def _narrow_kernel(dtype):
    @intent.kernel
    def k(x: I.In[dtype, ("N",)], idx: I.In[I.i32, ("K",)], y: I.Out[dtype, ("K",)]):
        y[:] = I.gather(x[:], idx[:])

    return k


_NARROW = {"f16": (I.f16, np.float16), "bf16": (I.bf16, ml_dtypes.bfloat16)}
_NARROW_KERNELS = {name: _narrow_kernel(d) for name, (d, _) in _NARROW.items()}


@pytest.mark.parametrize("name", sorted(_NARROW))
def test_gather_copies_f16_and_bf16_bit_patterns_exactly(run, name):
    np_dtype = _NARROW[name][1]
    bits = RNG.integers(0, 2 ** 16, 64, dtype=np.uint32).astype(np.uint16)
    bits[:4] = [0x0000, 0x8000, 0x7C00 if name == "f16" else 0x7F80, 0xFC00 if name == "f16" else 0xFF80]
    x = bits.view(np_dtype)
    nan = np.isnan(x.astype(np.float32))
    x = np.where(nan, np.zeros_like(x), x)  # NaN payloads are a cast question, not a gather one
    idx = RNG.integers(0, 64, 100).astype(np.int32)
    y = np.zeros(100, np_dtype)
    run(_NARROW_KERNELS[name], x, idx, y)
    np.testing.assert_array_equal(y.view(np.uint16), x[idx].view(np.uint16))


@intent.kernel
def gather_checked(x: I.In[I.f32, ("N", "M")], r: I.In[I.i32, ("K",)], c: I.In[I.i32, ("K",)],
                   y: I.Out[I.f32, ("K",)], z: I.InOut[I.f32, ("K",)]):
    z[:] = z[:] + 1.0
    y[:] = I.gather(x[:, :], (r[:], c[:]))


@pytest.mark.parametrize("axis,bad,extent", [(0, 3, 3), (1, 5, 5), (1, -1, 5), (0, -4, 3)])
def test_gather_valid_out_of_range_index_is_an_index_error_and_outputs_stay(run, axis, bad, extent):
    x = np.zeros((3, 5), np.float32)
    r = np.array([0, 1, 2, 1], np.int32)
    c = np.array([4, 0, 3, 2], np.int32)
    (r if axis == 0 else c)[2] = bad
    y = np.full(4, 8.0, np.float32)
    z = np.full(4, 2.0, np.float32)
    with pytest.raises(IndexError) as e:
        run(gather_checked, x, r, c, y, z)
    msg = str(e.value)
    assert re.search(rf"\baxis {axis}\b", msg), msg
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg), msg
    assert re.search(rf"extent {extent}\b", msg), msg
    np.testing.assert_array_equal(y, np.full(4, 8.0, np.float32))
    np.testing.assert_array_equal(z, np.full(4, 2.0, np.float32))


def test_gather_prints_as_one_gather_node():
    text = str(gather_masked.trace())
    assert re.search(r"f32\[K\] = gather %\d+, %\d+, %\d+, fill \{has_valid=True\}", text), text


# --- surface errors -----------------------------------------------------------------------------------


def _trace_error(body, match):
    @intent.kernel
    def k(x: I.In[I.f32, ("N", "M")], idx: I.In[I.i32, ("K",)], jdx: I.In[I.i32, ("L",)],
          f: I.In[I.f32, ("N",)]):
        body(x, idx, jdx, f)

    with pytest.raises(TraceError, match=match):
        k.trace()


@pytest.mark.parametrize("body,match", [
    (lambda x, i, j, f: I.gather(x[:, :], i[:]), "rank-1"),
    (lambda x, i, j, f: I.gather(x[:, :], (i[:],)), "1 index entries for a source of rank 2"),
    (lambda x, i, j, f: I.gather(x[:, :], (I.cast(i[:], I.f32), i[:])), "integer dtype"),
    (lambda x, i, j, f: I.gather(x[:, :], (i[:], j[:])), "not provably equal"),
    (lambda x, i, j, f: I.gather(f[:], i[:], fill=I.cast(0, I.f64)), "fill has dtype f64"),
    (lambda x, i, j, f: I.gather(f[:], i[:], valid=i[:]), "valid must be a bool"),
    (lambda x, i, j, f: I.gather(f[:], i[:], valid=j[:] > 0), "valid"),
    (lambda x, i, j, f: I.gather(f[:], i[:], fill=300000.0 * 1e300), "overflows f32"),
    (lambda x, i, j, f: I.gather(f[:], (i[0],)), "at least one"),
    (lambda x, i, j, f: I.gather(x[:, :], (i[:], -1)), "outside the extent"),
])
def test_gather_surface_errors_are_trace_errors(body, match):
    _trace_error(body, match)
