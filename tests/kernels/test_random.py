"""I.random.bits / I.random.uniform (spec §17, numerics T8) on every executable target.

Philox4x32-10 is pinned by the Random123 known-answer vectors three ways: an independent pure-Python
Philox written here, the generic (NumPy) block function and the cpu block function (compiled from the
statements the cpu rule emits). Kernels check the counter -> (block, word) mapping (large counters,
high block words, u64 seeds), tensor counters of several shapes and dtypes (empty included), scalar
counters, uniform in every float dtype against an exact computation from the bits, [0, 1), errors, and
that the values do not depend on parallel position or call order.
"""

import numpy as np
import pytest

import intent_trace as intent
from conftest import bits_equal
from intent_trace import I
from intent_trace.errors import TraceError
from intent_trace.oracle import generic_random
from intent_trace.oracle.numba import random as cpu_random

# Known answers copied from the official Random123 distribution, DEShawResearch/random123, file
# tests/kat_vectors (lines 27-29, the "philox4x32 10" entries): counter (4 words), key (2 words),
# expected output (4 words), all uint32.
KAT_PHILOX4X32_10 = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
KAT_IDS = ["zeros", "ones", "pi"]


# --- an independent reference: Philox4x32-R on Python ints, straight from the published algorithm ----------

def _mulhilo32(a: int, b: int) -> tuple:
    product = a * b
    return product >> 32, product & 0xFFFFFFFF


