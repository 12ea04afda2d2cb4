"""A row read's one unary op applied by the load phase (cuda_rows_load, cuda_rows_slots.applied): which reads qualify
(the read's one use, a pointwise op of the read alone, of the same slot dtype), the program (the op once per slot
after the loads, no pass computing it again; an op whose source a later pass reads is not held in slots of its own
then), and the numbers on every executable target (tilelang-c runs CUDA's row mapping emulated) against NumPy in
float64 within T5's bound: an f32 ``exp`` applied to its read and summed, then divided, at lengths on both sides of
the chunk and tier boundaries, with NaN and infinity at varying positions (exact bits hand-computed from x86's rules).

Why: RMSNorm f16 cast each element to f32 (its NaN quieted) in its fold and again in its write, 3 SASS instructions
an element each on sm_90a; its warp tier fell 5265 -> 4513 instructions with the weight read once a block too."""
import re

import numpy as np
import pytest
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_rows import U32, _kernel_body, _tiers, compiled  # noqa: F401
from intent_trace.backends.tilelang import cuda_rows, cuda_rows_slots
from intent_trace.backends.tilelang.target import generate

RNG = np.random.default_rng(1729)
zoo = benchmark_module("zoo_kernels")
LENGTHS = (1, 127, 129, 1023, 1024, 1025, 8191, 8193)


def _rows(v, like):
    return I.reshape(v, (like.shape[0], 1))


