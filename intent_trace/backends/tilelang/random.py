"""TileLang rule for ``random_bits`` (spec §17, numerics T8): Philox4x32-10, as generic computes it.

``random_bits`` is elementwise in its counter: each element is one call of the helper ``random_bits``
(seed u64, counter u64) -> u32, whose body (:mod:`.c`) splits the counter into block ``counter // 4`` and
word ``counter % 4`` and runs the ten Philox rounds on 32-bit words (the high half of each 64-bit
product, the key bumped by the Weyl constants before rounds 2..10). A counter of a signed dtype is
checked first: a negative one is generic's ``ValueError``. ``uniform`` has no rule of its own: it is
``shr``, ``cast`` and ``mul`` nodes.

:func:`philox4x32_10` runs the target's block function on arbitrary counter and key words (kernels reach
only counters with zero high words), the seam for the Random123 known-answer vectors.
"""
from __future__ import annotations

from ... import types as T
from .emitter import Lazy, Scalar, rule
from .scalar_rules import call, cast_expr


@rule("random_bits")
def _random_bits(em, node, args):
    seed, counter = args
    t = node.inputs[1].type
    d = t.dtype
    em.tir(T.u64)

    def bits(x: str) -> str:
        if d.kind == "int":
            em.check(call(em, "lt", (d,), T.bool_, (d, d), x, em.constant(0, d)), ValueError,
                     "I.random.bits: counter {0} is negative; Philox counters are non-negative (T8)",
                     f"T.Cast('int64', {x})")
        c = cast_expr(em, d, T.u64, x)
        return em.assign(call(em, "random_bits", (T.u64,), T.u32, (T.u64, T.u64), seed.expr, c), "t")

    if isinstance(t, T.ScalarType):
        return Scalar(bits(counter.expr))
    return Lazy(em.shape(t), lambda idx: bits(em.elem(counter, idx)))


# --- the block function (test seam) ---------------------------------------------------------------------

_PROGRAM = '''import tilelang.cpu.language as T

PRELUDE = {prelude!r}


@T.prim_func
def kernel(p0: T.Tensor((6,), 'int64')):
    with T.Kernel(1, prelude=PRELUDE) as _:
        T.evaluate(T.call_extern('int32', {name!r}, T.address_of(p0[0])))
'''


def philox4x32_10(ctr, key, target: str = "tilelang-c") -> tuple:
    """Philox4x32-10 of counter words ``ctr`` (4) under key words ``key`` (2), computed by ``target``'s helper;
    returns the four output words as ints."""
    import numpy as np
    import torch

    from .target import _target_module, compile_program

    module = _target_module(target)
    name = "it_philox4x32_10"
    source = module.extern_source(name, "philox4x32_10", (), T.i32, ("int64",))
    kernel = compile_program(_PROGRAM.format(prelude=module.prelude([source]), name=name), target)
    words = np.array([int(w) & 0xFFFFFFFF for w in (*ctr, *key)], np.int64)
    tensor = module.to_device(torch.from_numpy(words))
    kernel(tensor)
    module.synchronize()
    return tuple(int(w) for w in tensor.cpu().numpy()[:4])
