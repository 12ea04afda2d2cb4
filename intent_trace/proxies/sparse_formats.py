"""Structured-sparsity schemas (spec §12, numerics T7): ``I.sparse.two_of_four()``, ``I.sparse.one_of_two()``.

A schema is closed and immutable: a group size along the compression axis, a count of kept values per
group, and the metadata rule (per kept value its position 0..group-1, strictly increasing within a group).
The compressed extent along K is K * kept / group. Schemas compare and hash by value and print as
``I.sparse.two_of_four()`` in KIR attributes.
"""
from __future__ import annotations


class SparseFormat:
    """A closed structured-sparsity schema (frozen: group size, kept per group)."""

    __slots__ = ("name", "group", "keep")

    def __init__(self, name: str, group: int, keep: int):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "keep", keep)

    def __setattr__(self, attr, value):
        raise AttributeError(f"{self!r} is immutable")

    def __delattr__(self, attr):
        raise AttributeError(f"{self!r} is immutable")

    @property
    def group_size(self) -> int:
        return self.group

    @property
    def kept(self) -> int:
        return self.keep

    def compressed_extent(self, k: int) -> int:
        return k // self.group * self.keep

    def __eq__(self, other):
        return isinstance(other, SparseFormat) and (self.name, self.group, self.keep) == \
            (other.name, other.group, other.keep)

    def __hash__(self):
        return hash(("SparseFormat", self.name, self.group, self.keep))

    def __repr__(self) -> str:
        return f"I.sparse.{self.name}()"

    def __reduce__(self):
        return (_by_name, (self.name,))


_TWO_OF_FOUR = SparseFormat("two_of_four", 4, 2)
_ONE_OF_TWO = SparseFormat("one_of_two", 2, 1)
_BY_NAME = {"two_of_four": _TWO_OF_FOUR, "one_of_two": _ONE_OF_TWO}


def _by_name(name: str) -> SparseFormat:
    return _BY_NAME[name]


def two_of_four() -> SparseFormat:
    """2:4 sparsity: groups of 4 along K, 2 kept (compressed extent K/2), positions 0..3 increasing."""
    return _TWO_OF_FOUR


def one_of_two() -> SparseFormat:
    """1:2 sparsity: groups of 2 along K, 1 kept (compressed extent K/2), positions 0..1."""
    return _ONE_OF_TWO


__all__ = ["two_of_four", "one_of_two", "SparseFormat"]
