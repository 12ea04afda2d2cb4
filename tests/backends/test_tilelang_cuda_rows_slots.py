"""What a row group holds on chip between its passes and the launch bound it asks for (cuda_rows_slots), checked three
ways: the registers the plan counts for kernels whose buffers live differently (hand-counted), the bound in the
program and in the CUDA TileLang makes for it (``__launch_bounds__(256, 4)``; none on Metal), ptxas for sm_90a on the
GPU zoo's five row kernels (registers within the bound, no spills; where this machine has nvcc), and the numbers of
kernels whose slots take each path -- a narrow read with an f32 ``exp`` held, ``x`` held to the write beside the
held ``exp``, two reads of half the slots each -- at row lengths on both sides of every chunk and tier boundary, on
every executable target (tilelang-c runs CUDA's row mapping emulated), against NumPy in float64 within T5's bound.

Why: with the chunks of a pass in two loops ptxas kept softmax's ``x`` and ``exp(x - max)`` slots live at once (96
registers a thread, 2 blocks of 256 an SM; the H100 measured softmax 0.74 -> 0.64 of torch), and without a bound it
spent the registers it was given on scheduling freedom (71 for softmax, 86 for log-softmax: 3 blocks)."""
import re

import ml_dtypes
import numpy as np
import pytest
from example_modules import benchmark_module, example

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_rows import U32, _kernel_body, _softmax_bound, _tiers, compiled  # noqa: F401
from backends.test_tilelang_cuda_rows_columns import exp_weighted_sum
from backends.test_tilelang_cuda_rows_load import exp_normalised
from backends.tilelang_support import assembled, cuda_source
from intent_trace.backends.tilelang import cuda_rows, cuda_rows_slots, metal_grid
from intent_trace.backends.tilelang.target import generate
from schedule.row_kernels import layer_norm as layer_norm_parallel
from schedule.row_kernels import logsumexp, row_argmax

RNG = np.random.default_rng(1719)
zoo = benchmark_module("zoo_kernels")
softmax_rows = example("row_softmax").softmax_rows
#: a warp's rows (1024 elements at 32 slots a lane, 512 at 16), a block's (8192, 4096), chunks of 4 slots (128
#: and 1024 elements at 32 a warp and 256 a block), on both sides of each, and rows re-read by each pass
LENGTHS = (1, 7, 127, 129, 255, 257, 511, 512, 513, 1023, 1024, 1025, 4095, 4097, 8193)

#: a slot's load: a read (a warp's row), or a streaming load of the element's address (a block's, on CUDA)
_LOAD = r"(?:T\.call_extern\('\w+', '__ldcs', T\.access_ptr\()?"


def _rows(v, like):
    return I.reshape(v, (like.shape[0], 1))


@intent.kernel
def softmax_f16(x: I.In[I.f16, ("M", "N")], y: I.Out[I.f16, ("M", "N")]):
    xf = I.cast(x[:, :], I.f32)
    e = I.exp(xf - _rows(I.reduce.max(xf, axis=1), x))
    y[:, :] = I.cast(e / _rows(I.reduce.sum(e, axis=1), x), I.f16)


@intent.kernel
def softmax_bf16(x: I.In[I.bf16, ("M", "N")], y: I.Out[I.bf16, ("M", "N")]):
    xf = I.cast(x[:, :], I.f32)
    e = I.exp(xf - _rows(I.reduce.max(xf, axis=1), x))
    y[:, :] = I.cast(e / _rows(I.reduce.sum(e, axis=1), x), I.bf16)


