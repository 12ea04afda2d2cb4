"""The shared elementwise rule (intent_trace.codegen.pointwise): an operand used twice by one op (``c * c``) is one
value, evaluated once per element, and the op gets the same bits as NumPy's on every target -- NaN payloads
included, where a product of a NaN with itself is that NaN quieted (T3)."""
import re

import numpy as np
import pytest
from conftest import bits_equal

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.numba import target as cpu_target


@intent.kernel
def centred_squares(x: I.In[I.f32, ("N",)], s: I.f32, y: I.Out[I.f32, ("N",)]):
    c = x[:] - s
    y[:] = c * c


@intent.kernel
def centred_square_sums(x: I.In[I.f32, ("M", "N")], s: I.f32, y: I.Out[I.f32, ("M",)]):
    c = x[:, :] - s
    y[:] = I.reduce.sum(c * c, axis=1)


def _payload_nans(n: int, rng) -> np.ndarray:
    """Finite values with NaNs of distinct payloads (quiet and signalling, both signs) at spread positions."""
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    payloads = np.array([0x7FC00001, 0xFFC12345, 0x7F800003, 0xFF8ABCDE], np.uint32)  # the last two signalling
    at = rng.choice(n, size=min(n, len(payloads)), replace=False)
    x[at] = payloads[: len(at)].view(np.float32)
    return x


@pytest.mark.parametrize("n", [1, 7, 64, 301])
def test_a_square_of_one_value_has_numpys_bits(run, n):
    x = _payload_nans(n, np.random.default_rng(n))
    s = np.float32(0.75)
    y = np.full(n, 5.0, np.float32)
    run(centred_squares, x, s, y)
    with np.errstate(invalid="ignore"):
        c = x - s
        want = c * c  # NumPy on x86: a NaN operand's payload, quieted
    assert bits_equal(y, want)


def test_the_operand_is_read_once_per_element_on_cpu():
    x = np.linspace(-2, 2, 300, dtype=np.float32).reshape(3, 100)
    y = np.empty(3, np.float32)
    exe = intent.compile(centred_square_sums, target="cpu")
    exe(x, np.float32(0.25), y)
    loops = [m.group(0) for m in re.finditer(r"for k\d+ in range\(64\):\n(?:\s{16,}.*\n)+", exe.source)]
    assert loops, exe.source
    for body in loops:  # one read of x, one subtraction, the square of the same name, no NaN select
        assert len(re.findall(r"arg0\[", body)) == 1 and body.count(" - ") == 1, body
        assert re.search(r"(t\d+) \* \1\b", body) and "!=" not in body, body
    c = x.astype(np.float64) - 0.25
    assert np.allclose(y, (c * c).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("threshold", [1 << 62, 0], ids=["serial", "parallel"])
def test_a_square_of_one_value_in_both_cpu_builds(monkeypatch, threshold):
    """The same bits from the serial build and the parallel one (the threshold lowered to 0 runs it)."""
    monkeypatch.setattr(cpu_target, "PARALLEL_THRESHOLD", threshold)
    x = _payload_nans(301, np.random.default_rng(11))
    s = np.float32(-1.25)
    y = np.full(301, 5.0, np.float32)
    exe = intent.compile(centred_squares, target="cpu")
    exe(x, s, y)
    if threshold == 0:
        assert exe.module.kernel_parallel.signatures  # the parallel build ran
    with np.errstate(invalid="ignore"):
        c = x - s
        want = c * c
    assert bits_equal(y, want)
