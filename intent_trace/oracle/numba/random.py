"""RNG: Philox4x32-10 bits and uniform floats (spec §17, numerics T8).

Numba rule: ``random_bits`` is a fused element expression. Generated modules import only the
runtime ``R``, so the Philox block is emitted inline as plain statements (:func:`emit_philox`): the
key words are computed once at the node, and per element the counter becomes block ``counter // 4``
and word ``counter % 4``, the block runs ten rounds in a ``range(10)`` loop on uint64 locals (every
32-bit word in a uint64, so ``M * c`` is exact and its halves are a shift and a mask; all constants
are module-level ``np.uint64`` values, so no mixed signed/unsigned arithmetic is ever typed), and a
conditional expression picks the word. With checks on, a negative counter of a signed dtype is a
``ValueError``. ``uniform`` has no rule of its own: it is ``shr``, ``cast`` and ``mul`` nodes.

:func:`philox4x32_10` compiles the same emitted statements into a standalone function, the test
seam for the Random123 known-answer vectors (counters with non-zero high words included).
"""
from __future__ import annotations

from ... import types as T
from ...codegen.writer import SourceWriter
from ...graph import ops
from ...graph.interpreter import rule_registrar
from ...graph.lowering import ErrorSite
from .values import Lazy, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

ROUNDS = 10
M0, M1 = 0xD2511F53, 0xCD9E8D57  # multipliers of c0 and c2
W0, W1 = 0x9E3779B9, 0xBB67AE85  # key bumps (Weyl sequence)
MASK32 = 0xFFFFFFFF


def emit_philox(out, ctr: tuple, key: tuple, const) -> tuple:
    """Statements computing Philox4x32-10 of the uint64 expressions ``ctr`` (4 words) and ``key`` (2).

    ``out`` has ``assign(expr, prefix)``, ``line(text)``, ``block(header)`` and ``fresh(prefix)`` (the
    emitter's interface); ``const(value)`` names a uint64 constant. Returns the four uint64 locals
    holding the output words. Round r uses the key bumped r - 1 times (bumped after each round)."""
    c = [out.assign(f"np.uint64({x})", "r") for x in ctr]
    k = [out.assign(f"np.uint64({x})", "r") for x in key]
    mask, shift = const(MASK32), const(32)
    with out.block(f"for {out.fresh('n')} in range({ROUNDS}):"):
        p0, p1 = out.fresh("p"), out.fresh("p")
        out.line(f"{p0} = {const(M0)} * {c[0]}")
        out.line(f"{p1} = {const(M1)} * {c[2]}")
        out.line(f"{c[0]}, {c[1]}, {c[2]}, {c[3]} = ({p1} >> {shift}) ^ {c[1]} ^ {k[0]}, {p1} & {mask}, "
                 f"({p0} >> {shift}) ^ {c[3]} ^ {k[1]}, {p0} & {mask}")
        out.line(f"{k[0]} = ({k[0]} + {const(W0)}) & {mask}")
        out.line(f"{k[1]} = ({k[1]} + {const(W1)}) & {mask}")
    return tuple(c)


@rule(ops.random_bits)
def _random_bits(em, node, args):
    seed, counter = args
    counter_t = node.inputs[1].type
    signed = counter_t.dtype.kind == "int"

    def const(v):
        return em.constant(v, T.u64)

    s = em.assign(f"np.uint64({seed.expr})", "s")
    key = (em.assign(f"{s} & {const(MASK32)}", "s"), em.assign(f"{s} >> {const(32)}", "s"))

    def word(x: str) -> str:
        if signed:
            x = em.assign(f"np.int64({x})", "x")
            em.check(f"{x} < 0", ErrorSite(ValueError, "I.random.bits: counter {0} is negative; Philox counters "
                                                       "are non-negative (T8)"), x)
        u = em.assign(f"np.uint64({x})", "x")
        block = em.assign(f"{u} >> {const(2)}", "x")
        c0, c1, c2, c3 = emit_philox(em, (f"{block} & {const(MASK32)}", f"{block} >> {const(32)}", const(0),
                                          const(0)), key, const)
        w = em.assign(f"{u} & {const(3)}", "x")
        return em.assign(f"np.uint32({c0} if {w} == {const(0)} else ({c1} if {w} == {const(1)} else "
                         f"({c2} if {w} == {const(2)} else {c3})))", "t")

    if isinstance(counter_t, T.ScalarType):
        return Scalar(word(counter.expr))
    shape = tuple(em.extent(e) for e in counter_t.shape)
    return Lazy(shape, lambda idx: word(em.elem(counter, idx)))


# --- the standalone block function (test seam) ----------------------------------------------------

class _Writer(SourceWriter):
    """The emitter's statement interface with its own integer constants, for the standalone block."""

    def __init__(self):
        super().__init__()
        self.constants: dict = {}

    def const(self, value: int) -> str:
        name = f"K{value:x}"
        self.constants[name] = value
        return name


_BLOCK = None


def _block_function():
    global _BLOCK
    if _BLOCK is None:
        import numpy as np
        from numba import njit

        w = _Writer()
        out = emit_philox(w, ("c0", "c1", "c2", "c3"), ("k0", "k1"), w.const)
        source = "\n".join(["def philox4x32_10_block(c0, c1, c2, c3, k0, k1):", *w.lines,
                            f"    return ({', '.join(out)})", ""])
        namespace = {"np": np, **{n: np.uint64(v) for n, v in w.constants.items()}}
        exec(compile(source, "<philox4x32_10_block>", "exec"), namespace)
        _BLOCK = njit(error_model="numpy", nogil=True)(namespace["philox4x32_10_block"])
    return _BLOCK


def philox4x32_10(ctr, key) -> tuple:
    """Philox4x32-10 of the counter words ``ctr`` (4) under the key words ``key`` (2), each a uint32
    value, run through the statements the cpu rule emits; returns the four output words as ints."""
    import numpy as np

    words = [np.uint64(int(x) & MASK32) for x in (*ctr, *key)]
    return tuple(int(x) for x in _block_function()(*words))