@intent.kernel
def softmax_plus_x(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    e = I.exp(x[:, :] - _rows(I.reduce.max(x[:, :], axis=1), x))
    y[:, :] = e / _rows(I.reduce.sum(e, axis=1), x) + x[:, :]  # x's slots live to the write, beside exp's


@intent.kernel
def residual_norm(x: I.In[I.f32, ("M", "N")], r: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    h = x[:, :] + r[:, :]  # two reads: 16 slots each
    n = I.cast(x.shape[1], I.f32)
    c = h - _rows(I.reduce.sum(h, axis=1) / n, x)
    y[:, :] = c * _rows(I.rsqrt(I.reduce.sum(c * c, axis=1) / n + 1e-5), x)


# --- the plan -------------------------------------------------------------------------------------------------

#: kernel -> (slots a thread, registers its slots hold at once, blocks an SM under the bound: 65536 / (256 * (held
#: + 32))): softmax's x slots give way to exp's chunk by chunk (32); f64 takes two registers a slot (16 slots: 32);
#: x held to the write beside exp (64: 2 blocks); two reads of 16 slots each (32)
PLANS = {softmax_rows: (32, 32, 4), zoo.softmax_whole: (32, 32, 4), zoo.log_softmax: (32, 32, 4),
         zoo.layer_norm: (32, 32, 4), zoo.rms_norm_f16: (32, 32, 4), softmax_f16: (32, 32, 4), logsumexp: (16, 32, 4),
         row_argmax: (32, 32, 4), softmax_plus_x: (32, 64, 2), residual_norm: (16, 32, 4)}


@pytest.mark.parametrize("kernel", list(PLANS), ids=lambda k: k.name)
def test_the_registers_a_thread_holds_between_passes_set_the_blocks_an_sm_holds(kernel):
    graph = kernel.trace()
    plan = cuda_rows.row_plan(graph)
    slots, held, blocks = PLANS[kernel]
    assert (plan.slots, cuda_rows_slots.live_registers(graph, plan.group, plan.slots)) == (slots, held)
    assert plan.min_blocks == blocks and plan.part(graph).param("resident") == f"{blocks} blocks an SM"
    # the emulated program and Metal's have no launch bound (a threadgroup's registers are Metal's compiler's)
    assert cuda_rows.row_plan(graph, emulated=True).min_blocks == 0 and metal_grid.row_group(graph).min_blocks == 0


def test_the_bound_is_in_the_program_and_in_the_cuda_source_and_not_on_metal():
    program = generate(softmax_rows.trace(), "tilelang-cuda")
    body = program[program.index("def kernel("):].splitlines()
    top = body[2][:len(body[2]) - len(body[2].lstrip())]  # the kernel's own block, before the tiers and threads
    assert body.index(top + "T.annotate_min_blocks_per_sm(4)") < body.index(top + "tx1 = T.get_thread_binding()")
    assert re.search(r"__global__ void __launch_bounds__\(256, 4\) \w+\(", cuda_source(program))
    assert "annotate_min_blocks_per_sm" not in generate(softmax_rows.trace(), "tilelang-metal")


@pytest.mark.parametrize("kernel", [zoo.rms_norm_f16, softmax_bf16], ids=lambda k: k.name)
def test_a_half_precision_row_is_loaded_as_its_bits_and_decoded_after_every_load(kernel):
    """The load phase of each on-chip tier is the stored loads alone (no decode between them: a decode next to its
    load held each chunk's code on its loads, so RMSNorm f16 had 4 loads in flight a thread instead of 32), then one
    loop over the chunks decodes the bits into the slots the passes read."""
    program = generate(kernel.trace(), "tilelang-cuda")
    (bits,) = re.findall(r"(b\d+) = T\.alloc_local\(\(32,\), 'uint16'\)", program)
    warp, block, _ = _tiers(_kernel_body(program))
    for tier in (warp[warp.find("T.sync_threads()") + 1:], block):  # a warp's rows, past the weights it fills
        # once a block (test_tilelang_cuda_rows_columns), and a block's
        # the fast program's decode (it_), or the careful one's (itr_) in a tier without the NaN fast path
        load_end = re.search(r"= T\.call_extern\('float32', 'itr?_decode_", tier).start()
        loads = tier[:load_end]
        assert len(re.findall(rf"{bits}\[c\d+ \* 4 \+ u\d+\] = {_LOAD}p0\[", loads)) == 2  # whole chunks, the edge
        assert "_decode" not in loads and "p0[" not in tier[load_end:]  # every load before the first decode
        decodes = re.findall(rf"c\d+\[(c\d+) \* 4 \+ u\d+\] = T\.call_extern\('float32', 'itr?_decode_\w+', "
                             rf"{bits}\[\1 \* 4 \+ u\d+\]\)", tier)
        assert len(decodes) == 2 and len(set(decodes)) == 1  # both parts of a chunk in one loop


@pytest.mark.parametrize("kernel", [zoo.row_sum, zoo.rms_norm_f16, softmax_rows], ids=lambda k: k.name)
def test_a_block_s_row_is_loaded_with_streaming_loads_a_warp_s_with_reads(kernel):
    """A block's row is loaded into its slots with ``__ldcs`` (``ld.global.cs``), which ptxas cannot load again later:
    the read-only load it may, and did under the bound -- the row sum's first chunk (3 of 16 slots a thread) loaded
    again in the fold, after the other loads had returned (SASS for sm_90a; at 863dd6f each after the previous add).
    A warp's row keeps its reads (none was loaded again there, and the streaming loads' addresses spilled), and so do
    the passes over memory, the emulated program and Metal's. The stored dtype is the load's (f16: its bits)."""
    program = generate(kernel.trace(), "tilelang-cuda")
    warp, block, passes = _tiers(_kernel_body(program))
    stored = "uint16" if kernel is zoo.rms_norm_f16 else "float32"
    streamed = re.findall(rf"= T\.call_extern\('{stored}', '__ldcs', T\.access_ptr\(p0\[[^\]]*\], 'r'\)\)", block)
    assert len(streamed) == 2 and block.count("__ldcs") == 2  # whole chunks, the edge: every load of the row
    assert "__ldcs" not in warp + passes and "= p0[" in warp
    assert "__ldcs" not in generate(kernel.trace(), "tilelang-metal")
    assert not cuda_rows.row_plan(kernel.trace(), emulated=True).streamed
    got = assembled(cuda_source(program))  # nvcc: the program's PTX and ptxas' report
    if got is not None:  # nvcc keeps both kinds: streaming (a block's row), read-only (a warp's)
        (ptx,) = got.ptx.values()
        assert re.search(r"ld\.global\.cs\.[usbf]\d+", ptx) and re.search(r"ld\.global\.(nc\.)?[usbf]\d+", ptx)


def _row_sum_of(name: str):
    d = getattr(I, name)
    acc = {"bf16": I.f32, "f16": I.f32, "f64": I.f64}.get(name, I.i64)

    def row_sum_of(x: I.In[d, ("M", "N")], y: I.Out[acc, ("M",)]):
        y[:] = I.reduce.sum(I.cast(x[:, :], acc), axis=1)

    row_sum_of.__name__ = f"row_sum_{name}"
    return intent.kernel(row_sum_of)


@pytest.mark.parametrize("name", ["bool", "u8", "i8", "i16", "u16", "u32", "i64", "u64", "bf16", "f64"])
def test_every_stored_dtype_has_its_streaming_load(name):
    """``__ldcs`` is overloaded by the pointer's type: every dtype a view stores (bool as uint8, f16/bf16 as their
    bits, u32 as int32) has one, so the block's loads of each compile (the local nvcc, sm_90a) with no spill."""
    graph = _row_sum_of(name).trace()
    program, slots = generate(graph, "tilelang-cuda"), cuda_rows.row_plan(graph).slots  # 16 of 8 bytes, else 32
    warp, block, passes = _tiers(_kernel_body(program), 32 * slots, 256 * slots)
    assert block.count("'__ldcs'") == 2 and "__ldcs" not in warp + passes
    got = assembled(cuda_source(program))  # ptxas' report
    if got is not None:
        assert set(got.spills.values()) == {(0, 0)}


#: the GPU zoo's row kernels (benchmarks/gpu_zoo.py), x held beside exp (a bound of 2 blocks: 128 registers), a
#: computed weight filled once a block, the parallel form's weights read per element in every tier (no kept
#: operand: cuda_rows.RowEmitter._kept), an exp applied to its read's slots
ZOO = [softmax_rows, zoo.softmax_whole, zoo.log_softmax, zoo.layer_norm, zoo.rms_norm_f16, zoo.row_sum,
       zoo.argmax_rows, softmax_plus_x, exp_weighted_sum, layer_norm_parallel, exp_normalised]


@pytest.mark.parametrize("kernel", ZOO, ids=lambda k: k.name)
def test_ptxas_fits_the_row_kernels_in_their_bound_without_spills(kernel):
    """ptxas for sm_90a (the local nvcc): the kernel within 65536 / (256 * blocks) registers a thread and no spill
    (64 for the zoo's five: 4 blocks of 256 an SM, 32 warps; at 07d9565 softmax had 63, at 5efe198 96)."""
    graph = kernel.trace()
    source = cuda_source(generate(graph, "tilelang-cuda"))
    got = assembled(source)  # ptxas' report (the streaming-load test's, if made)
    if got is None:  # no nvcc here: the bound in the source alone
        assert "__launch_bounds__(256, " in source
        return
    (registers,) = got.registers.values()
    assert registers <= 65536 // (256 * cuda_rows.row_plan(graph).min_blocks)
    assert set(got.spills.values()) == {(0, 0)}


# --- the numbers ----------------------------------------------------------------------------------------------

def _softmax64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


#: (kernel, dtype, one rounding to it relative, its smallest subnormal's half absolute)
HALF = {"f16": (softmax_f16, np.float16, 2.0 ** -11, 2.0 ** -25),
        "bf16": (softmax_bf16, ml_dtypes.bfloat16, 2.0 ** -8, 2.0 ** -134)}


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("d", list(HALF))
def test_a_half_precision_softmax_holds_its_f32_exp_in_slots(compiled, d, n):
    kernel, dtype, rounding, tiny = HALF[d]
    x = (RNG.standard_normal((3, n)) * 4).astype(dtype)
    y = np.full_like(x, np.nan)
    compiled(kernel)(x, y)
    want = _softmax64(x)
    bound = (_softmax_bound(x.astype(np.float32)) + rounding) * want + tiny
    assert np.all(np.abs(y.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("n", LENGTHS)
def test_x_held_to_the_write_beside_exp(compiled, n):
    x = (RNG.standard_normal((3, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(softmax_plus_x)(x, y)
    s = _softmax64(x)
    want = s + x.astype(np.float64)
    assert np.all(np.abs(y - want) <= _softmax_bound(x) * s + U32 * np.abs(want) + 2.0 ** -149)


@pytest.mark.parametrize("n", LENGTHS)
def test_two_reads_of_half_the_slots_each(compiled, n):
    x = (RNG.standard_normal((3, n)) * 2 + 3).astype(np.float32)
    r = RNG.standard_normal((3, n)).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(residual_norm)(x, r, y)
    h = (x + r).astype(np.float64)  # one f32 addition, correctly rounded on every target: the same h
    d = h - h.mean(axis=1, keepdims=True)
    scale = np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    want = d / scale
    # the mean and the variance within (N + 2)·u of their magnitudes (T5), the centred value's error relative to
    # the row's spread, rsqrt within 2 ulp, the product one rounding (the layer norm bound of test_tilelang_cuda_rows)
    spread = np.max(np.abs(h), axis=1, keepdims=True) / scale
    assert np.all(np.abs(y - want) <= (4 * (n + 2) * (1 + spread) + 8) * U32 * (np.abs(want) + 1))
