"""Random pointwise programs (Hypothesis) against an independent NumPy/Python model of T2/T3.

Each example draws a dtype, a rank (0..3) and a short program: a list of ops over a growing list
of registers (the two inputs first). The program is traced into a kernel, run on several random
shapes of that rank (extents 0..3), and compared with the model below:

- floats: the operation in float64 on exact inputs, then one round-to-nearest-even into the
  format (:func:`round_vec`, written here with frexp/ldexp; f64 ops are IEEE float64 themselves);
  ``fma`` exactly with ``fractions.Fraction``. NaN compares as NaN; everything else bit for bit.
- integers: Python integers reduced modulo 2^bits, with T2's division, shift and pow rules.
"""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import intent_trace as intent
from intent_trace import I
from float_reference import FMT, round_fraction

FLOATS = [I.f16, I.bf16, I.f32, I.f64]
SIGNED = [I.i8, I.i16, I.i32, I.i64]
UNSIGNED = [I.u8, I.u16, I.u32, I.u64]
INTS = SIGNED + UNSIGNED
NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64,
      I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64}
BITS = {I.i8: 8, I.i16: 16, I.i32: 32, I.i64: 64, I.u8: 8, I.u16: 16, I.u32: 32, I.u64: 64}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
NAMES = ("A", "B", "C")


def _errstate():
    return np.errstate(all="ignore")


# --- the float model -------------------------------------------------------------------------------

def round_vec(x, dt) -> np.ndarray:
    """float64 values -> ``dt``, each rounded once to nearest-even (overflow to +-inf, subnormals kept)."""
    x = np.asarray(x, dtype=np.float64)
    if dt is I.f64:
        return x.copy()
    p, emin, emax = FMT[dt]
    with _errstate():
        _, e = np.frexp(x)
        quantum = np.maximum(e - 1, emin) - (p - 1)
        r = np.ldexp(np.rint(np.ldexp(x, -quantum)), quantum)
        r = np.where(np.isfinite(x), r, x)
        r = np.where(np.abs(r) >= 2.0 ** (emax + 1), np.copysign(np.inf, x), r)
    return r.astype(np.float32).astype(NP[dt]) if dt is I.bf16 else r.astype(NP[dt])


def fma_model(a: float, b: float, c: float, dt) -> float:
    if math.isfinite(a) and math.isfinite(b) and math.isfinite(c):
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        if exact != 0:
            return round_fraction(exact, dt)
        if a * b == 0 and c == 0:
            return -0.0 if (math.copysign(1, a) * math.copysign(1, b) < 0 and math.copysign(1, c) < 0) else 0.0
        return 0.0
    if math.isfinite(a) and math.isfinite(b):
        return c
    with _errstate():
        return float(np.float64(a) * np.float64(b) + np.float64(c))


def ieee_max(a, b, is_max):
    with _errstate():
        r = np.where(a > b, a, b) if is_max else np.where(a < b, a, b)
        zeros = (a == 0) & (b == 0)
        if is_max:
            z = np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0)
        else:
            z = np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0)
        r = np.where(zeros, z, r)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, r)


def float_model(op: str, regs: list, ops_args: tuple, lit, dt) -> np.ndarray:
    i, j, k = (regs[n % len(regs)].astype(np.float64) for n in ops_args)
    lit64 = float(round_vec(np.array(lit), dt)) if lit is not None else None
    with _errstate():
        if op == "fma":
            flat = [fma_model(x, y, z, dt) for x, y, z in zip(i.reshape(-1), j.reshape(-1), k.reshape(-1))]
            return round_vec(np.array(flat, dtype=np.float64).reshape(i.shape), dt)
        r = {
            "add": lambda: i + j, "sub": lambda: i - j, "mul": lambda: i * j, "div": lambda: i / j,
            "neg": lambda: -i, "abs": lambda: np.abs(i), "floor": lambda: np.floor(i), "sqrt": lambda: np.sqrt(i),
            "maximum": lambda: ieee_max(i, j, True), "minimum": lambda: ieee_max(i, j, False),
            "select_lt": lambda: np.where(i < j, j, k), "add_lit": lambda: i + lit64, "mul_lit": lambda: i * lit64,
            "lit_sub": lambda: lit64 - i, "via_f32": lambda: round_vec(i, I.f32).astype(np.float64),
        }[op]()
    return round_vec(r, dt)


