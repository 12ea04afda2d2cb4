"""What every text emitter derives from a KIR graph the same way.

The cpu oracle's Numba emitter (:mod:`intent_trace.oracle.numba`) and the TileLang emitter
(:mod:`intent_trace.backends.tilelang`) write different languages, but much of what they decide on the way
is about the KIR, not the language: the leaves of an aggregate value, which source element a broadcast,
slice, transpose or reshape reads, which index entries of a view access need no bounds check, when a combine
may be inlined per element, whether a stored value reads the view it overwrites. Those decisions are made
here, once: the oracle is what the backends are tested against, so the two must not drift apart where the
only difference between them should be the spelling.

Nothing here imports an emitter (the graph layer depends on neither, and the oracle never on a backend).
Helpers reach the emitter's value objects through small parameters instead: its ``Aggregate`` class, its
``add`` on index expressions, a function that writes one statement and returns its name.
"""
from __future__ import annotations

from .. import _format_mx as MX
from .. import types as T
from . import ops
from .provenance import Coord, IndexRelation, Ordinal
from .traits import INLINE_COMBINE

# --- aggregates ---------------------------------------------------------------------------------------------

def components(t: T.Type) -> list:
    """The component types of a tuple or record type, in order."""
    return list(t.items) if isinstance(t, T.TupleType) else [ft for _, ft in t.fields]


def leaf_values(value, aggregate: type) -> list:
    """The leaves of an emitter value, aggregates (instances of ``aggregate``) flattened in order."""
    if isinstance(value, aggregate):
        return [x for it in value.items for x in leaf_values(it, aggregate)]
    return [value]


def assemble(t: T.Type, leaves: list, aggregate: type):
    """The value of type ``t`` whose leaves are ``leaves`` (consumed from the front): the inverse of
    :func:`leaf_values`, with ``aggregate(items)`` for each tuple or record."""
    if isinstance(t, (T.TupleType, T.RecordType)):
        return aggregate(tuple(assemble(it, leaves, aggregate) for it in components(t)))
    return leaves.pop(0)


def component(em, node, args):
    """The rule of ``get`` and ``field`` in every emitter: the selected component of an aggregate value."""
    index = node.attr("index") if node.op is ops.get else node.inputs[0].type.names.index(node.attr("name"))
    return args[0].items[index]


# --- index expressions --------------------------------------------------------------------------------------

def index_add(a: str, b: str, spell) -> str:
    """``a + b`` on index expressions with the zero folded away; ``spell(a, b)`` writes any other sum."""
    if a == "0":
        return b
    return a if b == "0" else spell(a, b)


def index_mul(a: str, b: str, spell) -> str:
    """``a * b`` on index expressions with zeros and ones folded away; ``spell(a, b)`` writes any other product."""
    if a == "0" or b == "0":
        return "0"
    if a == "1":
        return b
    return a if b == "1" else spell(a, b)


def extent_value(e, env: dict, scalar: type):
    """The run-time scalar that defines a symbolic extent (its ``origin``, an instance of ``scalar`` in the
    emitter's ``env``: in scope wherever a type mentions the extent), or None: a static extent, or one defined
    otherwise (a kernel's named extent, a domain's length)."""
    if isinstance(e, int) or e.origin is None:
        return None
    value = env.get(e.origin)
    return value if isinstance(value, scalar) else None


def dynamic_carriers(node) -> list:
    """The carrier axes of a ``scaled_contract`` whose extent is dynamic, each held to the format's carrier count
    when the kernel runs: ``(operand, axis, role, format, wanted extent, the Dim)``."""
    group = node.attr("group_size")
    out = []
    for operand, axis, role, fmt in ((0, 2, "lhs", node.attr("lhs_format")), (2, 1, "rhs", node.attr("rhs_format"))):
        e = node.inputs[operand].type.shape[axis]
        if not isinstance(e, int):
            out.append((operand, axis, role, fmt, MX.carrier_extent(fmt, group), e))
    return out


def compression_extents(node) -> tuple:
    """A ``sparse_contract``'s compression pair: (compressed axis, rhs axis, its extent kc, the logical K); either
    extent dynamic means the run checks K % group == 0 (K dynamic) and kc * group == K * keep."""
    ca, rb = node.attr("reduce")[0]
    return ca, rb, node.inputs[0].type.shape[ca], node.inputs[2].type.shape[rb]


def named_extent(e) -> str:
    """`` (K)``: how a run-time message names a dynamic extent after its value (nothing for a static one)."""
    return "" if isinstance(e, int) else f" ({T.extent_str(e)})"


def runtime_bins_text(node) -> str:
    """How a run-time error names the runtime bin count of a ``histogram`` node (its last operand, by its name)."""
    return node.inputs[-1].hint or "the runtime bin count"


