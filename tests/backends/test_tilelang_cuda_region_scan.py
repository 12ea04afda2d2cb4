"""Segmented scans on tilelang-cuda (cuda_region_scan: a region_scan as three phases over chunks of its source axis;
schedule/region_scan.py recognises it).

The schedule (on CPU, no GPU): causal linear attention (examples/causal_linear_attention.py) gets
``segmented_scan`` with its chunk and phases, and three kernels; a near miss keeps the serial program and names its
reason. The numbers: on every executable target through the shared ``target`` fixture (tilelang-c running the CUDA
mapping emulated, a block's threads one after another), against a float64 NumPy reference computed independently
(the cumulative sum of the k^T v outer products), within T5's bound for each output's own terms (T10: the chunks and
the order in which their transitions combine are free): lengths no chunk divides (1, CHUNK - 1, CHUNK, CHUNK + 1,
many chunks and a tail), f32 and f16 sources, NaN and infinities planted at several positions (non-finite where and
only where the reference is).
"""
import attrs
import numpy as np
import pytest
from example_modules import example

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source, mapped_compiler
from intent_trace.backends.tilelang import cuda_region_scan, targets
from intent_trace.backends.tilelang.cuda_region_scan import CHUNK
from intent_trace.backends.tilelang.target import build, generate
from intent_trace.schedule import region_scan
from intent_trace.schedule.recognition import Rejected

ATTENTION = example("causal_linear_attention")
EMULATED = attrs.evolve(targets.C, multi_block=lambda g: cuda_region_scan.multi_block(g, emulated=True),
                        host_workspaces=True)


@intent.fn
def _transition(q, k, v, pos):
    return I.matmul(k, v, transpose_lhs=True, acc_dtype=I.f32)


@intent.fn
def _emit(q, k, v, pos, state):
    n = pos.shape[0]
    causal = I.reshape(pos, (n, 1)) >= I.reshape(pos, (1, n))
    scores = I.matmul(q, k, transpose_rhs=True, acc_dtype=I.f32)
    within = I.matmul(I.select(causal, scores, I.zeros(scores.shape, I.f32)), I.cast(v, I.f32), acc_dtype=I.f32)
    return I.cast(I.matmul(I.cast(q, I.f32), state, acc_dtype=I.f32) + within, I.f16)


@intent.kernel
def attention_f16(q: I.In[I.f16, ("L", "D")], k: I.In[I.f16, ("L", "D")], v: I.In[I.f16, ("L", "D")],
                  out: I.Out[I.f16, ("L", "D")], final: I.Out[I.f32, ("D", "D")]):
    """The example's kernel with f16 sources and output (f32 products and state)."""
    t = I.domain(0, q.shape[0])
    zero = I.zeros((q.shape[1], q.shape[1]), I.f32)
    outputs, state = I.region_scan(
        source=(q[:, :], k[:, :], v[:, :], I.indices(t)), axis=0, summarize=_transition,
        combine=lambda a, b: a + b, identity=zero, initial_state=zero, apply=lambda tr, s: s + tr, emit=_emit)
    out[:, :] = outputs
    final[:, :] = state


def _causal(pos):
    n = pos.shape[0]
    return I.reshape(pos, (n, 1)) >= I.reshape(pos, (1, n))


def _cumulative(la, pos):
    """[n, 1]: each member's sum of the log-decays up to it, through a masked product (no ordered loop)."""
    mask = I.select(_causal(pos), I.full((pos.shape[0], pos.shape[0]), 1.0, I.f32),
                    I.zeros((pos.shape[0], pos.shape[0]), I.f32))
    return I.matmul(mask, I.reshape(la, (la.shape[0], 1)), acc_dtype=I.f32)


@intent.fn
def _decay_summary(la, x, pos):
    total = I.reduce.sum(la, axis=0)
    weights = I.exp(total - _cumulative(la, pos))  # [n, 1]: each member's decay to the slice's end
    return total, I.reshape(I.matmul(weights, x, transpose_lhs=True, acc_dtype=I.f32), (x.shape[1],))


@intent.fn
def _decay_emit(la, x, pos, h):
    cum = _cumulative(la, pos)
    n = pos.shape[0]
    decay = I.select(_causal(pos), I.exp(cum - I.reshape(cum, (1, n))), I.zeros((n, n), I.f32))
    return I.exp(cum) * I.reshape(h, (1, h.shape[0])) + I.matmul(decay, x, acc_dtype=I.f32)


