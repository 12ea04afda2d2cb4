"""What the shared structural rules (:mod:`.structural`, :mod:`.access`, :mod:`.control`, :mod:`.folds`) need to
know about a target's spelling: a *dialect*, one frozen value per code generator (``NUMBA`` in
:mod:`intent_trace.oracle.numba.indexing`, ``TILELANG`` in :mod:`intent_trace.backends.tilelang.emitter`), held by
its emitter as ``em.dialect``.

Most fields build index text (int64 expressions) from index text. The few that take the emitter (``hold``,
``fresh_extent``, ``select``, ``decode``, ``encode``) may bind a local or register a helper; none opens a block.
What a rule *does* (which checks it makes, what it binds to a local, how it addresses an element) is written
once, in the rules, against these fields and the emitter's methods (:mod:`.protocol`).
"""
from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen(slots=True)
class Dialect:
    name: str
    zero: str  # the index 0, as a comparison's operand
    # A user's integer value (an operand of any integer dtype) as an index: ``np.int64(x)``, ``T.Cast('int64', x)``.
    index: Callable[[str], str]
    # An index expression as the target's int64, where the target types index text (identity on cpu, whose index
    # expressions are int64 already; TileLang casts: a bare literal is int32 there).
    as_index: Callable[[str], str]
    add: Callable[[str, str], str]
    mul: Callable[[str, str], str]
    floordiv: Callable[[str, str], str]
    mod: Callable[[str, str], str]
    nonneg: Callable[[str], str]  # max(0, x)
    where: Callable[[str, str, str], str]  # (condition, a, b): index text ``a if condition else b``
    serial: Callable[[str], str]  # the iterable of a serial loop over 0..n-1: ``range(n)``, ``T.serial(n)``
    # The member count of a domain (start, end, step), step checked positive where checks are on. Without checks
    # a TileLang domain whose step is not positive is empty; cpu leaves that case to T9.
    count: Callable[[str, str, str], str]
    # An index value an element computation uses (a view access's point coordinate, an element of I.indices): an
    # int64 local evaluated once in TileLang (TIR may evaluate an expression again at each use); on cpu the
    # expression itself, parenthesised where it is compound (an int64 copy of a prange index stops Numba
    # vectorising the loop).
    hold: Callable  # (em, expr, hint) -> index text
    # The extent a fresh (run-time) extent is known by after its negative-extent check: the value itself where a
    # failed check always leaves (cpu), or clamped at 0 where the kernel goes on without checks (TileLang).
    fresh_extent: Callable  # (em, name) -> name
    select: Callable  # (em, dtype, condition, a, b) -> the expression of `a if condition else b` in ``dtype``
    decode: Callable  # (em, view, expr) -> an element loaded from a view as the value computed with
    encode: Callable  # (em, view, expr) -> a computed value as the element a view stores
    subscript: Callable[[list], str]  # a view or buffer element's coordinates as the text inside ``[...]``
    # The written-element mask of a unique store (em.written_mask): how an element reads as marked, and the mark.
    marked: Callable[[str], str]
    mark: str
    # A unit domain over a kernel extent (``I.domain(0, x.shape[0])``) has that extent's name as its length, not a
    # clamped copy: TileLang then loops over the dynamic extent itself, whose bounds it reasons about.
    extent_lengths: bool = False

    def coordinate(self, start: str, step: str, i: str) -> str:
        """The member of a domain (``start``, ``step``) at position ``i``."""
        return self.add(start, self.mul(i, step))

    def operand(self, em, expr: str, hint: str) -> str:
        """A user's integer operand as an int64 local: an operand of a check and of later index arithmetic."""
        return em.assign(self.index(expr), hint)

    def product(self, shape) -> str:
        """The element count of extents ``shape`` (index text)."""
        out = "1"
        for s in shape:
            if s != "1":  # a unit axis multiplies by nothing: [M] and [M, 1] have one spelling, so no check
                out = self.mul(out, self.as_index(s))
        return self.as_index(out) if out == "1" else out
