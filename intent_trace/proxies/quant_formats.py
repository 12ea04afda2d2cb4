"""GGML k-quant format tokens (quantization.md Q1): ``I.quant.q8_k`` and ``I.quant.q4_k``.

A token is closed and immutable; it compares and hashes by name and prints as ``I.quant.q4_k`` in KIR
attributes. ``record_type(leading, blocks)`` gives the record of logical (unpacked) fields.
"""
from __future__ import annotations

from .. import types as T

QK_K = 256  # elements per super-block


class QuantFormat:
    """A closed GGML k-quant super-block format."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def __setattr__(self, attr, value):
        raise AttributeError(f"{self!r} is immutable")

    def __delattr__(self, attr):
        raise AttributeError(f"{self!r} is immutable")

    @property
    def block_size(self) -> int:
        return QK_K

    def field_shapes(self) -> tuple:
        """((name, dtype, per-block trailing shape), ...) in record order."""
        if self.name == "q8_k":
            return (("d", T.f32, ()), ("qs", T.i8, (QK_K,)), ("bsums", T.i16, (QK_K // 16,)))
        return (("d", T.f16, ()), ("dmin", T.f16, ()), ("scales", T.u8, (8,)), ("mins", T.u8, (8,)),
                ("q", T.u8, (QK_K,)))

    def record_type(self, leading: tuple, blocks) -> T.RecordType:
        return T.RecordType(tuple((n, T.TensorType(d, tuple(leading) + (blocks,) + tail))
                                  for n, d, tail in self.field_shapes()))

    def __eq__(self, other):
        return isinstance(other, QuantFormat) and self.name == other.name

    def __hash__(self):
        return hash(("QuantFormat", self.name))

    def __repr__(self) -> str:
        return f"I.quant.{self.name}"

    def __reduce__(self):
        return (_BY_NAME.__getitem__, (self.name,))


q8_k = QuantFormat("q8_k")
q4_k = QuantFormat("q4_k")
_BY_NAME = {"q8_k": q8_k, "q4_k": q4_k}

__all__ = ["q4_k", "q8_k", "QuantFormat", "QK_K"]
