"""tilelang-metal's tiled matmul (metal_matmul.py): TileLang's Metal ``T.gemm`` on SIMD-group matrices, run on the
Metal emulator (itm_matrix.h) against NumPy float64 references and hand-computed values.

- The program: simdgroup_load / simdgroup_multiply_accumulate / simdgroup_store on half, bfloat or float matrices
  (the operands' dtype), threadgroups of 128 threads over a grid of 64 x 64 output tiles, no software routine; the
  schedule names it first, for every call with M, N, K > 0.
- The numbers: f16, bf16 and f32 operands, f32 or narrowed outputs, at extents no tile divides (1, 7, 65, 130 ...),
  within T5's bound (T10: FMA inside a contraction, any order; the emulator fuses, an Apple GPU may not); batched
  and with a fused epilogue exact on integer-valued operands (every order and rounding gives the exact sum);
  NaN-ness and infinities exact, a NaN's payload x86's (recomputed by the serial program's code).
- What the emulator catches: the barrier after the accumulators' simdgroup_store removed is a data race.
"""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_metal_grid import SOFTWARE  # noqa: E402
from intent_trace.backends.tilelang import metal  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.executable import ProgramKernel, launch_sizes  # noqa: E402
from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel, EmulationError  # noqa: E402
from metal_source import check_msl  # noqa: E402

RNG = np.random.default_rng(1818)
NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}
DT = {"f16": I.f16, "bf16": I.bf16, "f32": I.f32}
UNIT = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f32": 2.0 ** -24}
TINY = {"f16": 2.0 ** -25, "bf16": 2.0 ** -134, "f32": 2.0 ** -150}  # half the least subnormal: RNE's absolute error
MATRIX = {"f16": "simdgroup_half8x8", "bf16": "simdgroup_bfloat8x8", "f32": "simdgroup_float8x8"}


def _matmul(operand: str, out: str):
    a_t, c_t = DT[operand], DT[out]

    @intent.kernel
    def k(a: I.In[a_t, ("M", "K")], b: I.In[a_t, ("K", "N")], c: I.Out[c_t, ("M", "N")]):
        p = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)
        c[:, :] = p if c_t is I.f32 else I.cast(p, c_t)

    k.__name__ = f"matmul_{operand}_{out}"
    return k


def _batched(operand: str):
    a_t = DT[operand]

    @intent.kernel
    def k(a: I.In[a_t, ("B", "M", "K")], b: I.In[a_t, ("B", "K", "N")], c: I.Out[I.f32, ("B", "M", "N")]):
        c[:, :, :] = I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32)

    return k


@intent.kernel
def bias_relu(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], bias: I.In[I.f32, ("N",)],
              c: I.Out[I.f16, ("M", "N")]):
    c[:, :] = I.cast(I.maximum(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) + bias[:], 0.0), I.f16)


CASES = {"f16": ("f16", "f32"), "f16_f16": ("f16", "f16"), "bf16_bf16": ("bf16", "bf16"), "bf16": ("bf16", "f32"),
         "f32": ("f32", "f32")}
KERNELS = {name: _matmul(*dtypes) for name, dtypes in CASES.items()}
BATCHED = {operand: _batched(operand) for operand in ("f16", "f32")}


def emulated(kernel):
    exe = intent.compile(kernel, target="tilelang-metal", emulate=True)
    assert exe.emulated
    return exe


def _tiled(exe, sizes: tuple):
    """The specialisation a call with these extents runs (asserted to be the tiled matmul)."""
    spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), sizes)))
    assert spec is not None and "T.gemm(A_s, B_s, C_f)" in spec.program, exe.schedule
    return spec


# --- the program ------------------------------------------------------------------------------------------------

PROGRAMS = {**{name: (k, CASES[name][0]) for name, k in KERNELS.items()},
            **{f"batched_{o}": (k, o) for o, k in BATCHED.items()}, "bias_relu": (bias_relu, "bf16")}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_program_is_simdgroup_matrices_on_a_grid_of_threadgroups(name):
    kernel, operand = PROGRAMS[name]
    exe = intent.compile(kernel, target="tilelang-metal")
    (spec,) = exe.specializations
    schedule = exe.schedule
    first = schedule.parts[0]
    assert schedule.mappings() == ("tiled_matmul", "flat_nest"), schedule  # the general program: one dot a thread
    assert "simdgroup_multiply_accumulate" in first.reason and f"operands={operand}" in first.describe()
    msl = check_msl(spec.program + "\n" + metal.kernel_source(spec.program))  # safe math, no fast::, no double
    assert msl.count("[[kernel") == 1 and "max_total_threads_per_threadgroup(128)" in msl
    body = msl.split("[[kernel", 1)[1]
    assert f"{MATRIX[operand]} A_local[" in body and f"{MATRIX[operand]} B_local[" in body
    assert "simdgroup_float8x8 C_f[" in body  # accumulated in f32 whatever the operands
    for call in ("simdgroup_load(A_local[", "simdgroup_load(B_local[", "simdgroup_multiply_accumulate(C_f[",
                 "simdgroup_store(C_f[", "threadgroup_barrier(mem_flags::mem_threadgroup)"):
        assert call in body, call
    called = set(re.findall(r"\b(it\w*)\(", body))
    assert not called & set(SOFTWARE), called & set(SOFTWARE)
    extents = {f"d{k}": 130 for k in range(len(exe.graph.extents))}
    ((blocks, threads),) = launch_sizes(spec.program, extents)
    assert threads == 128 and blocks[:2] == (3, 3) and math.prod(blocks) == (3 * 3 * 130 if "batched" in name else 9)


