"""Whole-tensor row kernels on the cpu target run as one parallel loop over rows (oracle/numba/rows.py, issue 19).

The whole-tensor softmax and the ``for r in I.parallel(rows)`` softmax get the same loop nest; row kernels give
NumPy's float64 answer within their T4/T5 bound on every target; a row group computes every element with the same
scalar code as the node-by-node build, so on programs without transcendental functions cpu matches generic bit for
bit (NaN payloads, infinities, signed zeros in the rows); chains the per-row loop must not take (a value used after
the chain, a view the chain writes and reads, reductions down columns) stay correct; the parallel build runs it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import bits_equal
from example_modules import benchmark_module, example

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.rows import row_groups

ZOO = benchmark_module("zoo_kernels")
rows, softmax_whole, layer_norm = ZOO.rows, ZOO.softmax_whole, ZOO.layer_norm
ref_softmax, ref_layer_norm, ref_rms_norm = (ZOO.REFERENCES[k] for k in (softmax_whole, layer_norm, ZOO.rms_norm_f16))


@intent.kernel
def rms_norm(x: I.In[I.f32, ("M", "N")], w: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M", "N")]):
    mean_square = I.reduce.sum(x[:, :] * x[:, :], axis=1) / I.cast(x.shape[1], I.f32)
    y[:, :] = x[:, :] * rows(I.rsqrt(mean_square + 1e-6), x) * w[:]


@intent.kernel
def centre_scale(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """No transcendental function: every step is exactly rounded, so cpu and generic agree bit for bit."""
    shifted = x[:, :] - rows(I.reduce.max(x[:, :], axis=1), x)
    y[:, :] = shifted / rows(I.reduce.sum(I.abs(shifted), axis=1), x) - rows(I.reduce.max(-x[:, :], axis=1), x)


@intent.kernel
def softmax_and_stats(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], m: I.Out[I.f32, ("M",)],
                      total: I.Out[I.f32, (1,)]):
    """The row max is written (a member) and summed down the column after the rows (it leaves the chain)."""
    mx = I.reduce.max(x[:, :], axis=1)
    y[:, :] = x[:, :] - rows(mx, x)
    m[:] = mx
    total[0] = I.reduce.sum(mx, axis=0)


@intent.kernel
def shift_and_max(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], m: I.Out[I.f32, ("M",)]):
    mx = I.reduce.max(x[:, :], axis=1)
    y[:, :] = x[:, :] - rows(mx, x)
    m[:] = mx


@intent.kernel
def centre_in_place(y: I.InOut[I.f32, ("M", "N")]):
    """Writes the view it reads: row r's write must not be seen by another row's read."""
    y[:, :] = y[:, :] - rows(I.reduce.sum(y[:, :], axis=1), y)
    y[:, :] = y[:, :] * rows(I.reduce.max(y[:, :], axis=1), y)


@intent.kernel
def column_centre(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")]):
    """A reduction down the columns (axis 0) under a broadcast over rows: no row group."""
    mean = I.reduce.sum(x[:, :], axis=0) / I.cast(x.shape[0], I.f32)
    y[:, :] = x[:, :] - I.reshape(mean, (1, x.shape[1]))


@intent.kernel
def row_sum(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
    y[:] = I.reduce.sum(x[:, :], axis=1)


def _bound(n: int) -> float:
    """T5: a row sum of n terms within about n f32 roundings, exp/rsqrt within T4's few ulp, then the output's
    own rounding; normwise against the row's largest value."""
    return (n + 16) * 2.0**-24


SHAPES = [(5, 13), (1, 1), (3, 8), (7, 17), (2, 33)]  # N: below, at, past the 8 partial accumulators; tails


@pytest.mark.parametrize("shape", SHAPES)
def test_row_kernels_match_numpy(run, shape):
    m, n = shape
    rng = np.random.default_rng(m * 100 + n)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    for kernel, args, want in ((softmax_whole, (x,), ref_softmax(x)),
                               (layer_norm, (x, g, b), ref_layer_norm(x, g, b)),
                               (rms_norm, (x, g), ref_rms_norm(x, g))):
        y = np.full(shape, np.nan, np.float32)
        run(kernel, *args, y)
        scale = np.abs(want).max(axis=1, keepdims=True) + 1e-30
        err = float((np.abs(y - want) / scale).max())
        assert err <= _bound(n), (kernel.name if hasattr(kernel, "name") else kernel, shape, err)


def _function(source: str, name: str) -> str:
    return source.split(f"def {name}(", 1)[1].split("\n@njit", 1)[0]


