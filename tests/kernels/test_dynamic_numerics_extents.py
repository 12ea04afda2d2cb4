"""The numerics-defined operations over dynamic extents (issue 15 item 2): one kernel for every model width.

``I.quantize`` over a dynamic K (B = K // 256 blocks, K % 256 == 0 checked when the kernel runs), ``I.scaled_matmul``
with a dynamic carrier extent (held to the group size), ``I.sparse_matmul`` with dynamic compression extents (K a
multiple of the group, kc = K * keep / group). A broken relation is a ValueError naming the extent and its value,
raised before any output is written; static extents keep their trace-time checks. The block extent meets the
kernel's dynamic outputs through ``I.assume_equal`` (or a domain of them). Every kernel runs on every executable
target through the shared ``run`` fixture; references are independent of the library: the quantize records
against the scalar transcription of ggml's reference code in test_quantize.py (bit for bit), the dots against
the exact dot of the dequantized operands (Q3's bound), scaled and sparse products against exact ``Fraction``
sums of operands decoded here with ml_dtypes / expanded by explicit loops (T5's bound).
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import intent_trace as intent
from intent_trace import I
from intent_trace._format_kquants import dequantize
from intent_trace.errors import TraceError
from test_quantize import FIELDS, assert_record, reference
from test_scaled_contract import assert_scaled_result
from test_sparse_contract import exact_matmul_check, expand, random_meta

F = np.float32
RNG = np.random.default_rng(2)


# --- quantize ----------------------------------------------------------------------------------------------------

@intent.kernel
def q8_rows(x: I.In[I.f32, ("M", "K")], d: I.Out[I.f32, ("M", "B")], qs: I.Out[I.i8, ("M", "B", 256)],
            bsums: I.Out[I.i16, ("M", "B", 16)]):
    I.assume_equal(d.shape[1], x.shape[1] // 256)  # the outputs' block extent is K // 256
    r = I.quantize(x[:, :], format=I.quant.q8_k)
    d[:, :] = r.d
    qs[:, :, :] = r.qs
    bsums[:, :, :] = r.bsums


@intent.kernel
def q4_rows(x: I.In[I.f32, ("M", "K")], d: I.Out[I.f16, ("M", "B")], dmin: I.Out[I.f16, ("M", "B")],
            scales: I.Out[I.u8, ("M", "B", 8)], mins: I.Out[I.u8, ("M", "B", 8)], q: I.Out[I.u8, ("M", "B", 256)]):
    r = I.quantize(x[:, :], format=I.quant.q4_k)
    I.assume_equal(q.shape[1], x.shape[1] // 256)  # stated after the quantize: the extents are one all the same
    d[:, :] = r.d
    dmin[:, :] = r.dmin
    scales[:, :, :] = r.scales
    mins[:, :, :] = r.mins
    q[:, :, :] = r.q


@intent.kernel
def q8_prefix(x: I.In[I.f32, ("K",)], d: I.InOut[I.f32, ("P",)]):
    r = I.quantize(x[:], format=I.quant.q8_k)
    d[I.domain(0, x.shape[0] // 256)] = r.d  # no statement: a domain of the output, bounds-checked


ROWS = {"q8_k": q8_rows, "q4_k": q4_rows}


def _records(fmt, m, nb, fill=7):
    return {n: np.full((m, nb) + tail, fill, npt) for n, _, npt, tail in FIELDS[fmt]}


@pytest.mark.parametrize("fmt", ["q8_k", "q4_k"])
@pytest.mark.parametrize("m,nb", [(1, 1), (3, 2), (2, 5), (4, 0)])
def test_quantize_over_a_dynamic_k_matches_ggml(run, fmt, m, nb):
    x = (RNG.standard_normal((m, nb * 256)) * RNG.uniform(0.01, 100, (m, 1))).astype(F)
    x[0, :7] = 0.0 if nb else x[0, :7]
    got = _records(fmt, m, nb)
    run(ROWS[fmt], x, *got.values())
    want = reference(x, fmt) if nb else {n: np.zeros((m, 0) + tail, npt) for n, _, npt, tail in FIELDS[fmt]}
    assert_record(got, want)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)
@given(m=st.integers(1, 3), nb=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_quantize_q8_k_over_widths_the_kernel_never_saw(run, m, nb, seed):
    x = np.random.default_rng(seed).standard_normal((m, nb * 256)).astype(F)
    got = _records("q8_k", m, nb)
    run(q8_rows, x, *got.values())
    assert_record(got, reference(x, "q8_k"))


def test_quantize_writes_a_domain_of_a_larger_output(run):
    x = RNG.standard_normal(768).astype(F)
    d = np.full(5, -1.0, F)
    run(q8_prefix, x, d)
    assert d[:3].tolist() == reference(x, "q8_k")["d"].tolist() and (d[3:] == -1.0).all()
    with pytest.raises(IndexError):
        run(q8_prefix, x, np.zeros(2, F))  # 3 blocks do not fit 2


@pytest.mark.parametrize("fmt", ["q8_k", "q4_k"])
def test_a_k_that_is_not_a_multiple_of_256_is_a_value_error_and_writes_nothing(run, fmt):
    x = RNG.standard_normal((2, 300)).astype(F)
    got = _records(fmt, 2, 1)
    with pytest.raises(ValueError, match=r"I\.quantize: the last extent K of its values is 300, not a multiple of "
                                         r"256") as e:
        run(ROWS[fmt], x, *got.values())
    assert any("quantize" in n for n in e.value.__notes__)  # the note names the op and the user's line
    for n, v in got.items():
        assert (v == 7).all(), n


def test_an_output_block_extent_that_is_not_k_over_256_is_assume_equals_error(run):
    x = RNG.standard_normal((2, 512)).astype(F)
    got = _records("q8_k", 2, 3)
    with pytest.raises(ValueError, match=r"I\.assume_equal: the sides differ: B \(an extent named in the signature "
                                         r"of kernel q8_rows at .*\) is 3, but \(K // 256\) \(made at "
                                         r"test_dynamic_numerics_extents\.py:\d+\) is 2"):
        run(q8_rows, x, *got.values())
    assert all((v == 7).all() for v in got.values())


@intent.kernel
def qdot_rows(x: I.In[I.f32, ("M", "K")], w: I.In[I.f32, ("N", "K")], y: I.Out[I.f32, ("M", "N")]):
    a = I.quantize(w[:, :], format=I.quant.q4_k)
    b = I.quantize(x[:, :], format=I.quant.q8_k)  # the same K: the same block extent, so the dot pairs them
    lhs = I.record(**{n: I.expand_dims(getattr(a, n), 0) for n in ("d", "dmin", "scales", "mins", "q")})
    rhs = I.record(**{n: I.expand_dims(getattr(b, n), 1) for n in ("d", "qs", "bsums")})
    y[:, :] = I.quantized_dot(lhs, rhs, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)


@pytest.mark.parametrize("m,n,nb", [(2, 3, 1), (1, 4, 3)])
def test_quantized_dot_over_a_dynamic_k_within_q3s_bound(run, m, n, nb):
    k = nb * 256
    x = RNG.standard_normal((m, k)).astype(F)
    w = RNG.standard_normal((n, k)).astype(F)
    y = np.full((m, n), np.nan, F)
    run(qdot_rows, x, w, y)
    wa = dequantize(reference(w, "q4_k"), "q4_k").astype(np.float64).reshape(n, k)
    xa = dequantize(reference(x, "q8_k"), "q8_k").astype(np.float64).reshape(m, k)
    terms = xa[:, None, :] * wa[None, :, :]
    u, steps = 2.0 ** -24, nb + 8
    gamma = steps * u / (1 - steps * u)
    assert np.all(np.abs(y - terms.sum(-1)) <= gamma * np.abs(terms).sum(-1) + 1e-30)


def test_the_kir_gives_quantize_its_block_count():
    text = str(q8_rows.trace())
    blocks = re.search(r"(%\d+): index = floordiv K, 256:index", text.split("read x")[1])
    assert blocks, text
    assert re.search(rf"= quantize %\d+, {blocks[1]} \{{format=I\.quant\.q8_k\}}", text), text
    assert re.search(r"index = assume_equal B == %\d+", text), text


def test_a_static_k_keeps_its_trace_time_check():
    @intent.kernel
    def k(x: I.In[I.f32, (2, 300)], d: I.Out[I.f32, (2, 1)]):
        d[:, :] = I.quantize(x[:, :], format=I.quant.q8_k).d

    with pytest.raises(TraceError, match="K = 300 must be a positive multiple of 256"):
        k.trace()


# On a target whose host sizes every buffer before the call (tilelang-cuda, tilelang-metal) B = K // 256 is the
# kernel's value, so each record field is held flat in (*lead, K): the C target switched to host workspaces runs
# that storage here, and the Metal program runs on its emulator.

@pytest.mark.parametrize("fmt", ["q8_k", "q4_k"])
def test_quantize_fields_held_flat_by_k_on_host_sized_targets(monkeypatch, fmt):
    import attrs

    from intent_trace.backends.tilelang import target as tl_target
    from intent_trace.backends.tilelang import targets

    monkeypatch.setitem(targets.TARGETS, "tilelang-c", attrs.evolve(targets.C, host_workspaces=True))
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = tl_target.build(ROWS[fmt].trace(), target="tilelang-c")
    widths = {w.shape for w in exe.workspaces}
    assert widths == {("d0", "d1")}, widths  # (M, K): sized by the kernel's extents alone
    for m, nb in ((2, 3), (1, 1), (3, 0)):
        x = RNG.standard_normal((m, nb * 256)).astype(F)
        got = _records(fmt, m, nb)
        exe(x, *got.values())
        if nb:
            assert_record(got, reference(x, fmt))
    with pytest.raises(ValueError, match="last extent K of its values is 260"):
        exe(np.zeros((1, 260), F), *_records(fmt, 1, 1).values())


def test_quantize_over_a_dynamic_k_on_the_metal_emulator():
    exe = intent.compile(q4_rows, target="tilelang-metal", emulate=True)
    x = RNG.standard_normal((2, 512)).astype(F)
    got = _records("q4_k", 2, 2)
    exe(x, *got.values())
    assert_record(got, reference(x, "q4_k"))


# --- scaled matmul -----------------------------------------------------------------------------------------------

@intent.kernel
def mx_dynamic(a: I.In[I.u8, ("M", "G", "C")], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", "CR", "N")],
               sb: I.In[I.u8, ("N", "G")], out: I.Out[I.f32, ("M", "N")]):
    out[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                                group_size=32, acc_dtype=I.f32)


@intent.kernel
def mx_flat(a: I.In[I.u8, ("M", "KB")], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("K", "N")],
            sb: I.In[I.u8, ("N", "G")], out: I.Out[I.f32, ("M", "N")]):
    # A model's row of K e2m1 codes is K / 2 bytes: its groups are those bytes 16 at a time (reshape checks it).
    lhs = I.reshape(a[:, :], (a.shape[0], sa.shape[1], 16))
    rhs = I.reshape(b[:, :], (sb.shape[1], 32, b.shape[1]))
    out[:, :] = I.scaled_matmul(lhs, sa[:, :], rhs, sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3, group_size=32,
                                acc_dtype=I.f32)


def _mx_operands(m, g, n, c=16, cr=32):
    a = RNG.integers(0, 256, (m, g, c)).astype(np.uint8)
    sa = RNG.integers(120, 134, (m, g)).astype(np.uint8)
    b = RNG.integers(0, 256, (g, cr, n)).astype(np.uint8)
    b[(b & 0x7F) == 0x7F] = 0x10  # no e4m3 NaN codes: every element is a number
    sb = RNG.integers(120, 134, (n, g)).astype(np.uint8)
    return a, sa, b, sb


@pytest.mark.parametrize("m,g,n", [(2, 1, 3), (3, 4, 2), (1, 0, 2)])
def test_scaled_matmul_with_a_dynamic_carrier_extent(run, m, g, n):
    a, sa, b, sb = _mx_operands(m, g, n)
    out = np.full((m, n), np.nan, F)
    run(mx_dynamic, a, sa, b, sb, out)
    assert_scaled_result(out, a, sa, b, sb, I.e2m1, I.e4m3, I.f32)


def test_scaled_matmul_of_flat_carriers_reshaped_to_groups(run):
    a, sa, b, sb = _mx_operands(3, 2, 4)
    out = np.full((3, 4), np.nan, F)
    run(mx_flat, a.reshape(3, 32), sa, b.reshape(64, 4), sb, out)
    assert_scaled_result(out, a, sa, b, sb, I.e2m1, I.e4m3, I.f32)
    with pytest.raises(ValueError, match="reshape of 90 elements"):  # 30 bytes a row are not 2 groups of 16
        run(mx_flat, np.zeros((3, 30), np.uint8), sa, b.reshape(64, 4), sb, out)


@pytest.mark.parametrize("side,c,cr,match", [
    ("lhs", 8, 32, r"lhs axis 2 \(C_lhs\) has extent C = 8, but e2m1 with group size 32 needs exactly 16"),
    ("rhs", 16, 16, r"rhs axis 1 \(C_rhs\) has extent CR = 16, but e4m3 with group size 32 needs exactly 32"),
])
def test_a_carrier_extent_that_is_not_the_group_is_a_value_error_and_writes_nothing(run, side, c, cr, match):
    a, sa, b, sb = _mx_operands(2, 2, 3, c=c, cr=cr)
    out = np.full((2, 3), 5.0, F)
    with pytest.raises(ValueError, match=r"I\.scaled_contract: " + match):
        run(mx_dynamic, a, sa, b, sb, out)
    assert (out == 5.0).all()


def test_a_static_carrier_extent_keeps_its_trace_time_check():
    @intent.kernel
    def k(a: I.In[I.u8, ("M", "G", 8)], sa: I.In[I.u8, ("M", "G")], b: I.In[I.u8, ("G", 32, "N")],
          sb: I.In[I.u8, ("N", "G")], out: I.Out[I.f32, ("M", "N")]):
        out[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1,
                                    rhs_format=I.e4m3, group_size=32, acc_dtype=I.f32)

    with pytest.raises(TraceError, match="has extent 8, but e2m1 with group size 32 needs exactly 16"):
        k.trace()


# --- sparse matmul -----------------------------------------------------------------------------------------------

@intent.kernel
def sparse_dynamic(c: I.In[I.f32, ("M", "KC")], meta: I.In[I.u8, ("M", "KC")], w: I.In[I.f32, ("K", "N")],
                   out: I.Out[I.f32, ("M", "N")]):
    out[:, :] = I.sparse_matmul(c[:, :], meta[:, :], w[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)


@intent.kernel
def sparse_static_k(c: I.In[I.f32, ("M", "KC")], meta: I.In[I.u8, ("M", "KC")], w: I.In[I.f32, (8, "N")],
                    out: I.Out[I.f32, ("M", "N")]):
    out[:, :] = I.sparse_matmul(c[:, :], meta[:, :], w[:, :], format=I.sparse.one_of_two(), acc_dtype=I.f32)


@intent.kernel
def sparse_static_kc(c: I.In[I.f32, ("M", 4)], meta: I.In[I.u8, ("M", 4)], w: I.In[I.f32, ("K", "N")],
                     out: I.Out[I.f32, ("M", "N")]):
    out[:, :] = I.sparse_matmul(c[:, :], meta[:, :], w[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)


@pytest.mark.parametrize("m,k,n", [(2, 4, 3), (3, 12, 2), (1, 0, 2), (2, 32, 5)])
def test_sparse_matmul_with_dynamic_compression_extents(run, m, k, n):
    c = RNG.standard_normal((m, k // 2)).astype(F)
    meta = random_meta(RNG, (m, k // 2), 1, 4, 2).astype(np.uint8)
    w = RNG.standard_normal((k, n)).astype(F)
    out = np.full((m, n), np.nan, F)
    run(sparse_dynamic, c, meta, w, out)
    exact_matmul_check(out, expand(c, meta, 1, 4, 2), w, I.f32)


def test_a_dynamic_compressed_extent_against_a_static_k(run):
    c = RNG.standard_normal((3, 4)).astype(F)
    meta = random_meta(RNG, (3, 4), 1, 2, 1).astype(np.uint8)
    w = RNG.standard_normal((8, 2)).astype(F)
    out = np.full((3, 2), np.nan, F)
    run(sparse_static_k, c, meta, w, out)
    exact_matmul_check(out, expand(c, meta, 1, 2, 1), w, I.f32)
    with pytest.raises(ValueError, match=r"compressed axis 1 has extent 3 \(KC\), but K = 8 \(rhs axis 0\) needs 4 "
                                         r"\(K \* 1 / 2\)"):
        run(sparse_static_k, c[:, :3], meta[:, :3], w, out)


def test_a_dynamic_k_against_a_static_compressed_extent(run):
    c = RNG.standard_normal((2, 4)).astype(F)
    meta = random_meta(RNG, (2, 4), 1, 4, 2).astype(np.uint8)
    w = RNG.standard_normal((8, 3)).astype(F)
    out = np.full((2, 3), np.nan, F)
    run(sparse_static_kc, c, meta, w, out)
    exact_matmul_check(out, expand(c, meta, 1, 4, 2), w, I.f32)
    out[:] = 1.0
    with pytest.raises(ValueError, match=r"reduction extent K = 10 \(rhs axis 0\) is not a multiple of the group "
                                         r"size 4"):
        run(sparse_static_kc, c, meta, np.zeros((10, 3), F), out)
    with pytest.raises(ValueError, match=r"compressed axis 1 has extent 4, but K = 12 \(rhs axis 0\) needs 6"):
        run(sparse_static_kc, c, meta, np.zeros((12, 3), F), out)
    assert (out == 1.0).all()


@pytest.mark.parametrize("kc,k,match", [
    (3, 6, r"the logical reduction extent K = 6 \(rhs axis 0\) is not a multiple of the group size 4"),
    (3, 8, r"compressed axis 1 has extent 3 \(KC\), but K = 8 \(rhs axis 0\) needs 4 \(K \* 2 / 4\)"),
    (6, 8, r"compressed axis 1 has extent 6 \(KC\), but K = 8 \(rhs axis 0\) needs 4"),
])
def test_compression_extents_that_do_not_relate_are_value_errors_and_write_nothing(run, kc, k, match):
    c = np.ones((2, kc), F)
    meta = np.zeros((2, kc), np.uint8)
    w = np.ones((k, 3), F)
    out = np.full((2, 3), 4.0, F)
    with pytest.raises(ValueError, match=r"I\.sparse_contract I\.sparse\.two_of_four\(\): " + match):
        run(sparse_dynamic, c, meta, w, out)
    assert (out == 4.0).all()
