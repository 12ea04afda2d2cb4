"""Types are values: dtypes, extents with identity, and the types of KIR values.

An extent is either a static ``int`` or a :class:`Dim`. Dims compare by identity: two views
declared with the same extent name share one Dim, and a domain built from ``x.shape[0]`` has
that very Dim as its extent. Two different Dims are never assumed equal ("both dynamic" is not
a proof of equality), except after ``I.assume_equal`` stated them equal (:func:`unite`): a statement
the kernel checks at run time, after which :func:`same_extent` treats them as one extent.
"""
from __future__ import annotations

import contextvars
from typing import Union

import attrs
import numpy as np


@attrs.frozen(slots=True, repr=False, eq=False)
class DType:
    """A scalar element type (numerics chapter T1). One instance per dtype: compared by identity."""

    name: str
    kind: str  # "bool" | "int" | "uint" | "float" | "mx"
    bits: int

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_dtype_named, (self.name,))

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer, including ``index``."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int" or self.kind == "float"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("int", "uint", "float")

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype that stores values of this type on the host."""
        return _NUMPY[self.name]

    @property
    def min(self):
        if self.is_int:
            return int(np.iinfo(self.np).min)
        if self.is_float:
            return -np.inf
        raise TypeError(f"{self.name} has no minimum")

    @property
    def max(self):
        if self.is_int:
            return int(np.iinfo(self.np).max)
        if self.is_float:
            return np.inf
        raise TypeError(f"{self.name} has no maximum")


bool_ = DType("bool", "bool", 8)
i8, i16, i32, i64 = (DType(f"i{b}", "int", b) for b in (8, 16, 32, 64))
u8, u16, u32, u64 = (DType(f"u{b}", "uint", b) for b in (8, 16, 32, 64))
f16 = DType("f16", "float", 16)
bf16 = DType("bf16", "float", 16)
f32 = DType("f32", "float", 32)
f64 = DType("f64", "float", 64)
index = DType("index", "int", 64)
e2m1 = DType("e2m1", "mx", 4)
e4m3 = DType("e4m3", "mx", 8)
e8m0 = DType("e8m0", "mx", 8)

_NUMPY_PLAIN = {
    "bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
    "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "index": np.int64,
}
_ML_DTYPES = {"bf16": "bfloat16", "e2m1": "float4_e2m1fn", "e4m3": "float8_e4m3fn", "e8m0": "float8_e8m0fnu"}


class _NumpyDtypes(dict):
    """name -> NumPy dtype; ml_dtypes (bfloat16, float8, float4) is imported on first use."""

    def __missing__(self, name: str) -> np.dtype:
        if name in _NUMPY_PLAIN:
            value = np.dtype(_NUMPY_PLAIN[name])
        else:
            import ml_dtypes

            value = np.dtype(getattr(ml_dtypes, _ML_DTYPES[name]))
        self[name] = value
        return value


_NUMPY = _NumpyDtypes()

DTYPES: dict[str, DType] = {
    d.name: d for d in (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, index, e2m1, e4m3, e8m0)
}
ARITHMETIC_DTYPES = tuple(d for d in DTYPES.values() if d.kind != "mx")



def _dtype_named(name: str) -> "DType":
    return DTYPES[name]


class Dim:
    """A dynamic extent with identity.

    ``name`` is the user's extent name for parameter extents. Derived extents (a domain's length,
    a runtime shape value) have no name: the printer names them through ``origin``, the KIR value
    that defines them, and error messages use ``label``, which says where the extent came from.
    """

    __slots__ = ("name", "origin", "label", "givers", "equal")

    def __init__(self, name: str | None = None, origin=None, label: str | None = None):
        self.name = name
        self.origin = origin
        self.label = label
        # Further index values that give this extent (clamped at 0) besides ``origin``: values the tracer
        # proved structurally equal to it (:mod:`.proxies.extents`), so a shape built from any of them is
        # accepted by the type rules as the one extent.
        self.givers: set = set()
        # The extent this one was stated equal to (``I.assume_equal``, checked when the kernel runs), or None:
        # a union-find parent, so a chain of statements is one class (:func:`representative`).
        self.equal = None

    def __repr__(self) -> str:
        return self.name or self.label or f"Dim@{id(self):x}"


def representative(e):
    """The extent that stands for ``e``'s class of extents stated equal (``e`` itself when none was)."""
    while isinstance(e, Dim) and e.equal is not None:
        e = e.equal
    return e


