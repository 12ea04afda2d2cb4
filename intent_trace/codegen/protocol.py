"""The emitter the shared rules (:mod:`.structural`, :mod:`.access`, :mod:`.control`, :mod:`.folds`,
:mod:`.pointwise`) are written against, and the part of it both code generators share (:class:`EmitterCore`).

An emitter is an :class:`~intent_trace.graph.interpreter.Interpreter` (``env``, ``run_region``, ``operand``) and a
:class:`~.writer.SourceWriter` (``fresh``, ``line``, ``assign``, ``block``, ``depth``) whose values are
:mod:`.values`; its ``dialect`` (:class:`.dialect.Dialect`) spells index text. Besides ``graph``, ``checks``,
``dim_names``, ``reads``/``aligned`` (the fusion analysis) and ``loop_stack`` (:mod:`.control`), the rules call:

- values: ``extent(e)``, ``shape(t)``, ``elem(value, idx)``, ``materialize(value, t)``, ``constant(value, dtype)``,
  ``scalar_op(node, dtype)`` (an elementwise op's spelling on operand expressions);
- checks: ``check(bad, check, *operands, **fields)`` (:mod:`.checks`), ``flag(condition)`` (a condition a block
  that leaves tests, evaluated once);
- loops: ``nest(shape, parallel)`` (a loop nest; ``parallel``: its iterations may run at once), ``in_loop()``
  (around a KIR loop's body), ``loop_frame(kind, names, t)``, ``leave_blocks(depth)`` (before a jump out of blocks),
  ``while_header()``, ``while_stop(condition)``;
- carries and branch results: ``mutable(t, init=None, scratch=True)``, ``current(names, t)``,
  ``store(names, value, t)``;
- view access: ``written_mask(view)``, ``race_read(var, view, shape, coords_at)``, ``race_write(var, view, element)``;
- folds: ``inlines(node)``, ``accumulators(types, inits)``, ``read_accumulators(accs)``,
  ``inline_combine(node, acc_t, lhs, rhs, captures, pos)``, ``result_array(shape, t)``, ``computed(value, t)``.

Each method's docstring in the cpu emitter (:class:`intent_trace.oracle.numba.base.EmitterBase`) and the TileLang
emitter (:class:`intent_trace.backends.tilelang.emitter.TileLangEmitter`) says what that target does and why.
"""
from __future__ import annotations

import contextlib
import functools

from .. import types as T
from ..graph.lowering import name_extents
from ..graph.values import Literal, Var
from ..schedule.prologue import prologue
from .values import Array, Lazy, Scalar


class EmitterCore:
    """What the emitters do alike: a literal is a constant scalar, a type's shape is its extents' expressions, a
    tensor value names the extents of its type, and a KIR loop is a frame of ``loop_stack`` while its body is
    emitted. A mixin of both emitters (before their SourceWriter and Interpreter bases)."""

    def elem(self, value, idx) -> str:
        """One element of a scalar or tensor value at index expressions ``idx`` (a lazy one: :meth:`lazy_elem`)."""
        if isinstance(value, Scalar):
            return value.expr
        if isinstance(value, Array):
            return f"{value.name}[{self.dialect.subscript(idx)}]"
        return self.lazy_elem(value, idx)

    @functools.cached_property
    def stated_extents(self) -> dict:
        """{value: kernel extent index} of the prologue's values stated equal to an extent (schedule.prologue)."""
        return prologue(self.graph).extents

    def literal(self, lit: Literal):
        return Scalar(self.constant(lit.value, lit.type.dtype))

    def shape(self, t) -> tuple:
        """A tensor type's extents as expressions."""
        return tuple(self.extent(e) for e in t.shape)

    def bind_dims(self, var: Var, value) -> None:
        """Name the symbolic extents of ``var``'s type by the extents of its value, where they have no name yet."""
        t = var.type
        if isinstance(t, T.TensorType) and isinstance(value, (Array, Lazy)):
            name_extents(self.dim_names, t.shape, value.shape)

    @contextlib.contextmanager
    def loop_frame(self, kind: str, names=(), t=None):
        """An enclosing KIR loop for ``break``/``continue``: its carries and the depth of its body's block."""
        self.loop_stack.append((kind, names, t, self.depth))
        try:
            yield
        finally:
            self.loop_stack.pop()
