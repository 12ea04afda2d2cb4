"""Random KIR-level programs: the cpu oracle agrees with the generic interpreter bit for bit.

Both follow one numerics chapter, so every op drawn here (no transcendental functions and no float
``pow``, whose results the chapter only bounds: NumPy's float64 ``power`` is a SIMD routine on AVX-512
hosts and glibc's ``pow`` may differ from it by an ulp) must give identical bits, NaN payloads and signed zeros
included. Hypothesis draws the dtype, shapes, the op chain, literals, control structure and
adversarial inputs.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import intent_trace as intent
from intent_trace import I
from conftest import bits_equal

DTYPES = {"f32": I.f32, "f64": I.f64, "bf16": I.bf16, "f16": I.f16, "i32": I.i32, "i64": I.i64, "u8": I.u8,
          "i16": I.i16, "u32": I.u32}
FLOAT_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")  # float pow: test_pointwise_specials, bounds
INT_BINARY = ("add", "sub", "mul", "floordiv", "mod", "maximum", "minimum", "and_", "or_", "xor", "shl", "shr")
FLOAT_UNARY = ("neg", "abs", "floor", "sqrt")
INT_UNARY = ("neg", "abs", "invert")
CASTS = ("f32", "f64", "i32", "i64", "u8", "bf16", "f16")

BIN = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
       "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "pow": lambda a, b: a ** b,
       "maximum": I.maximum, "minimum": I.minimum, "and_": lambda a, b: a & b, "or_": lambda a, b: a | b,
       "xor": lambda a, b: a ^ b, "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b}
UN = {"neg": lambda a: -a, "abs": I.abs, "floor": I.floor, "sqrt": I.sqrt, "invert": lambda a: ~a}


def build(dtype_name: str, rank: int, steps: tuple, control: str):
    dt = DTYPES[dtype_name]
    shape = ("M", "N")[:rank] if rank else ()

    def apply(v, w, s):
        for step in steps:
            kind, name, arg = step
            if kind == "bin":
                v = BIN[name](v, w if arg == "w" else (s if arg == "s" else arg))
            elif kind == "un":
                v = UN[name](v)
            elif kind == "select":
                v = I.select(v > w, v, w)
            elif kind == "fma":
                v = I.fma(v, w, v)
            elif kind == "cast":
                v = I.cast(I.cast(v, DTYPES[name]), dt)
        return v

    @intent.kernel
    def k(x: I.In[dt, shape], y: I.In[dt, shape], s: dt, out: I.Out[dt, shape]):
        doms = tuple(I.domain(0, e) for e in x.shape)
        if control == "plain":
            out[doms] = apply(x[doms], y[doms], s)
        elif control == "parallel" and rank:
            for i in I.parallel(doms[0]):
                rest = doms[1:]
                out[(i, *rest)] = apply(x[(i, *rest)], y[(i, *rest)], s)
        elif control == "loop" and rank:
            # An ordered loop carrying a scalar through the chain, then used by the whole-tensor chain.
            carried = I.loop(doms[0], s, lambda i, a: apply(a, s, s))
            out[doms] = apply(x[doms], y[doms], carried)
        else:
            flag = s > s - s if dt.is_float else s > 0
            out[doms] = I.if_(flag, lambda: apply(x[doms], y[doms], s), lambda: apply(y[doms], x[doms], s))

    return k


@st.composite
def programs(draw):
    name = draw(st.sampled_from(sorted(DTYPES)))
    dt = DTYPES[name]
    is_float = dt.is_float
    literal = st.floats(-4, 4, width=16).filter(lambda f: f == f) if is_float else \
        st.integers(0 if dt.kind == "uint" else -5, 7)
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(("bin", "bin", "un", "select", "cast") + (("fma",) if is_float else ())))
        if kind == "bin":
            op = draw(st.sampled_from(FLOAT_BINARY if is_float else INT_BINARY))
            arg = draw(st.one_of(st.just("w"), st.just("s"), literal))
            steps.append(("bin", op, arg))
        elif kind == "un":
            steps.append(("un", draw(st.sampled_from(FLOAT_UNARY if is_float else INT_UNARY)), None))
        elif kind == "cast":
            steps.append(("cast", draw(st.sampled_from(CASTS)), None))
        else:
            steps.append((kind, None, None))
    rank = draw(st.integers(0, 2))
    control = draw(st.sampled_from(("plain", "parallel", "loop", "if")))
    if rank == 0 and control in ("parallel", "loop"):
        control = "plain"
    shape = tuple(draw(st.integers(0, 4)) for _ in range(rank))
    if is_float:
        elements = st.floats(width=32 if name != "f64" else 64, allow_nan=True, allow_infinity=True,
                             allow_subnormal=True)
    else:
        info = np.iinfo(dt.np)
        elements = st.integers(int(info.min), int(info.max))
    host = np.float32 if name in ("bf16", "f16") else dt.np
    x = draw(hnp.arrays(host, shape, elements=elements)).astype(dt.np)
    y = draw(hnp.arrays(host, shape, elements=elements)).astype(dt.np)
    s = draw(elements)
    if is_float:
        s = float(np.asarray(s, dtype=host).astype(dt.np))
    return name, rank, tuple(steps), control, x, y, s


@settings(max_examples=30, deadline=None)
@given(programs())
def test_cpu_matches_generic_bit_for_bit_on_random_programs(program):
    name, rank, steps, control, x, y, s = program
    k = build(name, rank, steps, control)
    outs = []
    for target in ("generic", "cpu"):
        out = np.zeros_like(x)
        intent.compile(k, target=target)(x, y, s, out)
        outs.append(out)
    assert bits_equal(outs[0], outs[1]), (steps, control, x, y, s, outs)
