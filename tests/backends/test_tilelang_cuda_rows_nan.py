"""The row program's NaN fast path (cuda_rows_nan): a row is computed by fast helper bodies and, where a stored value
or a reduction result is NaN, computed again by the careful ones, which give the oracle's NaN bits (T3).

On tilelang-c (CUDA's row mapping emulated) the fast program's stored NaNs are the hardware's canonical NaN
0x7FFFFFFF, so every payload below comes from the recomputation alone: these tests fail without it. NaNs are planted
one to a row (quiet and signalling payloads, both signs) at the row's first, middle and last element (the last is in
the chunk the row ends in) in varying rows, for each tier (a warp's rows <= 1024, a block's <= 8192, longer rows in
passes); infinities that make the default NaN (inf - inf) in other rows. The expected bits are hand-computed from
x86's rules (T3): an operation's NaN result is its first NaN operand, quieted (bit 22 set), or the default NaN
0xFFC00000 for an invalid one; with one NaN in a row every op on it passes that NaN on, so every output element of
the row is that NaN quieted. The rows without a NaN are checked to be what NumPy computes within a loose bound
(their exact bounds are test_tilelang_cuda_rows*'s)."""
import numpy as np
import pytest
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_rows import EMULATED, compiled  # noqa: F401  (the fixture: CUDA's rows emulated)
from intent_trace.backends.tilelang import cuda_rows
from intent_trace.backends.tilelang.program import lower
from intent_trace.backends.tilelang.target import generate
from schedule.row_kernels import layer_norm, rms_norm_f16, row_argmax, row_sum, softmax_rows, softmax_tensor

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(2017)
#: a warp's row (with a partial last chunk), a block's, rows in passes (with a tail)
LENGTHS = (1000, 5000, 9001)
ROWS = 11  # two blocks of a warp's rows, the second partly filled
#: f32 NaN payloads: quiet, signalling, negative quiet, negative signalling
PAYLOADS = (0x7FC00123, 0x7F800001, 0xFFC54321, 0xFFA00000)
DEFAULT = 0xFFC00000  # x86's NaN for an invalid operation (inf - inf)


