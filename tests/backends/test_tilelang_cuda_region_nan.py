"""NaN payloads of the segmented-fold tile program (cuda_region_nan): a row holding a NaN output is recomputed by the
serial program, so every NaN output carries the oracle's bits (T3/T10: x86's propagation, the first NaN operand
quieted, 0xFFC00000 for an invalid operation), while the tile program's hot loop stays as it was.

Every test runs on every executable target through the shared ``target`` fixture; on tilelang-c the C target runs
CUDA's mapping emulated, whose staged NaN outputs are first made the hardware's canonical NaN (0x7FFFFFFF, as
tensor cores and CUDA arithmetic give), so the payloads checked here come from the recomputation alone. The
references are hand-derived bits (x86's rules applied to the one NaN each case plants) and the cpu target's
output, bit for bit wherever it is NaN; the other elements stay within the bounds of test_tilelang_cuda_region.
Where two distinct NaNs reach one output through a sum whose order the language leaves free (a contraction, the
fold's segmentation: T5, T10, spec §9), either payload is right, and that output is held to the two.
"""
import re

import numpy as np
import pytest

import intent_trace as intent

pytest.importorskip("tilelang")
from backends.test_tilelang_cuda_region import (ATTENTION, _attention_case, _reference, _specs,  # noqa: F401
                                                compiled)
from schedule.region_kernels import FA, SHIFT, attention_causal_shifted_f16, attention_lse_f16, key_max_f16

# f16 NaNs: quiet with payload 1; signalling with payload 1 (x86 quiets it: 0x7E01); quiet with the sign bit set
# and payload 5; signalling with the sign bit set and payload 0x100 (quieted: 0xFF00)
Q_NAN, S_NAN, NEG_NAN, NEG_S_NAN = 0x7E01, 0x7C01, 0xFE05, 0xFD00
DEFAULT_F16 = 0xFE00  # x86's default NaN 0xFFC00000 (an invalid operation) rounded to f16


def _nan(bits: int) -> np.float16:
    return np.array([bits], np.uint16).view(np.float16)[0]


def _oracle(kernel, inputs, outs, *scalars):
    """The cpu target's outputs (the reference for NaN payloads)."""
    outs = [np.zeros_like(o) for o in outs]
    intent.compile(kernel, target="cpu")(*inputs, *outs, *scalars)
    return outs


def _same_nans(out: np.ndarray, want: np.ndarray, free=None) -> None:
    """NaN where ``want`` is NaN, with its bits except where ``free`` (a mask) says two NaNs reach the element in an
    order the language leaves open: NaN-ness only there."""
    unsigned = {2: np.uint16, 4: np.uint32}[out.dtype.itemsize]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan), (np.argwhere(np.isnan(out) != nan)[:5])
    if free is not None:
        nan = nan & ~free
    got, exp = out.view(unsigned)[nan], want.view(unsigned)[nan]
    assert np.array_equal(got, exp), [(hex(a), hex(b)) for a, b in zip(got, exp) if a != b][:5]


