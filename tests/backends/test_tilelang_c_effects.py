"""tilelang-c against generic: atomics, Philox bits, scaled and sparse contract, k-quant records and dots."""

import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import TARGET, run_both
from intent_trace.backends.tilelang.philox import philox4x32_10
from intent_trace.backends.tilelang.target import build

RNG = np.random.default_rng(7)

# Random123's known answers (tests/kat_vectors, "philox4x32 10"), as tests/kernels/test_random.py copies them.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


# --- atomics -----------------------------------------------------------------------------------------------------

@intent.kernel
def _atomic_mix(idx: I.In[I.i32, ("K",)], v: I.In[I.u32, ("K",)], f: I.In[I.f32, ("K",)],
                dest: I.InOut[I.u32, ("N",)], fmax: I.InOut[I.f32, ("N",)], cell: I.InOut[I.i64, (1,)],
                old: I.Out[I.u32, ("K", 4)], ok: I.Out[I.bool, ("K",)], seen: I.Out[I.i64, ("K",)]):
    for i in I.domain(0, idx.shape[0]):
        old[i, 0] = I.atomic.add(dest[idx[i]], v[i], order="relaxed")
        old[i, 1] = I.atomic.xor(dest[idx[i]], v[i], order="acq_rel")
        old[i, 2] = I.atomic.min(dest[idx[i]], v[i], order="acquire")
        old[i, 3] = I.atomic.load(dest[idx[i]], order="acquire")
        I.atomic.max(fmax[idx[i]], f[i], order="release")
        r = I.atomic.compare_exchange(cell[0], I.cast(i, I.i64) - 1, I.cast(i, I.i64) * 3, order="release")
        ok[i] = r.success
        seen[i] = r.old_value
        I.atomic.store(cell[0], I.cast(i, I.i64), order="release")


def test_atomics_in_program_order_match_generic_bit_for_bit():
    k = 40
    idx = RNG.integers(0, 3, k).astype(np.int32)
    v = RNG.integers(0, 2 ** 32, k, dtype=np.uint64).astype(np.uint32)
    f = RNG.standard_normal(k).astype(np.float32)
    f[5], f[9] = np.nan, -0.0
    run_both(_atomic_mix, idx, v, f, RNG.integers(0, 2 ** 32, 3, dtype=np.uint64).astype(np.uint32),
             np.array([0.0, -np.inf, 1.0], np.float32), np.array([-1], np.int64), np.zeros((k, 4), np.uint32),
             np.zeros(k, bool), np.zeros(k, np.int64))


def test_atomic_helpers_are_named_by_operation_and_order():
    program = build(_atomic_mix.trace(), target=TARGET).program
    for name in ("it_atomic_add_relaxed_u32", "it_atomic_xor_acq_rel_u32", "it_atomic_min_acquire_u32",
                 "it_atomic_load_acquire_u32", "it_atomic_max_release_f32", "it_atomic_cas_release_relaxed_i64",
                 "it_atomic_store_release_i64"):
        assert f"'{name}', T.access_ptr(" in program, name


# --- RNG ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ctr,key,expected", KAT, ids=["zeros", "ones", "pi"])
def test_philox_block_reproduces_the_random123_known_answers(ctr, key, expected):
    assert philox4x32_10(ctr, key) == expected


@intent.kernel
def _bits(c: I.In[I.u64, ("N",)], i: I.In[I.i16, ("N",)], y: I.Out[I.u32, ("N", 2)], seed: I.u64):
    d = I.domain(0, c.shape[0])
    y[d, 0] = I.random.bits(seed, c[d])
    y[d, 1] = I.random.bits(seed, i[d])


def test_random_bits_match_generic():
    c = RNG.integers(0, 2 ** 64, 50, dtype=np.uint64)
    c[:4] = [0, 2 ** 64 - 1, 2 ** 34 + 3, 2 ** 63]
    i = RNG.integers(0, 2 ** 15, 50).astype(np.int16)
    for seed in (0, 2 ** 64 - 1, 0xA4093822299F31D0):
        run_both(_bits, c, i, np.zeros((50, 2), np.uint32), seed)


# --- scaled and sparse contract ----------------------------------------------------------------------------------

@intent.kernel
def _scaled(a: I.In[I.u8, (2, 2, 4)], sa: I.In[I.u8, (2, 2)], b: I.In[I.u8, (2, 8, 3)], sb: I.In[I.u8, (3, 2)],
            c: I.Out[I.f64, (2, 3)]):
    c[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=I.e2m1, rhs_format=I.e4m3,
                              group_size=8, acc_dtype=I.f64)


def test_scaled_contract_decodes_every_code_and_scale_like_generic():
    # every e2m1 nibble and every e4m3 code (NaN codes included), scales over the whole e8m0 range (0xFF is NaN);
    # small integer-valued scales keep every sum exact, so the results agree bit for bit whatever the order
    for lo in range(0, 256, 48):
        b = np.arange(lo, lo + 48, dtype=np.uint32).astype(np.uint8).reshape(2, 8, 3)
        a = RNG.integers(0, 256, (2, 2, 4), dtype=np.uint8)
        run_both(_scaled, a, np.array([[127, 128], [126, 129]], np.uint8), b,
                 np.array([[127, 127], [128, 126], [130, 127]], np.uint8), np.zeros((2, 3)))
    a = RNG.integers(0, 256, (2, 2, 4), dtype=np.uint8)
    b = np.full((2, 8, 3), 0x38, np.uint8)
    out = run_both(_scaled, a, np.array([[0, 254], [255, 127]], np.uint8), b, np.full((3, 2), 127, np.uint8),
                   np.zeros((2, 3)))["c"]
    assert np.isnan(out[1]).all() and not np.isnan(out[0]).any()


