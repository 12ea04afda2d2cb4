"""RNG: Philox4x32-10 bits and uniform floats (spec §17, numerics T8).

- ``I.random.bits(seed, counter)``: one ``random_bits`` node. ``seed`` is a u64 scalar (a traced
  ``I.u64`` value, or a Python int that becomes a u64 constant); ``counter`` is a non-negative integer
  scalar or tensor of any integer dtype (a Python int becomes an ``index`` constant). The result is u32
  with the counter's shape: word ``counter % 4`` of Philox4x32-10 with counter block ``counter // 4``
  and key ``(lo32(seed), hi32(seed))``. Pure: it reads no program, thread or parallel position.
- ``I.random.uniform(seed, counter, dtype=I.f32)``: ``(bits >> (32 - p)) * 2**-p`` with ``p`` the
  significand bits of ``dtype`` (f16 11, bf16 8, f32 24, f64 32), built from ``shr``, ``cast`` and a
  ``mul`` by an exact power-of-two literal, so it adds no canonical op. Every step is exact: the
  result is a multiple of ``2**-p`` in ``[0, 1)``.

Pure helpers traced into isolated regions (reduce/scan combines, region summarize/combine/apply/emit,
scatter combines) may not use the RNG (spec §7, §9): that is a TraceError naming the helper.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..graph import ops
from .build import as_dtype, binary, constant, convert
from .context import current, fail
from .values import Proxy, ScalarProxy, TensorProxy, ValueProxy, wrap

__all__ = ["bits", "uniform"]

# Significand bits of each float result dtype (T8); f64 takes all 32 bits of one Philox word.
SIGNIFICAND_BITS = {"f16": 11, "bf16": 8, "f32": 24, "f64": 32}


def _describe(x) -> str:
    return repr(x.type) if isinstance(x, Proxy) else f"{type(x).__name__} {x!r}"


def _seed(seed, who: str):
    if isinstance(seed, (bool, np.bool_)):
        fail(f"{who}: seed must be a u64 scalar, got the bool {seed!r}", "type")
    if isinstance(seed, (int, np.integer)):
        v = int(seed)
        if not 0 <= v <= T.u64.max:
            fail(f"{who}: seed {v} does not fit u64 (0..{T.u64.max})", "value")
        return constant(v, T.u64)._var
    if isinstance(seed, ScalarProxy):
        if seed.dtype is not T.u64:
            fail(f"{who}: seed must be a u64 scalar, got {seed.dtype}; declare the parameter as I.u64 or write "
                 f"I.cast(seed, I.u64) (T8: key = (lo32(seed), hi32(seed)))", "type")
        return seed._var
    if isinstance(seed, TensorProxy):
        fail(f"{who}: seed must be a u64 scalar, got the tensor {seed.type!r}; one seed keys the whole stream, "
             f"vary the counter instead", "type")
    fail(f"{who}: seed must be a u64 scalar or a Python int, got {_describe(seed)}", "type")


def _counter(counter, who: str):
    if isinstance(counter, (bool, np.bool_)):
        fail(f"{who}: counter must be an integer, got the bool {counter!r}", "type")
    if isinstance(counter, (int, np.integer)):
        v = int(counter)
        if v < 0:
            fail(f"{who}: counter {v} is negative; Philox counters are non-negative (T8)", "value")
        if v > T.u64.max:
            fail(f"{who}: counter {v} does not fit u64", "value")
        return constant(v, T.index if v <= T.index.max else T.u64)._var
    if isinstance(counter, ValueProxy):
        if not counter.dtype.is_int:
            fail(f"{who}: counter must have an integer dtype, got {counter.dtype}; counters are logical element "
                 f"numbers (for example I.indices(domain) or a domain point)", "type")
        return counter._var
    fail(f"{who}: counter must be a non-negative integer scalar or tensor, got {_describe(counter)}", "type")


def _check_not_in_pure_helper(who: str) -> None:
    isolated = current().scope.isolated_by
    if isolated is not None:
        fail(f"{isolated[1]} must be pure, but it calls {who}; pure helpers may not use the RNG (spec §7, §9): "
             f"draw the random values outside and pass them in", "value")


def bits(seed, counter):
    """Philox4x32-10 bits: u32 word ``counter % 4`` of block ``counter // 4`` under key ``seed`` (T8)."""
    who = "I.random.bits"
    _check_not_in_pure_helper(who)
    seed_v = _seed(seed, who)
    counter_v = _counter(counter, who)
    (out,) = current().emit(ops.random_bits, (seed_v, counter_v))
    return wrap(out)


def uniform(seed, counter, dtype=T.f32):
    """``(bits(seed, counter) >> (32 - p)) * 2**-p`` in ``dtype``: exact, in ``[0, 1)`` (T8)."""
    who = "I.random.uniform"
    dtype = as_dtype(dtype, f"{who} dtype")
    p = SIGNIFICAND_BITS.get(dtype.name)
    if p is None:
        fail(f"{who}: dtype must be one of f16, bf16, f32, f64, got {dtype}", "type")
    _check_not_in_pure_helper(who)
    w = bits(seed, counter)
    if p < 32:
        w = binary("shr", w, 32 - p)
    return binary("mul", convert("cast", w, dtype), 2.0 ** -p)
