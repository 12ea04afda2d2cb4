"""A view element's storage codec, shared by the rules that read and write views (the shared access rules through
``em.dialect``, memory's buffers and gathers, CUDA epilogues): defined with TileLang's dialect (:mod:`.dialect`).

A view whose values the target stores as another dtype (f16/bf16 as their uint16 bits, bool as uint8, u32 as
int32: ``view_storage``) is decoded where an element is read and encoded where one is written; both are helper
calls (:mod:`.scalar_rules`) or a cast.
"""
from __future__ import annotations

from .dialect import decode, encode

__all__ = ["decode", "encode"]
