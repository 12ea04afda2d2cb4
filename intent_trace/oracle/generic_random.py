"""RNG: Philox4x32-10 bits and uniform floats (spec §17, numerics T8).

Generic rule, vectorised over the counter: every 32-bit word is held in a uint64 array, so each
Philox multiply ``M * c`` (both factors below 2**32) is exact and its high and low halves are a shift
and a mask. ``random_bits`` maps each counter to block ``counter // 4`` and word ``counter % 4``,
computes the block ``(lo32(block), hi32(block), 0, 0)`` under key ``(lo32(seed), hi32(seed))`` and
picks the word. A negative counter is a ``ValueError`` (T8: counters are non-negative).
``uniform`` has no rule of its own: it is ``shr``, ``cast`` and ``mul`` nodes.
"""
from __future__ import annotations

import numpy as np

from ..graph import ops
from ..graph.interpreter import rule_registrar

RULES: dict = {}
rule = rule_registrar(RULES)

ROUNDS = 10
M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # multipliers of c0 and c2
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)  # key bumps (Weyl sequence)
_MASK = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox4x32(ctr, key, rounds: int = ROUNDS) -> tuple:
    """Philox4x32-``rounds`` (Random123) of counter words ``ctr`` (4) under key words ``key`` (2).

    Each word is a uint32 value or an array of them (broadcast together); returns the four output
    words as uint32 arrays. The key is bumped before rounds 2..R."""
    c0, c1, c2, c3 = (np.asarray(c).astype(np.uint64) & _MASK for c in ctr)
    k0, k1 = (np.asarray(k).astype(np.uint64) & _MASK for k in key)
    for r in range(rounds):
        if r:
            k0 = (k0 + W0) & _MASK
            k1 = (k1 + W1) & _MASK
        p0 = M0 * c0
        p1 = M1 * c2
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ k0, p1 & _MASK, (p0 >> _32) ^ c3 ^ k1, p0 & _MASK
    shape = np.broadcast_shapes(*(np.shape(c) for c in (c0, c1, c2, c3)))
    return tuple(np.broadcast_to(c, shape).astype(np.uint32) for c in (c0, c1, c2, c3))


def philox4x32_10(ctr, key) -> tuple:
    """The T8 block function: Philox4x32-10 (the test seam for the Random123 known answers)."""
    return philox4x32(ctr, key, ROUNDS)


def counter_bits(seed, counter) -> np.ndarray:
    """T8 ``bits``: word ``counter % 4`` of Philox4x32-10(block ``counter // 4``) under ``seed``."""
    counter = np.asarray(counter)
    if counter.dtype.kind == "i" and counter.size and counter.min() < 0:
        bad = int(counter[counter < 0].reshape(-1)[0])
        raise ValueError(f"I.random.bits: counter {bad} is negative; Philox counters are non-negative (T8)")
    c = counter.astype(np.uint64)
    block, word = c >> np.uint64(2), c & np.uint64(3)
    s = np.uint64(seed)
    w0, w1, w2, w3 = philox4x32_10((block & _MASK, block >> _32, 0, 0), (s & _MASK, s >> _32))
    out = np.where(word == 0, w0, np.where(word == 1, w1, np.where(word == 2, w2, w3)))
    return np.asarray(out, dtype=np.uint32).reshape(counter.shape)


@rule(ops.random_bits)
def _random_bits(it, node, args):
    return counter_bits(args[0], args[1])