def test_every_call_with_nonempty_extents_takes_the_tiled_program():
    exe = intent.compile(KERNELS["f16"], target="tilelang-metal")
    assert "when M > 0, N > 0, K > 0" in exe.schedule.parts[0].describe()
    m, k, n = (ev.extent for ev in exe.graph.extents)
    for sizes in ((1, 1, 1), (7, 65, 130), (64, 32, 64), (2 ** 16, 2 ** 14, 1)):
        assert exe.specialization_for(dict(zip((m, k, n), sizes))) is exe.specializations[0]
    for sizes in ((0, 4, 4), (4, 0, 4), (4, 4, 0), (2 ** 16, 2 ** 15, 1)):  # empty, or an operand of 2^31 elements
        assert exe.specialization_for(dict(zip((m, k, n), sizes))) is None


# --- the numbers ------------------------------------------------------------------------------------------------

def _check(c, a, b, out: str) -> None:
    """T5 with T10's freedom: |c - exact| <= (K + 1) u32 sum|a||b| for the f32 accumulator (an f32 product rounded
    or fused), then one rounding to the output dtype: + u_out |s| + half its least subnormal. NaN-ness and
    infinities exact against the float64 sum of each product (IEEE: an inf times 0, infinities of both signs)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = (a64[..., :, :, None] * b64[..., None, :, :]).sum(axis=-2)
        mag = np.abs(a64) @ np.abs(b64)
    k = a.shape[-1]
    bound = (k + 1) * UNIT["f32"] * mag + k * 2.0 ** -149
    if out != "f32":
        bound = bound + UNIT[out] * (np.abs(exact) + bound) + TINY[out]
    got = c.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    inf = np.isinf(exact)
    assert np.array_equal(got[inf], exact[inf])
    ok = np.isfinite(exact)
    err = np.abs(got[ok] - exact[ok])
    assert np.all(err <= bound[ok]), np.max(err / bound[ok])


SHAPES = [(1, 1, 1), (7, 65, 130), (65, 7, 1), (130, 130, 33), (64, 64, 64)]  # (M, N, K)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_within_t5s_bound_at_tails(name, m, n, k):
    operand, out = CASES[name]
    exe = emulated(KERNELS[name])
    _tiled(exe, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(NP[operand])
    b = RNG.standard_normal((k, n)).astype(NP[operand])
    c = np.full((m, n), np.nan, NP[out])
    exe(a, b, c)
    _check(c, a, b, out)


@pytest.mark.parametrize("operand", sorted(BATCHED))
def test_batched_matmul_is_exact_on_integer_values(operand):
    """Integer values (|a|, |b| <= 8, K = 67): every product and partial sum is exact in f32, so the tiled program
    must give NumPy's exact product bit for bit, in every batch entry and at every tail."""
    exe = emulated(BATCHED[operand])
    nb, m, k, n = 3, 70, 67, 9
    _tiled(exe, (nb, m, k, n))
    a = RNG.integers(-8, 9, (nb, m, k)).astype(NP[operand])
    b = RNG.integers(-8, 9, (nb, k, n)).astype(NP[operand])
    c = np.full((nb, m, n), np.nan, np.float32)
    exe(a, b, c)
    assert c.tolist() == np.einsum("bmk,bkn->bmn", a.astype(np.int64), b.astype(np.int64)).tolist()


def test_fused_bias_relu_and_cast_on_integer_values():
    """The epilogue fused into the store: an exact integer product plus a per-column f32 bias (exact: halves), the
    ReLU, then RNE to f16 (values past 2048 round), each reading its own column."""
    exe = emulated(bias_relu)
    m, k, n = 66, 40, 131
    _tiled(exe, (m, k, n))
    a = RNG.integers(-12, 13, (m, k)).astype(ml_dtypes.bfloat16)
    b = RNG.integers(-12, 13, (k, n)).astype(ml_dtypes.bfloat16)
    bias = (RNG.integers(-1000, 6000, n) / 2).astype(np.float32)
    c = np.full((m, n), np.nan, np.float16)
    exe(a, b, bias, c)
    exact = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    want = exact.astype(np.float16)
    assert (want != exact).any() and (exact == 0).any()  # some results round, some are clamped
    assert c.view(np.uint16).tolist() == want.view(np.uint16).tolist()


