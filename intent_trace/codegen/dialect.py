"""What the shared structural rules (:mod:`.structural`) need to know about a target's spelling: a *dialect*, one
frozen value per code generator (``NUMBA`` in :mod:`intent_trace.oracle.numba.indexing`, ``TILELANG`` in
:mod:`intent_trace.backends.tilelang.emitter`), held by its emitter as ``em.dialect``.

Everything here builds index text (int64 expressions) from index text; nothing emits statements except
``hold``, ``fresh_extent`` and ``select``, which take the emitter. The rules themselves (what is checked, what
is bound to a local, how an element is addressed) are written once, against these functions.
"""
from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen(slots=True)
class Dialect:
    name: str
    zero: str  # the index 0
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
    # An index operand of a check and of later arithmetic: bound to a local (``em.assign``) where the target must
    # evaluate it once (TileLang may re-evaluate an expression per use), else used as it is.
    hold: Callable  # (em, expr, hint) -> expr
    # The extent a fresh (run-time) extent is known by after its negative-extent check: the value itself where a
    # failed check always leaves (cpu), or clamped at 0 where the kernel goes on without checks (TileLang).
    fresh_extent: Callable  # (em, name) -> name
    select: Callable  # (em, dtype, condition, a, b) -> the expression of `a if condition else b` in ``dtype``

    def coordinate(self, start: str, step: str, i: str) -> str:
        """The member of a domain (``start``, ``step``) at position ``i``."""
        return self.add(start, self.mul(i, step))

    def operand(self, em, expr: str, hint: str) -> str:
        """A user's integer operand as an index, held (``hold``)."""
        return self.hold(em, self.index(expr), hint)

    def product(self, shape) -> str:
        """The element count of extents ``shape`` (index text)."""
        out = "1"
        for s in shape:
            out = self.mul(out, self.as_index(s))
        return self.as_index(out) if out == "1" else out
