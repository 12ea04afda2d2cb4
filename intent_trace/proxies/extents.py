"""Extent equalities the tracer proves structurally (issue 15 item 4).

Dynamic extents compare by identity (:mod:`..types`): two Dims are equal only when they are one Dim. This
module makes *one Dim per expression*: the index value that defines an extent is put in a normal form (a
polynomial over named extents and opaque values, :func:`..types.poly_add` and friends), and an extent asked
for a value whose normal form already defines a visible extent is that extent. So ``I.domain(half, 2*half)``
has the extent of ``I.domain(0, half)`` (``2*half - half`` is ``half``), and two computations of ``M*N``
are one extent. The value is then recorded as a *giver* of the Dim, which the type rules accept as its
defining operand.

A Dim is reused only while the value that defines it (its ``origin``) is in scope, so a backend that reads
the extent from that value always finds it; otherwise a fresh Dim is made (and becomes the expression's).

Only ``index`` arithmetic is interpreted (add, sub, mul, neg; floordiv and mod as opaque atoms of normal
forms): it wraps modulo 2^64, where ring identities hold, so equal normal forms are equal values; an integer
cast to ``index`` is the integer (``I.cast(n, I.index)`` twice is one extent, and the extent of ``n`` itself).
Anything else (other casts and dtypes, loads) is an atom compared by identity. Expressions deeper than
:data:`MAX_DEPTH` or wider than :data:`MAX_TERMS` are atoms too (a bound, not semantics).
"""
from __future__ import annotations

import sys

from .. import types as T
from ..graph import ops
from ..graph.values import Literal, Var
from .context import _PACKAGE_DIR

MAX_DEPTH = 32
MAX_TERMS = 16

_LINEAR = {ops.REGISTRY["add"]: 1, ops.REGISTRY["sub"]: -1}
_MUL = ops.REGISTRY["mul"]
_NEG = ops.REGISTRY["neg"]
_OPAQUE = {ops.REGISTRY["floordiv"]: "//", ops.REGISTRY["mod"]: "%"}
_CAST = ops.REGISTRY["cast"]


class _State:
    """Per trace: the normal form of each index value seen, and the Dim of each normal form."""

    __slots__ = ("polys", "dims", "producers")

    def __init__(self):
        self.polys: dict = {}  # Var -> normal form
        self.dims: dict = {}  # normal form -> Dim
        self.producers: dict = {}  # Var -> Node (filled per scope as needed)


def _state(trace) -> _State:
    st = trace.__dict__.get("_extent_state")
    if st is None:
        st = trace.__dict__["_extent_state"] = _State()
    return st


def _producer(trace, st: _State, var: Var):
    node = st.producers.get(var)
    if node is None:
        scope = trace.defined_in.get(var)
        for n in reversed(scope.nodes if scope is not None else ()):
            for out in n.outputs:
                st.producers.setdefault(out, n)
            if var in n.outputs:
                return n
    return node


def _is_index(x) -> bool:
    return isinstance(x.type, T.ScalarType) and x.type.dtype is T.index


def normal_form(trace, x, depth: int = 0) -> frozenset:
    """The normal form of an index operand (a Literal or a Var) in ``trace``."""
    if x.__class__ is Literal:
        return T.poly_const(int(x.value))
    if x.extent is not None:
        return T.poly_atom(x.extent)
    st = _state(trace)
    poly = st.polys.get(x)
    if poly is not None:
        return poly
    poly = _compute(trace, st, x, depth)
    if len(poly) > MAX_TERMS:
        poly = T.poly_atom(x)
    st.polys[x] = poly
    return poly


def _is_int_scalar(x) -> bool:
    return isinstance(x.type, T.ScalarType) and x.type.dtype.is_int


def _compute(trace, st: _State, x: Var, depth: int) -> frozenset:
    node = _producer(trace, st, x) if _is_index(x) and depth < MAX_DEPTH else None
    if node is not None and node.op is _CAST and _is_int_scalar(node.inputs[0]):
        source = node.inputs[0]  # an integer taken to index is that integer (mod 2^64, as every target holds it)
        return normal_form(trace, source, depth + 1) if source.__class__ is not Var or _is_index(source) \
            else T.poly_atom(source)
    if node is None or not all(_is_index(i) for i in node.inputs):
        return T.poly_atom(x)
    args = [normal_form(trace, i, depth + 1) for i in node.inputs]
    op = node.op
    if op in _LINEAR:
        return T.poly_add(args[0], args[1], _LINEAR[op])
    if op is _MUL:
        return T.poly_mul(args[0], args[1])
    if op is _NEG:
        return T.poly_scale(args[0], -1)
    if op in _OPAQUE:
        if _OPAQUE[op] == "//" and T.poly_constant_value(args[1]) == 1:
            return args[0]
        return T.poly_atom((_OPAQUE[op], args[0], args[1]))
    return T.poly_atom(x)


