"""A GPU's f16/bf16 add and mul return the hardware's canonical NaN (0x7FFF in both formats) where T3 wants the first
NaN operand, quieted (x86, the oracle's machine): what CUDA did before the seventh session (README, "Branch-free
element code on CUDA"). ``intent.verify`` must catch that fault, also where it hits one element, and let the right
results through on every target. The oracle's own bits are held to hand-derived ones first, so the verifier is
not checked against a reference that makes the same mistake.
"""
import itertools

import numpy as np
import pytest
from nan_formats import FORMATS, quiet

import intent_trace as intent
from intent_trace import I
from intent_trace.oracle.verification.kernel_policy import EXACT_ID

from .planting import planted

CANONICAL = 0x7FFF  # NVIDIA's f16 and bf16 NaN
DEFAULT = {"f16": 0xFE00, "bf16": 0xFFC0}  # x86's default NaN 0xFFC00000 (an invalid operation), rounded
OPS = {"add": (lambda a, b: a + b), "mul": (lambda a, b: a * b)}


def _kernel(op: str, name: str):
    dt, value = getattr(I, name), OPS[op]

    def body(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        d = I.domain(0, y.shape[0])
        y[d] = value(a[d], b[d])

    body.__name__ = body.__qualname__ = f"{op}_{name}"
    return intent.kernel(body)


KERNELS = {(op, name): _kernel(op, name) for op in OPS for name in ("f16", "bf16")}


def _case(op: str, name: str):
    """(a, b, hand-derived result words): every pair over {1.5, 0, +-inf, four NaNs}, twice, then 15 pairs more
    (a length of 113: a remainder at every vector width), each pair of distinct NaNs in both orders."""
    unsigned, _, nans = FORMATS[name]
    np_dtype = getattr(I, name).np
    finite = [int(np.array(x, np_dtype).view(unsigned)) for x in (1.5, 0.0, np.inf, -np.inf)]
    pairs = list(itertools.product(finite + nans, repeat=2))
    pairs = pairs * 2 + pairs[:15]
    a, b = (np.array([p[i] for p in pairs], unsigned) for i in (0, 1))
    want = []
    for x, y in pairs:
        if x in nans or y in nans:
            want.append(quiet(name, x if x in nans else y))  # T3: the first NaN operand, quieted
            continue
        with np.errstate(invalid="ignore"):
            exact = OPS[op](*(float(np.array([w], unsigned).view(np_dtype)[0]) for w in (x, y)))
        # inf - inf, 0 * inf: the default NaN; every other result here is exact in the format
        want.append(DEFAULT[name] if np.isnan(exact) else int(np.array(exact, np_dtype).view(unsigned)))
    return a.view(np_dtype), b.view(np_dtype), np.array(want, unsigned)


def _canonical(where):
    """A fault: the real kernel runs, then the NaN results that ``where(mask)`` keeps become the canonical NaN."""
    def fault(run, kernel, args):
        run()
        y = args[-1]
        nan = np.isnan(y.astype(np.float32))
        y.view(np.uint16)[where(nan)] = CANONICAL
    return fault


def _last(nan):
    one = np.zeros_like(nan)
    one[np.flatnonzero(nan)[-1]] = True  # the last NaN result: in the remainder
    return one


@pytest.mark.parametrize("op, name", KERNELS)
def test_the_oracle_gives_the_first_nan_operand(op, name):
    a, b, want = _case(op, name)
    y = np.zeros_like(a)
    intent.compile(KERNELS[op, name], target="cpu")(a, b, y)
    assert [hex(w) for w in y.view(np.uint16)] == [hex(w) for w in want]


@pytest.mark.parametrize("op, name", KERNELS)
def test_right_nans_pass_on_every_target(target, op, name):
    a, b, want = _case(op, name)
    result = intent.verify(KERNELS[op, name], target, a, b, np.zeros_like(a))
    assert result.passed, str(result)
    assert result.outputs[0].policy.policy_id == EXACT_ID  # payloads held bit for bit


@pytest.mark.parametrize("where", [lambda nan: nan, _last], ids=["every", "last"])
@pytest.mark.parametrize("op, name", KERNELS)
def test_the_hardware_s_canonical_nan_fails(monkeypatch, op, name, where):
    a, b, want = _case(op, name)
    mask = where(np.isnan(want.view(getattr(I, name).np).astype(np.float32)))
    with planted(monkeypatch, "generic", _canonical(where)):
        result = intent.verify(KERNELS[op, name], "generic", a, b, np.zeros_like(a))
    assert not result.passed
    comparison = result.outputs[0].comparison
    assert comparison.mismatches == comparison.nan_payload_mismatches == int(mask.sum()) > 0