def philox_reference(ctr, key, rounds: int = 10) -> tuple:
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(rounds):
        if r > 0:  # bump the key before rounds 2..R
            k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
            k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
        hi0, lo0 = _mulhilo32(0xD2511F53, c0)
        hi1, lo1 = _mulhilo32(0xCD9E8D57, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def bits_reference(seed: int, counter: int) -> int:
    """T8: word counter % 4 of Philox4x32-10((lo32(block), hi32(block), 0, 0), (lo32(seed), hi32(seed)))."""
    block, word = divmod(counter, 4)
    ctr = (block & 0xFFFFFFFF, block >> 32, 0, 0)
    return philox_reference(ctr, (seed & 0xFFFFFFFF, seed >> 32))[word]


# --- known answers --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ctr,key,expected", KAT_PHILOX4X32_10, ids=KAT_IDS)
def test_known_answers_independent_reference(ctr, key, expected):
    assert philox_reference(ctr, key) == expected


@pytest.mark.parametrize("ctr,key,expected", KAT_PHILOX4X32_10, ids=KAT_IDS)
def test_known_answers_generic_block(ctr, key, expected):
    out = generic_random.philox4x32_10(ctr, key)
    assert all(w.dtype == np.uint32 for w in out)
    assert tuple(int(w) for w in out) == expected


def test_known_answers_generic_block_vectorised():
    ctr = [np.array([v[0][i] for v in KAT_PHILOX4X32_10], np.uint32) for i in range(4)]
    key = [np.array([v[1][i] for v in KAT_PHILOX4X32_10], np.uint32) for i in range(2)]
    out = generic_random.philox4x32_10(ctr, key)
    for i in range(4):
        np.testing.assert_array_equal(out[i], [v[2][i] for v in KAT_PHILOX4X32_10])


@pytest.mark.parametrize("ctr,key,expected", KAT_PHILOX4X32_10, ids=KAT_IDS)
def test_known_answers_cpu_block(ctr, key, expected):
    assert cpu_random.philox4x32_10(ctr, key) == expected


@pytest.mark.parametrize("rounds", [1, 2, 7])
def test_generic_block_other_round_counts_match_reference(rounds):
    ctr, key, _ = KAT_PHILOX4X32_10[2]
    assert tuple(int(w) for w in generic_random.philox4x32(ctr, key, rounds)) == philox_reference(ctr, key, rounds)


# --- bits in kernels --------------------------------------------------------------------------------------------

@intent.kernel
def bits_of_indices(y: I.Out[I.u32, ("N",)], seed: I.u64):
    d = I.domain(0, y.shape[0])
    y[d] = I.random.bits(seed, I.indices(d))


def test_bits_zero_seed_counters_0_to_3_are_the_zero_known_answer(run):
    y = np.zeros(4, np.uint32)
    run(bits_of_indices, y, 0)
    np.testing.assert_array_equal(y, KAT_PHILOX4X32_10[0][2])


def test_bits_next_block_is_counter_block_one(run):
    y = np.zeros(12, np.uint32)
    seed = 0x0123456789ABCDEF
    run(bits_of_indices, y, seed)
    for block in range(3):
        words = philox_reference((block, 0, 0, 0), (0x89ABCDEF, 0x01234567))
        np.testing.assert_array_equal(y[4 * block:4 * block + 4], words)


_COUNTER_KERNELS: dict = {}


def counter_kernel(dtype, rank: int):
    key = (dtype, rank)
    if key not in _COUNTER_KERNELS:
        names = tuple("ABC"[:rank])
        full = (slice(None),) * rank

        @intent.kernel
        def k(c: I.In[dtype, names], y: I.Out[I.u32, names], seed: I.u64):
            y[full] = I.random.bits(seed, c[full])

        _COUNTER_KERNELS[key] = k
    return _COUNTER_KERNELS[key]


# counters whose block has a non-zero high word, and the extremes of each dtype
LARGE_U64 = [0, 3, 4, 2**34 + 1, 4 * (2**32 + 5) + 2, 2**62 - 1, 2**63, 2**63 + 7, 2**64 - 4, 2**64 - 1]
LARGE_I64 = [0, 1, 2**32 * 4 + 3, 2**35 + 2, 2**62 + 1, 2**63 - 1]


@pytest.mark.parametrize("dtype,np_dtype,values", [(I.u64, np.uint64, LARGE_U64), (I.i64, np.int64, LARGE_I64),
                                                   (I.index, np.int64, LARGE_I64)])
@pytest.mark.parametrize("seed", [0, 0xFFFFFFFFFFFFFFFF, 0xA4093822299F31D0])
def test_bits_large_counters_map_to_block_and_word(run, dtype, np_dtype, values, seed):
    c = np.array(values, np_dtype)
    y = np.zeros(len(values), np.uint32)
    run(counter_kernel(dtype, 1), c, y, seed)
    np.testing.assert_array_equal(y, [bits_reference(seed, v) for v in values])


@pytest.mark.parametrize("shape", [(0,), (7,), (3, 5), (2, 0), (2, 3, 2), (0, 2, 4)])
@pytest.mark.parametrize("dtype,np_dtype", [(I.u8, np.uint8), (I.i16, np.int16), (I.i32, np.int32),
                                            (I.u32, np.uint32)])
def test_bits_tensor_counters_of_several_shapes_and_dtypes(run, shape, dtype, np_dtype):
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    hi = min(np.iinfo(np_dtype).max, 10**6)
    c = rng.integers(0, hi, shape, endpoint=True).astype(np_dtype)
    y = np.full(shape, 7, np.uint32)
    seed = 0xDEADBEEF12345678
    run(counter_kernel(dtype, len(shape)), c, y, seed)
    expected = np.array([bits_reference(seed, int(v)) for v in c.reshape(-1)], np.uint32).reshape(shape)
    np.testing.assert_array_equal(y, expected)


@intent.kernel
def scalar_counters(y: I.Out[I.u32, (4,)], n: I.i32, m: I.u64, seed: I.u64):
    y[0] = I.random.bits(seed, n)
    y[1] = I.random.bits(seed, m)
    y[2] = I.random.bits(12345, 7)  # a Python int seed and counter inside the kernel are constants
    y[3] = I.random.bits(2**64 - 1, 2**64 - 1)  # a Python int counter past the index range is a u64 constant


def test_bits_scalar_counters_and_constant_seeds(run):
    y = np.zeros(4, np.uint32)
    seed = 2**63 + 12345
    run(scalar_counters, y, 2**31 - 1, 2**64 - 2, seed)
    expected = [bits_reference(seed, 2**31 - 1), bits_reference(seed, 2**64 - 2), bits_reference(12345, 7),
                bits_reference(2**64 - 1, 2**64 - 1)]
    np.testing.assert_array_equal(y, expected)


def test_bits_large_call_runs_the_parallel_build(run):
    n = 1 << 16  # the cpu target's parallel-build threshold
    y = np.zeros(n, np.uint32)
    seed = 0x5EED
    run(bits_of_indices, y, seed)
    np.testing.assert_array_equal(y, generic_random.counter_bits(np.uint64(seed), np.arange(n)))
    for k in (0, 1, 4095, n - 1):
        assert int(y[k]) == bits_reference(seed, k)


# --- purity: no dependence on parallel position or call order -----------------------------------------------

@intent.kernel
def bits_in_and_out_of_parallel(y_par: I.Out[I.u32, ("N",)], y_all: I.Out[I.u32, ("N",)],
                                 y_rev: I.Out[I.u32, ("N",)], y_twice: I.Out[I.u32, ("N",)], seed: I.u64):
    d = I.domain(0, y_par.shape[0])
    for i in I.parallel(d):
        y_par[i] = I.random.bits(seed, i)
        y_twice[i] = I.random.bits(seed, i) ^ I.random.bits(seed, i)  # the same draw twice: equal words
    idx = I.indices(d)
    y_all[d] = I.random.bits(seed, idx)
    y_rev[d] = I.random.bits(seed, (y_par.shape[0] - 1) - idx)  # counters in the reverse order


def test_bits_same_inside_parallel_body_as_outside_and_order_free(run):
    n = 37
    y_par, y_all, y_rev, y_twice = (np.full(n, 1, np.uint32) for _ in range(4))
    seed = 0xFEEDFACECAFEBEEF
    run(bits_in_and_out_of_parallel, y_par, y_all, y_rev, y_twice, seed)
    expected = [bits_reference(seed, k) for k in range(n)]
    np.testing.assert_array_equal(y_par, expected)
    np.testing.assert_array_equal(y_all, expected)
    np.testing.assert_array_equal(y_rev, expected[::-1])
    np.testing.assert_array_equal(y_twice, np.zeros(n, np.uint32))


def test_bits_kernel_is_pure_and_repeatable(run):
    a, b = np.zeros(9, np.uint32), np.zeros(9, np.uint32)
    run(bits_of_indices, a, 42)
    run(bits_of_indices, b, 42)
    np.testing.assert_array_equal(a, b)
    run(bits_of_indices, b, 43)
    assert not np.array_equal(a, b)
    g = bits_of_indices.trace()
    (node,) = [n for n in g.walk() if n.op.name == "random_bits"]
    assert node.op.pure and not node.op.effects


# --- uniform ------------------------------------------------------------------------------------------------------

SIGNIFICAND = {"f16": 11, "bf16": 8, "f32": 24, "f64": 32}
_UNIFORM_KERNELS: dict = {}


def uniform_kernel(dtype):
    if dtype not in _UNIFORM_KERNELS:
        @intent.kernel
        def k(c: I.In[I.u64, ("N",)], y: I.Out[dtype, ("N",)], seed: I.u64):
            d = I.domain(0, c.shape[0])
            y[d] = I.random.uniform(seed, c[d], dtype)

        _UNIFORM_KERNELS[dtype] = k
    return _UNIFORM_KERNELS[dtype]


def _exact_uniform(word: int, p: int, np_dtype) -> np.ndarray:
    top = word >> (32 - p)
    assert 0 <= top < 2**p
    return np.array(top * 2.0 ** -p).astype(np_dtype)  # exact: top < 2**p and 2**-p is a power of two


# For bf16 and f16: a counter whose word has all top p bits set (the largest value, (2**p - 1) * 2**-p < 1).
def _counter_with_top_bits(seed: int, p: int) -> int:
    words = generic_random.counter_bits(np.uint64(seed), np.arange(1 << 16))
    hits = np.flatnonzero((words >> np.uint32(32 - p)) == (1 << p) - 1)
    return int(hits[0])


@pytest.mark.parametrize("dtype", [I.f16, I.bf16, I.f32, I.f64], ids=lambda d: d.name)
def test_uniform_is_the_exact_shifted_bits_in_unit_interval(run, dtype):
    p = SIGNIFICAND[dtype.name]
    seed = 0x0F1E2D3C4B5A6978
    counters = [0, 1, 2, 3, 5, 2**33 + 3, 2**64 - 1] + list(range(100, 160))
    if p <= 11:
        top = _counter_with_top_bits(seed, p)
        assert bits_reference(seed, top) >> (32 - p) == 2**p - 1
        counters.append(top)
    c = np.array(counters, np.uint64)
    y = np.full(len(counters), 3, dtype.np)
    run(uniform_kernel(dtype), c, y, seed)
    expected = np.concatenate([_exact_uniform(bits_reference(seed, k), p, dtype.np).reshape(1) for k in counters])
    assert bits_equal(y, expected)
    wide = y.astype(np.float64)
    assert np.all(wide >= 0.0) and np.all(wide < 1.0)
    assert np.all(wide * 2.0**p == np.floor(wide * 2.0**p))  # a multiple of 2**-p
    if p <= 11:
        assert wide[-1] == 1.0 - 2.0**-p  # the largest value stays below 1


@pytest.mark.parametrize("dtype", [I.f16, I.bf16, I.f32, I.f64], ids=lambda d: d.name)
def test_uniform_builds_only_existing_ops(dtype):
    g = uniform_kernel(dtype).trace()
    names = [n.op.name for n in g.walk()]
    expected = ["random_bits", "cast", "mul"] if dtype is I.f64 else ["random_bits", "shr", "cast", "mul"]
    assert [n for n in names if n not in ("domain", "read", "write", "dim")] == expected
    text = str(g)
    p = SIGNIFICAND[dtype.name]
    if p < 32:
        assert "shr %" in text and f", {32 - p}:u32" in text


# --- errors -----------------------------------------------------------------------------------------------------

def _trace_error(body):
    """A kernel calling ``body`` with its locals (views c, f, y; scalars s: u64, x: f32, n: i64; domain d)."""
    @intent.kernel
    def k(c: I.In[I.i32, ("N",)], f: I.In[I.f32, ("N",)], y: I.Out[I.u32, ("N",)], s: I.u64, x: I.f32, n: I.i64):
        d = I.domain(0, c.shape[0])
        body(locals())

    return k


@pytest.mark.parametrize("body,match", [
    (lambda v: I.random.bits(v["s"], v["f"][v["d"]]), "counter must have an integer dtype, got f32"),
    (lambda v: I.random.bits(v["s"], v["c"][v["d"]] > 0), "counter must have an integer dtype, got bool"),
    (lambda v: I.random.bits(v["s"], 1.5), "counter must be a non-negative integer"),
    (lambda v: I.random.bits(v["s"], True), "counter must be an integer, got the bool"),
    (lambda v: I.random.bits(v["s"], -1), "counter -1 is negative"),
    (lambda v: I.random.bits(1.5, 0), "seed must be a u64 scalar or a Python int, got float"),
    (lambda v: I.random.bits(v["x"], 0), "seed must be a u64 scalar, got f32"),
    (lambda v: I.random.bits(v["n"], 0), r"seed must be a u64 scalar, got i64; .*I.cast\(seed, I.u64\)"),
    (lambda v: I.random.bits(I.cast(v["c"][v["d"]], I.u64), 0), "seed must be a u64 scalar, got the tensor"),
    (lambda v: I.random.bits(-3, 0), "seed -3 does not fit u64"),
    (lambda v: I.random.bits(2**64, 0), "does not fit u64"),
    (lambda v: I.random.uniform(v["s"], 0, I.i32), "dtype must be one of f16, bf16, f32, f64, got i32"),
    (lambda v: I.random.uniform(v["s"], v["f"][v["d"]]), "counter must have an integer dtype, got f32"),
])
def test_trace_errors(body, match):
    with pytest.raises(TraceError, match=match):
        _trace_error(body).trace()


@intent.kernel
def rng_in_combine(c: I.In[I.i32, ("N",)], y: I.Out[I.i32, (1,)]):
    d = I.domain(0, c.shape[0])
    y[0] = I.reduce(c[d], axis=0, identity=I.cast(0, I.i32),
                    combine=lambda a, b: a + b + I.cast(I.random.bits(7, 0) & 1, I.i32))


@intent.kernel
def rng_in_summarize(c: I.In[I.f32, ("N",)], y: I.Out[I.f32, (1,)]):
    d = I.domain(0, c.shape[0])
    y[0] = I.region_fold(source=c[d], axis=0, summarize=lambda s: I.reduce.sum(s, axis=0) + I.random.uniform(1, 0),
                         combine=lambda a, b: a + b, identity=I.cast(0.0, I.f32))


@pytest.mark.parametrize("kernel,who", [(rng_in_combine, "reduce"), (rng_in_summarize, "summarize")])
def test_rng_in_a_pure_helper_is_a_trace_error(kernel, who):
    match = rf"{who}.*helper `<lambda>` must be pure, but it calls I.random.(bits|uniform); pure helpers may not use"
    with pytest.raises(TraceError, match=match + " the RNG"):
        kernel.trace()


def test_random_namespace_exposes_only_bits_and_uniform():
    assert callable(I.random.bits) and callable(I.random.uniform)
    with pytest.raises(AttributeError):
        I.random.normal  # noqa: B018  (composite distributions are author helpers, §17)


@intent.kernel
def bits_of_i32(c: I.In[I.i32, ("N",)], y: I.Out[I.u32, ("N",)], seed: I.u64):
    d = I.domain(0, c.shape[0])
    y[d] = I.random.bits(seed, c[d])


@intent.kernel
def bits_of_i64_scalar(y: I.Out[I.u32, (1,)], n: I.i64, seed: I.u64):
    y[0] = I.random.bits(seed, n)


def test_negative_counter_at_run_time_is_a_value_error(run):
    c = np.array([0, 5, -3, 2], np.int32)
    y = np.full(4, 9, np.uint32)
    with pytest.raises(ValueError, match="counter -3 is negative") as e:
        run(bits_of_i32, c, y, 1)
    assert not isinstance(e.value, TraceError)
    np.testing.assert_array_equal(y, 9)  # the caller's output is unchanged
    y1 = np.full(1, 9, np.uint32)
    with pytest.raises(ValueError, match=f"counter {-2**63} is negative"):
        run(bits_of_i64_scalar, y1, -2**63, 1)
    np.testing.assert_array_equal(y1, 9)
