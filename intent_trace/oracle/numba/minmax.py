"""``min``/``max`` of two numbers for generated code and the runtime helpers, as instructions in the caller (issue
19: compile time).

Numba's builtin ``min``/``max`` are overloads whose implementation is a jitted function compiled afresh in every
process for every pair of argument types (never disk-cached): about 0.1 CPU s each, paid by the first kernel a
process compiles. These are intrinsics: a comparison and a select written into the caller, nothing compiled
apart. Same results as the builtins: both operands converted to their unified type, the first returned unless
the second is strictly smaller (larger), so a NaN first operand is returned as it is.
"""
from __future__ import annotations

import operator

from numba.core import types
from numba.extending import intrinsic


def _pick(op):
    def definition(typingctx, a, b):
        unified = typingctx.unify_types(types.unliteral(a), types.unliteral(b))
        if not isinstance(unified, (types.Integer, types.Float)):
            return None

        def codegen(context, builder, signature, args):
            x, y = (context.cast(builder, v, t, unified) for v, t in zip(args, signature.args))
            second = context.generic_compare(builder, op, (unified, unified), (y, x))
            return builder.select(second, y, x)

        return unified(a, b), codegen

    definition.__name__ = definition.__qualname__ = "min2" if op is operator.lt else "max2"
    return intrinsic(definition)


min2 = _pick(operator.lt)
max2 = _pick(operator.gt)