FLOAT_BUILDERS = {
    "add": lambda a, b, c, lit: a + b, "sub": lambda a, b, c, lit: a - b, "mul": lambda a, b, c, lit: a * b,
    "div": lambda a, b, c, lit: a / b, "neg": lambda a, b, c, lit: -a, "abs": lambda a, b, c, lit: abs(a),
    "floor": lambda a, b, c, lit: I.floor(a), "sqrt": lambda a, b, c, lit: I.sqrt(a),
    "maximum": lambda a, b, c, lit: I.maximum(a, b), "minimum": lambda a, b, c, lit: I.minimum(a, b),
    "fma": lambda a, b, c, lit: I.fma(a, b, c), "select_lt": lambda a, b, c, lit: I.select(a < b, b, c),
    "add_lit": lambda a, b, c, lit: a + lit, "mul_lit": lambda a, b, c, lit: a * lit,
    "lit_sub": lambda a, b, c, lit: lit - a,
}
FLOAT_OPS = sorted(FLOAT_BUILDERS) + ["via_f32"]


# --- the integer model -------------------------------------------------------------------------------

def lo(dt) -> int:
    return -(1 << (BITS[dt] - 1)) if dt in SIGNED else 0


def hi(dt) -> int:
    return (1 << (BITS[dt] - 1)) - 1 if dt in SIGNED else (1 << BITS[dt]) - 1


def wrap(v: int, dt) -> int:
    v &= (1 << BITS[dt]) - 1
    if dt in SIGNED and v >= 1 << (BITS[dt] - 1):
        v -= 1 << BITS[dt]
    return v


def c_div(a, b, dt):
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(-q if (a < 0) != (b < 0) else q, dt)


def c_mod(a, b, dt):
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(a - b * (-q if (a < 0) != (b < 0) else q), dt)


def int_pow(a, b, dt):
    if b >= 0:
        return wrap(pow(a, b, 1 << BITS[dt]), dt)
    return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)


def via_f64(a, dt):
    f = float(a)  # Python int -> float is correctly rounded (RNE)
    return min(max(math.trunc(f), lo(dt)), hi(dt)) if math.isfinite(f) else 0