@intent.kernel
def _sparse(a: I.In[I.i8, ("M", 4)], meta: I.In[I.u8, ("M", 4)], b: I.In[I.i8, (8, 3)], c: I.Out[I.i32, ("M", 3)]):
    c[:, :] = I.sparse_matmul(a[:, :], meta[:, :], b[:, :], format=I.sparse.two_of_four(), acc_dtype=I.i32)


def test_sparse_contract_matches_generic_exactly():
    m = 6
    meta = np.array([sorted(RNG.choice(4, 2, replace=False)) + sorted(RNG.choice(4, 2, replace=False))
                     for _ in range(m)], np.uint8)
    run_both(_sparse, RNG.integers(-128, 128, (m, 4)).astype(np.int8), meta,
             RNG.integers(-128, 128, (8, 3)).astype(np.int8), np.zeros((m, 3), np.int32))


# --- k-quants ----------------------------------------------------------------------------------------------------

@intent.kernel
def _q8(x: I.In[I.f32, (8, 512)], d: I.Out[I.f32, (8, 2)], qs: I.Out[I.i8, (8, 2, 256)],
        bs: I.Out[I.i16, (8, 2, 16)]):
    r = I.quantize(x[:, :], format=I.quant.q8_k)
    d[:, :] = r.d
    qs[:, :, :] = r.qs
    bs[:, :, :] = r.bsums


@intent.kernel
def _q4(x: I.In[I.f32, (8, 512)], d: I.Out[I.f16, (8, 2)], dm: I.Out[I.f16, (8, 2)], sc: I.Out[I.u8, (8, 2, 8)],
        mi: I.Out[I.u8, (8, 2, 8)], q: I.Out[I.u8, (8, 2, 256)]):
    r = I.quantize(x[:, :], format=I.quant.q4_k)
    d[:, :] = r.d
    dm[:, :] = r.dmin
    sc[:, :, :] = r.scales
    mi[:, :, :] = r.mins
    q[:, :, :] = r.q


def _hard_blocks() -> np.ndarray:
    x = RNG.standard_normal((8, 512)).astype(np.float32)
    x *= (10.0 ** RNG.integers(-30, 30, (8, 1))).astype(np.float32)  # scales near the f16 range's ends
    x[0] = np.round(x[0] * 4) / 4  # ties of nearest_int
    x[1, :300] = 0  # an all-zero block and a mixed one
    x[2] = np.abs(x[2])  # minima forced to 0
    x[3] = -3.0  # constant negative blocks
    x[4, ::2] = 1e-42  # subnormals
    x[5, 40], x[5, 300] = np.inf, -np.inf
    x[6, 41] = np.nan
    return x


def test_quantize_records_match_generic_bit_for_bit():
    x = _hard_blocks()
    run_both(_q8, x, np.zeros((8, 2), np.float32), np.zeros((8, 2, 256), np.int8), np.zeros((8, 2, 16), np.int16))
    run_both(_q4, x, np.zeros((8, 2), np.float16), np.zeros((8, 2), np.float16), np.zeros((8, 2, 8), np.uint8),
             np.zeros((8, 2, 8), np.uint8), np.zeros((8, 2, 256), np.uint8))


@pytest.mark.parametrize("lf", ["q4_k", "q8_k"])
def test_quantized_dot_matches_generic_bit_for_bit(lf):
    @intent.kernel
    def k(x: I.In[I.f32, (2, 1, 768)], y: I.In[I.f32, (3, 768)], o: I.Out[I.f32, (2, 3)]):
        a = I.quantize(x[:, :, :], format=getattr(I.quant, lf))
        b = I.quantize(y[:, :], format=I.quant.q8_k)
        o[:, :] = I.quantized_dot(a, b, lhs_format=getattr(I.quant, lf), rhs_format=I.quant.q8_k, acc_dtype=I.f32)

    run_both(k, (RNG.standard_normal((2, 1, 768)) * 3).astype(np.float32),
             RNG.standard_normal((3, 768)).astype(np.float32), np.zeros((2, 3), np.float32))


@intent.kernel
def _dynamic_dot(x: I.In[I.f32, ("M", 1, 512)], y: I.In[I.f32, ("N", 512)], q: I.Out[I.u8, ("M", 1, 2, 256)],
                 o: I.Out[I.f32, ("M", "N")]):
    a = I.quantize(x[:, :, :], format=I.quant.q4_k)
    b = I.quantize(y[:, :], format=I.quant.q8_k)
    q[:, :, :, :] = a.q
    o[:, :] = I.quantized_dot(a, b, lhs_format=I.quant.q4_k, rhs_format=I.quant.q8_k, acc_dtype=I.f32)


@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (0, 2)])
def test_quantize_and_dot_of_dynamic_extents_match_generic(m, n):
    # records of several thousand elements and of run-time size live on the heap
    run_both(_dynamic_dot, RNG.standard_normal((m, 1, 512)).astype(np.float32),
             RNG.standard_normal((n, 512)).astype(np.float32), np.zeros((m, 1, 2, 256), np.uint8),
             np.zeros((m, n), np.float32))
