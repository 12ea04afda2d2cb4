"""Host-side encoders and decoders for the formats the language computes with.

- MX (numerics T6): ``mx_quantize`` (codes and e8m0 scales for scaled_contract), ``mx_decode``.
- 2:4 structured sparsity (T7): ``pack_2to4_nibbles`` / ``unpack_2to4_nibbles`` (PTX metadata nibbles).
- GGML k-quants (quantization.md Q1): ``to_ggml_bytes`` / ``from_ggml_bytes``.

Each family lives in its own module (``_format_mx``, ``_format_sparse``, ``_format_kquants``); the names
here import them on first use.
"""
from __future__ import annotations

import importlib

_WHERE = {
    "mx_quantize": "_format_mx", "mx_decode": "_format_mx",
    "pack_2to4_nibbles": "_format_sparse", "unpack_2to4_nibbles": "_format_sparse",
    "to_ggml_bytes": "_format_kquants", "from_ggml_bytes": "_format_kquants",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"intent_trace.{module}"), name)


def __dir__():
    return sorted(_WHERE)
