"""The torch-argument cases shared by tilelang-c (CPU tensors, and the device path with a test target whose
"device" is the CPU) and tilelang-cuda (CUDA tensors, on the H200): each takes an executable and the device its
tensors are made on. References are NumPy on the same values; the messages are compared with generic's (the
shared ``bind_arguments`` messages), never worked out from the target under test."""
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

torch = pytest.importorskip("torch")

TORCH = {"bool": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
         "u8": torch.uint8, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64, "f16": torch.float16,
         "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
NUMPY = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
         "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
         "f32": np.float32, "f64": np.float64}
_KERNELS = {}


def kernel(name):
    """y = x gathered through idx, z = z where it equals x else x (InOut): a data-derived read that a bad index
    makes fail, and no arithmetic, so every dtype has it."""
    if name not in _KERNELS:
        d = getattr(I, "bool_" if name == "bool" else name)

        @intent.kernel
        def k(x: I.In[d, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[d, ("N",)], z: I.InOut[d, ("N",)]):
            y[:] = x[idx[:]]
            z[:] = I.select(x[:] == z[:], z[:], x[:])

        _KERNELS[name] = k
    return _KERNELS[name]


def values(name, n, seed=0):
    rng = np.random.default_rng(len(name) + 100 * seed)
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if name in ("f16", "bf16", "f32", "f64"):
        return (rng.standard_normal(n) * 4).astype(NUMPY[name])
    info = np.iinfo(NUMPY[name])
    return rng.integers(info.min, info.max, n, dtype=np.int64 if info.min < 0 else np.uint64,
                        endpoint=True).astype(NUMPY[name])


def tensor(a: np.ndarray, device="cpu"):
    """A torch tensor holding ``a``'s values (its own memory) on ``device``."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def numpy(t):
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.itemsize}")


def same(a, b) -> bool:
    """Bitwise equality of two tensors of one dtype (wherever they live)."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(numpy(a)), bits(numpy(b)))


def check_every_dtype_in_place(exe, name, device):
    """Outputs land in the caller's tensors (same memory), bit for bit; a failing run changes none of them."""
    n = 6
    x, z0 = values(name, n), values(name, n, 1)
    z0[::2] = x[::2]  # z keeps its element where it equals x
    idx = np.arange(n, dtype=np.int32)[::-1].copy()
    tx, tidx, ty, tz = tensor(x, device), tensor(idx, device), torch.zeros(n, dtype=TORCH[name], device=device), \
        tensor(z0, device)
    y_ptr, z_ptr = ty.data_ptr(), tz.data_ptr()
    exe(tx, tidx, ty, tz)
    assert ty.dtype == TORCH[name] and ty.data_ptr() == y_ptr and tz.data_ptr() == z_ptr
    np.testing.assert_array_equal(bits(numpy(ty)), bits(x[idx]))
    np.testing.assert_array_equal(bits(numpy(tz)), bits(x))
    # NumPy arrays of the same dtype (f16 and ml_dtypes' bfloat16 included) and CPU tensors give the same bits
    y, z = np.zeros(n, NUMPY[name]), z0.copy()
    exe(x, idx, y, z)
    np.testing.assert_array_equal(bits(y), bits(x[idx]))
    cy, cz = torch.zeros(n, dtype=TORCH[name]), tensor(z0)
    exe(tensor(x), tensor(idx), cy, cz)
    np.testing.assert_array_equal(bits(numpy(cy)), bits(x[idx]))
    np.testing.assert_array_equal(bits(numpy(cz)), bits(x))
    # a failing run (a coordinate past the end, at each end) changes none of the caller's tensors
    for at in (0, n - 1):
        wrong = np.arange(n, dtype=np.int32)
        wrong[at] = n + 3
        bad = tensor(wrong, device)
        before = [t.clone() for t in (tx, bad, ty, tz)]
        with pytest.raises(IndexError, match=f"coordinate {n + 3} on axis 0 is outside its extent {n}"):
            exe(tx, bad, ty, tz)
        assert all(same(t, b) for t, b in zip((tx, bad, ty, tz), before))


def check_strided_tensors(exe, name, device):
    """A strided input is read through its strides; a strided output (a column of a bigger tensor) is written in
    the caller's memory, the elements between untouched."""
    n = 5
    base_x = tensor(values(name, 2 * n), device)
    x = base_x[::2]  # every other element
    z_base = tensor(values(name, 3 * n, 2), device).reshape(n, 3)
    z = z_base[:, 2]
    y_base = torch.zeros((n, 2), dtype=TORCH[name], device=device)
    y = y_base[:, 1]
    z_rest, idx = z_base[:, :2].clone(), torch.arange(n, dtype=torch.int32, device=device)
    exe(x, idx, y, z)
    want = numpy(base_x)[::2]
    np.testing.assert_array_equal(bits(numpy(y_base[:, 1])), bits(want))
    np.testing.assert_array_equal(bits(numpy(z_base[:, 2])), bits(want))
    assert not numpy(y_base[:, 0]).astype(bool).any() and same(z_base[:, :2], z_rest)


def _message(run, args):
    with pytest.raises((TypeError, ValueError)) as e:
        run(*args)
    return e.type, str(e.value)


def check_messages_are_the_shared_ones(exe, device):
    """Wrong dtype, wrong extent, overlapping output: the target raises generic's exception, word for word, and
    leaves the caller's tensors unchanged."""
    generic = intent.compile(kernel("f16"), target="generic")

    def f16(n, device):
        return torch.zeros(n, dtype=torch.float16, device=device)

    def idx(n, device):
        return torch.arange(n, dtype=torch.int32, device=device)

    cases = [
        lambda d: (f16(4, d).float(), idx(4, d), f16(4, d), f16(4, d)),  # x of the wrong dtype
        lambda d: (f16(4, d), idx(4, d).long(), f16(4, d), f16(4, d)),  # idx of the wrong dtype
        lambda d: (f16(4, d), idx(4, d), f16(5, d), f16(4, d)),  # N disagrees
        lambda d: (f16(4, d), idx(4, d), f16(1, d).expand(4), f16(4, d)),  # y's elements overlap
        lambda d: (f16(4, d).reshape(2, 2), idx(4, d), f16(4, d), f16(4, d)),  # wrong rank
    ]
    for make in cases:
        want = _message(generic, make("cpu"))
        args = make(device)
        before = [a.clone() for a in args]
        assert _message(exe, args) == want
        assert all(same(a, b) for a, b in zip(args, before))


def check_launch_every_dtype(exe, name, device):
    """``launch`` (no staging, for data kept on the device) takes an f16 tensor as f16 or as the uint16 bits the
    general program declares, for every dtype."""
    n = 5
    x = values(name, n)
    idx = torch.arange(n, dtype=torch.int32, device=device)
    storage = exe.spec.view_storage(exe.graph.params[0].type.dtype)
    for as_storage in (False, True):
        tx, ty = tensor(x, device), torch.zeros(n, dtype=TORCH[name], device=device)
        tz = torch.zeros(n, dtype=TORCH[name], device=device)
        if as_storage and storage:
            store = getattr(torch, storage)
            tx, ty, tz = tx.view(store), ty.view(store), tz.view(store)
        exe.launch(tx, idx, ty, tz)
        exe.synchronize()
        np.testing.assert_array_equal(bits(numpy(ty.view(TORCH[name]))), bits(x))


def check_off_host_output_is_refused_on_cpu_targets(device: str):
    """An output tensor on ``device`` (not host memory) is a TypeError naming the view on generic and on tilelang-c,
    with one message: both bind through bind_arguments."""
    args = (torch.zeros(4, dtype=torch.float16), torch.arange(4, dtype=torch.int32),
            torch.empty(4, dtype=torch.float16, device=device), torch.zeros(4, dtype=torch.float16))
    messages = []
    for target in ("generic", "tilelang-c"):
        with pytest.raises(TypeError, match=rf"view y: the tensor is on {args[2].device}.*CPU") as e:
            intent.compile(kernel("f16"), target=target)(*args)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
