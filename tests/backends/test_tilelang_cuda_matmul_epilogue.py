"""A matmul's pointwise consumer fused into the tensor-core program (cuda_epilogue, cuda_matmul): bias, per-row
terms, residuals, scales, activations and the cast applied to each accumulator before the one store.

On the H200 (the lead's run)::

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/backends/test_tilelang_cuda_matmul_epilogue.py
    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/backends/test_tilelang_cuda_lowering.py tests/test_zoo_kernels.py -k "matmul"

Two halves. The program text: a graph whose one write stores a pointwise expression of a contraction gets the
tensor-core program with the epilogue's element code (the shared emitter's helpers, as the serial program calls
them) in a rolled loop over the tile staged in shared memory (a thread's 8 columns a pass, per-column reads before
the loop), one store of the tile, and TileLang lowers it for sm_90a (warpgroup MMAs, TMA store, the helpers'
calls). Near misses keep the general program. The numbers: every kernel
on every executable target through the shared ``target`` fixture against NumPy float64 references within T5's bound
(f32 accumulation of K products, one rounding per epilogue op, the final cast's half ulp), at shapes whose M, N and K
no tile divides (M past 128, N past 256, K not a multiple of 64), with NaN/inf/-0 in the epilogue's operands. On
tilelang-c the C target runs the epilogue mapping emulated (cuda_matmul.emulated: the same grid of output tiles,
clamped reads, stores only inside C, the same element code; the product the serial program's); on a GPU machine
``INTENT_TRACE_TEST_TARGETS=tilelang-cuda`` runs the real program, and the tests assert the epilogue program is
the one that runs.
"""
import math
import re

import attrs
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source
from example_modules import benchmark_module
from intent_trace.backends.tilelang import cuda_kernels, cuda_matmul, targets
from intent_trace.backends.tilelang import target as tl_target

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(1717)
U32 = 2.0 ** -24
#: the C target running the tensor-core epilogue mapping (its grid of tiles, one after another)
EMULATED = attrs.evolve(targets.C, specializations=cuda_kernels.emulated_specializations)
EPILOGUE_TARGETS = ("tilelang-c", "tilelang-cuda")  # the targets whose programs are the epilogue mapping
#: (M, K, N): one tile, tails past 128 rows / 256 columns / 64-deep steps, two tiles each way with tails
SHAPES = ((1, 8, 8), (3, 16, 24), (130, 40, 264), (257, 72, 520))


@intent.kernel
def mm_row_scale(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], r: I.In[I.f32, ("M",)],
                 c: I.Out[I.f32, ("M", "N")], s: I.f32):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) * s + I.reshape(r[:], (a.shape[0], 1))


@intent.kernel
def mm_residual_bf16(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], res: I.In[I.bf16, ("M", "N")],
                     c: I.Out[I.bf16, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.cast(I.tanh(I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)) + I.cast(res[m, n], I.f32), I.bf16)


@intent.kernel
def bmm_bias(a: I.In[I.f16, ("B", "M", "K")], b: I.In[I.f16, ("B", "K", "N")], bias: I.In[I.f32, ("N",)],
             c: I.Out[I.f16, ("B", "M", "N")]):
    product = I.contract(a[:, :, :], b[:, :, :], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.f32)
    c[:, :, :] = I.cast(I.minimum(product + bias[:], 4.0), I.f16)


@intent.kernel
def mm_row_sum_epilogue(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    p = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)
    c[:, :] = p + I.reshape(I.reduce.sum(p, axis=1), (a.shape[0], 1))  # a reduction: not pointwise


@intent.kernel
def mm_reads_its_operand(a: I.In[I.f16, ("M", "M")], b: I.In[I.f16, ("M", "M")], c: I.Out[I.f32, ("M", "M")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) + I.cast(a[:, :], I.f32)  # A held as tiles, not bits


@intent.kernel
def mm_f32_bias(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], bias: I.In[I.f32, ("N",)],
                c: I.Out[I.f32, ("M", "N")]):
    c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32) + bias[:]  # f32 operands: no tensor cores (TF32)