@intent.kernel
def decayed_recurrence(log_a: I.In[I.f32, ("L",)], x: I.In[I.f32, ("L", "D")], h0: I.In[I.f32, ("D",)],
                       states: I.Out[I.f32, ("L", "D")], final: I.Out[I.f32, ("D",)]):
    """h[t] = a[t] * h[t-1] + x[t]: a transition is (the slice's log-decay, its decayed sum), composed in order
    (``combine`` is not commutative) and not pointwise on one shape: the prefix phase is one block."""
    t = I.domain(0, x.shape[0])
    outputs, state = I.region_scan(
        source=(log_a[:], x[:, :], I.indices(t)), axis=0, summarize=_decay_summary,
        combine=lambda p, q: (p[0] + q[0], I.exp(q[0]) * p[1] + q[1]),
        identity=(I.cast(0.0, I.f32), I.zeros((x.shape[1],), I.f32)), initial_state=h0[:],
        apply=lambda tr, h: I.exp(tr[0]) * h + tr[1], emit=_decay_emit)
    states[:, :] = outputs
    final[:] = state


@intent.kernel
def scan_then_scale(x: I.In[I.f32, ("L", "D")], out: I.Out[I.f32, ("L", "D")], final: I.Out[I.f32, ("D",)]):
    """A near miss: the outputs are scaled after the scan (not a whole write of its result)."""
    zero = I.zeros((x.shape[1],), I.f32)
    outputs, state = I.region_scan(
        source=(x[:, :],), axis=0, summarize=lambda s: I.reduce.sum(s, axis=0), combine=lambda a, b: a + b,
        identity=zero, initial_state=zero, apply=lambda tr, s: s + tr,
        emit=lambda s, st: s + I.reshape(st, (1, st.shape[0])))
    out[:, :] = outputs * 2.0
    final[:] = state


def test_linear_attention_gets_a_segmented_scan():
    g = ATTENTION.linear_attention.trace()
    found = region_scan.recognise(g)
    assert isinstance(found, region_scan.SegmentedScan) and g.extents[found.axis].extent.name == "L"
    assert found.contractions == 4 and len(found.out_writes) == 1 and len(found.state_writes) == 1
    exe = build(g, target="tilelang-cuda")
    assert exe.schedule.mappings() == ("segmented_scan",), exe.schedule
    part = exe.schedule.general
    assert part.param("chunk") == CHUNK and part.param("source") == "L" and part.param("phases").startswith("3:")
    assert "segmented_scan (source=L, chunk=64" in str(exe.schedule)
    program = generate(g, "tilelang-cuda")
    elements = "T.max(T.ceildiv(T.Cast('int64', d1) * T.Cast('int64', d1), T.int64(128)), T.int64(1))"
    assert program.count("with T.Kernel(") == 3 and f"T.Kernel({elements}, threads=128) as bx:" in program
    assert program.count("with T.Kernel(T.max(T.ceildiv(d0, T.int64(64)), T.int64(1)), threads=128") == 2
    assert "T.sync_threads()" in program and "T.get_thread_binding()" in program


def test_a_batch_loop_is_the_grid_of_entries():
    g = ATTENTION.linear_attention_batched.trace()
    found = region_scan.recognise(g)
    assert isinstance(found, region_scan.SegmentedScan) and g.extents[found.batch].extent.name == "B"
    part = build(g, target="tilelang-cuda").schedule.general
    assert part.mapping == "segmented_scan" and part.param("batch") == "B" and part.param("source") == "L"
    program = generate(g, "tilelang-cuda")
    per = "T.max(T.ceildiv(d1, T.int64(64)), T.int64(1))"
    assert program.count(f"with T.Kernel({per} * T.max(d0, T.int64(1)), threads=128") == 2
    elements = "T.max(T.ceildiv(T.Cast('int64', d2) * T.Cast('int64', d2), T.int64(128)), T.int64(1))"
    assert f"with T.Kernel({elements} * T.max(d0, T.int64(1)), threads=128) as bx:" in program
    source = cuda_source(program)  # TileLang lowers it for sm_90a (no GPU here: not compiled)
    assert source.count("__global__ void __launch_bounds__(128, 1)") == 3 and "__syncthreads();" in source


