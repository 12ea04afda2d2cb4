"""add and mul with two NaN operands return the first one, quieted (T3, x86's rule), on every target, whichever
operand is loop-invariant and wherever the NaN stands.

LLVM's ``fadd``/``fmul`` are commutative in its IR (NaN payloads unspecified), and x86 returns its instruction's first
source NaN: cpu returned a scalar's NaN for ``x + s`` (the invariant held in a register became the first source) and
``y * 1.5``'s for ``x + y * 1.5`` (a load folded into the instruction is always its second source). The operand that
stays the same across the loop is a Python float, a NumPy scalar, a 0-d array or a row's reduced value; the NaNs
stand at the first element, at SIMD blocks' tails and at the last element of lengths that are no multiple of 4, 8 or
16, and the arrays run through both builds of cpu (serial, and parallel above ``PARALLEL_THRESHOLD``).

The references are hand-derived bits: the first NaN operand with its quiet bit set (f16 keeps its payload, bf16 only
its sign: NumPy's and ml_dtypes' conversions, which every target follows), else the exact result NumPy gives.
"""
import numpy as np
import pytest

from nan_formats import FORMATS, quiet

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target

LENGTHS = (1, 5, 13, 37, 67)  # no multiple of 4, 8 or 16: every vector loop has a tail
X, Y = 1.5, 0.5  # the finite operands; every result below is exact in each format


def _dtype(name):
    return getattr(I, name)


def _is_nan(name, bits) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isnan(np.asarray(bits, FORMATS[name][0]).view(_dtype(name).np).astype(np.float64))


def _expected(name, op, *operands) -> np.ndarray:
    """``op`` on the operands' bits (arrays or ints, broadcast): the first NaN operand quieted, else NumPy's exact
    result in float64 rounded to the format (exact for these values)."""
    unsigned = FORMATS[name][0]
    words = np.broadcast_arrays(*(np.asarray(w, unsigned) for w in operands))
    with np.errstate(invalid="ignore"):
        values = [w.view(_dtype(name).np).astype(np.float64) for w in words]
        want = np.asarray(op(*values)).astype(_dtype(name).np).view(unsigned)
    for w in reversed(words):  # the last assignment is the first operand's
        quieted = np.vectorize(lambda b: quiet(name, int(b)), otypes=[unsigned])(w) if w.size else w
        want = np.where(_is_nan(name, w), quieted, want)
    return want.astype(unsigned)


def _assert_bits(out, want, *context):
    got = out.view(want.dtype)
    bad = np.argwhere(got != want)
    assert bad.size == 0, (*context, [(tuple(int(i) for i in b), hex(int(got[tuple(b)])), hex(int(want[tuple(b)])))
                                      for b in bad[:6]])


def _builds(monkeypatch):
    """cpu's serial build, then its parallel build (``PARALLEL_THRESHOLD`` 0); other targets run twice."""
    for parallel in (False, True):
        monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", 0 if parallel else 1 << 40)
        yield parallel


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def _vector_kernel(name):
    dt = _dtype(name)

    @intent.kernel
    def k(x: I.In[dt, ("N",)], y: I.In[dt, ("N",)], z: I.In[dt, ()], out: I.Out[dt, (10, "N")], s: dt):
        d = I.domain(0, x.shape[0])
        out[0, d] = x[d] + s
        out[1, d] = s + x[d]
        out[2, d] = x[d] * s
        out[3, d] = s * x[d]
        out[4, d] = x[d] + z[()]
        out[5, d] = z[()] * x[d]
        out[6, d] = x[d] + y[d] * 1.5  # a computed second operand beside a loaded first one
        out[7, d] = y[d] * 1.5 + x[d]
        out[8, d] = x[d] + y[d]
        out[9, d] = x[d] * y[d]
    return k


def _vector_expected(name, x, y, z, s) -> np.ndarray:
    unsigned = FORMATS[name][0]
    y15 = _expected(name, _mul, y, int(np.array(1.5, _dtype(name).np).view(unsigned)))
    pairs = [(_add, x, s), (_add, s, x), (_mul, x, s), (_mul, s, x), (_add, x, z), (_mul, z, x), (_add, x, y15),
             (_add, y15, x), (_add, x, y), (_mul, x, y)]
    return np.stack([np.broadcast_to(_expected(name, op, a, b), x.shape) for op, a, b in pairs])


def _words(name, n: int, nan: int, every: int, finite: float) -> np.ndarray:
    """``n`` words of ``finite`` with ``nan`` at the first and last positions and every ``every``-th one."""
    unsigned = FORMATS[name][0]
    w = np.full(n, np.array(finite, _dtype(name).np).view(unsigned), unsigned)
    w[::every] = nan
    w[-1:] = nan
    return w


def _scalar(name, bits: int, python_float: bool):
    """A scalar argument of these bits: a NumPy scalar, or a Python float (f32/f64: a quiet NaN's payload survives
    the round trip through double; bf16's scalar is always a Python float, whose NaN sign it keeps)."""
    value = np.array(bits, FORMATS[name][0]).view(_dtype(name).np)[()]
    return float(value) if python_float or name == "bf16" else value


_VECTOR = {name: _vector_kernel(name) for name in FORMATS}


