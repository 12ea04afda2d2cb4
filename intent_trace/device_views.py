"""View arguments that stay in device memory: torch tensors on the target's device, bound as they are.

A target whose kernels run where the caller's tensors already live (tilelang-cuda: ``device_tensors="cuda"``)
takes them without a trip through the host: :func:`device_tensor` returns the tensor itself (detached, same
memory, strides kept) after the same dtype and layout checks a host view gets (:func:`.host_views.check_tensor`),
so the messages are the shared ones. Anything in host memory is left to :mod:`.host_views`; a tensor on another
device (another kind, or another CUDA device than the current one, where the kernel launches) is a TypeError
naming the view: copying it would leave the caller's outputs unwritten.

torch is imported only when an argument is a torch tensor or a device DLPack producer.
"""
from __future__ import annotations

from . import types as T
from .host_views import check_tensor, is_torch_tensor

_DLPACK_DEVICES = {"cuda": (2,)}  # kDLCUDA (pinned host memory, kDLCUDAHost, is host memory: host_views)


def device_tensor(name: str, t: T.ViewType, value, device: str, target: str):
    """``value`` as a torch tensor in ``device`` memory, or None when it is in host memory (or not a tensor)."""
    if not is_torch_tensor(value):
        producer = getattr(value, "__dlpack_device__", None)
        if producer is None or int(producer()[0]) not in _DLPACK_DEVICES.get(device, ()):
            return None
        import torch

        value = torch.from_dlpack(value)  # zero-copy: outputs still land in the producer's memory
    kind = value.device.type
    if kind == "cpu" and device != "cpu":  # host memory: a NumPy view (host_views); "cpu" is for tests
        return None
    if kind != device:
        raise TypeError(f"view {name}: the tensor is on {value.device}, but target {target} reads and writes "
                        f"{device} tensors or host memory; pass a {device} or a CPU tensor")
    current = _current_device(device)
    if isinstance(current, int) and value.device.index not in (None, current):
        raise TypeError(f"view {name}: the tensor is on {value.device}, but target {target} launches on the "
                        f"current device {device}:{current}; move the tensor there or select its device "
                        f"(torch.{device}.set_device)")
    check_tensor(name, t, value)
    return value.detach()


def _current_device(device: str):
    import torch

    module = getattr(torch, device, None)
    return module.current_device() if module is not None and hasattr(module, "current_device") else None


def layout(value) -> tuple:
    """(shape, byte strides, itemsize) of a NumPy array or a torch tensor."""
    if is_torch_tensor(value):
        size = value.element_size()
        return tuple(value.shape), tuple(s * size for s in value.stride()), size
    return tuple(value.shape), tuple(value.strides), value.itemsize
