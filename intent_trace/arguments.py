"""Call-time argument checks shared by every target (DESIGN §3).

Everything is checked before any target runs, so a bad call never writes anything: wrong dtype
-> TypeError, wrong rank or extent -> ValueError naming the extent and both values.

A view argument is a NumPy array or a CPU torch tensor. A tensor is bound as a NumPy array that is
a zero-copy view of its memory, strides kept (bf16 through its 16-bit pattern, as NumPy has no
bfloat16 of its own), so every target reads the caller's elements and writes its outputs into the
caller's tensor; torch is imported only when an argument is a tensor, so it stays optional.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from . import types as T
from .floatbits import number_text, round_number
from .graph.values import KernelGraph
from .limits import check_allocation

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
    want = getattr(torch, _TORCH_DTYPES.get(t.dtype.name, ""), None)
    if tensor.dtype != want:
        raise TypeError(f"view {name} is {t!r}: expected a tensor of {want} (for {t.dtype}), got {tensor.dtype}")
    if tensor.layout != torch.strided:
        raise TypeError(f"view {name}: a {tensor.layout} tensor has no strided memory to view; pass "
                        f"tensor.to_dense()")
    try:
        tensor = tensor.detach()
        if t.dtype.name == "bf16":  # NumPy has no bfloat16: view the bits, then as ml_dtypes' bfloat16
            return tensor.view(torch.int16).numpy().view(t.dtype.np)
        return tensor.numpy()
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"view {name}: the tensor cannot be viewed as a NumPy array without a copy ({e})") from None


def _overlaps(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` share memory (a stride of 0, or strides that interleave them)."""
    if a.size <= 1:
        return False
    axes = sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n > 1)
    span = a.itemsize  # bytes covered by the axes seen so far (smallest strides first)
    for stride, n in axes:
        if stride == 0:
            return True
        if stride < span:
            break  # not provably disjoint by strides alone: look at every element's address
        span = stride * (n - 1) + span
    else:
        return False
    check_allocation("the overlap check of a strided view", a.shape, 8)
    offsets = np.zeros((), np.int64)
    for stride, n in zip(a.strides, a.shape):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * stride)
    offsets = np.sort(offsets, axis=None)
    return bool(np.any(np.diff(offsets) < a.itemsize))


def _scalar(name: str, dtype: T.DType, value):
    if dtype.is_bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"scalar {name} is bool; got {type(value).__name__} {value!r}")
        return np.asarray(bool(value))
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"scalar {name} is {dtype}; got the bool {value!r}")
    if dtype.is_int:
        if not isinstance(value, (Integral, np.integer)):
            raise TypeError(f"scalar {name} is {dtype}; got {type(value).__name__} {value!r}")
        v = int(value)
        if not dtype.min <= v <= dtype.max:
            raise ValueError(f"scalar {name} = {number_text(v)} is out of range for {dtype} ({dtype.min}..{dtype.max})")
        return np.asarray(v, dtype=dtype.np)
    if not isinstance(value, (Real, np.integer, np.floating)):
        raise TypeError(f"scalar {name} is {dtype}; got {type(value).__name__} {value!r}")
    if isinstance(value, np.floating) and value.dtype == dtype.np:
        return np.asarray(value)
    if not isinstance(value, (Integral, np.integer, np.floating)):
        value = float(value)  # other Reals (Fraction, Decimal) through float64, as float literals
    stored, overflowed = round_number(value, dtype.np)
    if overflowed:
        raise ValueError(f"scalar {name} = {number_text(value)} overflows {dtype} (largest finite value "
                         f"{float(np.finfo(dtype.np).max)!r}); pass a value of the dtype, or ±inf explicitly")
    return stored


def bind_arguments(graph: KernelGraph, args: tuple, accept=(np.ndarray,)):
    """Check ``args`` against the graph's parameters; return (values in param order, {Dim: int})."""
    params = graph.params
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeError(f"kernel {graph.name} takes {len(params)} runtime arguments ({names}), got {len(args)}")
    values, dims, seen = [], {}, {}
    for p, a in zip(params, args):
        t = p.type
        if p.kind == "scalar":
            values.append(_scalar(p.name, t.dtype, a))
            continue
        if is_torch_tensor(a):
            a = tensor_view(p.name, t, a)
        elif not isinstance(a, accept):
            raise TypeError(f"view {p.name} expects a NumPy array or a CPU torch tensor of {t.dtype}, "
                            f"got {type(a).__name__}")
        want = t.dtype.np
        if a.dtype != want:
            raise TypeError(f"view {p.name} is {t!r}: expected dtype {want}, got {a.dtype}")
        if a.ndim != t.rank:
            raise ValueError(f"view {p.name} is {t!r}: expected rank {t.rank}, got shape {tuple(a.shape)}")
        if t.access != "In" and not a.flags.writeable:
            raise ValueError(f"view {p.name} is {t.access} but the array is read-only")
        if t.access != "In" and _overlaps(a):
            raise ValueError(f"view {p.name} is {t.access} but its elements overlap in memory (strides "
                             f"{a.strides} for shape {tuple(a.shape)}, e.g. an expanded or broadcast array), so "
                             f"it cannot hold one value per element; pass a contiguous copy")
        for axis, (e, n) in enumerate(zip(t.shape, a.shape)):
            if isinstance(e, int):
                if e != n:
                    raise ValueError(f"view {p.name} axis {axis} has static extent {e}, got {n}")
            elif e in dims:
                if dims[e] != n:
                    first = seen[e]
                    raise ValueError(f"extent {e.name} disagrees: {first[0]}.shape[{first[1]}] = {dims[e]} but "
                                     f"{p.name}.shape[{axis}] = {n}")
            else:
                dims[e] = n
                seen[e] = (p.name, axis)
        values.append(a)
    return values, dims
