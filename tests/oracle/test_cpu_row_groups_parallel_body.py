"""Row groups inside the body of a top-level ``I.parallel`` loop (oracle/numba/rows.py, issue 19).

A batch of row kernels written ``for b in I.parallel(B): y[b, :, :] = softmax(x[b, :, :])`` runs each iteration's
rows in one loop (a ``range`` inside the parallel loop over ``b``) instead of whole-matrix passes, as the
whole-tensor kernels' rows do; a member whose value a later node reads (attention's P, read by the second product;
a value reduced down its columns) is stored row by row into an array of its whole shape. Checked: NumPy's float64
answers within the T4/T5 bound on every target (the fixture), the parallel build, bit for bit with generic where
no transcendental function runs (NaN payloads, infinities, signed zeros), the allocation limit (a ValueError before
any write: the caller's arrays unchanged), and the loop nest the source shows.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import bits_equal
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from example_modules import benchmark_module

import intent_trace as intent
from intent_trace import I
from intent_trace.graph import ops
from intent_trace.oracle.numba import target as cpu_target
from intent_trace.oracle.numba.rows import row_groups

rows = benchmark_module("zoo_kernels").rows
# benchmarks/cpu_rows.py's kernels: the batched softmax and layer norm (a row group in each iteration), the causal
# attention (each batch's scores, mask and softmax, then P V in one I.parallel body: the probabilities P are a
# member the second product reads after the group)
CPU_ROWS = benchmark_module("cpu_rows")
batched_softmax, batched_layer_norm = CPU_ROWS.batched_softmax, CPU_ROWS.batched_layer_norm
causal_attention = CPU_ROWS.causal_attention
# and their float64 NumPy references
_softmax64, _layer_norm64 = CPU_ROWS.ref_batched_softmax, CPU_ROWS.ref_batched_layer_norm
_attention64 = CPU_ROWS.ref_causal_attention


@intent.kernel
def batched_centre_scale(x: I.In[I.f32, ("B", "L", "N")], y: I.Out[I.f32, ("B", "L", "N")],
                         col: I.Out[I.f32, ("B", "N")]):
    """No transcendental function (on data whose sums are exact, cpu and generic agree bit for bit); the scaled rows
    are also reduced down their columns after the group (a member stored whole: the column maximum reads every
    row)."""
    for b in I.parallel(I.domain(0, x.shape[0])):
        v = x[b, :, :]
        shifted = v - rows(I.reduce.max(v, axis=1), v)
        scaled = shifted / rows(I.reduce.sum(I.abs(shifted), axis=1), v)
        y[b, :, :] = scaled
        col[b, :] = I.reduce.max(scaled, axis=0)


def _rowwise_error(got, want) -> float:
    scale = np.abs(want).max(axis=-1, keepdims=True) + 1e-30
    return float((np.abs(got.astype(np.float64) - want) / scale).max())


def _bound(n: int) -> float:
    """T5: a row sum of n terms within about n f32 roundings, exp/sqrt within T4's few ulp, the output's own
    rounding; normwise against the row's largest value."""
    return (n + 16) * 2.0**-24


# B: one batch and several; L: one row, a few; N: below, at and past the lane sums' 64-wide blocks (tails)
SHAPES = [(1, 1, 1), (3, 5, 13), (2, 7, 64), (4, 3, 70)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_batched_row_kernels_match_numpy(run, shape):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    for kernel, want in ((batched_softmax, _softmax64(x)), (batched_layer_norm, _layer_norm64(x))):
        y = np.full(shape, np.nan, np.float32)
        run(kernel, x, y)
        assert _rowwise_error(y, want) <= _bound(shape[-1]), (kernel.name, shape)


@pytest.mark.parametrize("shape", [(2, 1, 8), (3, 9, 16), (2, 33, 8)], ids=lambda s: "x".join(map(str, s)))
def test_causal_attention_with_its_probabilities_stored_matches_numpy(run, shape):
    b, n, d = shape
    rng = np.random.default_rng(n + d)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    out = np.full(shape, np.nan, np.float32)
    run(causal_attention, q, k, v, out, np.float32(d ** -0.5))
    # the products' sums (n and d terms) on top of the softmax's bound, against max |v| (the output is a mean of v)
    err = float(np.abs(out - _attention64(q, k, v, d ** -0.5)).max()) / float(np.abs(v).max())
    assert err <= _bound(n) + (n + d + 16) * 2.0**-24, (shape, err)


@st.composite
def _batches(draw):
    """A batch of rows of random extents (the rows' tails past the 64-wide lane blocks included) and values over
    most of the f32 range's exponents, finite (the specials are the bit-for-bit test's)."""
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 70)))
    mantissas = draw(hnp.arrays(np.float32, shape, elements=st.floats(-1, 1, width=32)))
    exponents = draw(hnp.arrays(np.int32, shape, elements=st.integers(-30, 30)))
    return np.ldexp(mantissas, exponents).astype(np.float32)