INT_MODEL = {
    "add": lambda a, b, c, lit, dt: wrap(a + b, dt), "sub": lambda a, b, c, lit, dt: wrap(a - b, dt),
    "mul": lambda a, b, c, lit, dt: wrap(a * b, dt), "floordiv": lambda a, b, c, lit, dt: c_div(a, b, dt),
    "mod": lambda a, b, c, lit, dt: c_mod(a, b, dt), "and": lambda a, b, c, lit, dt: wrap(a & b, dt),
    "or": lambda a, b, c, lit, dt: wrap(a | b, dt), "xor": lambda a, b, c, lit, dt: wrap(a ^ b, dt),
    "shl": lambda a, b, c, lit, dt: wrap(a << b, dt) if 0 <= b < BITS[dt] else 0,
    "shr": lambda a, b, c, lit, dt: (a >> b) if 0 <= b < BITS[dt] else (-1 if a < 0 else 0),
    "neg": lambda a, b, c, lit, dt: wrap(-a, dt), "invert": lambda a, b, c, lit, dt: wrap(~a, dt),
    "maximum": lambda a, b, c, lit, dt: max(a, b), "minimum": lambda a, b, c, lit, dt: min(a, b),
    "select_lt": lambda a, b, c, lit, dt: b if a < b else c, "pow": lambda a, b, c, lit, dt: int_pow(a, b, dt),
    "add_lit": lambda a, b, c, lit, dt: wrap(a + lit, dt), "mul_lit": lambda a, b, c, lit, dt: wrap(a * lit, dt),
    "lit_sub": lambda a, b, c, lit, dt: wrap(lit - a, dt), "via_f64": lambda a, b, c, lit, dt: via_f64(a, dt),
}
INT_BUILDERS = {
    "add": lambda a, b, c, lit: a + b, "sub": lambda a, b, c, lit: a - b, "mul": lambda a, b, c, lit: a * b,
    "floordiv": lambda a, b, c, lit: a // b, "mod": lambda a, b, c, lit: a % b, "and": lambda a, b, c, lit: a & b,
    "or": lambda a, b, c, lit: a | b, "xor": lambda a, b, c, lit: a ^ b, "shl": lambda a, b, c, lit: a << b,
    "shr": lambda a, b, c, lit: a >> b, "neg": lambda a, b, c, lit: -a, "invert": lambda a, b, c, lit: ~a,
    "maximum": lambda a, b, c, lit: I.maximum(a, b), "minimum": lambda a, b, c, lit: I.minimum(a, b),
    "select_lt": lambda a, b, c, lit: I.select(a < b, b, c), "pow": lambda a, b, c, lit: a ** b,
    "add_lit": lambda a, b, c, lit: a + lit, "mul_lit": lambda a, b, c, lit: a * lit,
    "lit_sub": lambda a, b, c, lit: lit - a,
}
INT_OPS = sorted(INT_MODEL)


def int_model(op, regs, args, lit, dt) -> np.ndarray:
    i, j, k = (regs[n % len(regs)] for n in args)
    flat = [INT_MODEL[op](int(a), int(b), int(c), lit, dt)
            for a, b, c in zip(i.reshape(-1), j.reshape(-1), k.reshape(-1))]
    return np.array(flat, dtype=object).astype(NP[dt]).reshape(i.shape)


# --- kernels from programs ----------------------------------------------------------------------------

def build_step(dt, op, regs, args, lit):
    a, b, c = (regs[n % len(regs)] for n in args)
    if op == "via_f32":
        return I.cast(I.cast(a, I.f32), dt)
    if op == "via_f64":
        return I.cast(I.cast(a, I.f64), dt)
    return (FLOAT_BUILDERS if dt in FMT else INT_BUILDERS)[op](a, b, c, lit)


def program_kernel(dt, rank: int, program: tuple):
    names = NAMES[:rank]

    @intent.kernel
    def k(x: I.In[dt, names], y: I.In[dt, names], out: I.Out[dt, names]):
        doms = tuple(I.domain(0, x.shape[axis]) for axis in range(rank))
        regs = [x[doms], y[doms]]
        for op, args, lit in program:
            regs.append(build_step(dt, op, regs, args, lit))
        out[doms] = regs[-1]

    return k


def model(dt, program, x, y) -> np.ndarray:
    regs = [x, y]
    for op, args, lit in program:
        regs.append(float_model(op, regs, args, lit, dt) if dt in FMT else int_model(op, regs, args, lit, dt))
    return regs[-1]


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a).reshape(-1)
    return a.view(UINT[a.dtype.itemsize])


def assert_matches(got: np.ndarray, want: np.ndarray, dt, context):
    assert got.shape == want.shape
    if dt in FMT:
        g_nan, w_nan = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
        assert np.array_equal(g_nan, w_nan), (context, got, want)
        assert np.array_equal(bits(got)[~w_nan.reshape(-1)], bits(want)[~w_nan.reshape(-1)]), (context, got, want)
    else:
        assert np.array_equal(got, want), (context, got, want)


# --- strategies ---------------------------------------------------------------------------------------

