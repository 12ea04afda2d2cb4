"""CPU torch tensors are view arguments on every CPU target: bound as zero-copy NumPy views of the
tensor's memory (every dtype, f16 and bf16 included), so what the kernel writes lands in the caller's
tensor; a tensor elsewhere (CUDA, meta), of the wrong dtype, or whose memory cannot back the view is
refused before anything runs, naming the view.

The references are plain torch/NumPy operations on the same values, never another target.
"""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace.arguments import bind_arguments
from intent_trace.host_views import overlaps as _overlaps

# Every CPU target binds its arguments through bind_arguments (tilelang-c included; tilelang-cuda's
# CUDA tensors: tests/backends/test_tilelang_cuda_torch.py).
CPU_TARGETS = ("generic", "cpu", "tilelang-c")

# intent dtype -> the torch dtype a tensor for it has
TORCH_DTYPES = {
    I.bool_: torch.bool, I.i8: torch.int8, I.i16: torch.int16, I.i32: torch.int32, I.i64: torch.int64,
    I.u8: torch.uint8, I.u16: torch.uint16, I.u32: torch.uint32, I.u64: torch.uint64,
    I.f16: torch.float16, I.bf16: torch.bfloat16, I.f32: torch.float32, I.f64: torch.float64,
}
_KERNELS: dict = {}


def _swap_kernel(dt):
    """y = x; out = old z; z = x (In, Out and InOut of one dtype, no arithmetic: every dtype has it)."""
    if dt not in _KERNELS:
        @intent.kernel
        def swap(x: I.In[dt, ("M", "N")], y: I.Out[dt, ("M", "N")], z: I.InOut[dt, ("M", "N")],
                 old: I.Out[dt, ("M", "N")]):
            rows, cols = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
            old[rows, cols] = z[rows, cols]
            y[rows, cols] = x[rows, cols]
            z[rows, cols] = x[rows, cols]

        _KERNELS[dt] = swap
    return _KERNELS[dt]


def _values(dt, shape, seed):
    """Distinct-ish values of ``dt`` as a torch tensor (built from NumPy/ml_dtypes values)."""
    rng = np.random.default_rng(seed)
    if dt is I.bool_:
        return torch.from_numpy(rng.integers(0, 2, shape).astype(np.bool_))
    if dt.is_int:
        info = np.iinfo(dt.np)
        a = rng.integers(info.min, info.max, shape, dtype=dt.np, endpoint=True)
        return torch.from_numpy(a)
    a = rng.standard_normal(shape) * 100
    if dt is I.bf16:
        bits = a.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int16)
        return torch.from_numpy(bits).view(torch.bfloat16)
    return torch.from_numpy(a.astype(dt.np))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two tensors of one dtype."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.bool:
        return bool(torch.equal(a, b))
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.contiguous().view(width), b.contiguous().view(width)))


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("dt", list(TORCH_DTYPES), ids=str)
def test_torch_tensors_of_every_dtype_are_views_written_in_place(run, dt):
    x, z0 = _values(dt, (3, 5), 1), _values(dt, (3, 5), 2)
    z = z0.clone()
    y = torch.zeros((3, 5), dtype=TORCH_DTYPES[dt])
    old = torch.zeros((3, 5), dtype=TORCH_DTYPES[dt])
    y_storage, z_storage = y.data_ptr(), z.data_ptr()
    run(_swap_kernel(dt), x, y, z, old)
    assert _same(y, x) and _same(z, x) and _same(old, z0)
    assert y.data_ptr() == y_storage and z.data_ptr() == z_storage  # written where the caller's tensor lives


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("dt", [I.f32, I.f16, I.bf16, I.i64], ids=str)
def test_torch_strided_tensors_keep_their_strides(run, dt):
    """Transposed and sliced tensors are bound as strided views: inputs read and outputs land where the
    tensor's elements are, the elements between them untouched."""
    x = _values(dt, (5, 3), 3).t()  # (3, 5), not contiguous
    z_base = _values(dt, (3, 10), 4)
    z = z_base[:, ::2]  # every other column
    z0 = z.clone()
    y_base = torch.zeros((3, 10), dtype=TORCH_DTYPES[dt])
    y = y_base[:, 1::2]
    old = torch.zeros((5, 3), dtype=TORCH_DTYPES[dt]).t()
    untouched = z_base[:, 1::2].clone()
    run(_swap_kernel(dt), x, y, z, old)
    assert _same(y, x) and _same(z, x) and _same(old, z0)
    assert _same(z_base[:, 1::2], untouched) and not bool(y_base[:, ::2].to(torch.float64).any())


