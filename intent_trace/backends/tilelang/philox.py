"""The Random123 known-answer seam: a target's Philox4x32-10 block function run on arbitrary counter and key
words (kernels reach only counters with zero high words, :mod:`.random`)."""
from __future__ import annotations

from ... import types as T
from .target import compile_program
from .targets import target_named

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

    module = target_named(target)
    name = "it_philox4x32_10"
    source = module.extern_source(name, "philox4x32_10", (), T.i32, ("int64",))
    kernel = compile_program(_PROGRAM.format(prelude=module.prelude([source]), name=name), target)
    words = np.array([int(w) & 0xFFFFFFFF for w in (*ctr, *key)], np.int64)
    tensor = module.to_device(torch.from_numpy(words))
    kernel(tensor)
    module.synchronize()
    return tuple(int(w) for w in tensor.cpu().numpy()[:4])