@intent.kernel
def row_max(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.max(x[:, :], axis=1)


def _quiet(bits: int) -> int:
    return bits | 0x00400000


def _planted(n: int):
    """Rows of normal values with a NaN in rows 0, 5 and 10 (first, middle and last element, payloads in turn), an
    +inf in row 3 (inf - inf where the max is subtracted) and +inf and -inf in row 7 (inf - inf in a sum).
    Returns x and {row: the expected bits of each of its output elements}."""
    x = RNG.standard_normal((ROWS, n)).astype(np.float32)
    bits = x.view(np.uint32)
    want = {}
    for k, (row, col) in enumerate([(0, 0), (5, n // 2), (10, n - 1)]):
        p = PAYLOADS[(k + n) % len(PAYLOADS)]
        bits[row, col] = p
        want[row] = _quiet(p)
    x[3, n // 3] = np.inf
    x[7, 1], x[7, n - 2] = np.inf, -np.inf
    return x, want


def _clean(want: dict, *more) -> np.ndarray:
    ok = np.ones(ROWS, bool)
    ok[list(want)] = False
    ok[list(more)] = False
    return ok


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kernel", [softmax_rows, softmax_tensor, zoo.log_softmax], ids=lambda k: k.name)
def test_softmax_rows_with_a_nan_keep_its_payload(compiled, kernel, n):
    x, want = _planted(n)
    y = np.zeros_like(x)
    compiled(kernel)(x, y)
    got = y.view(np.uint32)
    for row, bits in want.items():
        assert (got[row] == bits).all(), (row, hex(bits), [hex(b) for b in np.unique(got[row])[:4]])
    # row 3: max = inf, inf - inf = the default NaN at the inf, -inf elsewhere; exp(-inf) = 0; the sum is the
    # default NaN, and every element's result (0 / NaN, NaN / NaN; log-softmax: -inf - NaN, NaN - NaN) is it
    assert (got[3] == DEFAULT).all(), [hex(b) for b in np.unique(got[3])[:4]]
    ok = _clean(want, 3, 7)
    x64 = x[ok].astype(np.float64)
    shifted = x64 - x64.max(axis=1, keepdims=True)
    ref = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    ref = ref if kernel is zoo.log_softmax else np.exp(ref)
    assert np.allclose(y[ok], ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("n", LENGTHS)
def test_layer_norm_rows_with_a_nan_keep_its_payload(compiled, n):
    x, want = _planted(n)
    w = (RNG.standard_normal(n) + 1).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    y = np.zeros_like(x)
    compiled(layer_norm)(x, w, b, y)
    got = y.view(np.uint32)
    for row, bits in want.items():  # the mean is the NaN: x - mean, the variance and every product pass it on
        assert (got[row] == bits).all(), (row, hex(bits))
    for row in (3, 7):  # mean inf (row 3) or inf - inf (row 7): the default NaN in every element
        assert (got[row] == DEFAULT).all(), (row, [hex(v) for v in np.unique(got[row])[:4]])
    ok = _clean(want, 3, 7)
    x64 = x[ok].astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    ref = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * w + b
    assert np.allclose(y[ok], ref, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("n", LENGTHS)
def test_row_sum_and_max_with_a_nan_keep_its_payload(compiled, n):
    x, want = _planted(n)
    s = np.zeros(ROWS, np.float32)
    compiled(row_sum)(x, s)
    for row, bits in want.items():
        assert s.view(np.uint32)[row] == bits, (row, hex(s.view(np.uint32)[row]), hex(bits))
    assert s.view(np.uint32)[7] == DEFAULT  # inf + -inf, in whatever order the partials meet
    assert s[3] == np.inf
    ok = _clean(want, 3, 7)
    assert np.allclose(s[ok], x[ok].astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-2)
    quiet = x.copy()  # the max returns its NaN operand as it is: quiet payloads alone, so quieting is no question
    for row in want:
        quiet.view(np.uint32)[row] |= np.uint32(0x00400000) * np.isnan(quiet[row])
    m = np.zeros(ROWS, np.float32)
    compiled(row_max)(quiet, m)
    for row, bits in want.items():
        assert m.view(np.uint32)[row] == bits, (row, hex(m.view(np.uint32)[row]), hex(bits))
    assert np.array_equal(m[_clean(want)], quiet[_clean(want)].max(axis=1))


@pytest.mark.parametrize("n", LENGTHS)
def test_argmax_rows_with_a_nan_give_its_index(compiled, n):
    x, want = _planted(n)
    y = np.full(ROWS, -7, np.int64)
    compiled(row_argmax)(x, y)
    assert np.array_equal(y, np.argmax(x, axis=1))  # NumPy: the first NaN, the first of equal maxima


@pytest.mark.parametrize("n", LENGTHS)
def test_rms_norm_f16_rows_with_a_nan_keep_its_payload(compiled, n):
    """f16 NaNs (quiet, signalling, both signs): the decode keeps the bits, the cast to f32 quiets them, every op
    passes the NaN on and the final cast keeps the payload's top ten bits: the f16 NaN quieted (0x0200 set)."""
    x = (RNG.standard_normal((ROWS, n)) * 3).astype(np.float16)
    bits = x.view(np.uint16)
    want = {}
    for k, (row, col) in enumerate([(0, 0), (5, n // 2), (10, n - 1)]):
        p = (0x7E05, 0x7C01, 0xFE31, 0xFD00)[(k + n) % 4]
        bits[row, col] = p
        want[row] = p | 0x0200
    y = np.zeros_like(x)
    compiled(rms_norm_f16)(x, y)
    got = y.view(np.uint16)
    for row, b in want.items():
        assert (got[row] == b).all(), (row, hex(b), [hex(v) for v in np.unique(got[row])[:4]])
    ok = _clean(want)
    x64 = x[ok].astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6)
    assert np.allclose(y[ok].astype(np.float64), ref, rtol=2e-3, atol=1e-4)


# --- the program --------------------------------------------------------------------------------------------------

@intent.kernel
def softmax_of_bits(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """Softmax of the values whose bits have the sign cleared (a bitcast reads a NaN's sign: no fast path)."""
    v = I.bitcast(I.bitcast(x[:, :], I.u32) & 0x7FFFFFFF, I.f32)
    e = I.exp(v - I.reshape(I.reduce.max(v, axis=1), (x.shape[0], 1)))
    y[:, :] = e / I.reshape(I.reduce.sum(e, axis=1), (x.shape[0], 1))


def test_a_row_group_with_a_bitcast_has_no_fast_path():
    fast, bits = cuda_rows.row_plan(softmax_tensor.trace()), cuda_rows.row_plan(softmax_of_bits.trace())
    assert bits is not None and fast is not None  # both row groups
    assert fast.nan_fast and "NaN fast path" in str(fast.part(softmax_tensor.trace()))
    assert not bits.nan_fast and "NaN fast path" not in str(bits.part(softmax_of_bits.trace()))
    program = generate(softmax_of_bits.trace(), "tilelang-cuda")
    assert "itr_is_nan" not in program and "itn_any" not in program


def test_each_tier_tests_its_row_and_recomputes_it_with_the_careful_helpers():
    """Per tier: the fast program (helpers it_*, the fast bodies), the flag combined over the row's threads (a
    warp's vote, a block's barrier), then the careful program (helpers itr_*, the x86 NaN decisions)."""
    program = generate(softmax_tensor.trace(), "tilelang-cuda")
    assert program.count("'itn_any_warp'") == 1 and program.count("'itn_any_block'") == 2
    assert "float it_add_f32(float a, float b) { return a + b; }" in program  # the fast body
    assert "float itr_add_f32(float a, float b) { float r = itr_add_f32_ieee(a, b);" in program  # the careful one
    assert "itr_exp_f32(float a) { float r = expf(a); if (r != r)" in program
    emulated = lower(softmax_tensor.trace(), EMULATED).text
    assert "itr_canonical" in emulated and "itn_any" not in emulated  # emulated: the threads share one flag
