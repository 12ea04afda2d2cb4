"""View arguments as NumPy arrays sharing the caller's memory (no copies, so outputs land in place).

Every target binds a view argument as a NumPy array (``arguments.bind_arguments``):

- a NumPy array as it is;
- a CPU torch tensor as a zero-copy view of its memory, strides kept, any dtype (bf16 through its
  16-bit pattern, as NumPy has no bfloat16 of its own: ml_dtypes' bfloat16 is the same bits);
- any other DLPack producer in host memory through ``np.from_dlpack``.

torch is imported only when an argument is a torch tensor, so it stays an optional dependency. An
object in device memory, of another dtype, or that has no strided memory to view is a TypeError
naming the view: copying it instead would leave the caller's outputs unwritten.
"""
from __future__ import annotations

import math

import numpy as np

from . import types as T
from .limits import check_allocation

_DLPACK_HOST_DEVICES = (1, 3)  # kDLCPU, kDLCUDAHost (pinned host memory)


# intent dtype name -> the torch dtype (by attribute name) of a tensor that may back a view of it
_TORCH_DTYPES = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
                 "f32": "float32", "f64": "float64", "index": "int64"}


def is_torch_tensor(value) -> bool:
    """Whether ``value`` is a torch tensor, decided without importing torch for anything else."""
    module = type(value).__module__
    if module != "torch" and not module.startswith("torch."):
        return False
    import torch

    return isinstance(value, torch.Tensor)


def check_tensor(name: str, t: T.ViewType, tensor) -> None:
    """TypeError naming the view unless ``tensor`` (wherever it lives) has the view's dtype and strided memory."""
    import torch

    want = getattr(torch, _TORCH_DTYPES.get(t.dtype.name, ""), None)
    if tensor.dtype != want:
        raise TypeError(f"view {name} is {t!r}: expected a tensor of {want} (for {t.dtype}), got {tensor.dtype}")
    if tensor.layout != torch.strided:
        raise TypeError(f"view {name}: a {tensor.layout} tensor has no strided memory to view; pass "
                        f"tensor.to_dense()")


def tensor_view(name: str, t: T.ViewType, tensor) -> np.ndarray:
    """A NumPy array sharing ``tensor``'s memory and strides, for the view parameter ``name`` of type ``t``.

    Refused with a TypeError naming the view: a tensor that is not in host memory (CUDA, meta: a CPU
    target cannot read it, and copying it would leave outputs unwritten), of another dtype than the
    view's, or with no strided memory to view (sparse, quantized, wrapper subclasses).
    """
    import torch

    if tensor.device.type != "cpu":
        raise TypeError(f"view {name}: the tensor is on {tensor.device}, but this target runs on the CPU and "
                        f"reads and writes host memory; pass a CPU tensor (tensor.cpu())")
    check_tensor(name, t, tensor)
    try:
        tensor = tensor.detach()
        if t.dtype.name == "bf16":  # NumPy has no bfloat16: view the bits, then as ml_dtypes' bfloat16
            return tensor.view(torch.int16).numpy().view(t.dtype.np)
        return tensor.numpy()
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"view {name}: the tensor cannot be viewed as a NumPy array without a copy ({e})") from None


def overlaps(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` share memory (a stride of 0, or strides that interleave them)."""
    return strides_overlap(a.shape, a.strides, a.itemsize)


def strides_overlap(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """Whether two elements of an array of ``shape``, byte ``strides`` and ``itemsize`` share memory: decided from
    the layout alone, so a tensor in device memory is checked as a NumPy array is."""
    if math.prod(shape) <= 1:
        return False
    axes = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    span = itemsize  # bytes covered by the axes seen so far (smallest strides first)
    for stride, n in axes:
        if stride == 0:
            return True
        if stride < span:
            break  # not provably disjoint by strides alone: look at every element's address
        span = stride * (n - 1) + span
    else:
        return False
    check_allocation("the overlap check of a strided view", shape, 8)
    offsets = np.zeros((), np.int64)
    for stride, n in zip(strides, shape):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * stride)
    offsets = np.sort(offsets, axis=None)
    return bool(np.any(np.diff(offsets) < itemsize))


def dlpack_view(name: str, value) -> np.ndarray:
    """A NumPy array sharing the memory of a DLPack producer that lives in host memory."""
    device = value.__dlpack_device__()
    if int(device[0]) not in _DLPACK_HOST_DEVICES:
        raise TypeError(f"view {name}: the {type(value).__name__} is on DLPack device {tuple(device)}, but this "
                        f"target runs on the CPU and reads and writes host memory; pass a host array")
    try:
        return np.from_dlpack(value)
    except (TypeError, ValueError, RuntimeError, BufferError) as e:
        raise TypeError(f"view {name}: the {type(value).__name__} cannot be viewed as a NumPy array without a copy "
                        f"({e})") from None


def host_view(name: str, t: T.ViewType, value, accept=(np.ndarray,)) -> np.ndarray:
    """The NumPy array the view parameter ``name`` (of type ``t``) is bound as, sharing ``value``'s memory."""
    if is_torch_tensor(value):
        return tensor_view(name, t, value)
    if isinstance(value, accept):
        return value
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return dlpack_view(name, value)
    raise TypeError(f"view {name} expects a NumPy array, a CPU torch tensor or a host DLPack array of {t.dtype}, "
                    f"got {type(value).__name__}")
