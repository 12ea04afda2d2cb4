"""Constexprs at call time: ``kernel(a, b, c, ACTIVATION="relu")`` and ``exe(a, b, c, ACTIVATION="relu")``.

A constexpr selects what is traced, so a call that names one runs the executable traced and built for that value:
the *specialisation* of (kernel, target, target options, constexpr values). Each is built once and cached on the
kernel, so calling again with the same values reaches the same executable object without tracing again.

Every executable that ``intent.compile`` (or a direct call) builds is recorded here, weakly, with what it was built
from; an executable's ``__call__`` given keywords asks :func:`respecialize` for its sibling with those values (the
values it was built with filling the rest) and delegates the runtime arguments to it. ``intent.compile`` of a
kernel with a constexpr that has no value yet (neither given nor defaulted) returns a :class:`Deferred`
executable, which needs that keyword at every call: a call without it is the same TypeError a trace without it is.
"""
from __future__ import annotations

import weakref

import attrs

from .targets import builder_for


@attrs.frozen(slots=True)
class Built:
    """What an executable was built from: its kernel, target, constexpr values (bound, in order) and options."""

    kernel: object
    target: str
    constexprs: tuple
    options: tuple  # (name, value) pairs, sorted


_BUILT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _options_key(options: dict) -> tuple:
    return tuple(sorted(options.items()))


def build(kernel, target: str, bound: tuple, options: dict):
    """A new executable of ``kernel`` traced with the ``bound`` constexprs, recorded for :func:`respecialize`."""
    exe = builder_for(target)(kernel.trace(**dict(bound)), **options)
    try:
        _BUILT.setdefault(exe, Built(kernel, target, bound, _options_key(options)))
    except TypeError:  # an executable that cannot be weakly referenced takes no keywords later
        pass
    return exe


def specialization(kernel, target: str, constexprs: dict, options: dict):
    """The cached executable of ``kernel`` on ``target`` for these constexpr values (defaults filling the rest)
    and target options: built on first use, the same object afterwards."""
    bound = kernel.bind_constexprs(constexprs)
    key = (target, bound, _options_key(options))
    exe = kernel._compiled.get(key)
    if exe is None:
        with kernel._lock:
            exe = kernel._compiled.get(key)
            if exe is None:
                exe = build(kernel, target, bound, options)
                kernel._compiled[key] = exe
    return exe


def respecialize(exe, constexprs: dict):
    """``exe``'s specialisation with the keyword ``constexprs`` replacing the values it was built with."""
    built = _BUILT.get(exe) if not isinstance(exe, Deferred) else exe.built
    if built is None:
        raise TypeError(f"{exe!r} takes runtime arguments only (it was not built from an @intent.kernel by "
                        f"intent.compile), got keywords {', '.join(sorted(constexprs))}")
    merged = {**dict(built.constexprs), **constexprs}
    if not isinstance(exe, Deferred) and built.kernel.bind_constexprs(merged) == built.constexprs:
        return exe  # the values it was built with
    return specialization(built.kernel, built.target, merged, dict(built.options))


def compile_or_defer(kernel, target: str, constexprs: dict, options: dict):
    """``intent.compile``'s executable: built now when every constexpr has a value, else a :class:`Deferred`."""
    kernel.check_constexprs(constexprs)  # unknown names and wrong types fail here, at compile time
    if kernel.missing_constexprs(constexprs):
        builder_for(target)  # an unknown target fails here too
        return Deferred(Built(kernel, target, tuple(sorted(constexprs.items())), _options_key(options)))
    return build(kernel, target, kernel.bind_constexprs(constexprs), options)


class Deferred:
    """``intent.compile`` of a kernel whose constexpr has no value yet: each call names it as a keyword and runs
    that value's specialisation (cached on the kernel)."""

    def __init__(self, built: Built):
        self.built = built
        self.target = built.target

    @property
    def kernel(self):
        return self.built.kernel

    def __call__(self, *args, **constexprs) -> None:
        return respecialize(self, constexprs)(*args)

    def __repr__(self) -> str:
        missing = ", ".join(self.kernel.missing_constexprs(dict(self.built.constexprs)))
        return f"<{self.target} executable {self.kernel.name}, specialised per call on {missing}>"