@settings(max_examples=30, deadline=None)
@given(x=_batches())
@example(x=np.array([[[1.83671e-40, 0.0, 0.0]]], np.float32))  # CI's find: a subnormal row (the underflow term)
def test_random_batches_match_numpy(x):
    for kernel, reference in ((batched_softmax, _softmax64), (batched_layer_norm, _layer_norm64)):
        y = np.full(x.shape, np.nan, np.float32)
        intent.compile(kernel, target="cpu")(x, y)
        want = reference(x)
        err = np.abs(y.astype(np.float64) - want).max(axis=-1)
        scale = np.abs(want).max(axis=-1)  # normwise against the row's largest output (T5's sums are relative)
        if kernel is batched_layer_norm:  # x - mean cancels: its rounding is relative to max |x|, then divided by
            x64 = x.astype(np.float64)  # the row's deviation (at least sqrt(1e-5): a constant row's outputs are
            scale = scale + np.abs(x64).max(axis=-1) / np.sqrt(x64.var(axis=-1) + 1e-5)  # that rounding / 0.003)
        # T5's underflow term: an f32 result in the subnormal range is rounded to an absolute 2^-150, relative to
        # nothing; in a layer norm each of the n + 16 operations' such error is divided by the row's deviation
        # (a row of subnormals: c * c underflows to zero and the mean's rounding becomes the output's error)
        absolute = (x.shape[-1] + 16) * 2.0**-150 / np.sqrt(x.astype(np.float64).var(axis=-1) + 1e-5)
        assert (err <= _bound(x.shape[-1]) * scale + absolute).all(), (kernel.name, x.shape, err, scale)


def _specials(rng, shape):
    """Small integers (every sum exact in any order: T5 leaves the order to the target, so only exact sums can be
    compared bit for bit) with infinities, signed zeros and NaN payloads at random positions."""
    x = rng.integers(-8, 9, shape).astype(np.float32)
    flat = x.reshape(-1)
    payload = np.array([0x7FC12345, 0xFFA00001], np.uint32).view(np.float32)  # quiet/signalling, both signs
    for k, value in zip(rng.permutation(flat.size), [np.inf, -np.inf, 0.0, -0.0, payload[0], payload[1]]):
        flat[k] = value
    x[-1, -1, :] = -np.inf  # a row of -inf only (in the last batch)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_and_the_stored_member_match_generic_bit_for_bit_with_specials(seed):
    x = _specials(np.random.default_rng(seed), (3, 6, 9))
    outs = {}
    for target in ("generic", "cpu"):
        y, col = np.zeros(x.shape, np.float32), np.zeros((3, 9), np.float32)
        intent.compile(batched_centre_scale, target=target)(x, y, col)
        outs[target] = (y, col)
    assert bits_equal(outs["cpu"][0], outs["generic"][0]) and bits_equal(outs["cpu"][1], outs["generic"][1])


def test_the_parallel_build_runs_the_rows_inside_each_iteration():
    rng = np.random.default_rng(7)
    shape = (5, 64, 208)  # 66,560 elements: just above the parallel threshold
    assert np.prod(shape) >= cpu_target.PARALLEL_THRESHOLD
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    for kernel, want in ((batched_softmax, _softmax64(x)), (batched_layer_norm, _layer_norm64(x))):
        y = np.full(shape, np.nan, np.float32)
        exe = intent.compile(kernel, target="cpu")
        exe(x, y)
        assert exe.module.kernel_parallel.signatures  # the parallel build ran
        assert _rowwise_error(y, want) <= _bound(shape[-1]), kernel.name


