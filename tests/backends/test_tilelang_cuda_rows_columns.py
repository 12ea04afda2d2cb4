"""A row group's per-column values computed once per block where a block holds several rows (cuda_rows_columns): the
schedule's row-invariant nodes and their per-column frontier (RMSNorm's ``cast(w[:], f32)``, layer norm's ``g[:]`` and
``b[:]``, none for softmax or the parallel form), the program (the warp tier fills a shared buffer per value before
its row guard, then a barrier, and its passes read the buffer, not the view; a block's tier, one row a block, keeps
its reads), and the numbers on every executable target (tilelang-c runs CUDA's row mapping emulated): layer norm at
row counts that fill no block, one, and a block and a part (8 rows a block), at row lengths on both sides of the
warp tier's chunk and tier boundaries, against NumPy in float64 within T5's bound; a per-column value computed by a
chain (``exp`` of a weight) and read in a fold of one value per row, with NaN and infinity at varying columns; and
empty tensors (no rows: no element computed; no columns).

Why: RMSNorm f16's write pass loaded, decoded and quieted its weight per element in each of a block's 8 rows (10 of
its 43 SASS instructions an element on sm_90a, 34 with the weight in shared memory)."""
import re

import numpy as np
import pytest
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_rows import U32, _kernel_body, _tiers, compiled  # noqa: F401
from intent_trace import types as T
from intent_trace.backends.tilelang.target import generate
from intent_trace.schedule import rows as schedule_rows
from schedule.row_kernels import layer_norm as layer_norm_parallel

RNG = np.random.default_rng(1723)
zoo = benchmark_module("zoo_kernels")
#: the warp tier's chunks (128 elements) and its longest row (1024), a block's row past it, on both sides of each
LENGTHS = (1, 127, 129, 1023, 1024, 1025)
ROWS = (1, 7, 9, 17)  # fewer rows than a block's 8, a block and one more row, two blocks and one more


@intent.kernel
def exp_weighted_sum(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :] * I.exp(w[:] * 0.5), axis=1)


# --- the schedule -------------------------------------------------------------------------------------------------

def test_the_schedule_names_the_per_column_values_a_row_reads():
    rms = schedule_rows.recognise(zoo.rms_norm_f16.trace())
    (weight,) = rms.columns  # cast(w[:], f32): its read and the cast are row-invariant, the cast is what a row reads
    assert weight.type == T.TensorType(T.f32, weight.type.shape) and any(weight in n.outputs for n in rms.invariant)
    norm = schedule_rows.recognise(zoo.layer_norm.trace())
    assert len(norm.columns) == 2 and all(str(v.type) == "f32[N]" for v in norm.columns)
    chain = schedule_rows.recognise(exp_weighted_sum.trace())
    (scaled,) = chain.columns  # exp(w * 0.5): the frontier, not w or w * 0.5
    assert sum(1 for n in chain.invariant if n.outputs and n.outputs[0] is scaled) == 1
    assert schedule_rows.recognise(zoo.softmax_whole.trace()).columns == ()
    assert schedule_rows.recognise(layer_norm_parallel.trace()).columns == ()  # a loop body is one row's


@pytest.mark.parametrize("kernel", [zoo.rms_norm_f16, zoo.layer_norm, exp_weighted_sum], ids=lambda k: k.name)
def test_the_warp_tier_fills_the_columns_once_a_block_and_its_passes_read_them(kernel):
    program = generate(kernel.trace(), "tilelang-cuda")
    columns = len(schedule_rows.recognise(kernel.trace()).columns)
    warp, block, passes = _tiers(_kernel_body(program))
    lines = warp.splitlines()
    guard = next(i for i, x in enumerate(lines) if x.strip().startswith("if r") and "< d0:" in x)
    fill, rows = "\n".join(lines[:guard]), "\n".join(lines[guard:])
    assert fill.strip().splitlines()[-2].strip() == "T.sync_threads()"  # then the row's index, then its guard
    assert "if T.Cast('int64', bx) * T.int64(8) < d0:" in fill  # only a block holding a row computes them
    buffers = set(re.findall(r"(w\d+)\[j\d+\] = ", fill))
    assert len(buffers) == columns and all(f"{b}[j" in rows for b in buffers)
    views = [f"p{k}[" for k in range(1, 1 + columns)]  # the weight views: read by the fill alone
    assert all(v in fill and v not in rows for v in views)
    assert all(v in block for v in views) and not any(b in block for b in buffers)  # a block's row reads them