def _specs(kernel) -> tuple:
    """(the wide-tile program, the small-tile one): the first for grids of at least WIDE_BLOCKS of its tiles."""
    wide, small = cuda_kernels.specializations(kernel.trace(), targets.CUDA)
    assert wide.least == cuda_matmul.WIDE_BLOCKS and small.least == 0 and wide.name == small.name
    return wide, small


def _spec(kernel):
    return _specs(kernel)[0]


# --- the program ---------------------------------------------------------------------------------------------

def test_bias_relu_is_fused_into_the_tensor_core_program_before_its_one_store():
    spec = _spec(zoo.matmul_bias_relu_f16)
    p = spec.program
    assert spec.name == "matmul_epilogue" and spec.stored == (2,)  # the f16 bias is read as its bits
    assert "p2: T.Tensor((d2,), 'uint16')" in p and "A: T.Tensor((d0, d1,), 'float16')" in p
    assert "T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)" in p
    # the accumulators staged as f32 (rows padded), then a rolled loop: a thread's 8 columns of a row a pass
    assert "C_a = T.alloc_shared((128, 264), 'float32')" in p and "C_a[si, sj] = C_f[si, sj]" in p
    assert "cx = tx % 32 * 8" in p and "for ir in T.serial(16):" in p and "ei = ir * 8 + tx // 32" in p
    assert p.count("T.Parallel") == 1 and "for c in T.vectorized(8):\n                a_l[c] = C_a[ei, cx + c]" in p
    # the bias at each of the thread's (clamped) columns, read and decoded once, before the loop
    loop = p.index("for ir in T.serial(16):")
    for c in range(8):
        column = f"en_c{c} = T.min(T.Cast('int64', bx * 256 + cx + {c}), T.Cast('int64', d2) - T.int64(1))"
        assert p.index(column) < p.index(f"T.call_extern('float32', 'it_decode_f16', p2[en_c{c}])") < loop
        # the serial program's helpers on each accumulator, into the thread's 8 results
        add = f"t3_c{c} = T.call_extern('float32', 'it_add_f32', fa[0], t2_c{c})"
        # the ReLU's max, then the cast to f16 and its encode as one rounding (cuda_epilogue_helpers)
        relu = f"t4_c{c} = T.call_extern('float32', 'it_max_f32', t3_c{c}, K0)"
        store = f"o_l[{c}] = T.reinterpret(T.call_extern('uint16', 'it_cast_encode_f32_f16', t4_c{c}), 'float16')"
        assert loop < p.index(f"fa[0] = a_l[{c}]") < p.index(add) < p.index(relu) < p.index(store)
    assert p.count("p2[") == 8 and "'it_cast_f32_f16'" not in p and "'it_encode_f16'" not in p
    assert "for c in T.vectorized(8):\n                C_s[ei, cx + c] = o_l[c]" in p
    assert p.count("C[") == 1 and "T.copy(C_s, C[by * 128, bx * 256])" in p  # the one store
    # any M; N and K in whole 16-byte rows (and a grid of at least WIDE_BLOCKS tiles)
    assert spec.applies({0: 130 * 64, 1: 40, 2: 264}) and not spec.applies({0: 130 * 64, 1: 40, 2: 260})
    source = cuda_source(p)
    assert "wgmma" in source and "tma_store" in source
    assert "it_add_f32(fa[0], t2_c0)" in source and "it_max_f32(t3_c0, K0)" in source
    assert "*(float4*)(a_l + " in source and "*(uint4*)(((half_t*)C_s) + " in source  # 16-byte accesses


def test_the_schedule_reports_the_fused_epilogue():
    exe = tl_target.build(zoo.matmul_bias_relu_f16.trace(), target="tilelang-cuda")
    text = str(exe.schedule)
    assert "tiled_matmul" in text and "matmul_epilogue" in text


