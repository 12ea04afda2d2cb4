"""T2 integer arithmetic (and the T1 rules it leans on), checked against Python integers.

Every reference here is computed with Python's unbounded integers and an explicit reduction
modulo 2^bits; NumPy is only used to hold the arrays.
"""
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I
from one_op_kernels import one_op_kernel

SIGNED = [I.i8, I.i16, I.i32, I.i64, I.index]
UNSIGNED = [I.u8, I.u16, I.u32, I.u64]
INT_DTYPES = SIGNED + UNSIGNED

NP = {I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.index: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64}
BITS = {I.i8: 8, I.i16: 16, I.i32: 32, I.i64: 64, I.index: 64, I.u8: 8, I.u16: 16, I.u32: 32, I.u64: 64}


def ids(dtypes):
    return [str(d) for d in dtypes]


def is_signed(dt) -> bool:
    return dt in SIGNED


def lo(dt) -> int:
    return -(1 << (BITS[dt] - 1)) if is_signed(dt) else 0


def hi(dt) -> int:
    return (1 << (BITS[dt] - 1)) - 1 if is_signed(dt) else (1 << BITS[dt]) - 1


def wrap(v: int, dt) -> int:
    """Python int -> the value of dtype ``dt`` congruent to it modulo 2^bits."""
    bits = BITS[dt]
    v &= (1 << bits) - 1
    if is_signed(dt) and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def arr(values, dt) -> np.ndarray:
    return np.array([int(v) for v in values], dtype=object).astype(NP[dt])


def as_ints(a: np.ndarray) -> list:
    return [int(v) for v in a.reshape(-1)]


