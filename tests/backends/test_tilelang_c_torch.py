"""tilelang-c takes CPU torch tensors of every dtype (f16 and bf16 included) and NumPy f16/bf16 arrays, zero-copy:
outputs are written into the caller's own tensor, and a failing run leaves every tensor unchanged. Arguments go
through the shared ``bind_arguments`` (one conversion path for every target), so a bad one raises generic's
message. The device path tilelang-cuda takes for CUDA tensors (inputs read where they are, outputs staged and
committed on success) runs here too, on a test target whose "device" is the CPU (the H200 runs it for real:
test_tilelang_cuda_torch.py)."""
import attrs
import pytest
from backends import torch_cases as tc

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.executable import TileLangExecutable
from intent_trace.backends.tilelang.target import build
from intent_trace.backends.tilelang.targets import C

torch = tc.torch
DEVICE_PATH_ON_CPU = attrs.evolve(C, device_tensors="cpu")  # CPU tensors bound as tensors, as CUDA's are


def _executables(name):
    graph = tc.kernel(name).trace()
    return {"host": build(graph, target="tilelang-c"), "device": TileLangExecutable(graph, DEVICE_PATH_ON_CPU)}


@pytest.mark.parametrize("path", ["host", "device"])
@pytest.mark.parametrize("name", list(tc.TORCH))
def test_torch_tensors_of_every_dtype_are_written_in_place(name, path):
    tc.check_every_dtype_in_place(_executables(name)[path], name, "cpu")


@pytest.mark.parametrize("path", ["host", "device"])
@pytest.mark.parametrize("name", ["f16", "bf16", "bool", "u32", "f64"])
def test_strided_torch_tensors_are_read_and_written_through_their_strides(name, path):
    tc.check_strided_tensors(_executables(name)[path], name, "cpu")


@pytest.mark.parametrize("path", ["host", "device"])
def test_bad_arguments_raise_the_shared_messages_and_change_nothing(path):
    tc.check_messages_are_the_shared_ones(_executables("f16")[path], "cpu")


def test_a_tensor_in_device_memory_is_refused_naming_the_view_as_on_every_cpu_target():
    tc.check_off_host_output_is_refused_on_cpu_targets("meta")


def test_a_tensor_on_another_device_than_the_targets_is_refused_naming_it():
    meta = torch.empty(4, dtype=torch.float16, device="meta")
    with pytest.raises(TypeError, match=r"view x: the tensor is on meta, but target tilelang-c reads and writes "
                                        r"cpu tensors"):
        _executables("f16")["device"](meta, torch.arange(4, dtype=torch.int32), torch.zeros(4, dtype=torch.float16),
                                      torch.zeros(4, dtype=torch.float16))


@pytest.mark.parametrize("name", list(tc.TORCH))
def test_launch_takes_tensors_in_their_value_dtype_or_their_storage_dtype(name):
    tc.check_launch_every_dtype(build(tc.kernel(name).trace(), target="tilelang-c"), name, "cpu")