def check_planted_nans(compiled, kernel, block: int, tail: int) -> None:
    """NaNs planted in an attention kernel's operands, whose source is a block of keys and a tail (``block + tail``
    queries and keys): the NaN outputs hold the payloads derived by hand and the oracle's. Batch 0: one query row
    (q[0, 3, 5]) and a V element only (v[0, block + tail // 2, 4], in the tail block); batch 1: the first key;
    batch 2: the last key. ``compiled(kernel, **extents)`` gives the executable (the target's; tilelang-metal's
    test calls this too)."""
    B, D = 3, 16
    L = S = block + tail
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=21)
    q[0, 3, 5], v[0, block + tail // 2, 4] = _nan(Q_NAN), _nan(NEG_NAN)
    k[1, 0, 2], k[2, S - 1, 7] = _nan(S_NAN), _nan(NEG_S_NAN)
    out = np.zeros((B, L, D), np.float16)
    compiled(kernel, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    causal = kernel is FA.attention_f16_causal
    # by hand: each NaN output holds the payload of the one NaN it reads, quieted (x86); a score row that sees a NaN
    # key, or a NaN query, makes its whole output row NaN; a NaN v element its column in every row (a masked key's
    # p is 0, and 0 * NaN is NaN)
    want = np.full(out.shape, 0, np.uint16)
    want[0, :, 4] = NEG_NAN
    want[0, 3, :] = Q_NAN  # every p of row 3 is the query's NaN: mul(p, v) keeps its first operand's payload
    want[1, :, :] = Q_NAN  # S_NAN quieted
    want[2, (np.arange(L) >= S - 1) if causal else slice(None), :] = NEG_S_NAN | 0x0200
    nan = want != 0
    # except where two NaNs reach one output: causal row 3 sees keys 0..3 only, so its p is the query's NaN there
    # and 0 at the masked key holding v's NaN, whose product 0 * v is v's NaN. Both reach the PV contraction's sum
    # for out[0, 3, 4], and which comes first is the contraction's order and the fold's segmentation (T5, T10,
    # spec §9: free): either payload (the generic oracle gives both, test_two_nans_in_one_dot_product_...)
    free = np.zeros(out.shape, bool)
    free[0, 3, 4] = causal
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out.view(np.uint16)[nan & ~free], want[nan & ~free])
    assert set(out.view(np.uint16)[free].tolist()) <= {Q_NAN, NEG_NAN}
    (oracle,) = _oracle(kernel, (q, k, v), [out], scale)
    assert set(oracle.view(np.uint16)[free].tolist()) <= {Q_NAN, NEG_NAN}
    _same_nans(out, oracle, free)
    ref = _reference(q, k, v, scale, causal=causal)
    assert np.abs(out[~nan].astype(np.float64) - ref[~nan]).max() <= bound


@pytest.mark.parametrize("kernel", ATTENTION, ids=lambda k: k.name)
def test_planted_nans_give_the_oracle_s_payloads(compiled, kernel):
    check_planted_nans(compiled, kernel, block=128, tail=22)  # the CUDA program's key blocks are 128


def test_two_nans_in_one_dot_product_leave_the_payload_free(monkeypatch):
    # out[0, 3, 4] of causal attention (check_planted_nans' inputs) by the reference interpreter under two legal
    # segmentations (spec §9). Keys 0..127 and 128..149 apart (the CUDA program's blocks): the first slice's
    # acc[3, 4] is the query's NaN alone; the second's is v's alone (0 * v: row 3 sees none of its keys, so its m is
    # -inf and its beta 0), so combine gives acc_a * alpha + acc_b * 0 with alpha = exp(NaN - NaN), the query's: add
    # keeps its first operand, the query's NaN (T3). One slice (cpu's slices hold 256 keys): both NaN terms meet in
    # the PV contraction, whose order T5/T10 leave free; generic's einsum, as cpu's loops, keeps the later term's,
    # v's (README: "Where two NaNs meet in one dot product"), and T3's mul(acc, beta) keeps it. So the language
    # fixes neither, and cpu, whose fold is that one slice, must give generic's one-slice bits at every NaN output.
    from intent_trace.oracle import generic_region
    B, D, L = 3, 16, 150
    (q, k, v, scale), _ = _attention_case(B, L, L, D, seed=21)
    q[0, 3, 5], v[0, 139, 4] = _nan(Q_NAN), _nan(NEG_NAN)
    k[1, 0, 2], k[2, L - 1, 7] = _nan(S_NAN), _nan(NEG_S_NAN)
    outs = {}
    for name, cuts in (("blocks", [(0, 128), (128, L)]), ("one", [(0, L)])):
        monkeypatch.setattr(generic_region, "segmentation", lambda rng, n, cuts=cuts: cuts)
        outs[name] = np.zeros((B, L, D), np.float16)
        intent.compile(FA.attention_f16_causal, target="generic")(q, k, v, outs[name], scale)
    assert outs["blocks"].view(np.uint16)[0, 3, 4] == Q_NAN and outs["one"].view(np.uint16)[0, 3, 4] == NEG_NAN
    (oracle,) = _oracle(FA.attention_f16_causal, (q, k, v), [outs["one"]], scale)
    _same_nans(oracle, outs["one"])
    free = np.zeros(oracle.shape, bool)
    free[0, 3, 4] = True
    _same_nans(outs["blocks"], outs["one"], free)  # the segmentations differ in that one element alone


def test_invalid_operations_give_x86_s_default_nan(compiled):
    # rows i < SHIFT see no key (0 / 0); batch 1 has an infinite key element: inf - inf in the rows whose score
    # it makes +inf, inf * 0 where the query is 0 there
    B, L, S, D = 2, 200, 150, 16
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=3)
    k[1, 7, 2] = np.inf
    q[1, 160, 2] = 0
    out = np.zeros((B, L, D), np.float16)
    compiled(attention_causal_shifted_f16, B=B, L=L, S=S, D=D)(q, k, v, out, scale)
    nan = np.isnan(out)
    assert nan[:, :SHIFT].all() and nan[1, 160].all() and nan[1, SHIFT:].any() and not nan[0, SHIFT:].any()
    assert (out.view(np.uint16)[nan] == DEFAULT_F16).all()
    (oracle,) = _oracle(attention_causal_shifted_f16, (q, k, v), [out], scale)
    _same_nans(out, oracle)