def test_bind_arguments_returns_numpy_views_sharing_the_tensor_memory():
    graph = _swap_kernel(I.bf16).trace()
    x = _values(I.bf16, (2, 3), 5)
    y, z, old = (torch.zeros((2, 3), dtype=torch.bfloat16) for _ in range(3))
    values, dims = bind_arguments(graph, (x, y.t().contiguous().t(), z, old))
    assert all(isinstance(v, np.ndarray) for v in values)
    assert values[0].dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.array_equal(values[0].view(np.uint16), x.view(torch.int16).numpy().view(np.uint16))
    assert values[2].__array_interface__["data"][0] == z.data_ptr()
    assert list(dims.values()) == [2, 3]


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_torch_tensor_of_the_wrong_dtype_is_a_type_error_naming_view_and_both_dtypes(run):
    f = torch.zeros((2, 2), dtype=torch.float32)
    with pytest.raises(TypeError, match=r"\bz\b.*bf16.*torch\.float32|\bz\b.*torch\.float32.*bf16") as e:
        run(_swap_kernel(I.bf16), f.bfloat16(), f.bfloat16(), f, f.bfloat16())
    assert "bfloat16" in str(e.value)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_torch_tensor_of_an_unsupported_dtype_is_a_type_error(run):
    c = torch.zeros((2, 2), dtype=torch.complex64)
    f = torch.zeros((2, 2), dtype=torch.float32)
    with pytest.raises(TypeError, match=r"\bx\b.*complex64"):
        run(_swap_kernel(I.f32), c, f, f.clone(), f.clone())


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_torch_tensor_on_another_device_is_a_type_error_saying_so(run):
    f = torch.zeros((2, 2), dtype=torch.float32)
    meta = torch.empty((2, 2), dtype=torch.float32, device="meta")
    with pytest.raises(TypeError, match=r"\by\b.*meta.*CPU"):
        run(_swap_kernel(I.f32), f, meta, f.clone(), f.clone())


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_torch_expanded_output_tensor_is_refused(run):
    """An output whose elements share memory (stride 0) cannot hold one value per element."""
    f = torch.zeros((2, 2), dtype=torch.float32)
    shared = torch.zeros((1, 2), dtype=torch.float32).expand(2, 2)
    with pytest.raises(ValueError, match=r"\by\b.*overlap"):
        run(_swap_kernel(I.f32), f, shared, f.clone(), f.clone())
    assert not shared.any()


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_numpy_overlapping_output_is_refused_and_input_may_overlap(run):
    f = np.ones((2, 2), np.float32)
    shared = np.lib.stride_tricks.as_strided(np.zeros(2, np.float32), (2, 2), (0, 4), writeable=True)
    with pytest.raises(ValueError, match=r"\bz\b.*overlap"):
        run(_swap_kernel(I.f32), f, f.copy(), shared, f.copy())
    y, z, old = np.zeros((2, 2), np.float32), np.full((2, 2), 3, np.float32), np.zeros((2, 2), np.float32)
    run(_swap_kernel(I.f32), np.broadcast_to(np.float32(2), (2, 2)), y, z, old)  # an input may repeat elements
    assert (y == 2).all() and (z == 2).all() and (old == 3).all()


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_torch_tensor_requiring_grad_is_read_and_written(run):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_()
    y = torch.zeros((2, 3), dtype=torch.float32)
    z = torch.zeros((2, 3), dtype=torch.float32)
    run(_swap_kernel(I.f32), x, y, z, torch.zeros((2, 3)))
    assert torch.equal(y, x.detach()) and torch.equal(z, x.detach())


@intent.kernel
def _gather_then_write(x: I.In[I.f32, ("N",)], idx: I.In[I.i64, ("N",)], y: I.Out[I.f32, ("N",)],
                       z: I.InOut[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    z[d] = z[d] + 1.0
    y[d] = x[idx[d]]


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("bad", range(4))
def test_torch_failing_run_leaves_output_tensors_unchanged(run, bad):
    x = torch.arange(4, dtype=torch.float32)
    idx = torch.tensor([0, 1, 2, 3], dtype=torch.int64)
    idx[bad] = 4  # out of range at every position
    y = torch.full((4,), 7.0)
    z = torch.full((4,), 5.0)
    with pytest.raises(IndexError, match=r"\bx\b"):
        run(_gather_then_write, x, idx, y, z)
    assert torch.equal(y, torch.full((4,), 7.0)) and torch.equal(z, torch.full((4,), 5.0))


def test_torch_is_not_imported_for_numpy_arguments():
    code = ("import sys, numpy as np, intent_trace as intent\n"
            "from intent_trace import I\n"
            "@intent.kernel\n"
            "def k(x: I.In[I.f32, ('N',)], y: I.Out[I.f32, ('N',)]):\n"
            "    d = I.domain(0, x.shape[0])\n"
            "    y[d] = x[d]\n"
            "y = np.zeros(3, np.float32)\n"
            "intent.compile(k, target='generic')(np.ones(3, np.float32), y)\n"
            "assert (y == 1).all()\n"
            "print('torch' in sys.modules)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(-3, 6)), min_size=1, max_size=3),
       st.sampled_from([1, 2, 4]))
def test_overlap_check_matches_the_element_addresses(axes, itemsize):
    """``_overlaps`` against a brute-force reference: the set of bytes each element occupies."""
    shape = tuple(n for n, _ in axes)
    strides = tuple(s * itemsize if s % 2 else s for _, s in axes)  # odd multiples and raw byte strides
    base = np.zeros(256, np.uint8)
    start = 128
    a = np.lib.stride_tricks.as_strided(base[start:].view(np.dtype(f"u{itemsize}")) if itemsize > 1 else base[start:],
                                        shape, strides)
    bytes_used, overlap = set(), False
    for index in np.ndindex(*shape):
        first = sum(i * s for i, s in zip(index, strides))
        span = set(range(first, first + itemsize))
        overlap |= bool(bytes_used & span)
        bytes_used |= span
    assert _overlaps(a) == overlap


class _Producer:
    """A DLPack producer that is neither a NumPy array nor a torch tensor (it exports a NumPy array's memory)."""

    def __init__(self, array, device=None):
        self.array, self.device = array, device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_host_dlpack_arrays_are_views_written_in_place(run):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, z, old = np.zeros((2, 3), np.float32), np.full((2, 3), 4, np.float32), np.zeros((2, 3), np.float32)
    run(_swap_kernel(I.f32), _Producer(x), _Producer(y), _Producer(z), old)
    assert (y == x).all() and (z == x).all() and (old == 4).all()


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_dlpack_array_on_a_device_is_a_type_error_saying_so(run):
    f = np.zeros((2, 2), np.float32)
    with pytest.raises(TypeError, match=r"\bx\b.*device \(2, 0\).*CPU"):
        run(_swap_kernel(I.f32), _Producer(f, device=(2, 0)), f.copy(), f.copy(), f.copy())