@pytest.mark.parametrize("operand", ["f16", "f32"])
def test_nans_and_infinities(operand):
    m, n, k = 70, 67, 40
    exe = emulated(KERNELS[operand])
    _tiled(exe, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(NP[operand])
    b = RNG.standard_normal((k, n)).astype(NP[operand])
    a[3, 5] = np.nan  # row 3 NaN
    b[6, 66] = np.nan  # the last column (the second tile's tail) NaN
    a[5, 2], b[2, 7] = 0.0, np.inf  # 0 * inf at (5, 7); inf * x elsewhere in column 7
    b[1, :], b[30, :] = 1.0, 1.0
    a[68:70, 1], b[1, 20] = np.inf, -np.inf  # rows 68, 69: +inf, but -inf in column 20 (inf * -inf) ...
    a[68, 30] = -np.inf  # ... and row 68 inf - inf (NaN) but in column 20 (-inf twice)
    c = np.zeros((m, n), np.float32)
    exe(a, b, c)
    _check(c, a, b, "f32")
    assert np.isnan(c[3]).all() and np.isnan(c[:, 66]).all() and np.isnan(c[5, 7]) and np.isnan(c[68, 21])
    assert c[69, 20] == -np.inf and c[69, 21] == np.inf and c[68, 20] == -np.inf


def test_a_nan_result_keeps_the_payload_x86_gives():
    """One quiet NaN with a payload in A's row 3 and nothing else NaN: x86 propagates that operand's payload
    through the product and every later add, so all of row 3 is 0x7FC01234 (the serial program's recomputation),
    whatever the hardware's MMA makes of it."""
    m, n, k = 9, 70, 33
    exe = emulated(KERNELS["f32"])
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    a[3, 20] = np.array([0x7FC01234], np.uint32).view(np.float32)[0]
    c = np.zeros((m, n), np.float32)
    exe(a, b, c)
    assert (c[3].view(np.uint32) == 0x7FC01234).all()
    assert not np.isnan(np.delete(c, 3, axis=0)).any()


def test_a_failing_call_leaves_the_output_unchanged():
    exe = emulated(KERNELS["f16"])
    c = np.full((2, 4), 5.0, np.float32)
    with pytest.raises(ValueError, match="K"):
        exe(np.ones((2, 3), np.float16), np.ones((5, 4), np.float16), c)
    with pytest.raises(TypeError):
        exe(np.ones((2, 3), np.float32), np.ones((3, 4), np.float16), c)
    assert (c == 5.0).all()


# --- what the emulator catches ----------------------------------------------------------------------------------

def test_the_barrier_after_the_accumulators_store_removed_is_a_race():
    """The barrier metal_matmul.py writes after ``T.copy(C_f, C_s)`` (TileLang's ThreadSync places none after a
    simdgroup_store): without it a thread reads an accumulator element another simdgroup's lane stored."""
    exe = emulated(KERNELS["f16"])
    kernel = ProgramKernel(_tiled(exe, (70, 40, 70)).program)
    lines = kernel.source.split("\n")
    stores = [i for i, line in enumerate(lines) if "simdgroup_store(" in line]
    barrier = next(i for i in range(stores[-1], len(lines)) if "threadgroup_barrier(" in lines[i])
    assert barrier == stores[-1] + 1
    lines[barrier] = ""
    kernel.kernels[0] = EmulatedKernel("\n".join(lines))
    a, b = np.ones((70, 40), np.float16), np.ones((40, 70), np.float16)
    with pytest.raises(EmulationError) as e:
        kernel(a.view(np.uint16), b.view(np.uint16), np.zeros((70, 70), np.float32))
    race = re.search(r"data race on threadgroup array (\w+)\[\d+\]: (read|write) by thread \((\d+),0,0\) of "
                     r"threadgroup \((\d+),(\d+),0\) at line (\d+) and (read|write) by thread \((\d+),0,0\) of "
                     r"threadgroup \((\d+),(\d+),0\) at line (\d+)", str(e.value))
    assert race is not None, str(e.value)
    assert race[3] != race[8] and (race[4], race[5]) == (race[9], race[10])
    sites = {lines[int(race[6]) - 1], lines[int(race[11]) - 1]}
    assert any("simdgroup_store(" in s for s in sites) and any("C_s[" in s and "simdgroup" not in s for s in sites)
