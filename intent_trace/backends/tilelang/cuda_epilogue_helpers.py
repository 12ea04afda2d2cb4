"""The tensor-core matmul's fused epilogue on CUDA: its own bodies of two helpers, the serial program's bits.

The epilogue (:mod:`.cuda_epilogue`) runs the shared emitter's element code once per accumulator, 128 a thread in a
rolled loop, so what a helper costs per element is what the epilogue costs. Two of the shared bodies (:mod:`.cuda`)
cost more than they must there (SASS of matmul + bias + ReLU, 4096^3 f16, sm_90a: the loop's common path over 8
elements was 245 instructions with 9 branch regions; with these bodies 167 and 1, the NaN recomputation's):

- ``it_max_f32`` / ``it_min_f32`` (and the f16/bf16 forms, held as floats) are the C body's early returns; nvcc made
  each a branch region (``BSSY``/``BSYNC`` and a branch per element, 8 per pass). Here they are the same decisions
  as selects (:func:`minmax_body`). They stay early returns in the shared table: there the select form made the
  f32 flash-attention fold spill (2436 bytes a thread against 1744), so only the epilogue's programs take it.
- A written ``cast(x, f16)`` of an f32 value is rounded twice: the cast rounds to f16 and widens back to f32 (the
  value the graph holds), the store's encode rounds that again to the f16 bits (``F2FP``, ``HADD2.F32``, ``F2FP``
  and both NaN selects per element). Rounding to nearest even twice gives the once-rounded value, so the store is
  one helper, ``cast_encode`` (:func:`cast_encode_source`): the hardware's rounding for every value but a NaN, whose
  bits are the C bodies' cast then encode, written out (:data:`NAN_CAST_ENCODE`).

:func:`epilogue_target` is the CUDA target with these bodies (the C target's emulation of the program takes the
same selects, and the C bodies' cast then encode); :func:`rounded_store` finds the cast a store may take over.
"""
from __future__ import annotations

import functools

import attrs

from ... import types as DT
from ...graph import ops
from . import c, cuda
from .cuda_half_hardware import HARDWARE

#: the helper family of a store that rounds an f32 value to f16/bf16 and encodes its bits in one step
CAST_ENCODE = "cast_encode"

#: value dtypes the CUDA helpers hold as ``float`` (f16/bf16 are computed in f32 and rounded by their casts)
_HELD_AS_FLOAT = ("f32", "f16", "bf16")

#: an f32 NaN's bits after the C bodies' cast to the format (quieted, the payload's top bits kept: f16 nine below the
#: quiet bit, bf16 none) and their encode: f16 ``sign | 0x7e00 | payload[21:13]``, bf16 ``sign | 0x7fc0``
NAN_CAST_ENCODE = {"f16": "(uint16_t)(((itb_bits32(a) >> 16) & 0x8000u) | 0x7e00u | ((itb_bits32(a) >> 13) & 0x1ffu))",
                   "bf16": "(uint16_t)(((itb_bits32(a) >> 16) & 0x8000u) | 0x7fc0u)"}


def minmax_body(is_max: bool) -> str:
    """IEEE 754-2019 maximum/minimum as the C body decides it (the first NaN operand wins, -0 < +0), in selects: one
    select a rule, the first rule last (a chained ``?:`` became the same branch region as the early returns)."""
    zero, cmp = ("b : a", ">") if is_max else ("a : b", "<")
    return (f"float r = a {cmp} b ? a : b; r = a == 0 && b == 0 ? ((itb_bits32(a) >> 31) ? {zero}) : r; "
            f"r = b != b ? b : r; return a != a ? a : r;")


def cast_encode_source(name: str, narrow: str) -> str:
    """The f16/bf16 bits of an f32 value rounded once to nearest even: the hardware's rounding, a NaN's bits as the C
    bodies' cast and encode give them."""
    hw = HARDWARE[narrow]
    return (f"{hw.include}{cuda.DEVICE.function} uint16_t {name}(float a) {{ "
            f"return a != a ? {NAN_CAST_ENCODE[narrow]} : {hw.encoded('a')}; }}")


def _helper_source(shared, hardware: bool, name: str, family: str, dtypes: tuple, ret, args: tuple) -> str | None:
    if family in ("max", "min") and ret.name in _HELD_AS_FLOAT and dtypes == (ret,):
        definition = shared(name, family, dtypes, ret, args)  # its spelling and signature, the body replaced
        return definition[:definition.index("{")] + f"{{ {minmax_body(family == 'max')} }}"
    if family == CAST_ENCODE and dtypes[0] == DT.f32 and dtypes[-1].name in HARDWARE:
        narrow = dtypes[-1].name
        if hardware:
            return cast_encode_source(name, narrow)
        # the C target (the CUDA program emulated): the C bodies' cast, then their encode
        return (f"{c.C_SPELLING.function} uint16_t {name}(float a) {{ "
                f"return itb_{narrow}_encode(itb_d{narrow}((double)a)); }}")
    return shared(name, family, dtypes, ret, args)


def epilogue_target(target):
    """``target`` with the epilogue's bodies of max/min and the ``cast_encode`` family: CUDA's, or on the C target
    (the CUDA program emulated, :func:`.cuda_matmul.emulated`) the same selects and the C bodies' rounding."""
    helpers = functools.partial(_helper_source, target.helper_source, target.name == cuda.NAME)
    return attrs.evolve(target, helper_source=helpers)


def rounded_store(graph, written, out_dtype):
    """The f32 value whose cast to ``out_dtype`` (f16/bf16) is ``written``, the stored value, when the store may round
    it itself (the cast's result has no use but the write); else None."""
    if out_dtype.name not in HARDWARE:
        return None
    node = next((n for n in graph.body.nodes if written in n.outputs), None)
    if (node is None or node.op is not ops.cast or node.inputs[0].type.dtype != DT.f32
            or node.attr("dtype") != out_dtype):
        return None
    uses = [n for n in graph.body.nodes if written in n.inputs]
    return node.inputs[0] if len(uses) == 1 and uses[0].op is ops.write else None
