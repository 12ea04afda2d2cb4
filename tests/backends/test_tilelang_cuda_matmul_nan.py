"""NaN accumulators of the tensor-core matmul (cuda_matmul_nan): an element whose product ends NaN is recomputed by
the serial program's helpers after the K loop, so the epilogue and the output carry the oracle's payloads (T3/T10:
x86's propagation, the first NaN operand quieted, 0xFFC00000 for inf * 0 and inf - inf), while the K loop stays as
it was.

Every test runs on every executable target through the shared ``target`` fixture. On tilelang-c the C target runs
the epilogue mapping emulated, its product made hardware-like (cuda_matmul_nan.hardware_product: each NaN element
NVIDIA's canonical 0x7FFFFFFF, as the tensor cores give it), so the payloads come from the recomputation alone (a
plain matmul keeps the C target's own program: its CUDA fix is checked as text and lowered). References: bits
derived by hand from x86's rules for the NaN each case plants, and the cpu target's output bit for bit.
"""
import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_matmul_epilogue import _runs_epilogue, bmm_bias, compiled, mm_row_scale  # noqa: F401
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda_matmul, targets

RNG = np.random.default_rng(31)


@intent.kernel
def mm_f16(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
    c[:, :] = I.cast(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32), I.f16)


@intent.kernel
def mm_residual_bf16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], res: I.In[I.bf16, ("M", "N")],
                     c: I.Out[I.bf16, ("M", "N")]):
    c[:, :] = I.cast(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) + I.cast(res[:, :], I.f32), I.bf16)


def _bits(x: np.ndarray, dtype) -> np.ndarray:
    return np.asarray(x).view(dtype)


def _nan16(bits: int, dtype=np.float16):
    return np.array([bits], np.uint16).view(dtype)[0]


def _same_nans(out: np.ndarray, want: np.ndarray) -> None:
    unsigned = {2: np.uint16, 4: np.uint32}[out.dtype.itemsize]
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    got, exp = out.view(unsigned)[nan], want.view(unsigned)[nan]
    assert np.array_equal(got, exp), [(hex(x), hex(y)) for x, y in zip(got, exp) if x != y][:5]


def test_planted_nans_in_the_product_give_the_oracle_s_payloads(compiled, target):
    # M past one 128-row tile, N past one 256-column tile, K not a multiple of 64: a signalling NaN in A's row 3 at
    # k = 0, a quiet NaN with the sign bit in B's column 260 (the tail tile) at the last k, and inf * 0 (A's row 140
    # holds inf at k = 5, B's row 5 holds 0 in column 7): x86's default NaN
    m, k, n = 150, 40, 264
    exe = compiled(mm_row_scale)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    r = RNG.standard_normal(m).astype(np.float32)
    a[3, 0], b[k - 1, 260] = _nan16(0x7C01), _nan16(0xFE05)
    a[140, 5], b[5, 7] = np.inf, 0.0
    c = np.zeros((m, n), np.float32)
    exe(a, b, r, c, np.float32(0.5))
    _runs_epilogue(exe, target, (m, k, n))
    bits = _bits(c, np.uint32)
    # by hand: row 3 carries A's NaN (quieted: 0x7E01 as f32 is 0x7FC02000), column 260 B's (0xFFC0A000), (140, 7)
    # the default NaN 0xFFC00000. Element (3, 260) sums two NaNs: which wins depends on the order of the sum, which
    # T10 leaves to each target (cpu's is not ascending k), so there only one of the two payloads is asked for.
    want = np.zeros((m, n), np.uint32)
    want[:, 260] = 0xFFC0A000
    want[3, :] = 0x7FC02000
    want[140, 7] = 0xFFC00000
    nan = want != 0
    one = nan.copy()
    one[3, 260] = False
    assert np.array_equal(np.isnan(c), nan) and np.array_equal(bits[one], want[one])
    assert bits[3, 260] in (0x7FC02000, 0xFFC0A000)
    oracle = np.zeros_like(c)
    intent.compile(mm_row_scale, target="cpu")(a, b, r, oracle, np.float32(0.5))
    _same_nans(np.where(one, c, 0), np.where(one, oracle, 0))
    assert np.allclose(c[~nan], oracle[~nan], rtol=1e-3, atol=1e-3)  # infinities in row 140 equal