@intent.kernel
def scan_in_emit(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], total: I.Out[I.f32, (1,)]):
    """A near miss: emit scans its slice (an ordered loop in the element code: every thread would write its buffer)."""
    d = I.domain(0, x.shape[0])
    outs, final = I.region_scan(
        source=x[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0), combine=lambda a, b: a + b,
        identity=I.cast(0.0, I.f32), initial_state=I.cast(0.0, I.f32), apply=lambda t, state: state + t,
        emit=lambda s, state: I.cumsum(s, axis=0) + state)
    y[d] = outs
    total[0] = final


@pytest.mark.parametrize("kernel, why", [
    (scan_then_scale, "op mul at test_tilelang_cuda_region_scan.py:"),
    (scan_in_emit, "op scan at test_tilelang_cuda_region_scan.py:"),
], ids=["consumer-after-the-scan", "ordered-loop-in-a-helper"])
def test_a_near_miss_keeps_one_thread_and_says_why(kernel, why):
    found = region_scan.recognise(kernel.trace())
    assert isinstance(found, Rejected) and why in found.reason, found
    schedule = build(kernel.trace(), target="tilelang-cuda").schedule
    assert schedule.general.mapping == "serial"
    assert f"not a segmented scan: {why}" in schedule.general.reason


@pytest.fixture
def scans(target, monkeypatch):
    return mapped_compiler(target, monkeypatch, EMULATED, "segmented_scan")


def _reference(q, k, v):
    """(out, final, the sums of the outputs' terms' magnitudes, the terms per output) in float64."""
    with np.errstate(invalid="ignore", over="ignore"):  # a signalling NaN, infinities
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
        states = np.cumsum(np.einsum("ld,le->lde", k, v), axis=0)
        out, final = np.einsum("ld,lde->le", q, states), states[-1]
        magnitude = np.einsum("ld,lde->le", np.abs(q), np.cumsum(np.einsum("ld,le->lde", np.abs(k), np.abs(v)), 0))
        final_magnitude = np.sum(np.einsum("ld,le->lde", np.abs(k), np.abs(v)), axis=0)
    return out, final, magnitude, final_magnitude


def _check(got, want, magnitude, terms: int, unit: float = 2.0 ** -24, rounded: float = 0.0) -> None:
    """Non-finite exactly where the reference is; elsewhere within T5's bound gamma_n * sum |terms| (every term a
    product of three values: ``terms`` additions and two multiplications each), plus, when the f32 result is rounded
    to a narrower output (``rounded``: its unit roundoff), that rounding (relative, and half its least subnormal)."""
    assert np.array_equal(np.isfinite(got), np.isfinite(want))
    finite = np.isfinite(want)
    n = terms + 2
    bound = n * unit / (1 - n * unit) * magnitude[finite]
    if rounded:
        bound += rounded * (np.abs(want[finite]) + bound) + 2.0 ** -25
    err = np.abs(got[finite].astype(np.float64) - want[finite])
    assert np.all(err <= bound), np.max(err - bound)


PAYLOAD = 0x7F812345  # a signalling NaN
LENGTHS = [1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 7]


@pytest.mark.parametrize("L", LENGTHS, ids=[f"L{n}" for n in LENGTHS])
def test_linear_attention_f32(scans, L):
    D = 8
    exe = scans(ATTENTION.linear_attention)
    for seed in range(2):  # several sequences through one executable
        rng = np.random.default_rng(L * 10 + seed)
        q, k, v = (rng.standard_normal((L, D)).astype(np.float32) for _ in range(3))
        out, final = np.zeros((L, D), np.float32), np.zeros((D, D), np.float32)
        exe(q, k, v, out, final)
        want, want_final, magnitude, final_magnitude = _reference(q, k, v)
        _check(out, want, magnitude, L * D + D)
        _check(final, want_final, final_magnitude, L)


@pytest.mark.parametrize("L", [CHUNK + 1, 3 * CHUNK + 5], ids=["one-tail", "tail"])
def test_linear_attention_f16(scans, L):
    D = 4
    rng = np.random.default_rng(L)
    q, k, v = (rng.uniform(-1, 1, (L, D)).astype(np.float16) for _ in range(3))
    out, final = np.zeros((L, D), np.float16), np.zeros((D, D), np.float32)
    scans(attention_f16)(q, k, v, out, final)
    want, want_final, magnitude, final_magnitude = _reference(q, k, v)
    _check(out, want, magnitude, L * D + D, rounded=2.0 ** -11)  # f32 arithmetic, then one rounding to f16
    _check(final, want_final, final_magnitude, L)