def test_metal_fills_the_columns_with_its_barrier():
    program = generate(zoo.layer_norm.trace(), "tilelang-metal")
    assert program.count("T.alloc_shared((1024,), 'float32')") == 2 and "T.sync_threads()" in program


# --- the numbers ----------------------------------------------------------------------------------------------

def _layer_norm64(x, g, b):
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    scale = np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)
    return d / scale, d / scale * g + b, scale


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("m", ROWS)
def test_layer_norm_with_weights_read_once_a_block(compiled, m, n):
    x = (RNG.standard_normal((m, n)) * 2 + 1).astype(np.float32)
    g = (RNG.standard_normal(n) + 1).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    compiled(zoo.layer_norm)(x, g, b, y)
    normal, want, scale = _layer_norm64(x, g, b)
    # mean and variance within (N + 2)·u of their magnitudes (T5), the centred value relative to the row's spread,
    # rsqrt within 2 ulp, then the products and the sum a rounding each
    spread = np.max(np.abs(x.astype(np.float64)), axis=1, keepdims=True) / scale
    bound = (4 * (n + 2) * (1 + spread) + 16) * U32 * (np.abs(normal * g) + np.abs(b) + 1)
    assert np.all(np.abs(y - want) <= bound)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("m", ROWS)
def test_a_computed_column_value_in_a_fold(compiled, m, n):
    x = RNG.standard_normal((m, n)).astype(np.float32)
    w = RNG.standard_normal(n).astype(np.float32)
    y = np.full(m, np.nan, np.float32)
    compiled(exp_weighted_sum)(x, w, y)
    terms = x.astype(np.float64) * np.exp(w.astype(np.float64) * 0.5)
    # the sum within (N - 1)·u of its terms' magnitudes (T5), each term exp within 2 ulp and a product: 4·u more
    assert np.all(np.abs(y - terms.sum(axis=1)) <= (n + 4) * U32 * np.abs(terms).sum(axis=1))


@pytest.mark.parametrize("n", [129, 1024])
def test_nan_and_inf_weights_at_varying_columns(compiled, n):
    m = 9
    x = RNG.standard_normal((m, n)).astype(np.float32) + 2  # no zero: x * inf is an inf of x's sign
    x[:, 0] = np.abs(x[:, 0])
    for col in (0, n // 2, n - 1):
        w = RNG.standard_normal(n).astype(np.float32)
        w[col] = np.array(0x7FC00123, np.uint32).view(np.float32)  # a quiet NaN with a payload
        y = np.zeros(m, np.float32)
        compiled(exp_weighted_sum)(x, w, y)
        # exp keeps the NaN's payload (quiet), the product keeps its NaN operand, the sum its NaN: every row's sum
        assert (y.view(np.uint32) == 0x7FC00123).all(), (col, y.view(np.uint32))
    w = RNG.standard_normal(n).astype(np.float32)
    w[0] = np.inf  # column 0's x is positive in every row: each sum is +inf
    y = np.zeros(m, np.float32)
    compiled(exp_weighted_sum)(x, w, y)
    assert (y == np.inf).all()


def test_empty_rows_and_columns(compiled):
    g, b = np.ones(5, np.float32), np.zeros(5, np.float32)
    y = np.empty((0, 5), np.float32)
    compiled(zoo.layer_norm)(np.empty((0, 5), np.float32), g, b, y)  # no row: nothing computed, nothing written
    out = np.full(3, np.nan, np.float32)
    compiled(exp_weighted_sum)(np.empty((3, 0), np.float32), np.empty(0, np.float32), out)
    assert (out == 0).all()  # a sum of no terms