def test_an_f16_and_a_batched_output(compiled, target):
    # the cast of a recomputed NaN keeps its payload's top bits (x86's F16C); a batch entry's NaN stays in it
    bs, m, k, n = 2, 130, 24, 264
    exe = compiled(bmm_bias)
    a = RNG.standard_normal((bs, m, k)).astype(np.float16)
    b = RNG.standard_normal((bs, k, n)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float32)
    a[1, 129, 23] = _nan16(0xFD00)  # the last row of the tail tile, the last k: sNaN with sign, payload 0x100
    c = np.zeros((bs, m, n), np.float16)
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (bs, m, k, n))
    nan = np.zeros(c.shape, bool)
    nan[1, 129] = True
    assert np.array_equal(np.isnan(c), nan) and (_bits(c, np.uint16)[nan] == 0xFF00).all()
    oracle = np.zeros_like(c)
    intent.compile(bmm_bias, target="cpu")(a, b, bias, oracle)
    _same_nans(c, oracle)


def test_a_bf16_output_of_an_inf_minus_inf(compiled, target):
    # +inf * 1 at k = 0 and -inf * 1 at k = 1 in row 2: inf - inf, x86's default NaN, rounded to bf16 (0xFFC0)
    m, k, n = 4, 16, 8
    exe = compiled(mm_residual_bf16)
    a = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    res = RNG.standard_normal((m, n)).astype(ml_dtypes.bfloat16)
    a[2, 0], a[2, 1] = np.inf, -np.inf
    b[0, :], b[1, :] = 1.0, 1.0
    c = np.zeros((m, n), ml_dtypes.bfloat16)
    exe(a, b, res, c)
    _runs_epilogue(exe, target, (m, k, n))
    nan = np.zeros(c.shape, bool)
    nan[2] = True
    assert np.array_equal(np.isnan(c.astype(np.float32)), nan) and (_bits(c, np.uint16)[nan] == 0xFFC0).all()
    oracle = np.zeros_like(c)
    intent.compile(mm_residual_bf16, target="cpu")(a, b, res, oracle)
    _same_nans(c, oracle)


def test_the_k_loop_is_unchanged_and_the_fix_follows_it():
    # plain f16 output: the converted tile is staged, then (after a barrier) a NaN element's bits are the serial
    # program's cast; an epilogue reads a thread's 8 accumulators of a row into locals and, where one of them is a
    # NaN (one branch), recomputes each NaN in its own loop before the element code; the accumulator fragment is
    # never written back (wgmma's registers); both lower for sm_90a
    for kernel, dest in ((mm_f16, "C_s[fi, fj] = T.reinterpret("), (mm_row_scale, "fa[0] = fs[0]")):
        program = cuda_matmul.tensor_core(kernel.trace(), targets.CUDA).program
        loop, rest = re.split(r"\n        (?=\S)", program[program.index("for ko in T.Pipelined"):], maxsplit=1)
        assert "itr_is_nan" not in loop and "it_add_f32" not in loop
        assert dest in rest
        if kernel is mm_f16:
            assert "'itr_is_nan', C_f[fi, fj]" in rest
            assert rest.index("T.copy(C_f, C_s)") < rest.index("T.sync_threads()") < rest.index(dest) < \
                rest.index("T.copy(C_s, C[")
        else:
            gate = "if " + " or ".join(f"T.call_extern('int32', 'itr_is_nan', a_l[{c}]) != 0" for c in range(8)) + ":"
            assert rest.index("a_l[c] = C_a[ei, cx + c]") < rest.index(gate) < rest.index("for c in T.unroll(8):") < \
                rest.index("fa[0] = a_l[c]") < rest.index(dest) < rest.index("a_l[c] = fa[0]") < \
                rest.index("fa[0] = a_l[0]")
            assert rest.count("for fk in T.serial(") == 1  # one recomputation, in the loop over the 8 columns
            assert "C_f[" not in rest.replace("C_a[si, sj] = C_f[si, sj]", "")  # the fragment only read, once
        assert "wgmma" in cuda_source(program)