def unite(a, b) -> None:
    """Make the classes of extents ``a`` and ``b`` one (``I.assume_equal``): ``b``'s representative joins ``a``'s,
    and a static size, when one side is one, represents the class. The statement is the kernel's, checked when
    it runs: only the tracer calls this, on the Dims of the trace it builds."""
    a, b = representative(a), representative(b)
    if a is b or (isinstance(a, int) and isinstance(b, int)):
        return
    if isinstance(b, int):
        a.equal = b
    else:
        b.equal = a


Extent = Union[int, Dim]


# --- extent expressions ------------------------------------------------------------------------------
# The normal form in which the tracer compares index expressions that define extents: a polynomial with
# integer coefficients over *atoms* (a named extent, an index value the tracer cannot see into, an opaque
# ``a // b`` or ``a % b`` of normal forms). Index arithmetic wraps modulo 2^64, and ring identities hold
# there, so two expressions with one normal form have one value: ``2*half - half`` is ``half``, two
# computations of ``M*N`` are one extent. A normal form is a frozenset of (monomial, coefficient), a
# monomial a frozenset of (atom, power): hashable, order-free, compared structurally.

_WRAP = 1 << 64


def _signed(c: int) -> int:
    c %= _WRAP
    return c - _WRAP if c >= _WRAP // 2 else c


ONE = frozenset()  # the empty monomial


def poly_const(c: int) -> frozenset:
    c = _signed(c)
    return frozenset({(ONE, c)}) if c else frozenset()


def poly_atom(atom) -> frozenset:
    return frozenset({(frozenset({(atom, 1)}), 1)})


def poly_add(a: frozenset, b: frozenset, sign: int = 1) -> frozenset:
    terms = dict(a)
    for m, c in b:
        terms[m] = _signed(terms.get(m, 0) + sign * c)
    return frozenset((m, c) for m, c in terms.items() if c)


def poly_scale(a: frozenset, k: int) -> frozenset:
    return frozenset((m, _signed(c * k)) for m, c in a if _signed(c * k))


def _monomial_mul(m1: frozenset, m2: frozenset) -> frozenset:
    powers = dict(m1)
    for atom, p in m2:
        powers[atom] = powers.get(atom, 0) + p
    return frozenset(powers.items())


def poly_mul(a: frozenset, b: frozenset) -> frozenset:
    out: frozenset = frozenset()
    for m1, c1 in a:
        for m2, c2 in b:
            out = poly_add(out, frozenset({(_monomial_mul(m1, m2), _signed(c1 * c2))}))
    return out


def poly_constant_value(a: frozenset):
    """The constant a normal form stands for, or None when it has atoms."""
    if not a:
        return 0
    if len(a) == 1:
        (m, c), = a
        if m == ONE:
            return c
    return None


def poly_single_atom(a: frozenset):
    """The atom of a normal form that is exactly one atom (coefficient and power 1), or None."""
    if len(a) == 1:
        (m, c), = a
        if c == 1 and len(m) == 1:
            (atom, p), = m
            if p == 1:
                return atom
    return None


def poly_text(a: frozenset, atom_text) -> str:
    """A readable spelling (for messages): ``M*N``, ``2*half - half`` is ``half``; constants last."""
    if not a:
        return "0"
    terms = []
    for m, c in a:
        factors = "*".join(atom_text(x) if p == 1 else f"{atom_text(x)}^{p}"
                           for x, p in sorted(m, key=lambda t: atom_text(t[0])))
        terms.append((factors, c))
    parts = []
    # constants last, larger coefficients first, then by text: never the frozenset's order, which follows the
    # atoms' hashes and so the process's hash seed (generated source quoting this text must not vary by process)
    for factors, c in sorted(terms, key=lambda t: (not t[0], -abs(t[1]), t[0], t[1])):
        mag = abs(c)
        term = str(mag) if not factors else factors if mag == 1 else f"{mag}*{factors}"
        parts.append(("- " if c < 0 else "+ ") + term)
    text = " ".join(parts)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def same_extent(a: Extent, b: Extent) -> bool:
    """Provably equal: equal static sizes, the very same Dim, or extents stated equal (``I.assume_equal``, checked
    at run time)."""
    if a is b or (isinstance(a, int) and isinstance(b, int) and a == b):
        return True
    if (a.__class__ is Dim and a.equal is not None) or (b.__class__ is Dim and b.equal is not None):
        a, b = representative(a), representative(b)
        return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)
    return False