def test_an_f32_output_is_finished_in_place_and_scalars_and_row_terms_are_operands():
    p = _spec(mm_row_scale).program
    assert "p4: T.float32" in p and "p2: T.Tensor((d0,), 'float32')" in p
    # an f32 result goes back into the staged tile (dense: it leaves by TMA) and nothing else is staged
    assert "C_s" not in p and "C_a = T.alloc_shared((128, 256), 'float32')" in p
    assert "C_a[ei, cx + c] = o_l[c]" in p and "T.copy(C_a, C[by * 128, bx * 256])" in p
    # the row term read once a row, at the row's clamped index, inside the loop; the scalar per element
    row = re.search(r"\n( *)(f\d+) = T.Cast\('int64', em\)\n\1(t\d+) = p2\[\2\]", p)
    assert row and p.index("for ir in T.serial(16):") < row.start() < p.index("fa[0] = a_l[0]") and p.count("p2[") == 1
    assert f"T.call_extern('float32', 'it_add_f32', t3_c7, {row[3]})" in p and "'it_mul_f32', fa[0], p4)" in p
    source = cuda_source(p)
    assert "wgmma" in source and "tma_store" in source


def test_bf16_residual_and_vendor_math_epilogue_lowers():
    p = _spec(mm_residual_bf16).program
    assert "'bfloat16'" in p and "'it_tanh_f32'" in p and "p2: T.Tensor((d0, d2,), 'uint16')" in p
    assert "T.reinterpret(T.call_extern('uint16', 'it_cast_encode_f32_bf16'" in p and "'it_cast_f32_bf16'" not in p
    assert "wgmma" in cuda_source(p)


def test_batched_epilogue_indexes_the_batch_entry():
    spec = _spec(bmm_bias)
    assert spec.name == "batched_matmul_epilogue" and "eb = T.Cast('int64', bz)" in spec.program
    assert spec.program.index("eb = T.Cast('int64', bz)") < spec.program.index("for ir in T.serial(16):")
    assert "T.copy(C_s, C[bz, by * 128, bx * 256])" in spec.program
    assert "wgmma" in cuda_source(spec.program)


@pytest.mark.parametrize("kernel", [mm_row_sum_epilogue, mm_reads_its_operand, mm_f32_bias], ids=lambda k: k.name)
def test_epilogue_near_misses_get_no_tensor_core_program(kernel):
    assert all("T.gemm" not in s.program for s in cuda_kernels.specializations(kernel.trace(), targets.CUDA))
    assert cuda_kernels.emulated_specializations(kernel.trace(), targets.C) == []


def test_a_plain_matmul_keeps_its_program():
    @intent.kernel
    def mm(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], c: I.Out[I.f16, ("M", "N")]):
        c[:, :] = I.cast(I.matmul(a[:, :], b[:, :], acc_dtype=I.f32), I.f16)

    spec = _spec(mm)
    assert spec.name == "matmul" and "T.copy(C_f, C_s)" in spec.program and "T.copy(C_s, C[by * 128, bx * 256])" in \
        spec.program
    # its loops over the tile are the NaN accumulators' (cuda_matmul_nan), after the K loop: one compare per element
    # sets the tile's flag, and the serial program's recomputation runs only behind it (in the hot path it halved
    # the program's speed on the H100)
    text = spec.program
    assert text.count("T.Parallel") == 2 and text.count("'itr_is_nan', C_f[fi, fj]") == 2
    gate = text.index("if nan_s[0] != 0:")
    assert text.index("nan_s[0] = 1") < gate < text.index("for fk in T.serial(") and text.count("for fk in") == 1
    assert spec.stored == () and cuda_kernels.emulated_specializations(mm.trace(), targets.C) == []