def extent_expr(e, dim_names: dict, env: dict, scalar: type, clamp) -> str | None:
    """An extent's expression: its number when static, the emitter's name for it when it has one, else
    ``clamp(expr)`` of the run-time value that gives it (a negative value is an empty extent), or None when
    no such value is in scope."""
    if isinstance(e, int):
        return str(e)
    name = dim_names.get(e)
    if name is not None:
        return name
    value = extent_value(e, env, scalar)
    return clamp(value.expr) if value is not None else None


def name_extents(dim_names: dict, extents, names) -> None:
    """Name each symbolic extent by the expression an emitter computed for it, where it has none yet (the
    first value of an extent names it; later ones of the same extent are equal)."""
    for e, s in zip(extents, names):
        if not isinstance(e, int):
            dim_names.setdefault(e, s)


def intern_constant(constants: dict, lines: list, key, text: str) -> str:
    """The module-level constant for ``key``: ``K0``, ``K1``, ... in order of first use, declared once by a
    line ``name = text`` in ``lines`` (a value spelled exactly once, however often the kernel uses it)."""
    name = constants.get(key)
    if name is None:
        name = constants[key] = f"K{len(constants)}"
        lines.append(f"{name} = {text}")
    return name


# --- shapes: which source element an element of the result reads ------------------------------------------

def broadcast_index(src_shape: tuple, out_shape: tuple, idx: list) -> list:
    """The index into a tensor of ``src_shape`` that its right-aligned broadcast to ``out_shape`` reads at
    ``idx``: an axis of static extent 1 against a longer one reads element 0 (KIR's only broadcast rule)."""
    offset = len(idx) - len(src_shape)
    return ["0" if isinstance(e, int) and e == 1 and not (isinstance(o, int) and o == 1) else i
            for e, o, i in zip(src_shape, out_shape[offset:], idx[offset:])]


def transpose_index(perm, idx: list) -> list:
    """The source index a transpose by ``perm`` reads at result index ``idx`` (result axis i is source axis
    ``perm[i]``)."""
    old = [None] * len(perm)
    for i, p in enumerate(perm):
        old[p] = idx[i]
    return old


def slice_index(offsets: list, idx: list, add) -> list:
    """The source index a slice reads at result index ``idx``. ``offsets`` has one entry per source axis:
    None (the whole axis), ``("range", start)`` (a result axis shifted by start) or ``("point", p)`` (a fixed
    coordinate, no result axis)."""
    it = iter(idx)
    mapped = []
    for off in offsets:
        if off is None:
            mapped.append(next(it))
        elif off[0] == "range":
            mapped.append(add(next(it), off[1]))
        else:
            mapped.append(off[1])
    return mapped


def flat_index(idx: list, shape: tuple, add, mul) -> str:
    """The row-major position of index ``idx`` in ``shape`` (the order a reshape keeps)."""
    flat = "0"
    for i, n in zip(idx, shape):
        flat = add(mul(flat, n), i)
    return flat


def unflatten(flat: str, shape: tuple, remainder, quotient) -> list:
    """The index of row-major position ``flat`` (a name) in ``shape``. ``remainder(f, n)`` and
    ``quotient(f, n)`` write ``f mod n`` and ``f div n`` and return their names; the first axis is the
    quotient left by the others (the position is inside the shape, so it needs no remainder)."""
    if not shape:
        return []
    inner = []
    for n in reversed(shape[1:]):
        inner.append(remainder(flat, n))
        flat = quotient(flat, n)
    return [flat, *reversed(inner)]


# --- reduce and scan ----------------------------------------------------------------------------------------

def pointwise_shape(node) -> tuple | None:
    """The one shape of a reduce's or scan's accumulator leaves when its combine is pointwise (only
    :data:`~.traits.INLINE_COMBINE` ops, no nested regions, every accumulator leaf of one shape), else None. Such a combine
    can be inlined per accumulator element; which captures allow it is the emitter's call."""
    (region,) = node.regions
    shapes = {tuple(getattr(t, "shape", ())) for t in T.leaf_types(node.inputs[1].type)}
    if len(shapes) != 1 or not all(n.op in INLINE_COMBINE and not n.regions for n in region.nodes):
        return None
    return shapes.pop()


def scalar_param(t: T.Type, names: list, *, scalar: type, lazy: type, aggregate: type):
    """A combine region's parameter of type ``t`` inlined for one element: each leaf is the local in
    ``names`` holding that element (a tensor leaf is a lazy tensor that ignores the index)."""
    leaves = [lazy(tuple("1" for _ in lt.shape), lambda idx, name=name: name) if isinstance(lt, T.TensorType)
              else scalar(name) for lt, name in zip(T.leaf_types(t), names)]
    return assemble(t, leaves, aggregate)