def same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(same_extent(x, y) for x, y in zip(a, b))


class Type:
    """Base of KIR value types."""

    __slots__ = ()


def _as_tuple(items) -> tuple:
    """The converter of tuple-valued fields. A Python function rather than ``tuple`` itself: attrs reads
    the converter's signature when it builds the class, and for a builtin that means tokenizing its text
    signature (milliseconds at import)."""
    return tuple(items)


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class ScalarType(Type):
    dtype: DType

    def __repr__(self) -> str:
        return self.dtype.name


class _Shaped:
    """rank and the ``(M, N)`` shape spelling shared by tensor, view and buffer types."""

    __slots__ = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    def shape_text(self) -> str:
        return "(" + ", ".join(map(extent_str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class TensorType(_Shaped, Type):
    """A ranked tensor SSA value. Rank 0 is distinct from a scalar (spec §4)."""

    dtype: DType
    shape: tuple = attrs.field(converter=_as_tuple)

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{', '.join(map(extent_str, self.shape))}]"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class ViewType(_Shaped, Type):
    """An external view: a kernel parameter backed by caller memory."""

    access: str  # "In" | "Out" | "InOut"
    dtype: DType
    shape: tuple = attrs.field(converter=_as_tuple)

    def __repr__(self) -> str:
        return f"{self.access}[{self.dtype.name}, {self.shape_text()}]"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class BufferType(_Shaped, Type):
    """A kernel-local logical buffer (spec §15): mutable state with a shape and dtype, no residency."""

    dtype: DType
    shape: tuple = attrs.field(converter=_as_tuple)

    def __repr__(self) -> str:
        return f"Buffer[{self.dtype.name}, {self.shape_text()}]"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class DomainType(Type):
    """A half-open integer sequence (a domain or a source-derived subregion)."""

    extent: Extent

    def __repr__(self) -> str:
        return f"domain[{extent_str(self.extent)}]"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class TupleType(Type):
    items: tuple = attrs.field(converter=_as_tuple)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.items))
        return f"({inner},)" if len(self.items) == 1 else f"({inner})"


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class RecordType(Type):
    fields: tuple = attrs.field(converter=_as_tuple)  # ((name, Type), ...), order is part of identity

    @property
    def names(self) -> tuple:
        return tuple(n for n, _ in self.fields)

    def field_type(self, name: str) -> Type:
        for n, t in self.fields:
            if n == name:
                return t
        raise KeyError(name)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{n}: {t!r}" for n, t in self.fields) + "}"


def extent_str(e: Extent) -> str:
    """Printing hook; the printer installs a namer for derived Dims while it prints."""
    if isinstance(e, int):
        return str(e)
    if e.name is not None:
        return e.name
    return _derived_dim_namer.get()(e)


def _default_namer(d: Dim) -> str:
    return repr(d)


# Per thread/task: a print in one thread names derived Dims by its own graph's names only.
_derived_dim_namer: contextvars.ContextVar = contextvars.ContextVar("intent_trace_dim_namer", default=_default_namer)


def set_dim_namer(namer) -> object:
    """Install a function naming derived Dims in this thread/task (used by the printer); returns the previous one."""
    previous = _derived_dim_namer.get()
    _derived_dim_namer.set(namer)
    return previous


def leaf_types(t: Type) -> list:
    """The scalar/tensor components of a value type, tuples and records flattened in order."""
    if isinstance(t, TupleType):
        return [x for it in t.items for x in leaf_types(it)]
    if isinstance(t, RecordType):
        return [x for _, ft in t.fields for x in leaf_types(ft)]
    return [t]


def is_value_type(t: Type) -> bool:
    return isinstance(t, (ScalarType, TensorType, TupleType, RecordType))


def dtype_of(t: Type) -> DType | None:
    return getattr(t, "dtype", None)


def shape_of(t: Type) -> tuple:
    """Shape of a scalar (``()``) or tensor; other types have no uniform shape."""
    if isinstance(t, ScalarType):
        return ()
    if isinstance(t, (TensorType, ViewType)):
        return t.shape
    raise TypeError(f"{t!r} has no shape")
