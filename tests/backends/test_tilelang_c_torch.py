"""tilelang-c takes CPU torch tensors of every dtype (f16 and bf16 included) and NumPy f16/bf16 arrays, zero-copy:
outputs are written into the caller's own tensor, and a failing run leaves every tensor unchanged."""
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
from intent_trace.backends.tilelang.target import build

TORCH = {"bool": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
         "u8": torch.uint8, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64, "f16": torch.float16,
         "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
NUMPY = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
         "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
         "f32": np.float32, "f64": np.float64}
_KERNELS = {}


def _kernel(name):
    """y = x reversed, z += x (InOut), with a data-derived read that a bad index makes fail."""
    if name not in _KERNELS:
        d = getattr(I, "bool_" if name == "bool" else name)

        @intent.kernel
        def k(x: I.In[d, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[d, ("N",)], z: I.InOut[d, ("N",)]):
            y[:] = x[idx[:]]
            z[:] = I.select(x[:] == z[:], z[:], x[:])

        _KERNELS[name] = k
    return _KERNELS[name]


def _values(name, n):
    rng = np.random.default_rng(len(name))
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if name in ("f16", "bf16", "f32", "f64"):
        return (rng.standard_normal(n) * 4).astype(NUMPY[name])
    info = np.iinfo(NUMPY[name])
    return rng.integers(info.min, info.max, n, dtype=np.int64 if info.min < 0 else np.uint64,
                        endpoint=True).astype(NUMPY[name])


def _torch(a: np.ndarray):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _numpy(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@pytest.mark.parametrize("name", list(TORCH))
def test_torch_tensors_of_every_dtype_are_written_in_place(name):
    n = 6
    x, z0 = _values(name, n), _values(name, n)[::-1].copy()
    z0[::2] = x[::2]  # z keeps its element where it equals x
    idx = np.arange(n, dtype=np.int32)[::-1].copy()
    exe = build(_kernel(name).trace(), target="tilelang-c")
    tx, tidx, ty, tz = _torch(x), torch.from_numpy(idx.copy()), torch.zeros(n, dtype=TORCH[name]), _torch(z0)
    y_ptr, z_ptr = ty.data_ptr(), tz.data_ptr()
    exe(tx, tidx, ty, tz)
    assert ty.dtype == TORCH[name] and ty.data_ptr() == y_ptr and tz.data_ptr() == z_ptr
    np.testing.assert_array_equal(_numpy(ty).view(f"u{x.itemsize}"), x[idx].view(f"u{x.itemsize}"))
    np.testing.assert_array_equal(_numpy(tz).view(f"u{x.itemsize}"), x.view(f"u{x.itemsize}"))
    # NumPy arrays of the same dtype (f16 and ml_dtypes' bfloat16 included) give the same bits
    y, z = np.zeros(n, NUMPY[name]), z0.copy()
    exe(x, idx, y, z)
    np.testing.assert_array_equal(y.view(f"u{x.itemsize}"), x[idx].view(f"u{x.itemsize}"))
    # a failing run (a coordinate past the end) changes none of the caller's tensors
    bad = torch.from_numpy(np.array([0, 1, 2, 3, 4, n + 3], np.int32))
    before = [t.clone() for t in (tx, bad, ty, tz)]
    with pytest.raises(IndexError, match=f"coordinate {n + 3} on axis 0 is outside its extent {n}"):
        exe(tx, bad, ty, tz)
    for t, b in zip((tx, bad, ty, tz), before):
        assert torch.equal(t.view(torch.uint8) if t.dtype == torch.bool else t, b.view(torch.uint8) if b.dtype == torch.bool else b)


def test_non_contiguous_torch_output_is_written_in_place():
    exe = build(_kernel("f16").trace(), target="tilelang-c")
    x = _values("f16", 4)
    big = torch.zeros((4, 2), dtype=torch.float16)
    y, z = big[:, 1], torch.zeros(4, dtype=torch.float16)  # a strided view of the caller's tensor
    exe(_torch(x), torch.arange(4, dtype=torch.int32), y, z)
    np.testing.assert_array_equal(big[:, 1].numpy(), x)
    np.testing.assert_array_equal(big[:, 0].numpy(), np.zeros(4, np.float16))


@pytest.mark.parametrize("name", list(TORCH))
def test_launch_takes_tensors_in_their_value_dtype_or_their_storage_dtype(name):
    """``launch`` (no staging, for data kept on the device) takes an f16 tensor as f16 or as the uint16 bits the
    general program declares, for every dtype."""
    n = 5
    x = _values(name, n)
    exe = build(_kernel(name).trace(), target="tilelang-c")
    idx = torch.arange(n, dtype=torch.int32)
    storage = exe.spec.view_storage(exe.graph.params[0].type.dtype)
    for as_storage in (False, True):
        tx, ty, tz = _torch(x), torch.zeros(n, dtype=TORCH[name]), torch.zeros(n, dtype=TORCH[name])
        if as_storage and storage:
            bits = getattr(torch, storage)
            tx, ty, tz = tx.view(bits), ty.view(bits), tz.view(bits)
        exe.launch(tx, idx, ty, tz)
        got = _numpy(ty.view(TORCH[name]))
        np.testing.assert_array_equal(got.view(f"u{x.itemsize}"), x.view(f"u{x.itemsize}"))