@intent.kernel
def exp_normalised(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    e = I.exp(x[:, :])  # the read's one use: applied to its slots, so not held in slots of its own for the write
    y[:, :] = e / _rows(I.reduce.sum(e, axis=1), x)


@intent.kernel
def narrowed(x: I.In[I.f64, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(I.cast(x[:, :], I.f32), axis=1)  # f64 slots, f32 values: not applied


def _applied(kernel) -> list:
    graph = kernel.trace()
    group = cuda_rows.row_plan(graph).group
    return [op.op.name for op in cuda_rows_slots.applied(graph, group).values()]


def test_the_reads_whose_one_use_is_a_unary_op_of_them():
    assert _applied(zoo.rms_norm_f16) == ["cast"]
    assert _applied(exp_normalised) == ["exp"]
    assert _applied(zoo.softmax_whole) == []  # x is read by the max and by the subtraction
    assert _applied(zoo.layer_norm) == []  # x is read by the mean and by the centring
    assert _applied(narrowed) == []  # f64 slots take two registers, an f32 one
    graph = exp_normalised.trace()
    assert cuda_rows_slots.held_sources(graph, cuda_rows.row_plan(graph).group) == {}


@pytest.mark.parametrize("kernel", [zoo.rms_norm_f16, exp_normalised], ids=lambda k: k.name)
def test_the_load_phase_applies_the_op_once_and_no_pass_again(kernel):
    program = generate(kernel.trace(), "tilelang-cuda")
    helper = {"rms_norm_f16": "it_cast_f16_f32", "exp_normalised": "it_exp_f32"}[kernel.name]
    # the op of a slot (not of a weight: rows_columns), the fast program's or the careful one's (a tier without the
    # NaN fast path)
    on_slots = re.compile(rf"'{helper.replace('it_', 'itr?_')}', c\d+\[")
    for tier in _tiers(_kernel_body(program))[:2]:  # a warp's rows, a block's: on chip
        first_fold = tier.index("T.alloc_var('float32'")  # the first fold's accumulator: the load phase is done
        assert len(on_slots.findall(tier[:first_fold])) == 2  # a whole chunk's slot, the edge's
        assert not on_slots.search(tier[first_fold:])
    assert program.count("T.alloc_local((32,), 'float32')") == 1  # the read's slots alone (no held exp)


def _normalised64(x):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x.astype(np.float64))
        return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n", LENGTHS)
def test_an_applied_exp_within_the_bound(compiled, n):
    x = (RNG.standard_normal((9, n)) * 3).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(exp_normalised)(x, y)
    want = _normalised64(x)
    # exp within 2 ulp, the sum of N positive terms within (N - 1)·u (T5), the division one rounding
    assert np.all(np.abs(y - want) <= (n + 8) * U32 * want + 2.0 ** -149)


@pytest.mark.parametrize("n", [7, 1024, 1025])
def test_an_applied_exp_keeps_nan_bits_and_infinity(compiled, n):
    x = RNG.standard_normal((4, n)).astype(np.float32)
    nan = np.array(0x7FC00ABC, np.uint32).view(np.float32)  # a quiet NaN with a payload
    for row, col in ((0, 0), (1, n // 2), (2, n - 1)):
        x[row, col] = nan
    x[3, (n - 1) // 3] = np.inf  # exp(inf) = inf: inf / inf is the default NaN there, finite / inf = 0 elsewhere
    y = np.zeros_like(x)
    compiled(exp_normalised)(x, y)
    bits = y.view(np.uint32)
    # rows 0-2: the sum is the NaN (exp keeps a quiet NaN's payload): each element e / NaN keeps the NaN operand, and
    # the NaN element NaN / NaN its own (the first operand): every element the same NaN
    assert (bits[:3] == 0x7FC00ABC).all()
    inf_col = (n - 1) // 3
    assert bits[3, inf_col] == 0xFFC00000  # inf / inf: invalid, x86's default NaN
    assert (np.delete(y[3], inf_col) == 0).all()


# --- values a fold keeps for later passes (cuda_rows_slots.held_operands) ------------------------------------------

@intent.kernel
def centred_plus_x(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    c = x[:, :] - _rows(I.reduce.sum(x[:, :], axis=1) / I.cast(x.shape[1], I.f32), x)
    y[:, :] = c * _rows(I.rsqrt(I.reduce.sum(c * c, axis=1) + 1.0), x) + x[:, :]  # x read on in the write


def _kept(kernel) -> list:
    graph = kernel.trace()
    group = cuda_rows.row_plan(graph).group
    return [v for values in cuda_rows_slots.held_operands(graph, group).values() for v in values]


def test_a_fold_keeps_the_values_a_later_pass_reads_where_they_replace_a_read():
    (shifted,) = _kept(zoo.log_softmax)  # x - max: summed as exp(x - max), written as x - max - log(sum)
    (centred,) = _kept(zoo.layer_norm)  # x - mean: squared and summed, then scaled
    assert str(shifted.type) == str(centred.type) == "f32[M, N]"
    assert _kept(zoo.softmax_whole) == [] and _kept(zoo.rms_norm_f16) == [] and _kept(zoo.row_sum) == []
    assert _kept(centred_plus_x) == []  # x is read by the write too: keeping c would hold 64 registers, not 32
    for kernel in (zoo.log_softmax, zoo.layer_norm):
        graph = kernel.trace()
        assert cuda_rows_slots.live_registers(graph, cuda_rows.row_plan(graph).group, 32) == 32


def test_the_write_reads_the_kept_value_from_its_slots():
    warp, block, passes = _tiers(_kernel_body(generate(zoo.log_softmax.trace(), "tilelang-cuda")))
    for tier in (warp, block):  # on chip: the write's subtraction is of the kept x - max
        write = tier[tier.rindex("T.call_extern('float32', 'it_log_f32'"):]
        assert len(re.findall(r"'it_sub_f32', h\d+\[", write)) == 2 and "c4[" not in write
    write = passes[passes.rindex("it_log_f32"):]  # a pass over memory: x - max computed again from x
    assert "= p0[" in write and "it_sub_f32" in write and not re.search(r"h\d+\[", write)
    warp, block, _ = _tiers(_kernel_body(generate(zoo.layer_norm.trace(), "tilelang-cuda")))
    assert re.search(r"'it_mul_f32', h\d+\[", warp)  # a warp's rows: the write scales the kept x - mean
    assert not re.search(r"h\d+\[", block)  # a block's row reads its weights from memory: not kept (ptxas spilled)


def _log_softmax64(x):
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        s = x64 - x64.max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("n", LENGTHS)
def test_log_softmax_with_its_shift_kept_within_the_bound(compiled, n):
    x = (RNG.standard_normal((9, n)) * 3).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(zoo.log_softmax)(x, y)
    want = _log_softmax64(x)
    # x - max one rounding, the sum of exps within (N + 2)·u relatively (T5, exp within 2 ulp), its log within 2
    # ulp of a value at least 1 (absolute ~ (N + 4)·u), the subtraction one rounding
    assert np.all(np.abs(y - want) <= (n + 8) * U32 * (np.abs(want) + 1))


@pytest.mark.parametrize("n", [7, 1024, 1025])
def test_log_softmax_with_nan_and_inf_at_varying_positions(compiled, n):
    x = RNG.standard_normal((4, n)).astype(np.float32)
    x[0, n // 2] = np.array(0x7FC00DEF, np.uint32).view(np.float32)
    x[1, n - 1] = np.inf
    x[2, 0] = -np.inf
    y = np.zeros_like(x)
    compiled(zoo.log_softmax)(x, y)
    bits = y.view(np.uint32)
    assert (bits[0] == 0x7FC00DEF).all()  # the max is the NaN: every x - NaN keeps it, and so does the rest
    # row 1: the max is inf; x - inf = -inf for the finite, inf - inf = the default NaN at the inf, which the sum
    # takes: every element is then -inf - NaN or NaN - NaN, the default NaN
    assert (bits[1] == 0xFFC00000).all()
    finite = _log_softmax64(x[2:3, 1:])[0]  # -inf takes no part in the max or the sum (exp(-inf) = 0)
    assert y[2, 0] == -np.inf and np.all(np.abs(y[2, 1:] - finite) <= (n + 8) * U32 * (np.abs(finite) + 1))
