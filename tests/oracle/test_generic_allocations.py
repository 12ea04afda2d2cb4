"""Generic refuses a call whose allocations cannot fit (intent_trace.limits) before making them: a
ValueError naming what was being allocated, its extent and its size, with the caller's arrays left
bit-identical; never a bare MemoryError or NumPy's "array is too big". Extents that do not fit the
index type at run time are ValueErrors too.

Most cases lower the limit with INTENT_TRACE_MAX_ALLOCATION so the shapes stay small; the first uses
the machine's own limit with an extent no machine can hold.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import intent_trace as intent
from intent_trace import I

LIMIT = 1 << 16  # bytes, for the cases that lower the limit


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", str(LIMIT))


def _call(kernel, *args):
    exe = intent.compile(kernel, target="generic")
    before = [np.copy(a) for a in args if isinstance(a, np.ndarray)]
    with pytest.raises(ValueError) as e:
        exe(*args)
    assert not isinstance(e.value, MemoryError)
    after = [a for a in args if isinstance(a, np.ndarray)]
    assert all(np.array_equal(a, b) for a, b in zip(after, before))
    return str(e.value)


@intent.kernel
def static_domain(y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, 2**40)
    y[I.domain(0, y.shape[0])] = I.cast(I.reduce.sum(I.indices(d), axis=0), I.f32)


def test_static_domain_no_machine_can_hold_is_a_value_error_naming_it_and_its_size():
    message = _call(static_domain, np.full(2, 7, np.float32))
    assert "domain" in message and str(2**40) in message and str(2**43) in message


@intent.kernel
def runtime_domain(y: I.Out[I.f32, ("N",)], n: I.i64):
    d = I.domain(0, n)
    y[I.domain(0, y.shape[0])] = I.cast(I.reduce.sum(I.indices(d), axis=0), I.f32)


def test_runtime_domain_too_large_is_a_value_error(small_limit):
    n = LIMIT  # LIMIT members of 8 bytes
    message = _call(runtime_domain, np.full(2, 7, np.float32), n)
    assert "domain" in message and str(n) in message and str(8 * n) in message


def test_runtime_domain_within_the_limit_runs(small_limit):
    y = np.zeros(2, np.float32)
    intent.compile(runtime_domain, target="generic")(y, 100)
    assert np.all(y == 4950)


@intent.kernel
def unsigned_domain(y: I.Out[I.f32, ("N",)], n: I.u64):
    d = I.domain(I.cast(n, I.index) * 0, n)
    y[I.domain(0, y.shape[0])] = I.cast(I.reduce.sum(I.indices(d), axis=0), I.f32)


def test_runtime_extent_that_does_not_fit_index_is_a_value_error():
    message = _call(unsigned_domain, np.full(2, 7, np.float32), 2**64 - 1)
    assert "index" in message and str(2**64 - 1) in message


@intent.kernel
def runtime_full(y: I.Out[I.f32, ("N",)], n: I.index):
    t = I.full((n, 4), 1.0, I.f32)
    y[I.domain(0, y.shape[0])] = I.full((y.shape[0],), 0.0, I.f32) + I.reduce.sum(t, axis=(0, 1))


def test_full_too_large_is_a_value_error_naming_its_shape(small_limit):
    n = LIMIT // 4
    message = _call(runtime_full, np.full(2, 7, np.float32), n)
    assert "full" in message and str(n * 4) in message and str(n * 16) in message


@intent.kernel
def runtime_buffer(y: I.Out[I.f32, ("N",)], n: I.index):
    b = I.buffer((n,), I.f32, init=0.0)
    y[I.domain(0, 1)] = b[I.domain(0, 1)]


def test_buffer_too_large_is_a_value_error(small_limit):
    n = LIMIT
    message = _call(runtime_buffer, np.full(2, 7, np.float32), n)
    assert "buffer" in message and str(n) in message and str(4 * n) in message


@intent.kernel
def outer_product(a: I.In[I.f32, ("M",)], b: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("M",)]):
    rows, cols = I.domain(0, a.shape[0]), I.domain(0, b.shape[0])
    y[rows] = I.reduce.sum(I.outer(a[rows], b[cols]), axis=1)


def test_temporary_too_large_is_a_value_error_and_small_ones_run(small_limit):
    m = n = 256  # inputs of 1 KiB, a 256 KiB outer product
    message = _call(outer_product, np.ones(m, np.float32), np.ones(n, np.float32), np.full(m, 7, np.float32))
    assert str(m * n) in message and str(4 * m * n) in message
    y = np.zeros(8, np.float32)
    intent.compile(outer_product, target="generic")(np.ones(8, np.float32), np.ones(8, np.float32), y)
    assert np.all(y == 8)


@intent.kernel
def copy(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
    d = I.domain(0, x.shape[0])
    y[d] = x[d]


def test_staging_copy_too_large_is_a_value_error_naming_the_view(monkeypatch):
    x = np.ones(1024, np.float32)
    monkeypatch.setenv("INTENT_TRACE_MAX_ALLOCATION", str(x.nbytes - 1))
    message = _call(copy, x, np.full(1024, 7, np.float32))
    assert "y" in message and "1024" in message and str(x.nbytes) in message


@intent.kernel
def sparse_lhs(c: I.In[I.f32, ("M", 128)], meta: I.In[I.u8, ("M", 128)], b: I.In[I.f32, (256, "N")],
               y: I.Out[I.f32, ("M", "N")]):
    out = I.sparse_matmul(c[:, :], meta[:, :], b[:, :], format=I.sparse.two_of_four(), acc_dtype=I.f32)
    y[I.domain(0, y.shape[0]), I.domain(0, y.shape[1])] = out


def test_sparse_contract_dense_operand_too_large_is_a_value_error(small_limit):
    m, k = 128, 256  # a compressed lhs of 64 KiB (the limit), its dense form 128 KiB: over it
    meta = np.tile(np.array([0, 1], np.uint8), (m, k // 4))
    message = _call(sparse_lhs, np.ones((m, k // 2), np.float32), meta, np.ones((k, 1), np.float32),
                    np.full((m, 1), 7, np.float32))
    assert "dense" in message and str(m * k) in message and str(4 * m * k) in message


@pytest.mark.parametrize("fmt,per_byte", [(I.e2m1, 2), (I.e4m3, 1)], ids=str)
def test_scaled_contract_decoded_operand_too_large_is_a_value_error(small_limit, fmt, per_byte):
    m, g, gs = 16, 16, 32  # lhs codes of 8 KiB (e4m3) or 4 KiB (e2m1); decoded in float64: 64 KiB each, and more
    c = gs // per_byte

    @intent.kernel
    def k(a: I.In[I.u8, (m * 2, g, c)], sa: I.In[I.u8, (m * 2, g)], b: I.In[I.u8, (g, c, 1)],
          sb: I.In[I.u8, (1, g)], y: I.Out[I.f32, (m * 2, 1)]):
        y[:, :] = I.scaled_matmul(a[:, :, :], sa[:, :], b[:, :, :], sb[:, :], lhs_format=fmt, rhs_format=fmt,
                                  group_size=gs, acc_dtype=I.f32)

    codes = np.zeros((m * 2, g, c), np.uint8)
    message = _call(k, codes, np.full((m * 2, g), 127, np.uint8), np.zeros((g, c, 1), np.uint8),
                    np.full((1, g), 127, np.uint8), np.full((m * 2, 1), 7, np.float32))
    elements = m * 2 * g * gs
    assert "decoded lhs" in message and str(elements) in message and str(8 * elements) in message


@intent.kernel
def runtime_extents(y: I.Out[I.f32, ("N",)], a: I.i64, b: I.u64, c: I.index):
    d = I.domain(a, I.cast(b, I.index))
    t = I.full((c, 2), 1.0, I.f32)
    buf = I.buffer((c,), I.f32, init=2.0)
    total = I.cast(I.reduce.sum(I.indices(d), axis=0), I.f32) + I.reduce.sum(t, axis=(0, 1))
    y[I.domain(0, y.shape[0])] = I.full((y.shape[0],), 0.0, I.f32) + total + buf[I.domain(0, 1)][0]


_WIDE = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=120)
@given(a=_WIDE | st.integers(-8, 8), b=st.integers(0, 2**64 - 1) | st.integers(0, 8),
       c=_WIDE | st.integers(0, 8))
def test_runtime_extents_of_any_size_run_or_are_value_errors(a, b, c):
    """Every domain bound, full shape and buffer extent: the call runs, or is refused with a ValueError and
    the output untouched; never MemoryError, OverflowError or NumPy's own size errors."""
    import os

    old = os.environ.get("INTENT_TRACE_MAX_ALLOCATION")
    os.environ["INTENT_TRACE_MAX_ALLOCATION"] = str(LIMIT)
    try:
        y = np.full(2, 7, np.float32)
        try:
            intent.compile(runtime_extents, target="generic")(y, a, b, c)
        except ValueError as e:
            assert not isinstance(e, MemoryError) and np.all(y == 7), e
            assert any(w in str(e) for w in ("needs", "index", "negative", "step")), e
        except IndexError as e:  # c == 0: the buffer has no element 0 to read
            assert c == 0 and "outside its extent 0" in str(e) and np.all(y == 7), e
        else:
            assert 1 <= c <= LIMIT  # the buffer's first element was read, and t fit
    finally:
        if old is None:
            del os.environ["INTENT_TRACE_MAX_ALLOCATION"]
        else:
            os.environ["INTENT_TRACE_MAX_ALLOCATION"] = old