def _visible(trace, dim: T.Dim) -> bool:
    origin = dim.origin
    if origin is None:
        return True  # a kernel's named extent, or one no value defines: kernel-wide
    scope = trace.defined_in.get(origin)
    return scope is not None and scope.active


def known(trace, poly: frozenset):
    """The extent a normal form already defines (and that is still in scope), or None."""
    atom = T.poly_single_atom(poly)
    if isinstance(atom, T.Dim):
        return atom  # e.g. x.shape[0] + 0: the named extent itself
    if isinstance(atom, Var) and atom in trace.value_dims and _visible(trace, trace.value_dims[atom]):
        return trace.value_dims[atom]
    dim = _state(trace).dims.get(poly)
    return dim if dim is not None and _visible(trace, dim) else None


def register(trace, poly: frozenset, dim) -> None:
    """Make ``dim`` the extent of ``poly`` (a fresh extent some later value or domain may prove equal to)."""
    if isinstance(dim, T.Dim):
        _state(trace).dims[poly] = dim


def value_dim(trace, var: Var) -> T.Dim:
    """``Trace.value_dim``: the extent an index value stands for (its value clamped at 0). One Dim per normal
    form in scope: a value structurally equal to one that already gives an extent gives that extent."""
    dim = trace.value_dims.get(var)
    if dim is not None:
        return dim
    poly = normal_form(trace, var) if _is_index(var) else T.poly_atom(var)
    atom = T.poly_single_atom(poly)
    dim = known(trace, poly) if atom is not var else None
    if dim is None and isinstance(atom, Var) and atom is not var:
        dim = value_dim(trace, atom)  # e.g. (2*half - half) is half: half's extent
    if dim is None:
        text = describe(poly) if atom is not var else None
        label = (f"the extent {var.hint}" if var.hint else
                 f"the runtime extent {text} used at {position(trace)}" if text else
                 f"the runtime extent used at {position(trace)}")
        dim = T.Dim(origin=var, label=label)
        register(trace, poly, dim)
    else:
        dim.givers.add(var)
    trace.value_dims[var] = dim
    return dim


def made_at(trace, var: Var):
    """The source location of the node that defines ``var`` in ``trace`` (None for a parameter or an extent)."""
    node = _producer(trace, _state(trace), var)
    return node.loc if node is not None else None


def difference(trace, begin, end) -> frozenset:
    """The normal form of ``end - begin`` (the member count of a unit-step domain, before the clamp at 0)."""
    return T.poly_add(normal_form(trace, end), normal_form(trace, begin), -1)


def unit_step_extent(trace, begin, end, what: str):
    """The extent of ``[begin, end)`` (unit step) when the tracer can name it: (extent or None, normal form,
    label for a fresh extent). A normal form that is one index value is that value's extent."""
    poly = difference(trace, begin, end)
    dim = known(trace, poly)
    atom = T.poly_single_atom(poly)
    if dim is None and isinstance(atom, Var) and trace.defined_in.get(atom) is not None \
            and trace.defined_in[atom].active:
        dim = value_dim(trace, atom)
    return dim, poly, f"the length ({describe(poly)}) of the {what} at {position(trace)}"


def _atom_text(atom) -> str:
    if isinstance(atom, T.Dim):
        return T.extent_str(atom)
    if isinstance(atom, tuple):
        return f"({_operand_text(atom[1])} {atom[0]} {_operand_text(atom[2])})"
    return atom.hint or "<value>"


def _operand_text(poly: frozenset) -> str:
    """An operand of ``//`` or ``%``: parenthesised when it is a sum (``(M + k) // 2``, never ``M + k // 2``)."""
    text = describe(poly)
    return f"({text})" if len(poly) > 1 or text.startswith("-") else text


def describe(poly: frozenset) -> str:
    return T.poly_text(poly, _atom_text)


def position(trace) -> str:
    """The user's file:line:column (the column tells two extents made on one line apart)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return repr(trace.location())
    code = f.f_code
    line, col = f.f_lineno, None
    try:
        positions = list(code.co_positions())[f.f_lasti // 2]
        line, col = positions[0] or line, positions[2]
    except (IndexError, AttributeError):
        pass
    name = code.co_filename.rsplit("/", 1)[-1]
    return f"{name}:{line}" + (f":{col + 1}" if col is not None else "")