def test_the_wide_tiles_only_where_their_grid_fills_the_gpu():
    """A 128 x 256 tile a block at one block an SM leaves SMs idle on grids of fewer blocks than SMs (1000^3: 32
    blocks on 132 SMs): those calls take the 128 x 128 program. The executable takes the first program that applies:
    the wide one from WIDE_BLOCKS blocks, the small one (which applies at any size) below."""
    def chosen(specs, extents):
        return next(s for s in specs if s.applies(extents)).grid[1][1]

    for kernel in (zoo.matmul_f16, zoo.matmul_bias_relu_f16):
        specs = _specs(kernel)
        assert specs[1].applies({0: 4096, 1: 4096, 2: 4096}) and not specs[0].applies({0: 1000, 1: 1000, 2: 1000})
        for (m, k, n), columns in (((4096, 4096, 4096), 256), ((4000, 4000, 4000), 256), ((2048, 64, 2048), 256),
                                   ((2048, 2048, 1024), 128), ((1000, 1000, 1000), 128), ((1024, 1024, 1024), 128),
                                   ((1, 8, 8), 128), ((2047, 8, 2048), 256), ((1920, 8, 2048), 128)):
            assert chosen(specs, {0: m, 1: k, 2: n}) == columns, (m, k, n)
    specs = _specs(bmm_bias)  # the batch entries count: 16 x 1024^2 is 512 blocks of 128 x 256
    assert chosen(specs, {0: 16, 1: 1024, 2: 1024, 3: 1024}) == 256 and chosen(specs, {0: 2, 1: 1000, 2: 64, 3: 1000}) == 128
    text = str(tl_target.build(zoo.matmul_f16.trace(), target="tilelang-cuda").schedule)
    assert "tile=128x256); when M > 0, N % 8 == 0, K % 8 == 0, ceil(M / 128) * ceil(N / 256) >= 128 blocks" in text
    assert "tile=128x128); when M > 0, N % 8 == 0, K % 8 == 0:" in text


def test_the_small_tile_program_covers_its_tile_and_lowers_to_warpgroup_mmas():
    _, small = _specs(zoo.matmul_bias_relu_f16)
    p = small.program
    assert "B_s = T.alloc_shared((64, 128), 'float16')" in p and "num_stages=4" in p
    # 16 threads a row of 128 columns, 16 rows a pass, 8 passes; the staged f32 rows padded by 8
    assert "C_a = T.alloc_shared((128, 136), 'float32')" in p and "cx = tx % 16 * 8" in p and "for ir in T.serial(8):" in p
    assert p.count("C[") == 1 and "T.copy(C_s, C[by * 128, bx * 128])" in p
    source = cuda_source(p)
    assert "wgmma" in source and "tma_store" in source and "*(float4*)(a_l + " in source
    _, plain = _specs(zoo.matmul_f16)
    assert "C_s = T.alloc_shared((128, 128), 'float16')" in plain.program and "wgmma" in cuda_source(plain.program)


# --- the numbers ---------------------------------------------------------------------------------------------

@pytest.fixture(params=["small", "wide"])
def compiled(request, target, monkeypatch):
    """``compiled(kernel)``: the kernel for this target; on tilelang-c with the epilogue mapping emulated. The
    tests' grids are small: ``small`` runs them as they come (the 128 x 128 tiles), ``wide`` with the 128 x 256
    tiles at every size (``WIDE_BLOCKS`` 0)."""
    if request.param == "wide":
        monkeypatch.setattr(cuda_matmul, "WIDE_BLOCKS", 0)
    if target == "tilelang-c" or request.param == "wide":
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
    return lambda kernel: intent.compile(kernel, target=target)