def float_specials(dt):
    p, emin, emax = FMT[dt]
    tiny = 2.0 ** (emin - p + 1)
    big = float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, tiny, -tiny, 2.0**emin, big, -big, 1.0, -1.0, 0.5]


def float_elements(dt):
    width = {I.f16: 16, I.bf16: 32, I.f32: 32, I.f64: 64}[dt]
    adversarial = st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    moderate = st.floats(min_value=-8.0, max_value=8.0, width=width)
    return st.one_of(adversarial, moderate, st.sampled_from(float_specials(dt)))


def int_elements(dt):
    cands = (lo(dt), lo(dt) + 1, -1, 0, 1, 2, BITS[dt] - 1, BITS[dt], hi(dt))
    edges = sorted({v for v in cands if lo(dt) <= v <= hi(dt)})
    return st.one_of(st.integers(lo(dt), hi(dt)), st.integers(max(lo(dt), -9), 9), st.sampled_from(edges))


def make_array(values, dt, shape) -> np.ndarray:
    if dt in FMT:
        return round_vec(np.array(values, dtype=np.float64), dt).reshape(shape)
    return np.array([int(v) for v in values], dtype=object).astype(NP[dt]).reshape(shape)


@st.composite
def arrays(draw, dt, shape):
    n = math.prod(shape)
    elements = float_elements(dt) if dt in FMT else int_elements(dt)
    return make_array(draw(st.lists(elements, min_size=n, max_size=n)), dt, shape)


@st.composite
def literals(draw, dt):
    if dt in FMT:
        limit = 60000.0 if dt is I.f16 else 1e30
        return draw(st.floats(min_value=-limit, max_value=limit, allow_subnormal=True))
    return draw(st.integers(lo(dt), hi(dt)))


@st.composite
def programs(draw):
    dt = draw(st.sampled_from(FLOATS + INTS))
    ops = FLOAT_OPS if dt in FMT else INT_OPS
    n = draw(st.integers(1, 5))
    program = []
    for _ in range(n):
        op = draw(st.sampled_from(ops))
        args = tuple(draw(st.integers(0, 7)) for _ in range(3))
        lit = draw(literals(dt)) if op.endswith("_lit") or op.startswith("lit_") else None
        program.append((op, args, lit))
    return dt, tuple(program)


# ``run`` is a stateless function-scoped fixture (compile-and-call for one target): safe to share across examples.
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- properties ------------------------------------------------------------------------------------

# Each example traces (and on compiled targets, compiles) a fresh kernel: half the profile's examples,
# each running three shapes through its kernel.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture],
          max_examples=max(10, settings.default.max_examples // 2))
@given(prog=programs(), rank=st.integers(0, 3), data=st.data())
def test_pointwise_chain_matches_model(run, prog, rank, data):
    dt, program = prog
    kernel = program_kernel(dt, rank, program)
    for _ in range(3):  # several shapes of this rank through one traced kernel
        shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank), label="shape"))
        x = data.draw(arrays(dt, shape), label="x")
        y = data.draw(arrays(dt, shape), label="y")
        out = np.zeros(shape, dtype=NP[dt])
        run(kernel, x, y, out)
        assert_matches(out, model(dt, program, x, y), dt, (dt, program, x, y))


_BCAST: dict = {}


def broadcast_kernel(dt, rank, b_spec):
    """out = (x[all] + b[right-aligned, size-one axes static]) * s + full((), 1.5) for a runtime scalar s."""
    key = (dt, rank, b_spec)
    if key not in _BCAST:
        names = NAMES[:rank]
        offset = rank - len(b_spec)
        b_ann = tuple(1 if one else names[offset + i] for i, one in enumerate(b_spec))

        @intent.kernel
        def k(x: I.In[dt, names], b: I.In[dt, b_ann], s: dt, out: I.Out[dt, names]):
            doms = tuple(I.domain(0, x.shape[axis]) for axis in range(rank))
            b_idx = tuple(slice(None) if one else doms[offset + i] for i, one in enumerate(b_spec))
            out[doms] = (x[doms] + b[b_idx]) * s + I.full((), 1.5, dt)

        _BCAST[key] = k
    return _BCAST[key]