def edge_values(dt) -> list:
    bits = BITS[dt]
    cands = [lo(dt), lo(dt) + 1, lo(dt) + 2, -3, -2, -1, 0, 1, 2, 3, 7, bits - 1, bits, bits + 1,
             hi(dt) // 2, hi(dt) // 2 + 1, hi(dt) - 1, hi(dt), -(hi(dt) // 2)]
    return sorted({v for v in cands if lo(dt) <= v <= hi(dt)})


def random_values(dt, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    bits = BITS[dt]
    raw = [int.from_bytes(rng.bytes(bits // 8), "little") for _ in range(n)]
    small = [int(v) for v in rng.integers(-20, 21, n)]
    return [wrap(v, dt) for v in raw] + [wrap(v, dt) for v in small if lo(dt) <= v <= hi(dt)]


def pairs(dt, seed: int, n_random: int = 64):
    """All pairs of edge values plus random pairs: two aligned lists."""
    edges = edge_values(dt)
    a = [x for x in edges for _ in edges]
    b = [y for _ in edges for y in edges]
    ra, rb = random_values(dt, n_random, seed), random_values(dt, n_random, seed + 1)
    m = min(len(ra), len(rb))
    return a + ra[:m], b + rb[:m]


# --- kernels (traced once per dtype and op) ----------------------------------------------------

BINOPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b, "pow": lambda a, b: a ** b, "and": lambda a, b: a & b,
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "maximum": lambda a, b: I.maximum(a, b),
    "minimum": lambda a, b: I.minimum(a, b),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
COMPARES = ("eq", "ne", "lt", "le", "gt", "ge")
UNOPS = {"neg": lambda a: -a, "invert": lambda a: ~a, "square": lambda a: a ** 2, "cube": lambda a: a ** 3,
         "plus_one": lambda a: a + 1, "one_minus": lambda a: 1 - a, "times_minus_one": lambda a: a * -1}

def binary_kernel(op: str, dt):
    return one_op_kernel(BINOPS[op], dt, I.bool if op in COMPARES else dt, 2)


def unary_kernel(op: str, dt):
    return one_op_kernel(UNOPS[op], dt, dt, 1)


def run_binary(run, op, dt, a_vals, b_vals):
    a, b = arr(a_vals, dt), arr(b_vals, dt)
    out = np.zeros(a.shape, dtype=bool if op in COMPARES else NP[dt])
    run(binary_kernel(op, dt), a, b, out)
    return out


def expect_equal(got: np.ndarray, want: list, a_vals, b_vals=None):
    got_l = as_ints(got)
    bad = [(i, a_vals[i], None if b_vals is None else b_vals[i], got_l[i], want[i])
           for i in range(len(want)) if got_l[i] != want[i]]
    assert not bad, f"{len(bad)} mismatches (index, a, b, got, want), first ones: {bad[:6]}"


# --- references -----------------------------------------------------------------------------

def c_div(a: int, b: int, dt) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(-q if (a < 0) != (b < 0) else q, dt)


def c_mod(a: int, b: int, dt) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    q = -q if (a < 0) != (b < 0) else q
    return wrap(a - b * q, dt)


def ref_shl(a: int, s: int, dt) -> int:
    return wrap(a << s, dt) if 0 <= s < BITS[dt] else 0


def ref_shr(a: int, s: int, dt) -> int:
    if 0 <= s < BITS[dt]:
        return a >> s  # Python >> is arithmetic on negative ints, logical on the non-negative unsigned values
    return -1 if a < 0 else 0


def ref_pow(a: int, b: int, dt) -> int:
    if b >= 0:
        return wrap(pow(a, b, 1 << BITS[dt]), dt)
    if a == 1:
        return 1
    if a == -1:
        return -1 if b % 2 else 1
    return 0


# --- + - * wrap modulo 2^bits ------------------------------------------------------------------

@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_add_sub_mul_wrap_modulo_2_pow_bits(run, op, dt):
    a, b = pairs(dt, seed=BITS[dt] + len(op))
    py = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}[op]
    got = run_binary(run, op, dt, a, b)
    expect_equal(got, [wrap(py(x, y), dt) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_add_mul_wrap_hand_values(run, dt):
    bits = BITS[dt]
    a = [hi(dt), lo(dt), hi(dt)]
    b = [1, -1 if is_signed(dt) else hi(dt), 2]
    got_add = as_ints(run_binary(run, "add", dt, a, b))
    got_mul = as_ints(run_binary(run, "mul", dt, a, b))
    if is_signed(dt):
        assert got_add == [lo(dt), hi(dt), lo(dt) + 1]  # INT_MAX + 1 = INT_MIN; INT_MIN + -1 = INT_MAX
        assert got_mul == [hi(dt), lo(dt), -2]  # INT_MIN * -1 = INT_MIN; INT_MAX * 2 = -2
    else:
        assert got_add == [0, hi(dt), 1]  # UMAX + 1 = 0; UMAX + 2 = 1
        assert got_mul == [hi(dt), 0, (1 << bits) - 2]


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", ["neg", "plus_one", "one_minus", "times_minus_one"])
def test_unary_and_literal_arithmetic_wraps(run, op, dt):
    if op == "times_minus_one" and not is_signed(dt):
        pytest.raises(intent.TraceError, intent.trace, unary_kernel(op, dt))  # -1 does not fit an unsigned dtype
        return
    vals = edge_values(dt) + random_values(dt, 32, seed=3)
    py = {"neg": lambda x: -x, "plus_one": lambda x: x + 1, "one_minus": lambda x: 1 - x,
          "times_minus_one": lambda x: -x}[op]
    a = arr(vals, dt)
    out = np.zeros_like(a)
    run(unary_kernel(op, dt), a, out)
    expect_equal(out, [wrap(py(v), dt) for v in vals], vals)


# A negation read by a comparison, not a store (a store keeps the low bits whatever the register holds): -INT_MIN
# wraps to INT_MIN, which is negative. On tilelang-cuda ptxas compared the PTX ``neg.s16`` of -32768 as +32768 (an
# H100, 2026-12-07); literal 0 - x and x * -1 become that instruction too once inlined.
NEGATIONS = {"neg": lambda x: -x, "zero_minus": lambda x: 0 - x, "times_minus_one": lambda x: x * -1, "abs": I.abs}


def _compared_negation(op: str, dt):
    @intent.kernel
    def negation_compared(x: I.In[dt, ("N",)], zero: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, x.shape[0])
        out[d] = I.select(NEGATIONS[op](x[d]) < zero[d], zero[d], x[d])

    return negation_compared


@pytest.mark.parametrize("dt", SIGNED, ids=ids(SIGNED))
@pytest.mark.parametrize("op", list(NEGATIONS))
def test_a_negation_compares_as_its_wrapped_value(run, op, dt):
    # every value of the 8- and 16-bit dtypes (INT_MIN at each position a vector lane can take), the edges and
    # random values of the wider ones
    vals = list(range(lo(dt), hi(dt) + 1)) if BITS[dt] <= 16 else edge_values(dt) + random_values(dt, 64, seed=5)
    x = arr(vals, dt)
    out = np.full_like(x, 7)
    run(_compared_negation(op, dt), x, np.zeros_like(x), out)
    negated = [wrap(abs(v) if op == "abs" else -v, dt) for v in vals]
    expect_equal(out, [0 if n < 0 else v for v, n in zip(vals, negated)], vals)


def _unsigned_negation_compared(dt):
    @intent.kernel
    def unsigned_negation_compared(x: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, x.shape[0])
        out[d] = I.select(-x[d] <= x[d], x[d], -x[d])

    return unsigned_negation_compared


@pytest.mark.parametrize("dt", [I.u8, I.u16], ids=ids([I.u8, I.u16]))
def test_an_unsigned_negation_compares_as_its_wrapped_value(run, dt):
    # -x of an unsigned x wraps modulo 2^bits (-0x8000 is 0x8000 in u16): a register holding the unwrapped 32-bit
    # difference would compare above x there (the unsigned side of the signed test above), every value
    vals = list(range(0, hi(dt) + 1))
    out = np.zeros(len(vals), NP[dt])
    run(_unsigned_negation_compared(dt), arr(vals, dt), out)
    expect_equal(out, [v if wrap(-v, dt) <= v else wrap(-v, dt) for v in vals], vals)


# --- // and % ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_floordiv_truncates_toward_zero(run, dt):
    a, b = pairs(dt, seed=11)
    got = run_binary(run, "floordiv", dt, a, b)
    expect_equal(got, [c_div(x, y, dt) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_mod_has_sign_of_dividend(run, dt):
    a, b = pairs(dt, seed=12)
    got = run_binary(run, "mod", dt, a, b)
    expect_equal(got, [c_mod(x, y, dt) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", SIGNED, ids=ids(SIGNED))
def test_floordiv_mod_hand_values(run, dt):
    a = [-7, 7, -7, 7, -1, 1, -6]
    b = [2, -2, -2, 2, 3, -3, 3]
    assert as_ints(run_binary(run, "floordiv", dt, a, b)) == [-3, -3, 3, 3, 0, 0, -2]
    assert as_ints(run_binary(run, "mod", dt, a, b)) == [-1, 1, -1, 1, -1, 1, 0]


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_floordiv_mod_by_zero_give_zero(run, dt):
    a = edge_values(dt)
    b = [0] * len(a)
    assert as_ints(run_binary(run, "floordiv", dt, a, b)) == [0] * len(a)
    assert as_ints(run_binary(run, "mod", dt, a, b)) == [0] * len(a)


@pytest.mark.parametrize("dt", SIGNED, ids=ids(SIGNED))
def test_floordiv_int_min_by_minus_one_gives_int_min(run, dt):
    m = lo(dt)
    assert as_ints(run_binary(run, "floordiv", dt, [m, m, m], [-1, 1, m])) == [m, m, 1]
    assert as_ints(run_binary(run, "mod", dt, [m, m, m], [-1, 1, m])) == [0, 0, 0]


# --- shifts ----------------------------------------------------------------------------------

def shift_cases(dt):
    bits = BITS[dt]
    values = [v for v in (lo(dt), -1, -5, 1, 5, 0x5A, hi(dt)) if lo(dt) <= v <= hi(dt)]
    values += random_values(dt, 4, seed=21)[:4]
    amounts = [s for s in range(-bits - 2, 2 * bits + 3) if lo(dt) <= s <= hi(dt)]
    amounts += [lo(dt), hi(dt)]
    a = [v for v in values for _ in amounts]
    s = [x for _ in values for x in amounts]
    return a, s


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_shl_amounts_outside_width_give_zero(run, dt):
    a, s = shift_cases(dt)
    got = run_binary(run, "shl", dt, a, s)
    expect_equal(got, [ref_shl(x, y, dt) for x, y in zip(a, s)], a, s)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_shr_arithmetic_for_signed_logical_for_unsigned(run, dt):
    a, s = shift_cases(dt)
    got = run_binary(run, "shr", dt, a, s)
    expect_equal(got, [ref_shr(x, y, dt) for x, y in zip(a, s)], a, s)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_shift_by_exactly_bits_hand_values(run, dt):
    bits = BITS[dt]
    assert as_ints(run_binary(run, "shl", dt, [1, 1], [bits, bits - 1])) == [0, wrap(1 << (bits - 1), dt)]
    if is_signed(dt):
        assert as_ints(run_binary(run, "shr", dt, [-8, -8, 8, -8], [bits, -1, bits, 1])) == [-1, -1, 0, -4]
    else:
        top = hi(dt)
        assert as_ints(run_binary(run, "shr", dt, [top, top], [bits, 1])) == [0, top >> 1]


# --- integer pow ------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_pow_exact_modulo_2_pow_bits(run, dt):
    rng = np.random.default_rng(BITS[dt])
    bases = [v for v in (-3, -2, -1, 0, 1, 2, 3, 5, 7, 255, lo(dt), hi(dt)) if lo(dt) <= v <= hi(dt)]
    bases += random_values(dt, 6, seed=31)[:6]
    exps = [e for e in (0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127) if e <= hi(dt)]
    exps += [int(e) for e in rng.integers(0, min(hi(dt), 2**62), 4)] + [hi(dt)]
    a = [x for x in bases for _ in exps]
    b = [y for _ in bases for y in exps]
    got = run_binary(run, "pow", dt, a, b)
    expect_equal(got, [ref_pow(x, y, dt) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", SIGNED, ids=ids(SIGNED))
def test_pow_negative_exponent(run, dt):
    a = [1, 1, -1, -1, -1, 0, 2, -2, 5, hi(dt), lo(dt), -1]
    b = [-1, lo(dt), -1, -2, -3, -1, -1, -1, -2, -1, -1, lo(dt)]
    want = [1, 1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 1]  # lo(dt) is even
    assert as_ints(run_binary(run, "pow", dt, a, b)) == want


def test_pow_hand_values_i8(run):
    a = [3, 3, 2, -2, -2, 0, 7]
    b = [4, 5, 8, 7, 8, 0, 3]
    # 3^5 = 243 -> -13; 2^8 = 256 -> 0; (-2)^7 = -128; (-2)^8 = 256 -> 0; 0^0 = 1; 7^3 = 343 -> 87
    assert as_ints(run_binary(run, "pow", I.i8, a, b)) == [81, -13, 0, -128, 0, 1, 87]


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", ["square", "cube"])
def test_pow_by_literal_wraps(run, op, dt):
    vals = edge_values(dt) + random_values(dt, 16, seed=41)
    n = 2 if op == "square" else 3
    a = arr(vals, dt)
    out = np.zeros_like(a)
    run(unary_kernel(op, dt), a, out)
    expect_equal(out, [wrap(v ** n, dt) for v in vals], vals)


# --- bitwise and comparisons ----------------------------------------------------------------

@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise_binary_on_integers(run, op, dt):
    a, b = pairs(dt, seed=51)
    py = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[op]
    got = run_binary(run, op, dt, a, b)
    expect_equal(got, [wrap(py(x, y), dt) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_invert_is_bitwise_not(run, dt):
    vals = edge_values(dt) + random_values(dt, 16, seed=52)
    a = arr(vals, dt)
    out = np.zeros_like(a)
    run(unary_kernel("invert", dt), a, out)
    expect_equal(out, [wrap(~v, dt) for v in vals], vals)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_on_integers(run, op, dt):
    a, b = pairs(dt, seed=53)
    got = run_binary(run, op, dt, a, b)
    expect_equal(got, [(max if op == "maximum" else min)(x, y) for x, y in zip(a, b)], a, b)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
@pytest.mark.parametrize("op", COMPARES)
def test_comparisons_give_bool(run, op, dt):
    a, b = pairs(dt, seed=61)
    py = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
          "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[op]
    got = run_binary(run, op, dt, a, b)
    assert got.dtype == np.bool_
    assert [bool(v) for v in got] == [py(x, y) for x, y in zip(a, b)]


def test_comparison_result_dtype_is_bool_at_trace_time():
    seen = []

    @intent.kernel
    def k(a: I.In[I.u64, ("N",)], b: I.In[I.u64, ("N",)], out: I.Out[I.bool, ("N",)]):
        d = I.domain(0, a.shape[0])
        c = a[d] < b[d]
        seen.append(c.dtype)
        out[d] = c

    intent.trace(k)
    assert seen == [I.bool]


_BOOL_KERNELS: dict = {}


def bool_kernel(op):
    if op not in _BOOL_KERNELS:
        fn = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
              "invert": lambda a, b: ~a, "logical_not": lambda a, b: I.logical_not(a),
              "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}[op]

        @intent.kernel
        def k(a: I.In[I.bool, ("N",)], b: I.In[I.bool, ("N",)], out: I.Out[I.bool, ("N",)]):
            d = I.domain(0, a.shape[0])
            out[d] = fn(a[d], b[d])

        _BOOL_KERNELS[op] = k
    return _BOOL_KERNELS[op]


@pytest.mark.parametrize("op", ["and", "or", "xor", "invert", "logical_not", "eq", "ne"])
def test_bool_ops_are_logical(run, op):
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    out = np.zeros(4, dtype=bool)
    run(bool_kernel(op), a, b, out)
    want = {"and": [False, False, False, True], "or": [False, True, True, True],
            "xor": [False, True, True, False], "invert": [True, True, False, False],
            "logical_not": [True, True, False, False], "eq": [True, False, False, True],
            "ne": [False, True, True, False]}[op]
    assert out.tolist() == want


# --- T1 rules around integer arithmetic --------------------------------------------------------

def test_bool_arithmetic_is_a_trace_error():
    @intent.kernel
    def k(a: I.In[I.bool, ("N",)], b: I.In[I.bool, ("N",)], out: I.Out[I.bool, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] + b[d]

    with pytest.raises(intent.TraceError):
        intent.trace(k)


def test_mixed_integer_dtypes_are_a_trace_error():
    @intent.kernel
    def k(a: I.In[I.i32, ("N",)], b: I.In[I.i64, ("N",)], out: I.Out[I.i64, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] + b[d]

    with pytest.raises(intent.TraceError, match="I.cast"):
        intent.trace(k)


def test_true_division_of_integers_is_a_trace_error():
    @intent.kernel
    def k(a: I.In[I.i32, ("N",)], out: I.Out[I.i32, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] / 2

    with pytest.raises(intent.TraceError):
        intent.trace(k)


@pytest.mark.parametrize("dt,value", [(I.i8, 300), (I.i8, -129), (I.u8, 256), (I.u8, -1), (I.i32, 2**31),
                                      (I.u64, 2**64), (I.i64, 1.5)], ids=lambda v: str(v))
def test_integer_literal_that_does_not_fit_is_a_trace_error(dt, value):
    @intent.kernel
    def k(a: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = a[d] + value

    with pytest.raises(intent.TraceError):
        intent.trace(k)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=ids(INT_DTYPES))
def test_integer_literal_at_range_edges_is_exact(run, dt):
    """Literals lo(dt) and hi(dt) fit exactly (T1): x - x + lit gives lit."""

    @intent.kernel
    def k(a: I.In[dt, ("N",)], out: I.Out[dt, ("N",)]):
        d = I.domain(0, a.shape[0])
        out[d] = I.select(a[d] == 0, a[d] + hi(dt), a[d] + lo(dt))

    a = arr([0, 0, 1 if not is_signed(dt) else -1], dt)
    out = np.zeros_like(a)
    run(k, a, out)
    want = [hi(dt), hi(dt), wrap((1 if not is_signed(dt) else -1) + lo(dt), dt)]
    assert as_ints(out) == want