@pytest.mark.parametrize("name", list(FORMATS))
def test_scalar_operands_keep_the_first_nan(run, monkeypatch, name):
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    finite_x = int(np.array(X, np_dtype).view(unsigned))
    for n in LENGTHS:
        for k in range(len(nans) + 1):  # every NaN in each role, then the scalars finite
            nx, ny, nz, ns = (nans[(k + j) % len(nans)] for j in range(4))
            if k == len(nans):
                nz = ns = finite_x
            x = _words(name, n, nx, 3, X)
            y = _words(name, n, ny, 2, Y)
            if name in ("f32", "f64") and k % 2:  # a quiet scalar NaN, so that a Python float carries it exactly
                ns = ns | FORMATS[name][1]
            want = _vector_expected(name, x, y, nz, ns)
            for parallel in _builds(monkeypatch):
                out = np.zeros((10, n), np_dtype)
                run(_VECTOR[name], x.view(np_dtype), y.view(np_dtype), np.array(nz, unsigned).view(np_dtype), out,
                    _scalar(name, ns, python_float=bool(k % 2)))
                _assert_bits(out, want, n, k, parallel)


def _row_kernel(name):
    dt = _dtype(name)

    @intent.kernel
    def k(x: I.In[dt, ("M", "N")], w: I.In[dt, ("M", "N")], out: I.Out[dt, (4, "M", "N")]):
        total = I.reshape(I.cast(I.reduce.sum(w[:, :], axis=1), dt), (x.shape[0], 1))  # a row's value, held across the row
        out[0, :, :] = x[:, :] * total  # x * inv-like
        out[1, :, :] = total * x[:, :]
        out[2, :, :] = x[:, :] + total  # x + mean-like
        out[3, :, :] = total + x[:, :]
    return k


_ROWS = {name: _row_kernel(name) for name in FORMATS}


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_rows_reduced_value_keeps_the_first_nan(run, monkeypatch, name):
    # by hand: the row sum of w is its one NaN, quieted (T3: NaN + finite), or 0.5 * n exactly; each output element
    # is the first NaN of (x, total) or (total, x), quieted
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    half = int(np.array(Y, np_dtype).view(unsigned))
    for n in (13, 37):
        for k, (nx, nw) in enumerate([(nans[0], nans[1]), (nans[3], nans[2]), (nans[2], nans[0])]):
            x = np.stack([_words(name, n, nx, step, X) for step in (3, 4, 5, 7)])
            w = np.full((4, n), half, unsigned)
            w[1, 0] = w[2, n - 1] = w[3, n // 2] = quiet(name, nw)  # row 0 finite; one NaN in each other row
            totals = np.where(_is_nan(name, w).any(axis=1), quiet(name, nw),
                              np.array(Y * n, np_dtype).view(unsigned)).astype(unsigned)[:, None]
            want = np.stack([_expected(name, _mul, x, totals), _expected(name, _mul, totals, x),
                             _expected(name, _add, x, totals), _expected(name, _add, totals, x)])
            for parallel in _builds(monkeypatch):
                out = np.zeros((4, 4, n), np_dtype)
                run(_ROWS[name], x.view(np_dtype), w.view(np_dtype), out)
                _assert_bits(out, want, n, k, parallel)


def _negated_kernel(name):
    dt = _dtype(name)

    @intent.kernel
    def k(x: I.In[dt, ("N",)], y: I.In[dt, ("N",)], out: I.Out[dt, (5, "N")], s: dt):
        d = I.domain(0, x.shape[0])
        out[0, d] = -(x[d] * s)
        out[1, d] = -(s * x[d])
        out[2, d] = -(x[d] * y[d])
        out[3, d] = -(x[d] / s)
        out[4, d] = -(x[d] * 1.5)
    return k


_NEGATED = {name: _negated_kernel(name) for name in FORMATS}


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_negated_product_flips_its_nans_sign(run, name):
    # T3: -x flips the sign bit, also of a NaN. LLVM sinks fneg(x * y) into one factor ((-x) * y), equal for every
    # number but not for a NaN of the other factor: cpu returned -(x * s) with s a NaN as s's NaN unflipped
    unsigned, _, nans = FORMATS[name]
    np_dtype = _dtype(name).np
    sign = np.array(0x8000 if unsigned is np.uint16 else 1 << (8 * np.dtype(unsigned).itemsize - 1), unsigned)
    finite = int(np.array(X, np_dtype).view(unsigned))
    one_half = int(np.array(1.5, np_dtype).view(unsigned))
    for n in (5, 37):
        for k, ns in enumerate([*nans, finite]):
            x = _words(name, n, nans[(k + 1) % len(nans)], 3, X)
            y = _words(name, n, nans[(k + 2) % len(nans)], 2, Y)
            want = np.stack([_expected(name, _mul, x, ns), _expected(name, _mul, ns, x), _expected(name, _mul, x, y),
                             np.broadcast_to(_expected(name, lambda a, b: a / b, x, ns), x.shape),
                             _expected(name, _mul, x, one_half)]) ^ sign
            out = np.zeros((5, n), np_dtype)
            run(_NEGATED[name], x.view(np_dtype), y.view(np_dtype), out, _scalar(name, ns, python_float=False))
            _assert_bits(out, want, n, k)
