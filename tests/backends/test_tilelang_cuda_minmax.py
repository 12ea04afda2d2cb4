"""tilelang-cuda's f32/f64 ``max`` and ``min`` are selects (cuda._select_minmax), not the C body's early returns,
which nvcc made three branch regions per combine of a row's max fold (softmax, log-softmax: a dependent chain). The
rules must stay the C body's (IEEE 754-2019 maximum/minimum: a NaN operand wins, the first one, its bits unchanged,
signalling or quiet; -0 < +0): both helpers are compiled for this host with g++ and run on every pair of ordinary
values, signed zeros, infinities and NaN payloads, and their bits compared with the rules computed in NumPy."""
import ctypes

import numpy as np
import pytest
from backends.host_cxx import shared_library
from backends.test_tilelang_cuda_nans import _BITS, _host, _values

from intent_trace import types as T
from intent_trace.backends.tilelang import c as C
from intent_trace.backends.tilelang import cuda


def _expected(family: str, a: np.ndarray, b: np.ndarray, np_uint) -> np.ndarray:
    """The rules, from the operands' bits: a if a is NaN, else b if b is NaN, else the signed-zero rule, else the
    larger (smaller)."""
    sign = (a.view(np_uint) >> np_uint(8 * a.itemsize - 1)) != 0
    zeros = (a == 0) & (b == 0)
    pick_a = a > b if family == "max" else a < b
    zero_a = ~sign if family == "max" else sign  # max(-0, +0) = +0, min(-0, +0) = -0
    r = np.where(zeros, np.where(zero_a, a, b), np.where(pick_a, a, b))
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r)).view(np_uint)


@pytest.mark.parametrize("family", ["max", "min"])
@pytest.mark.parametrize("dtype", [T.f32, T.f64], ids=str)
def test_the_selected_min_and_max_give_the_c_body_s_bits(dtype, family):
    t = "float" if dtype.name == "f32" else "double"
    _, np_float, np_uint = _BITS[t]
    name = f"it_{family}_{dtype.name}"
    text = cuda.helper_source(name, family, (dtype,), dtype, (dtype, dtype))
    assert "if (" not in text and "return a != a ? a : r;" in text  # selects only: no early return
    body = C.helper_source(f"{name}_body", family, (dtype,), dtype, (dtype, dtype), cuda.DEVICE)
    assert "if (a != a) return a;" in body  # the C body the selects replace
    defs = [_host(text), _host(body)]
    prelude = _host(C.prelude([], cuda.DEVICE)) + "\n" + "\n".join(
        _host(cuda.DEVICE.render(C.BASE[n])) for n in C.base_helpers(defs, C.BASE))
    runners = [f'extern "C" void run_{f}(const {t}* a, const {t}* b, {t}* out, long k) '
               f'{{ for (long i = 0; i < k; ++i) out[i] = {f}(a[i], b[i]); }}' for f in (name, f"{name}_body")]
    lib = shared_library("\n".join([prelude, *defs, *runners, ""]), "cuda_minmax")
    v = _values(np_float, np_uint)
    a, b = (np.ascontiguousarray(g.ravel(), np_float) for g in np.meshgrid(v, v, indexing="ij"))
    ptr = ctypes.POINTER(ctypes.c_float if t == "float" else ctypes.c_double)
    want = _expected(family, a, b, np_uint)
    for f in (name, f"{name}_body"):
        out = np.empty(len(a), np_float)
        getattr(lib, f"run_{f}")(a.ctypes.data_as(ptr), b.ctypes.data_as(ptr), out.ctypes.data_as(ptr),
                                 ctypes.c_long(len(out)))
        bad = np.flatnonzero(out.view(np_uint) != want)
        assert bad.size == 0, (f, [(hex(int(a.view(np_uint)[i])), hex(int(b.view(np_uint)[i])),
                                    hex(int(out.view(np_uint)[i])), hex(int(want[i]))) for i in bad[:5]])