# In q and k only: the example's emit multiplies v by masked scores, and 0 * inf (or 0 * NaN in v) is NaN for every row
# of the slice before the planted one, so where the slices end would be observable (§9.2's laws hold for finite values)
@pytest.mark.parametrize("where", [(0, "k", np.nan), (CHUNK - 1, "k", np.inf), (CHUNK, "q", -np.inf),
                                   (2 * CHUNK + 3, "k", np.nan)],
                         ids=["nan-first", "inf-chunk-end", "inf-chunk-start", "nan-middle"])
def test_linear_attention_non_finite(scans, where):
    at, name, value = where
    L, D = 3 * CHUNK + 9, 4
    rng = np.random.default_rng(at)
    arrays = {n: rng.standard_normal((L, D)).astype(np.float32) for n in "qkv"}
    arrays[name][at, 1] = value
    if np.isnan(value):  # a signalling NaN with a payload of its own: every NaN it makes is it, quieted (T3)
        arrays[name][at, 1:2].view(np.uint32)[:] = PAYLOAD
    out, final = np.zeros((L, D), np.float32), np.zeros((D, D), np.float32)
    scans(ATTENTION.linear_attention)(arrays["q"], arrays["k"], arrays["v"], out, final)
    want, want_final, magnitude, final_magnitude = _reference(arrays["q"], arrays["k"], arrays["v"])
    _check(out, want, magnitude, L * D + D)
    _check(final, want_final, final_magnitude, L)
    if np.isnan(value):
        for got in (out, final):
            assert np.all(got[np.isnan(got)].view(np.uint32) == PAYLOAD | 0x00400000)


@pytest.mark.parametrize("B, L", [(3, 2 * CHUNK + 5), (1, CHUNK), (2, 0), (0, 5)],
                         ids=["entries-tail", "one-entry", "empty-axis", "no-entries"])
def test_batched_linear_attention(scans, B, L):
    D = 4
    rng = np.random.default_rng(B * 100 + L)
    q, k, v = (rng.standard_normal((B, L, D)).astype(np.float32) for _ in range(3))
    out, final = np.full((B, L, D), 7.0, np.float32), np.full((B, D, D), 7.0, np.float32)
    scans(ATTENTION.linear_attention_batched)(q, k, v, out, final)
    for b in range(B):
        if L == 0:
            assert np.array_equal(final[b], np.zeros((D, D), np.float32))
            continue
        want, want_final, magnitude, final_magnitude = _reference(q[b], k[b], v[b])
        _check(out[b], want, magnitude, L * D + D)
        _check(final[b], want_final, final_magnitude, L)


def test_an_ordered_combine_gets_one_prefix_block():
    g = decayed_recurrence.trace()
    found = region_scan.recognise(g)
    assert isinstance(found, region_scan.SegmentedScan) and found.elementwise is None
    part = build(g, target="tilelang-cuda").schedule.general
    assert part.mapping == "segmented_scan" and "(one block an entry)" in part.param("phases")
    assert "with T.Kernel(T.int64(1), threads=128) as bx:" in generate(g, "tilelang-cuda")


@pytest.mark.parametrize("L", [1, CHUNK + 3, 4 * CHUNK + 1], ids=["one", "tail", "chunks-tail"])
def test_an_ordered_combine_is_the_recurrence(scans, L):
    D = 6
    rng = np.random.default_rng(L)
    log_a = np.log(rng.uniform(0.9, 1.0, L)).astype(np.float32)
    x = rng.standard_normal((L, D)).astype(np.float32)
    h0 = rng.standard_normal(D).astype(np.float32)
    states, final = np.zeros((L, D), np.float32), np.zeros(D, np.float32)
    scans(decayed_recurrence)(log_a, x, h0, states, final)
    a = np.exp(log_a.astype(np.float64))
    want, magnitude = np.zeros((L, D)), np.zeros((L, D))
    h, m = h0.astype(np.float64), np.abs(h0.astype(np.float64))
    for t in range(L):
        h, m = a[t] * h + x[t], a[t] * m + np.abs(x[t])
        want[t], magnitude[t] = h, m
    # exp and the sums of log-decays carry a few ulps each per member (a reordering error is of the values' size)
    bound = 2.0 ** -24 * 16 * (L + 8) * magnitude
    assert np.all(np.abs(states - want) <= bound), np.max(np.abs(states - want) / magnitude)
    assert np.all(np.abs(final - want[-1]) <= bound[-1])