def _body(kernel):
    graph = intent.compile(kernel, target="cpu").graph
    (loop,) = [n for n in graph.body.nodes if n.op is ops.parallel]
    return loop.regions[0]


def test_the_groups_of_a_parallel_body_and_what_they_store():
    (group,) = row_groups(_body(batched_softmax), store_escaping=True).values()
    assert group.stored == frozenset()  # the write is a member: row r of y[b] written in the row's loop
    (group,) = row_groups(_body(batched_centre_scale), store_escaping=True).values()
    assert len(group.stored) == 1  # the scaled rows: the column maximum after the group reads them
    (group,) = row_groups(_body(causal_attention), store_escaping=True).values()
    ((stored,),) = [[v for v in n.outputs if v in group.stored] for n in group.members if n.outputs and
                    n.outputs[0] in group.stored]
    assert stored.type.rank == 2  # P (L x L), which the second product reads
    assert row_groups(_body(causal_attention)) == {}  # where a group cannot store (the kernel's top level) it ends


def _headers(source: str, function: str) -> list:
    body = source.split(f"def {function}(", 1)[1].split("\n@njit", 1)[0]
    return [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^( *)for \w+ in (prange|range)\(", body, re.M)]


def test_the_loop_nest_and_no_staging():
    """One parallel loop over the batch, the rows in a ``range`` inside it, each member's element loops inside
    that; the row buffers' allocation checks go before the parallel loop, so nothing can fail after a write and
    the outputs are not staged (copied)."""
    source = intent.compile(batched_softmax, target="cpu", checks=False).source
    headers = _headers(source, "kernel")
    assert headers[0] == (4, "prange") and headers[1] == (8, "range") and all(d > 8 for d, _ in headers[2:])
    assert [k for _, k in headers].count("prange") == 1
    assert "STAGES_OUTPUTS = False" in source
    # the stored probabilities are allocated before the loop over rows, once per iteration of the batch
    attention = intent.compile(causal_attention, target="cpu", checks=False).source
    body = attention.split("def kernel(", 1)[1].split("\n@njit", 1)[0]
    row_loop = re.search(r"^ {8}for (r\d+) in range\(", body, re.M)
    stored = re.search(rf"^ {{16}}(a\d+)\[{row_loop.group(1)}, i\d+\] = ", body, re.M)  # in its element loop
    assert row_loop and stored
    assert re.search(rf"^ {{4}}{stored.group(1)} = R\.alloc_empty\(", body, re.M)  # hoisted with the others


def test_a_row_buffer_over_the_allocation_limit_fails_before_any_write(monkeypatch):
    exe = intent.compile(batched_softmax, target="cpu")
    x = np.random.default_rng(8).standard_normal((2, 3, 64)).astype(np.float32)
    y = np.full_like(x, 5.0)
    exe(x, np.zeros_like(x))  # compiled and cached under the machine's limit
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "128")  # 32 floats: a row's buffer of 64 cannot fit
    with pytest.raises(ValueError, match="elements"):
        exe(x, y)
    assert (y == 5.0).all()


def test_a_stored_member_over_the_allocation_limit_names_its_op_before_any_write(monkeypatch):
    exe = intent.compile(batched_centre_scale, target="cpu")
    x = np.random.default_rng(9).integers(-8, 9, (2, 6, 9)).astype(np.float32)
    exe(x, np.zeros_like(x), np.zeros((2, 9), np.float32))
    y, col = np.full_like(x, 5.0), np.full((2, 9), 6.0, np.float32)
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", "100")  # a row (9 floats) fits, the 6 x 9 stored rows do not
    with pytest.raises(ValueError, match=r"the result of `div` of shape \(L, N\) needs 54 elements"):
        exe(x, y, col)
    assert (y == 5.0).all() and (col == 6.0).all()
