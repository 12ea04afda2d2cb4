"""Kernel parameter spellings (spec §2): views, runtime scalars, constexprs and enums."""
from __future__ import annotations

import enum
import keyword
import math

import attrs

from . import types as T


@attrs.frozen(slots=True)
class ViewSpec:
    """``I.In[dtype, shape]`` and friends, as written in an annotation."""

    access: str
    dtype: T.DType
    shape: tuple


class _ViewAccess:
    def __init__(self, access: str):
        self.access = access

    def __getitem__(self, item) -> ViewSpec:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"write I.{self.access}[dtype, shape], e.g. I.{self.access}[I.f32, ('M', 'N')]")
        dtype, shape = item
        if not isinstance(dtype, T.DType):
            raise TypeError(f"I.{self.access}[...] dtype must be an intent dtype such as I.f32, got {dtype!r}")
        if dtype.kind == "mx":
            raise TypeError(f"{dtype} is a microscaling format; a view holds its codes as I.u8 carriers")
        if isinstance(shape, (str, int)):
            shape = (shape,)
        if not isinstance(shape, tuple):
            raise TypeError(f"I.{self.access}[...] shape must be a tuple of extent names and ints, got {shape!r}")
        for e in shape:
            if isinstance(e, bool) or not isinstance(e, (str, int)):
                raise TypeError(f"view extents are names (dynamic) or ints (static), got {e!r}")
            if isinstance(e, int) and e < 0:
                raise ValueError(f"static extent {e} is negative")
            if isinstance(e, int) and e > T.index.max:
                raise ValueError(f"static extent {e} does not fit the index type (at most 2**63 - 1 = {T.index.max})")
            if isinstance(e, str) and (not e.isidentifier() or keyword.iskeyword(e) or e.startswith("_")):
                raise ValueError(f"extent name {e!r} must be an identifier not starting with '_'")
        static = [e for e in shape if isinstance(e, int)]
        if math.prod(static) > T.index.max:
            raise ValueError(f"static extents {tuple(static)} have {math.prod(static)} elements, more than the index "
                             f"type holds (at most 2**63 - 1 = {T.index.max})")
        return ViewSpec(self.access, dtype, shape)

    def __repr__(self) -> str:
        return f"I.{self.access}"


In = _ViewAccess("In")
Out = _ViewAccess("Out")
InOut = _ViewAccess("InOut")


@attrs.frozen(slots=True)
class ConstexprSpec:
    """``I.Constexpr[T]``: a compile-time value that selects hardware-independent branches."""

    type: object

    def check(self, name: str, value):
        t = self.type
        ok = (t is bool and isinstance(value, bool)) or \
             (t is int and isinstance(value, int) and not isinstance(value, bool)) or \
             (t is float and isinstance(value, (int, float)) and not isinstance(value, bool)) or \
             (t is str and isinstance(value, str)) or \
             (isinstance(t, type) and issubclass(t, Enum) and isinstance(value, t))
        if not ok:
            raise TypeError(f"constexpr {name} must be a {getattr(t, '__name__', t)}, got {value!r}")
        return value


class _Constexpr:
    def __getitem__(self, t) -> ConstexprSpec:
        if t in (bool, int, float, str):
            return ConstexprSpec(t)
        if isinstance(t, type) and issubclass(t, Enum):
            validate_enum(t)
            return ConstexprSpec(t)
        raise TypeError(f"I.Constexpr[...] takes bool, int, float, str or an I.Enum type, got {t!r}")

    def __repr__(self) -> str:
        return "I.Constexpr"


Constexpr = _Constexpr()


class Enum(enum.Enum):
    """A finite, closed, named constexpr type (spec §2).

    Members are compared only with members of the same enum (comparing across enum types, or with
    numbers, is a TypeError) and have no arithmetic. They select branches at trace time and never
    become runtime values.
    """

    def __init_subclass__(cls, **kwargs):
        # ``class Mode(int, I.Enum)`` would give members int's arithmetic back (``MODE * 10`` tracing to a
        # number): a data-type mixin is refused where the class is defined.
        mixins = [b.__name__ for b in cls.__mro__ if b is not object and not issubclass(b, enum.Enum)]
        if mixins:
            raise TypeError(f"enum {cls.__name__} mixes in {', '.join(mixins)}: I.Enum members have no arithmetic "
                            f"and compare only within their enum; derive from I.Enum alone")
        super().__init_subclass__(**kwargs)

    def __eq__(self, other):
        if isinstance(other, Enum) and type(other) is type(self):
            return self is other
        raise TypeError(f"{self!r} compared with {other!r}: enum values compare only within one enum type")

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((type(self).__qualname__, self._name_))

    def __bool__(self):
        raise TypeError(f"{self!r} has no truth value; compare it with a member of {type(self).__name__}")


def validate_enum(cls) -> None:
    """Non-empty, unique names and values, values int or str."""
    members = list(cls)
    if not members:
        raise TypeError(f"enum {cls.__name__} has no members")
    if len(cls.__members__) != len(members):
        aliases = [n for n, m in cls.__members__.items() if m.name != n]
        raise TypeError(f"enum {cls.__name__} repeats a value: {', '.join(aliases)} alias other members")
    for m in members:
        if isinstance(m.value, bool) or not isinstance(m.value, (int, str)):
            raise TypeError(f"enum {cls.__name__}.{m.name} value must be an int or str, got {m.value!r}")