def _runs_epilogue(exe, target, sizes, tiled=True):
    """On the targets with the mapping: the call with these extents runs the epilogue program (or, with
    ``tiled`` False, the general one), of 128 x 256 tiles where their grid has at least ``WIDE_BLOCKS`` blocks
    (every grid under the fixture's ``wide``), else of 128 x 128."""
    if target in EPILOGUE_TARGETS:
        spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), sizes)))
        assert (spec is not None and spec.name.endswith("_epilogue")) == tiled, spec
        if tiled:
            *batch, m, _, n = sizes
            blocks = -(-m // 128) * -(-n // 256) * math.prod(batch)
            assert spec.grid[1][1] == (256 if blocks >= cuda_matmul.WIDE_BLOCKS else 128), spec.grid


def _product(a, b):
    """(the exact product in float64, T5's bound on its f32 accumulation: (K + 1) u sum |a||b|)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return a @ b, (a.shape[-1] + 1) * U32 * (np.abs(a) @ np.abs(b))


def _f16_bound(want, err, ulp=2.0 ** -11, tiny=2.0 ** -25):
    """The f32 error ``err`` carried through the final cast's rounding (half an ulp of the result, or of the
    smallest subnormal)."""
    return err + ulp * (np.abs(want) + err) + tiny


def _check(got, want, bound):
    got = np.asarray(got, dtype=np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    ok = ~nan
    assert np.all((got[ok] == want[ok]) | (np.abs(got[ok] - want[ok]) <= bound[ok])), \
        np.max(np.abs(got[ok] - want[ok]) - bound[ok])


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_bias_relu_matches_numpy_within_the_bound(compiled, target, m, k, n):
    exe = compiled(zoo.matmul_bias_relu_f16)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.float16(7.0))
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (m, k, n))
    p, err = _product(a, b)
    want = np.maximum(p + bias, 0.0)
    _check(c, want, _f16_bound(want, err + U32 * np.abs(p + bias)))


def test_bias_relu_edges_nan_inf_and_signed_zeros(compiled, target):
    m, k, n = 5, 8, 16
    exe = compiled(zoo.matmul_bias_relu_f16)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    a[1] = 0.0  # row 1's products are all +0 or -0: the bias alone decides
    bias = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1.0, -1.0, 65504.0, -65504.0, 6e-8, -6e-8, 2.0, -2.0,
                     0.5, -0.5, 3.0], dtype=np.float16)
    c = np.zeros((m, n), np.float16)
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (m, k, n))
    p, err = _product(a, b)
    with np.errstate(invalid="ignore"):
        want = np.maximum(p + bias.astype(np.float64), 0.0)
    want[:, 7] = np.where(p[:, 7] + 65504.0 >= 65520.0, np.inf, want[:, 7])  # f16 overflow rounds to inf
    bound = _f16_bound(np.where(np.isinf(want), 0, want), err + U32 * np.abs(np.nan_to_num(p + bias)))
    got = c.astype(np.float64)
    assert np.all(np.isinf(got[:, 0]) & (got[:, 0] > 0)) and np.all(got[:, 1] == 0) and np.all(np.isnan(got[:, 2]))
    assert np.all(np.signbit(c[1, 3:5]) == np.array([False, False]))  # relu of +-0: the max picks +0
    finite = np.isfinite(want)
    _check(np.where(finite, got, 0), np.where(finite, want, 0), np.where(finite, bound, 0))


@pytest.mark.parametrize("m,k,n", [(3, 16, 24), (130, 40, 264)])
def test_row_terms_and_scalars_match_numpy(compiled, target, m, k, n):
    exe = compiled(mm_row_scale)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    r = RNG.standard_normal(m).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    s = np.float32(-1.75)
    exe(a, b, r, c, s)
    _runs_epilogue(exe, target, (m, k, n))
    p, err = _product(a, b)
    want = p * float(s) + r[:, None]
    _check(c, want, 1.75 * err + 2 * U32 * (np.abs(want) + 1.75 * np.abs(p)))


@pytest.mark.parametrize("m,k,n", [(3, 16, 24), (130, 40, 264)])
def test_bf16_residual_tanh_matches_numpy(compiled, target, m, k, n):
    exe = compiled(mm_residual_bf16)
    bf = ml_dtypes.bfloat16
    a = (RNG.standard_normal((m, k)) * 0.3).astype(bf)
    b = (RNG.standard_normal((k, n)) * 0.3).astype(bf)
    res = RNG.standard_normal((m, n)).astype(bf)
    c = np.zeros((m, n), bf)
    exe(a, b, res, c)
    _runs_epilogue(exe, target, (m, k, n))
    p, err = _product(a, b)
    want = np.tanh(p) + res.astype(np.float64)
    # tanh is 1-Lipschitz, within a few ulps (T4), one f32 add; then bf16's half ulp (2^-8)
    _check(c, want, _f16_bound(want, err + 8 * U32 * (np.abs(want) + 1), ulp=2.0 ** -8, tiny=2.0 ** -134))


@pytest.mark.parametrize("bs,m,k,n", [(2, 3, 16, 24), (3, 130, 40, 264)])
def test_batched_bias_min_matches_numpy(compiled, target, bs, m, k, n):
    exe = compiled(bmm_bias)
    a = RNG.standard_normal((bs, m, k)).astype(np.float16)
    b = RNG.standard_normal((bs, k, n)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros((bs, m, n), np.float16)
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (bs, m, k, n))
    p, err = _product(a, b)
    want = np.minimum(p + bias, 4.0)
    _check(c, want, _f16_bound(want, err + U32 * np.abs(p + bias)))


def test_extents_the_tiles_cannot_take_run_the_general_program(compiled, target):
    m, k, n = 4, 9, 7  # N and K not whole 16-byte rows: no TMA descriptor
    exe = compiled(zoo.matmul_bias_relu_f16)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    exe(a, b, bias, c)
    _runs_epilogue(exe, target, (m, k, n), tiled=False)
    p, err = _product(a, b)
    want = np.maximum(p + bias, 0.0)
    _check(c, want, _f16_bound(want, err + U32 * np.abs(p + bias)))


def test_wrong_dtype_and_extent_leave_the_output_unchanged(compiled):
    exe = compiled(zoo.matmul_bias_relu_f16)
    a, b = np.ones((3, 8), np.float16), np.ones((8, 16), np.float16)
    c = np.full((3, 16), np.float16(5.0))
    with pytest.raises(TypeError):
        exe(a, b, np.ones(16, np.float32), c)
    with pytest.raises(ValueError, match="N"):
        exe(a, b, np.ones(8, np.float16), c)
    assert np.all(c == 5.0)


def test_emulated_program_is_the_one_the_c_target_runs_under_the_plugin():
    spec = cuda_matmul.emulated(zoo.matmul_bias_relu_f16.trace(), targets.C)
    cuda = _spec(zoo.matmul_bias_relu_f16).program
    assert spec.name == "matmul_epilogue" and spec.stored == (0, 1, 2, 3)  # the C target's storage, every view
    p = spec.program
    # the CUDA program's loop, the block's threads one after another; the tile then stored inside C
    assert "for tx in T.serial(256):" in p and p.count("p3[") == 1 and "= C_o[oi, oj]" in p
    loop = cuda[cuda.index("        cx = tx"):cuda.index("        T.copy(C_s")]
    emulated = p[p.index("cx = tx"):p.index("for oi, oj")]
    for c in range(8):  # the same lanes, hoisting and element code (the C target keeps f16 as its bits)
        assert f"p2[en_c{c}]" in emulated
        assert f"o_l[{c}] = T.call_extern('uint16', 'it_cast_encode_f32_f16', t4_c{c})" in emulated
    shape = [x.strip() for x in loop.splitlines() if x.strip().startswith(("for ir", "ei =", "cx =", "en_c"))]
    assert shape and shape == [x.strip() for x in emulated.splitlines()
                               if x.strip().startswith(("for ir", "ei =", "cx =", "en_c"))]
