"""tilelang-cuda takes torch CUDA tensors of every dtype on every program it can choose (collected only when
INTENT_TRACE_TEST_TARGETS names tilelang-cuda; tools/gpu_session.sh runs it): inputs are read where they are,
reinterpreted as the storage dtype the program declares (f16 as its uint16 bits, bool as uint8); outputs run on
device copies committed into the caller's tensors only when the kernel succeeded. CPU tensors and NumPy arrays keep
working, and a bad argument raises generic's message. The same cases run on tilelang-c in CI
(test_tilelang_c_torch.py), through the same device path on a CPU "device"."""
import numpy as np
import pytest
from backends import torch_cases as tc

import intent_trace as intent
from intent_trace import I

torch = tc.torch
if not torch.cuda.is_available():
    pytest.fail("test_tilelang_cuda_torch.py is collected only for tilelang-cuda, which needs a CUDA device",
                pytrace=False)
TARGET = "tilelang-cuda"


@pytest.mark.parametrize("name", list(tc.TORCH))
def test_cuda_tensors_of_every_dtype_are_computed_in_place(name):
    tc.check_every_dtype_in_place(intent.compile(tc.kernel(name), target=TARGET), name, "cuda")


@pytest.mark.parametrize("name", ["f16", "bf16", "bool", "u32", "f64"])
def test_strided_cuda_tensors_are_read_and_written_through_their_strides(name):
    tc.check_strided_tensors(intent.compile(tc.kernel(name), target=TARGET), name, "cuda")


def test_bad_cuda_arguments_raise_the_shared_messages_and_change_nothing():
    tc.check_messages_are_the_shared_ones(intent.compile(tc.kernel("f16"), target=TARGET), "cuda")


@pytest.mark.parametrize("name", list(tc.TORCH))
def test_launch_takes_cuda_tensors_of_every_dtype(name):
    tc.check_launch_every_dtype(intent.compile(tc.kernel(name), target=TARGET), name, "cuda")


def test_a_cuda_tensor_on_a_cpu_target_is_refused_with_the_shared_message():
    tc.check_off_host_output_is_refused_on_cpu_targets("cuda")


@intent.kernel
def scale_f16(x: I.In[I.f16, ("M", "N")], w: I.In[I.f16, ("N",)], y: I.Out[I.f16, ("M", "N")]):
    m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
    y[m, n] = x[m, n] * w[n]


def test_f16_cuda_tensors_run_on_a_grid_program():
    """A pointwise f16 nest (a grid of threads, not a template): the product of two f16 values is exact in f32, so
    it rounds once to f16, as NumPy's f16 multiply does."""
    rng = np.random.default_rng(3)
    x, w = (rng.standard_normal((37, 129)) * 8).astype(np.float16), rng.standard_normal(129).astype(np.float16)
    y = torch.zeros((37, 129), dtype=torch.float16, device="cuda")
    intent.compile(scale_f16, target=TARGET)(tc.tensor(x, "cuda"), tc.tensor(w, "cuda"), y)
    np.testing.assert_array_equal(tc.bits(tc.numpy(y)), tc.bits(x * w))


@intent.kernel
def matmul_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.cast(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32), I.f16)


@pytest.mark.parametrize("shape", [(256, 128, 512), (100, 40, 72)], ids=["tiled", "general"])
def test_f16_matmul_takes_cuda_tensors_on_the_tiled_and_the_general_program(shape):
    """Small integers: every product and partial sum is exact in f32, so any association gives NumPy's result.
    (256, 128, 512) is divided by the matmul tiles (the specialisation); (100, 40, 72) is not (the general program
    declares f16 as uint16: the rejection issue 17 measured)."""
    m, k, n = shape
    rng = np.random.default_rng(4)
    a, b = rng.integers(-4, 5, (m, k)).astype(np.float16), rng.integers(-4, 5, (k, n)).astype(np.float16)
    exe = intent.compile(matmul_f16, target=TARGET)
    c = torch.full((m, n), 7.0, dtype=torch.float16, device="cuda")
    ta, tb = tc.tensor(a, "cuda"), tc.tensor(b, "cuda")
    exe(ta, tb, c)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(tc.numpy(c), want)
    c2 = torch.zeros((n, m), dtype=torch.float16, device="cuda").t()  # a transposed output, strides kept
    exe(ta, tb, c2)
    np.testing.assert_array_equal(tc.numpy(c2), want)
