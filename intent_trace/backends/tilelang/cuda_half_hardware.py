"""CUDA's hardware conversions between f32 and f16/bf16, spelled once.

Several helper tables write a conversion as the hardware instruction alone (round to nearest even, a NaN made the
hardware's canonical one) where no NaN can reach it or where its NaN case is decided around it: the row program's
and the tile program's fast bodies (:mod:`.cuda_rows_nan`, :mod:`.cuda_region_tiles`), the matmul epilogue's
rounded store (:mod:`.cuda_epilogue_helpers`), the serial helpers' conversions with their NaN case as bits
(:mod:`.cuda`). Each writes its own body around these spellings (its NaN case or none, its signature); the
intrinsics' names, the header that declares them and the format's infinity stand here, so a format is added or
respelled in one place. The module imports nothing of the package: every CUDA helper table may use it.
"""
from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class Hardware:
    """One format's conversion intrinsics (CUDA's ``cuda_fp16.h`` / ``cuda_bf16.h``) and the expressions built of
    them; each expression's operand ``x`` is C source (an f32 value, or the format's 16 bits for :meth:`decoded`)."""

    header: str  # the CUDA header that declares the format's type and intrinsics
    from_f32: str  # f32 to the format, rounded to nearest even (a NaN becomes the canonical NaN)
    to_f32: str  # the format to f32 (exact; a NaN's payload is not kept)
    to_bits: str  # the format's value as its 16 bits (unsigned short)
    from_bits: str  # 16 bits as the format's value
    infinity_bits: str  # the format's +infinity as a C literal: bits above it, the sign cleared, are a NaN

    @property
    def include(self) -> str:
        """The ``#include`` line a helper that uses the intrinsics starts with (a prelude precedes TileLang's own
        includes, so each helper names its header)."""
        return f"#include <{self.header}>\n"

    def rounded(self, x: str) -> str:
        """f32 ``x`` rounded to the format and widened back to f32 (a cast to the format, held as f32)."""
        return f"{self.to_f32}({self.from_f32}({x}))"

    def encoded(self, x: str) -> str:
        """f32 ``x`` rounded to the format, as its 16 bits (a store's encode)."""
        return f"{self.to_bits}({self.from_f32}({x}))"

    def decoded(self, x: str) -> str:
        """The format's 16 bits ``x`` widened to f32 (a load's decode)."""
        return f"{self.to_f32}({self.from_bits}({x}))"


#: the hardware conversions of each 16-bit float format, by dtype name
HARDWARE = {"f16": Hardware("cuda_fp16.h", "__float2half_rn", "__half2float", "__half_as_ushort", "__ushort_as_half",
                            "0x7c00u"),
            "bf16": Hardware("cuda_bf16.h", "__float2bfloat16_rn", "__bfloat162float", "__bfloat16_as_ushort",
                             "__ushort_as_bfloat16", "0x7f80u")}