def merge_index(pos: list, red: list, axes: tuple, rank: int) -> list:
    """The source index of a reduction (scan): ``red`` on the reduced ``axes``, ``pos`` on the kept ones."""
    pos, red = iter(pos), iter(red)
    return [next(red) if k in axes else next(pos) for k in range(rank)]


# --- view accesses ------------------------------------------------------------------------------------------

def covers_axis(domain, domain_var, extent) -> bool:
    """Whether the domain value ``domain`` (of the KIR variable ``domain_var``) is exactly 0, 1, ... up to a
    view axis's ``extent``: its coordinates need no bounds check. Only a symbolic extent is matched (by
    identity); against a static one the coordinates are checked."""
    return domain.start == "0" and domain.step == "1" and domain_var.type.extent is extent \
        and not isinstance(extent, int)


def safe_point(env: dict, var, extent, domain: type) -> bool:
    """Whether the KIR index ``var`` is a point of a domain (an instance of ``domain`` in the emitter's
    ``env``) that covers the view axis of ``extent`` (:func:`covers_axis`): it needs no bounds check."""
    rel = getattr(var, "provenance", None)
    if not isinstance(rel, IndexRelation) or rel.kind != "point" or not isinstance(rel.coord, Coord) \
            or not isinstance(rel.member, Ordinal):
        return False
    d = env.get(rel.source)
    return isinstance(d, domain) and covers_axis(d, rel.source, extent)


def access_coords(plan: list, idx: list, coordinate, data_coord) -> list:
    """The view coordinates of one element of a read or write, from its per-entry ``plan`` (``("all", None)``,
    ``("domain", d)``, ``("point", p)`` or ``("tensor", (value, rank, ...))``) and the result index ``idx``.
    ``coordinate(d, i)`` is domain member i; ``data_coord(info, element_idx)`` reads (and checks) the
    coordinate a tensor entry holds at its own index."""
    k = 0
    out = []
    for kind, info in plan:
        if kind == "all":
            out.append(idx[k])
            k += 1
        elif kind == "domain":
            out.append(coordinate(info, idx[k]))
            k += 1
        elif kind == "point":
            out.append(info)
        else:
            rank = info[1]
            out.append(data_coord(info, idx[k:k + rank]))
            k += rank
    return out


def rereads_destination(node, reads: dict, aligned: dict) -> bool:
    """Whether the value a write stores reads the view it overwrites at other elements than the one being
    written (``reads``/``aligned`` from :func:`intent_trace.codegen.analysis.fusible_values`): computed
    element by element during the write, it would see its own output, so it must be snapshotted first."""
    value_var, dest = node.inputs[1], node.inputs[0]
    if dest not in reads.get(value_var, ()):
        return False
    own = (node.attr("index"), tuple(node.inputs[2:]))
    return any(v is dest and sig != own for v, sig in aligned.get(value_var, ()))


# --- run-time checks ----------------------------------------------------------------------------------------

class ErrorSite:
    """What an executable needs to raise the right exception for the error code a failed run-time check
    records (the code is the site's 1-based position in the emitter's list).

    ``message`` is a template the emitter writes: ``{0}``, ``{1}``, ``{2}`` are the values recorded with the
    error, ``{name}`` the text given as keyword ``name``. Text that comes from the user (view names, buffer
    labels holding a file name, format names) is passed as a keyword and never spliced into the template:
    ``str.format`` does not re-read the text it substitutes, so a file named ``k{x}.py`` or ``k{0}.py`` is
    printed as it is instead of being read as a field of the template.
    """

    __slots__ = ("exception", "message", "note", "texts")

    def __init__(self, exception: type, message: str, note: str = "", **texts: str):
        self.exception = exception
        self.message = message
        self.note = note  # never a template: added to the exception as it is
        self.texts = texts

    def error(self, values) -> Exception:
        """The exception to raise for the values recorded with the error code."""
        error = self.exception(self.message.format(*(int(v) for v in values), **self.texts))
        if self.note:
            error.add_note(self.note)
        return error


# --- contract views of other ops ----------------------------------------------------------------------------

class _TypedVar:
    __slots__ = ("type",)

    def __init__(self, t):
        self.type = t


class DenseContract:
    """A ``sparse_contract`` node as a contract rule sees it: the contract of its dense logical lhs (of type
    ``lhs_type``, in place of the compressed values and metadata) with its rhs, so that the dense product
    is formed exactly as contract forms it."""

    def __init__(self, node, lhs_type: T.Type):
        self._node = node
        self.op, self.loc, self.outputs = node.op, node.loc, node.outputs
        self.inputs = (_TypedVar(lhs_type), node.inputs[2])

    def attr(self, name):
        return self._node.attr(name)