def test_f32_attention_on_cuda_cores(compiled):
    # 64-row tiles: a tail of rows and of keys (150 = 64 + 64 + 22); a signalling f32 query NaN, a quiet v NaN
    # with the sign bit set in the tail block
    L, S, D = 70, 150, 16
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, D), (S, D), (S, D)))
    q[3, 5] = np.array([0x7F800001], np.uint32).view(np.float32)[0]
    v[140, 2] = np.array([0xFFC00123], np.uint32).view(np.float32)[0]
    out = np.zeros((L, D), np.float32)
    compiled(FA.attention, L=L, S=S, D=D)(q, k, v, out, 0.25)
    bits = out.view(np.uint32)
    assert (bits[3] == 0x7FC00001).all()  # quieted
    others = np.arange(L) != 3
    assert (bits[others, 2] == 0xFFC00123).all()
    assert not np.isnan(np.delete(out[others], 2, axis=1)).any()
    (oracle,) = _oracle(FA.attention, (q, k, v), [out], 0.25)
    _same_nans(out, oracle)


def test_a_per_row_output_and_an_exact_max(compiled):
    # the log-sum-exp output (one value a row) and the exact max (IEEE maximum: the tile reduces ordered keys, whose
    # NaN is one canonical key): a NaN in the last row of the last (short) block of rows and in the first key
    B, L, S, D = 2, 132, 140, 32  # L: a tail no block_M divides, rows of f32 in whole 16-byte units (TMA)
    (q, k, v, scale), bound = _attention_case(B, L, S, D, seed=5)
    q[0, L - 1, 0] = _nan(NEG_S_NAN)
    k[1, 0, 1] = _nan(Q_NAN)
    out, lse = np.zeros((B, L, D), np.float16), np.zeros((B, L), np.float32)
    compiled(attention_lse_f16, B=B, L=L, S=S, D=D)(q, k, v, out, lse, scale)
    assert (out.view(np.uint16)[0, L - 1] == NEG_S_NAN | 0x0200).all() and (out.view(np.uint16)[1] == Q_NAN).all()
    assert lse.view(np.uint32)[0, L - 1] == 0xFFE00000 and (lse.view(np.uint32)[1] == 0x7FC02000).all()
    oracle_out, oracle_lse = _oracle(attention_lse_f16, (q, k, v), [out, lse], scale)
    _same_nans(out, oracle_out)
    _same_nans(lse, oracle_lse)
    best = np.zeros((B, L), np.float32)
    compiled(key_max_f16, B=B, L=L, S=S, D=D)(q, k, best)
    assert best.view(np.uint32)[0, L - 1] == 0xFFE00000 and (best.view(np.uint32)[1] == 0x7FC02000).all()
    (oracle_best,) = _oracle(key_max_f16, (q, k), [best])
    _same_nans(best, oracle_best)


@pytest.mark.parametrize("kernel", ATTENTION, ids=lambda k: k.name)
def test_the_recomputation_follows_the_source_loop(kernel):
    # the hot loop is the tile program's alone; the serial program's helpers (its_*) run only in the branch a NaN
    # output takes, after the outputs are staged; its buffers and mutable locals are allocated at the top
    program = _specs(kernel)["segmented_fold_d128"].program
    body = program[program.index("for kb in T.Pipelined"):]
    loop, rest = re.split(r"\n        (?=\S)", body, maxsplit=1)
    assert "its_" not in loop and "itr_is_nan" not in loop
    check = rest.index("itr_is_nan")
    assert rest.index("its_") > check > rest.index("T.copy(out")
    # the test of a staged row is unrolled (its loads issue back to back), the recomputation is not
    assert re.search(r"for j\d+ in T\.unroll\(128\):\n\s+nan\d+\[0\] = nan\d+\[0\] \| T\.call_extern\('int32', 'itr_is_nan'",
                     rest[:check + 40])
    assert rest.index("T.copy(o", check) > rest.rindex("its_")  # the staged tile is stored after its fix
    assert not re.search(r"\n {9,}\w+ = T\.alloc_", program)