def _loop_skeleton(source: str, function: str = "kernel") -> list:
    """(indent, range or prange) of every loop header of ``function`` in generated source."""
    body = _function(source, function)
    return [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^( *)for \w+ in (prange|range)\(", body, re.M)]


def test_both_softmax_spellings_get_one_loop_nest_over_rows():
    """The same loop nest in both spellings: one parallel loop over rows (the parallel build runs its body,
    oracle/numba/outline.py, per chunk of rows); no M x N temporary."""
    whole = intent.compile(softmax_whole, target="cpu", checks=False).source
    parallel = intent.compile(example("row_softmax").softmax_rows, target="cpu", checks=False).source
    assert _loop_skeleton(whole) == _loop_skeleton(parallel)
    skeleton = _loop_skeleton(whole)
    assert [k for _, k in skeleton].count("prange") == 1 and skeleton[0] == (4, "prange")
    assert _loop_skeleton(whole, "body_0") == [(4, "range")] + skeleton[1:]  # rows _lo .. _hi, then the same
    for source in (whole, parallel):
        assert _loop_skeleton(source, "kernel_parallel") == [(4, "prange")]  # over chunks of rows
        # no M x N temporary: outside the loop over rows the kernels allocate nothing but one row buffer (the
        # serial build's, before its loop over rows; the parallel build's at the top of an outlined body, once
        # per chunk of rows, outline.py), of the row's length and none when there is no row
        for function in ("kernel", "kernel_parallel"):
            allocations = re.findall(r"^    \w+ = (?:R\.alloc_\w+|np\.(?:empty|full|zeros))\((.*)$",
                                     _function(source, function), re.M)
            assert len(allocations) == (function == "kernel"), (function, allocations)
            assert all(re.fullmatch(r"\(ext1 if \w+ > 0 else 0,\), np\.float32\)", a) for a in allocations)


def test_row_groups_form_only_where_a_row_reduction_feeds_the_row():
    def groups(kernel):
        return row_groups(intent.compile(kernel, target="cpu").graph.body)

    assert len(groups(softmax_whole)) == 1 and len(groups(layer_norm)) == 1 and len(groups(centre_scale)) == 1
    assert len(groups(shift_and_max)) == 1  # the row max is written by a member
    assert groups(softmax_and_stats) == {}  # the row max is also summed after the rows: it leaves the chain
    assert groups(row_sum) == {}  # a reduction straight into a write: its code is unchanged
    assert groups(column_centre) == {}
    assert groups(centre_in_place) == {}  # it writes the view it reads


def _specials(rng, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.permutation(flat.size)
    payload = np.array([0x7FC12345, 0xFFA00001], np.uint32).view(np.float32)  # quiet NaNs with payloads, signs
    for k, v in zip(picks, [np.inf, -np.inf, 0.0, -0.0, payload[0], payload[1], np.float32(3.4e38)]):
        flat[k] = v
    x[-1, :] = -np.inf  # a row of -inf only
    return x


@pytest.mark.parametrize("shape", [(6, 9), (4, 24), (3, 1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_row_groups_match_generic_bit_for_bit_with_specials(shape, seed):
    x = _specials(np.random.default_rng(seed), shape)
    outs = {}
    for target in ("generic", "cpu"):
        y = np.zeros(shape, np.float32)
        intent.compile(centre_scale, target=target)(x, y)
        outs[target] = y
    assert bits_equal(outs["cpu"], outs["generic"])


def test_a_value_used_after_the_chain_and_a_written_row_value(run):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 11)).astype(np.float32)
    y, m, total = np.zeros_like(x), np.zeros(9, np.float32), np.zeros(1, np.float32)
    run(softmax_and_stats, x, y, m, total)
    mx = x.max(axis=1)
    np.testing.assert_array_equal(m, mx)
    np.testing.assert_array_equal(y, x - mx[:, None])  # one exactly rounded subtraction per element
    assert abs(float(total[0]) - float(mx.astype(np.float64).sum())) <= 16 * 2.0**-24 * float(np.abs(mx).sum())
    y2, m2 = np.zeros_like(x), np.zeros(9, np.float32)
    run(shift_and_max, x, y2, m2)
    np.testing.assert_array_equal(m2, mx)
    np.testing.assert_array_equal(y2, x - mx[:, None])


def test_writing_the_view_it_reads_and_column_reductions(run):
    rng = np.random.default_rng(4)
    x = rng.integers(-8, 8, (6, 10)).astype(np.float32)  # small integers: every step below is exact
    y = x.copy()
    run(centre_in_place, y)
    want = x - x.sum(axis=1, keepdims=True)
    want = want * want.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(y, want)
    out = np.zeros_like(x)
    run(column_centre, x, out)
    np.testing.assert_allclose(out, x - x.mean(axis=0, dtype=np.float64), rtol=0, atol=8 * 2.0**-20)


def test_row_group_on_the_parallel_build(monkeypatch):
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((37, 29)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    exe = intent.compile(softmax_whole, target="cpu")
    exe(x, y)
    assert exe.module.kernel_parallel.signatures
    assert float((np.abs(y - ref_softmax(x)) / ref_softmax(x).max(axis=1, keepdims=True)).max()) <= _bound(29)


@intent.kernel
def reshape_rows(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("A", "B")]):
    y[:, :] = I.reshape(x[:], (y.shape[0], y.shape[1]))


def test_a_reshape_check_remains_where_the_element_counts_can_differ():
    """[M] -> [M, 1] needs no check (the same product on both sides, so row kernels need no staging); a reshape
    between extents given independently still raises a ValueError naming both counts."""
    x = np.arange(6, dtype=np.float32)
    y = np.zeros((2, 3), np.float32)
    intent.compile(reshape_rows, target="cpu")(x, y)
    np.testing.assert_array_equal(y, x.reshape(2, 3))
    bad = np.full((2, 2), 7.0, np.float32)
    with pytest.raises(ValueError, match="reshape of 6 elements into a shape of 4 elements"):
        intent.compile(reshape_rows, target="cpu")(x, bad)
    assert (bad == 7.0).all()
    assert "!= ext0" not in intent.compile(rms_norm, target="cpu").source