@fixture_ok
@given(dt=st.sampled_from(FLOATS), rank=st.integers(0, 3), data=st.data())
def test_size_one_and_scalar_broadcasting(run, dt, rank, data):
    b_rank = data.draw(st.integers(0, rank), label="b_rank")
    b_spec = tuple(data.draw(st.lists(st.booleans(), min_size=b_rank, max_size=b_rank), label="size-one axes"))
    shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank), label="shape"))
    b_shape = tuple(1 if one else shape[rank - b_rank + i] for i, one in enumerate(b_spec))
    x = data.draw(arrays(dt, shape), label="x")
    b = data.draw(arrays(dt, b_shape), label="b")
    s = data.draw(st.floats(min_value=-1e4, max_value=1e4, allow_subnormal=True), label="s")
    out = np.zeros(shape, dtype=NP[dt])
    run(broadcast_kernel(dt, rank, b_spec), x, b, s, out)
    s_dt = float(round_vec(np.array(s), dt))  # the runtime scalar rounds to dt once (RNE)
    with _errstate():
        t = round_vec(x.astype(np.float64) + b.astype(np.float64), dt).astype(np.float64)
        t = round_vec(t * s_dt, dt).astype(np.float64)
        want = round_vec(t + 1.5, dt)
    assert_matches(out, np.broadcast_to(want, shape), dt, (x, b, s))


@intent.kernel
def _rows_plus_vector(x: I.In[I.f32, ("M", "N")], v: I.In[I.f32, ("N",)], out: I.Out[I.f32, ("M", "N")]):
    rows = I.domain(0, x.shape[0])
    cols = I.domain(0, x.shape[1])
    out[rows, cols] = x[rows, cols] + v[cols]


@fixture_ok
@given(m=st.integers(0, 4), n=st.integers(0, 4), data=st.data())
def test_rows_plus_vector_broadcasts_along_rows(run, m, n, data):
    x = data.draw(arrays(I.f32, (m, n)), label="x")
    v = data.draw(arrays(I.f32, (n,)), label="v")
    out = np.zeros((m, n), np.float32)
    run(_rows_plus_vector, x, v, out)
    want = round_vec(x.astype(np.float64) + v.astype(np.float64)[None, :], I.f32)
    assert_matches(out, want, I.f32, (x, v))


@intent.kernel
def _rank0_chain(x: I.In[I.f32, ()], s: I.f32, out: I.Out[I.f32, ()], vec_out: I.Out[I.f32, ("N",)]):
    one = I.full((), 1.0, I.f32)
    t = x[()] * s + one
    out[()] = I.maximum(t, -t)
    d = I.domain(0, vec_out.shape[0])
    vec_out[d] = I.full((vec_out.shape[0],), 2.0, I.f32) * t - s


@fixture_ok
@given(x=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
       s=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True), n=st.integers(0, 3))
def test_rank0_tensor_and_runtime_scalar(run, x, s, n):
    xa = np.array(x, dtype=np.float32)
    out = np.full((), 9.0, np.float32)
    vec_out = np.zeros(n, np.float32)
    run(_rank0_chain, xa, s, out, vec_out)
    with _errstate():
        t = round_vec(round_vec(np.float64(x) * np.float64(s), I.f32).astype(np.float64) + 1.0, I.f32)
        want = ieee_max(t.astype(np.float64), -t.astype(np.float64), True)
        vec_want = round_vec(round_vec(2.0 * t.astype(np.float64), I.f32).astype(np.float64) - np.float64(s), I.f32)
    assert out.shape == ()
    assert_matches(out, round_vec(want, I.f32), I.f32, (x, s))
    assert_matches(vec_out, np.broadcast_to(vec_want, (n,)), I.f32, (x, s))
