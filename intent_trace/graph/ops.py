"""The op registry: every canonical KIR op, defined once, as data.

An :class:`OpDef` names the op, its operand and attribute schema, its type rule, its effects and flags.
Every op has a real type rule (the elementwise ones below, the structural ones in :mod:`.type_rules` and
:mod:`.type_rules_structured`): the result type follows from the operand types and the other attributes, and
where an op records its result (the ``type``/``types`` attribute the backends read) the rule computes or checks
it, so validation never compares an attribute with itself. Backends are tables keyed by these OpDef objects;
``tests/graph/test_coverage.py`` checks that every backend has a rule (or an explicit rejection) for every op.

Each op carries its *traits* (what kind of computation it is: :data:`TRAITS`); every set of ops a backend
or an analysis asks about ("the pointwise ops", "the ops that consume operands element by element") is derived
from them in one place, :mod:`.traits`. Each op also carries its surface spellings (operator dunders, ``I.*``
shorthands), of which :mod:`.surface`'s tables and the proxy dunders are views, and its printer hook.
"""
from __future__ import annotations

import keyword
import math
from typing import Callable

import attrs

from .. import types as T
from ..errors import TraceTypeError, TraceValueError
from . import type_rules as R
from . import type_rules_structured as S
from .values import Literal


@attrs.frozen(slots=True, eq=False, repr=False)
class OpDef:
    name: str
    family: str  # "binary" | "compare" | "unary" | "ternary" | "convert" | "shape" | "aggregate"
    #            | "domain" | "memory" | "control"
    arity: int | None  # operand count; None for variadic
    attrs: tuple = ()  # attribute names, in schema order
    regions: int = 0
    effects: frozenset = frozenset()  # "read" | "write" | "control" | "alloc" | "check" (may fail the run)
    infer: Callable | None = None  # (op, inputs, attrs: dict) -> tuple[Type, ...]
    dtypes: str = "any"  # operand dtype class: "any" | "numeric" | "float" | "int" | "int_or_bool" | "compare"
    doc: str = ""
    traits: frozenset = frozenset()  # names from TRAITS
    once_operands: tuple = ()  # operand positions the op evaluates once per result element (besides "once")
    dunders: tuple = ()  # ((Python operator method, operands reflected), ...) that build this op
    shorthands: tuple = ()  # the ``I.*`` names that build this op ("reduce.sum", "atomic.add", ...)
    printer: Callable | None = None  # (node, operand texts) -> the node's text after `=`; None: the generic form
    region_names: tuple = ()  # the printer's label of each region, where they differ in kind
    math: "MathSpec | None" = None  # what the numerics checks know about a T4 library function (unary math only)

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    @property
    def pure(self) -> bool:
        return not self.effects

    @property
    def records_type(self) -> bool:
        """Whether nodes of this op record their result type as the ``type`` attribute."""
        return "type" in self.attrs

    def with_attr(self, attrs: tuple, name: str, value) -> tuple:
        """``attrs`` with ``name`` set, in schema order."""
        given = dict(attrs)
        given[name] = value
        return tuple((k, given[k]) for k in self.attrs if k in given)


REGISTRY: dict[str, OpDef] = {}

# What an op is, as far as the code generators and analyses care. A trait is a fact about the op's
# semantics, never about one backend; :mod:`.traits` derives every op set from these.
TRAITS = {
    "pointwise": "computes each result element from the operand elements at the same position (commutes with "
                 "indexing: a combine made of such ops can be inlined per element)",
    "elementwise": "consumes every operand element by element at the result's position (pointwise ops, and "
                   "random_bits, whose counter is read element by element)",
    "aggregate": "builds or takes apart a tuple or record (no computation: free inside an inlined combine)",
    "permutation": "rearranges elements without computing (each source element is read once per result element)",
    "element_consumer": "evaluates its operands' elements one at a time, so a fused operand can be computed in "
                        "place of each element read",
    "once": "evaluates each element of every operand at most once per result element",
    "rematerialized": "cheap enough to recompute per consumer instead of materialising a value used twice",
    "looping": "runs a loop for every result element (over the reduced or contracted positions)",
    "indexed": "reads one source element per result element at coordinates it is given (constant work per "
               "element, no loop)",
    "first_nan": "a NaN result is its first NaN operand, quieted, or the default NaN for an invalid operation (T3, as "
                 "x86's arithmetic gives it): exact even where two NaN operands meet",
    "vendor_math": "a library function of T4 (a GPU target may use the vendor's precise implementation, T10)",
    "contraction": "a paired-axis multiply-add (T10 allows FMA inside it)",
    "reduction": "combines the elements along axes with an associative combine (T10 allows any order it permits)",
    "reads_nan_bits": "a non-NaN result may depend on a NaN operand's payload or sign bit (a bitcast's integer bits; "
                      "an atomic compare-exchange compares bits): a program that gives NaNs other payloads (a GPU "
                      "fast path recomputing NaN rows) is exact only without such ops",
}


# --- surface spellings ---------------------------------------------------------------------
# How users write each op: Python operators (the proxy dunders are generated from these) and ``I.*`` names
# (graph/surface.py's tables are views of them; language.py defines the functions).

_OPERATOR_NAMES = {"add": "add", "sub": "sub", "mul": "mul", "div": "truediv", "floordiv": "floordiv", "mod": "mod",
                   "pow": "pow", "and_": "and", "or_": "or", "xor": "xor", "shl": "lshift", "shr": "rshift"}
_DUNDERS = {
    **{op: ((f"__{n}__", False), (f"__r{n}__", True)) for op, n in _OPERATOR_NAMES.items()},
    **{op: ((f"__{op}__", False),) for op in ("eq", "ne", "lt", "le", "gt", "ge", "neg", "invert", "abs")},
}
_SHORTHANDS = {
    "maximum": ("maximum",), "minimum": ("minimum",), "div": ("fdiv",), "fma": ("fma",), "select": ("select", "where"),
    "cast": ("cast",), "bitcast": ("bitcast",), "reshape": ("reshape", "expand_dims"), "transpose": ("transpose",),
    "full": ("full", "zeros"), "join": ("join",), "record": ("record",), "domain": ("domain",),
    "indices": ("indices",), "assume_equal": ("assume_equal",), "parallel": ("parallel",), "loop": ("loop",),
    "while": ("while_",), "if": ("if_",),
    "break": ("break_",), "continue": ("continue_",), "invert": ("logical_not",),
    "reduce": ("reduce", "reduce.sum", "reduce.max", "reduce.any", "reduce.all", "arg_reduce.max"),
    "scan": ("scan", "cumsum", "cummax"), "contract": ("contract", "dot", "matvec", "vecmat", "matmul"),
    "mul": ("outer",), "region_fold": ("region_fold",), "region_scan": ("region_scan",), "gather": ("gather",),
    "histogram": ("histogram",), "buffer": ("buffer",), "scatter_reduce": ("scatter_reduce",),
    "masked_read": ("load",), "masked_write": ("store",),
    "random_bits": ("random.bits", "random.uniform"), "scaled_contract": ("scaled_matmul", "scaled_contract"),
    "sparse_contract": ("sparse_contract", "sparse_matmul"), "quantize": ("quantize",),
    "quantized_dot": ("quantized_dot",), "atomic_load": ("atomic.load",), "atomic_store": ("atomic.store",),
    "atomic_rmw": ("atomic.add", "atomic.exchange", "atomic.max", "atomic.min", "atomic.and_", "atomic.or_",
                   "atomic.xor"),
    "atomic_compare_exchange": ("atomic.compare_exchange",),
}


def indexed_access(node, args) -> str:
    """The printer hook of view and buffer accesses: ``read x[%0, :]``, ``write y[%0] = %3``."""
    kinds = node.attr("index")
    target, rest = args[0], args[1:]
    value = None
    if node.op.effects & {"write"}:
        value, rest = rest[0], rest[1:]
    it = iter(rest)
    index = ", ".join(":" if k == "all" else next(it) for k in kinds)
    return f"{node.op.name} {target}[{index}]" + (f" = {value}" if value is not None else "")


def masked_access(node, args) -> str:
    """The printer hook of masked accesses: ``masked_read x[%1, %2] if %3 else %4``, ``masked_write y[%1] = %0 if
    %2`` (per-element coordinates, then the valid mask, then the fill of a read)."""
    target, rest = args[0], args[1:]
    rank = len(node.inputs[0].type.shape)
    if node.op.effects & {"write"}:
        value, coords, valid = rest[0], rest[1:1 + rank], rest[1 + rank]
        data = " {data_indexed=True}" if node.attr("data_indexed") else ""
        return f"{node.op.name} {target}[{', '.join(coords)}] = {value} if {valid}{data}"
    coords, valid, fill = rest[:rank], rest[rank], rest[rank + 1]
    return f"{node.op.name} {target}[{', '.join(coords)}] if {valid} else {fill}"


def define(name: str, family: str, arity, **kw) -> OpDef:
    if name in REGISTRY:
        raise RuntimeError(f"op {name} defined twice")
    kw.setdefault("dunders", _DUNDERS.get(name, ()))
    # a T4 function is spelled I.<its name> (the function is generated in language.py)
    kw.setdefault("shorthands", _SHORTHANDS.get(name, ()) + ((name,) if kw.get("math") is not None else ()))
    unknown = set(kw.get("traits", ())) - TRAITS.keys()
    if unknown:
        raise RuntimeError(f"op {name} has unknown traits {sorted(unknown)}")
    kw["traits"] = frozenset(kw.get("traits", ()))
    op = OpDef(name, family, arity, **kw)
    REGISTRY[name] = op
    return op


# --- type rules --------------------------------------------------------------------------

_DTYPE_CLASSES = {
    "any": lambda d: True,
    "numeric": lambda d: d.is_numeric,
    "float": lambda d: d.is_float,
    "int": lambda d: d.is_int,
    "int_or_bool": lambda d: d.is_int or d.is_bool,
    "compare": lambda d: d.is_numeric or d.is_bool,
}
_DTYPE_CLASS_WORDS = {
    "numeric": "a numeric dtype (cast bool first)",
    "float": "a floating dtype (f16, bf16, f32, f64)",
    "int": "an integer dtype",
    "int_or_bool": "an integer or bool dtype",
    "compare": "a numeric or bool dtype",
}


def _check_dtype(opname: str, cls: str, t: T.Type) -> T.DType:
    d = getattr(t, "dtype", None)
    if not isinstance(t, (T.ScalarType, T.TensorType)) or d is None:
        raise TraceTypeError(f"{opname} takes scalars or tensors, got {t!r}")
    if not _DTYPE_CLASSES[cls](d):
        raise TraceTypeError(f"{opname} needs {_DTYPE_CLASS_WORDS[cls]}, got {d}")
    return d


def _same_types(opname: str, types) -> T.Type:
    first = types[0]
    for t in types[1:]:
        if t != first:
            raise TraceTypeError(f"{opname} operands must have one type after broadcasting, got {first!r} and {t!r}")
    return first


def _with_dtype(t: T.Type, dtype: T.DType) -> T.Type:
    return T.ScalarType(dtype) if isinstance(t, T.ScalarType) else T.TensorType(dtype, t.shape)


def elementwise(result: str = "same"):
    """Operands of one type; Literal operands are splat constants of the same dtype."""

    def rule(op: OpDef, inputs, attrs):
        t = None
        dtype = None
        for x in inputs:
            d = _check_dtype(op.name, op.dtypes, x.type)
            if dtype is None:
                dtype = d
            elif d is not dtype:
                raise TraceTypeError(f"{op.name} operands must have one dtype, got {dtype} and {d}")
            if x.__class__ is not Literal:
                if t is None:
                    t = x.type
                elif x.type != t:
                    raise TraceTypeError(
                        f"{op.name} operands must have one type after broadcasting, got {t!r} and {x.type!r}")
        if t is None:
            t = T.ScalarType(dtype)
        return (_with_dtype(t, T.bool_) if result == "bool" else t,)

    return rule


def select_rule(op, inputs, attrs):
    pred = inputs[0].type
    if _check_dtype("select", "any", pred) is not T.bool_:
        raise TraceTypeError(f"select needs a bool predicate, got {pred.dtype}")
    a, b = inputs[1:]
    if a.type.dtype is not b.type.dtype:
        raise TraceTypeError(f"select values must have one dtype, got {a.type.dtype} and {b.type.dtype}")
    values = [x.type for x in (a, b) if x.__class__ is not Literal]  # Literals are splat constants
    t = _same_types("select", values) if values else a.type
    if T.shape_of(pred) != T.shape_of(t) and not T.same_shape(T.shape_of(pred), T.shape_of(t)):
        raise TraceValueError(f"select predicate shape {pred!r} differs from value shape {t!r}")
    return (t,)


def convert_rule(op, inputs, attrs):
    src = inputs[0].type
    d = _check_dtype(op.name, "any", src)
    target = attrs["dtype"]
    if op.name == "bitcast" and d.bits != target.bits:
        raise TraceTypeError(f"bitcast needs equal bit widths, got {d} ({d.bits} bits) and {target} ({target.bits} bits)")
    return (_with_dtype(src, target),)


def no_result(op, inputs, attrs):
    return ()


# --- the ops ------------------------------------------------------------------------------

BINARY = {
    "add": "numeric", "sub": "numeric", "mul": "numeric", "div": "float", "floordiv": "int", "mod": "int",
    "pow": "numeric", "maximum": "numeric", "minimum": "numeric",
    "and_": "int_or_bool", "or_": "int_or_bool", "xor": "int_or_bool", "shl": "int", "shr": "int",
}
BINARY_ATTRS = {"div": ("approximate", "flush_to_zero")}
#: T4's bound of each ``approximate=True`` option, by op name: ``("ulp", n)`` within n ulp of the correctly rounded
#: result, ``("absolute", e)`` within e of the exact one. The verifier charges it on every target (kernel_bounds),
#: whatever instruction the target uses (T10: the hardware's approximate instructions on a GPU)
APPROXIMATE_BOUNDS = {"div": ("ulp", 2), "exp2": ("ulp", 2), "tanh": ("absolute", 2.0**-10.9)}
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


@attrs.frozen(slots=True)
class MathSpec:
    """What every implementation and check needs to know about one unary function of T4, kept on its op.

    Adding a function is then one entry of :data:`UNARY_MATH_SPECS` (plus one numerics body per implementation):
    the ``I.*`` function, the TileLang scalar rule, the verifier's special-value witnesses (``annex_f``), the
    propagation of its error bound (``kernel_bounds``) and the catalogue's deferral are derived from it, so none of
    them can be forgotten when a function is added.
    """

    vendor: bool = True  # the platform library's accuracy (T4's 2 ulp, T10's vendor bound); False: exact (T3)
    specials: tuple = ()  # ((x, exact result), ...): T4's C99 Annex F values; NaN in gives NaN out for every function
    condition: float | None = None  # a bound on |x f'(x) / f(x)| over the finite f32 domain; None: unbounded near
    #                                 a root (a rounding there may lose all relative accuracy: kernel_bounds)
    positive: bool = False  # every non-NaN result is >= 0
    # The documented accuracy (ulp, against the correctly rounded f32 result) of the precise device libraries a GPU
    # target may call (T10), as ((library, ulps), ...). CUDA: CUDA C Programming Guide, "Mathematical Functions",
    # Table "Single-Precision Mathematical Standard Library Functions with Maximum ULP Error" (expf 2, exp2f 2,
    # expm1f 1, logf 1, log1pf 1, sinf 2, cosf 2, asinf 2, tanhf 2, erff 2, erfcf 4, lgammaf 6 outside
    # (-10.001, -2.264), cyl_bessel_i0f 6, rsqrtf 2); sigmoid has no CUDA function (4: its f32 composition's budget).
    # Metal: the MSL specification's precise-math table (4 ulp for these).
    vendor_ulps: tuple = ()
    options: tuple = ()  # the op's numeric option attributes (T4: approximate, flush_to_zero)
    dtypes: str = "float"

    def ulps(self, library: str) -> int | None:
        """The documented bound of ``library``'s implementation (``"cuda"``, ``"metal"``), None if not listed."""
        return dict(self.vendor_ulps).get(library)


_INF = math.inf
_NAN = math.nan


def _library(specials=(), *, condition=None, positive=False, cuda=None, options=()) -> MathSpec:
    """A vendor function: CUDA's documented bound as given, Metal's precise table's 4 ulp."""
    ulps = ((("cuda", cuda),) if cuda is not None else ()) + (("metal", 4),)
    return MathSpec(True, tuple(specials), condition, positive, ulps, options)


_EXACT = MathSpec(vendor=False)

#: The unary functions of T4, in the order the surface lists them. ``specials``: T4's list plus C99 Annex F's other
#: exact cases of the same functions (exp(+-0) = 1, log(1) = +0, lgamma(1) = lgamma(2) = +0, ...).
UNARY_MATH_SPECS = {
    "exp": _library(((-_INF, 0.0), (_INF, _INF), (0.0, 1.0), (-0.0, 1.0)), condition=104.0, positive=True, cuda=2),
    "log": _library(((0.0, -_INF), (-0.0, -_INF), (-1.0, _NAN), (-_INF, _NAN), (1.0, 0.0), (_INF, _INF)), cuda=1),
    "log1p": _library(((-1.0, -_INF), (-2.0, _NAN), (-_INF, _NAN), (0.0, 0.0), (-0.0, -0.0), (_INF, _INF)), cuda=1),
    "lgamma": _library(((0.0, _INF), (-0.0, _INF), (-1.0, _INF), (-2.0, _INF), (-7.0, _INF), (1.0, 0.0), (2.0, 0.0),
                        (_INF, _INF), (-_INF, _INF)), cuda=6),
    "sin": _library(((0.0, 0.0), (-0.0, -0.0), (_INF, _NAN), (-_INF, _NAN)), cuda=2),
    "asin": _library(((0.0, 0.0), (-0.0, -0.0), (1.5, _NAN), (-1.5, _NAN), (_INF, _NAN), (-_INF, _NAN)), cuda=2),
    "cos": _library(((0.0, 1.0), (-0.0, 1.0), (_INF, _NAN), (-_INF, _NAN)), cuda=2),
    "floor": _EXACT,
    "erf": _library(((0.0, 0.0), (-0.0, -0.0), (_INF, 1.0), (-_INF, -1.0)), condition=1.0, cuda=2),
    "erfc": _library(((-_INF, 2.0), (_INF, 0.0)), condition=210.0, positive=True, cuda=4),
    "i0": _library(((_INF, _INF), (-_INF, _INF)), condition=104.0, positive=True, cuda=6),
    "rsqrt": _library(((0.0, _INF), (-0.0, -_INF), (_INF, 0.0), (-1.0, _NAN), (-_INF, _NAN)), condition=0.5,
                      positive=True, cuda=2),
    "sqrt": MathSpec(vendor=False, positive=True),
    "sigmoid": _library(((-_INF, 0.0), (_INF, 1.0)), condition=104.0, positive=True, cuda=4),
    "abs": MathSpec(vendor=False, positive=True, dtypes="numeric"),
    "exp2": _library(((-_INF, 0.0), (_INF, _INF), (0.0, 1.0), (-0.0, 1.0)), condition=104.0, positive=True, cuda=2,
                     options=("approximate", "flush_to_zero")),
    "tanh": _library(((_INF, 1.0), (-_INF, -1.0), (0.0, 0.0), (-0.0, -0.0)), condition=1.0, cuda=2,
                     options=("approximate",)),
    # e^x - 1 without exp's cancellation near 0 (C99 7.12.6.3; Annex F.9.3.3): |x e^x / (e^x - 1)| <= max(1, x)
    "expm1": _library(((-_INF, -1.0), (_INF, _INF), (0.0, 0.0), (-0.0, -0.0)), condition=104.0, cuda=1),
}
UNARY_MATH = tuple(UNARY_MATH_SPECS)
UNARY_ATTRS = {name: spec.options for name, spec in UNARY_MATH_SPECS.items() if spec.options}

_ELEMENTWISE = frozenset({"pointwise", "elementwise", "element_consumer", "once"})
_FIRST_NAN = frozenset({"add", "sub", "mul", "div"})  # and fma; not pow (a libm's), nor maximum/minimum (IEEE's own)
for _name, _cls in BINARY.items():
    define(_name, "binary", 2, attrs=BINARY_ATTRS.get(_name, ()), infer=elementwise(), dtypes=_cls,
           traits=_ELEMENTWISE | {"first_nan"} if _name in _FIRST_NAN else _ELEMENTWISE)
for _name in COMPARE:
    define(_name, "compare", 2, infer=elementwise("bool"), dtypes="compare", traits=_ELEMENTWISE)
for _name, _spec in UNARY_MATH_SPECS.items():
    define(_name, "unary", 1, attrs=_spec.options, infer=elementwise(), dtypes=_spec.dtypes, math=_spec,
           traits=_ELEMENTWISE | {"vendor_math"} if _spec.vendor else _ELEMENTWISE)
define("neg", "unary", 1, infer=elementwise(), dtypes="numeric", traits=_ELEMENTWISE)
define("invert", "unary", 1, infer=elementwise(), dtypes="int_or_bool", doc="bitwise not; logical not on bool",
       traits=_ELEMENTWISE)
define("select", "ternary", 3, infer=select_rule, traits=_ELEMENTWISE)
define("fma", "ternary", 3, infer=elementwise(), dtypes="float", doc="a*b+c rounded once",
       traits=_ELEMENTWISE | {"first_nan"})
define("constant", "convert", 0, attrs=("value", "type"), infer=R.constant_rule,
       doc="a typed scalar constant (I.cast of a Python number)", traits={"pointwise"})
define("cast", "convert", 1, attrs=("dtype",), infer=convert_rule, traits=_ELEMENTWISE)
define("bitcast", "convert", 1, attrs=("dtype",), infer=convert_rule,
       traits=_ELEMENTWISE | {"reads_nan_bits"})

# Shape transforms and construction. Result types carry the (possibly dynamic) extents; operands
# after the first give runtime values of extents where the result needs them.
define("broadcast", "shape", 1, attrs=("type",), infer=R.broadcast_rule, traits={"element_consumer", "rematerialized"},
       doc="explicit scalar/size-one/rank broadcast (spec §4), right-aligned")
define("reshape", "shape", None, attrs=("type", "extents"), infer=R.reshape_rule,
       traits={"permutation", "element_consumer", "once"},
       doc="operands: value, then the runtime values of the result axes listed in `extents`")
define("transpose", "shape", 1, attrs=("perm", "type"), infer=R.transpose_rule,
       traits={"permutation", "element_consumer", "once"})
define("slice", "shape", None, attrs=("axes", "type"), infer=R.slice_rule,
       traits={"permutation", "element_consumer", "once"},
       doc="contiguous positions [start, stop) along the listed axes; operands: value, then start/stop per axis")
define("full", "shape", None, attrs=("type", "extents"), infer=R.full_rule, traits={"rematerialized"},
       doc="operands: the fill scalar, then the runtime values of the result axes listed in `extents`")
define("join", "shape", 2, attrs=("type",), infer=R.join_rule,
       traits={"permutation", "element_consumer", "once"}, doc="stack along a new trailing axis of extent 2")
define("tuple", "aggregate", None, attrs=("type",), infer=R.tuple_rule, traits={"aggregate"})
define("get", "aggregate", 1, attrs=("index", "type"), infer=R.get_rule, traits={"aggregate"})
define("record", "aggregate", None, attrs=("type",), infer=R.record_rule, traits={"aggregate"})
define("field", "aggregate", 1, attrs=("name", "type"), infer=R.field_rule, traits={"aggregate"})

# Domains and coordinates (spec §3).
define("domain", "domain", 3, attrs=("type",), infer=R.domain_rule, doc="operands: begin, end, step")
define("subregion", "domain", 3, attrs=("type",), infer=R.subregion_rule,
       doc="operands: parent domain, begin, end (member positions of the parent, no clamping)")
define("indices", "domain", 1, attrs=("type",), infer=R.indices_rule, traits={"rematerialized"}, doc="source coordinates of a domain's members")
define("dim", "domain", 1, attrs=("axis", "type"), infer=R.dim_rule,
       doc="the runtime extent of one axis of a tensor or view, or a domain's member count (axis 0)")

def assumed_equality(node, args) -> str:
    """The printer hook of ``assume_equal``: ``assume_equal N == %6`` (the sides' texts are the run-time message's)."""
    return f"{node.op.name} {args[0]} == {args[1]}"


# An extent equality the tracer cannot prove, stated by the kernel (issue 15 item 4): proxies/assume.py; the rules
# in oracle/generic_shapes.py, oracle/numba/memory.py, backends/tilelang/memory.py. From the node on, the two
# operands' extents are one extent (types.unite); every target checks the statement where the node stands: a
# ValueError naming both sides (`lhs`/`rhs`: each side's expression and the line that made it) and no output
# written. Its effect ("check") keeps it in place: it is never dropped, moved or fused away.
define("assume_equal", "domain", 2, attrs=("lhs", "rhs"), effects=frozenset({"check"}), infer=R.assume_equal_rule,
       printer=assumed_equality,
       doc="operands: two index scalars the kernel states equal; result: their value; the run fails when they "
           "differ")

# External views (spec §15). ``index`` describes each view axis: ("domain"|"scalar"|"tensor"|"all").
define("read", "memory", None, attrs=("index", "type"), effects=frozenset({"read"}), printer=indexed_access, infer=S.read_rule,
       traits={"element_consumer", "rematerialized"},
       doc="operands: view, then one index operand per non-'all' axis entry")
define("write", "memory", None, attrs=("index",), effects=frozenset({"write"}), printer=indexed_access, infer=no_result,
       traits={"element_consumer"}, once_operands=(1,),
       doc="operands: view, value, then index operands (domains, points, whole axes)")
define("unique_store", "memory", None, attrs=("index",), effects=frozenset({"write"}), printer=indexed_access, infer=no_result,
       traits={"element_consumer"}, once_operands=(1,),
       doc="arbitrary-index unique store: a view write with data-derived integer tensor indices; the destination "
           "relation must be injective (generic and cpu check it at run time)")

# Scaled and sparse contract (spec §11, §12; numerics T6, T7): proxies/scaled.py, oracle/generic_scaled.py,
# oracle/numba/scaled.py. Quantized computation (spec §11.1, quantization.md): proxies/quant.py,
# oracle/generic_quant.py, oracle/numba/quant.py.
define("scaled_contract", "structured", 4, attrs=("lhs_format", "rhs_format", "group_size", "acc_dtype", "type"),
       infer=S.scaled_contract_rule, traits={"looping", "contraction"},
       doc="operands: lhs codes u8[M, G, C_lhs], lhs e8m0 scale codes u8[M, G], rhs codes u8[G, C_rhs, N], rhs "
           "e8m0 scale codes u8[N, G]; reduce ((1, 0), (2, 1)); result acc_dtype[M, N]")
define("sparse_contract", "structured", 3, attrs=("format", "reduce", "batch", "acc_dtype", "type"),
       infer=S.sparse_contract_rule, traits={"looping", "contraction"},
       doc="operands: compressed lhs, logical metadata (same shape), dense rhs; the lhs compression axis is its "
           "first reduce axis; otherwise as contract")
define("quantize", "structured", None, attrs=("format", "type"), infer=S.quantize_rule,
       doc="f32[..., K] -> the format's record of logical fields (quantization.md Q1, Q2); a dynamic K comes with a "
           "second operand, the block count K // 256 (the record's blocks extent; K % 256 == 0 is checked by the run)")
define("quantized_dot", "structured", 2, attrs=("lhs_format", "rhs_format", "acc_dtype", "type"), infer=S.quantized_dot_rule,
       traits={"looping", "contraction"},
       doc="dot of two quantized records over the blocks axis; leading axes broadcast (quantization.md Q3)")

# Indexed access beyond views (spec §13, §15). Implemented in proxies/memory.py, oracle/generic_memory.py and
# oracle/numba/memory.py.
define("gather", "memory", None, attrs=("has_valid", "type"), infer=S.gather_rule,
       traits={"element_consumer", "indexed"},
       doc="pure tensor gather: operands source tensor, one integer index per source axis (all broadcast to the "
           "result shape), [valid bool], fill (a scalar or a tensor broadcastable to the result); invalid lanes do "
           "not read and give fill")
define("histogram", "structured", None, attrs=("bins", "has_valid", "type"), infer=S.histogram_rule,
       traits={"element_consumer"}, once_operands=(0,),
       doc="operands: integer values, [valid bool]; counts of each bin in [0, bins) as a (bins,) tensor")
define("buffer", "memory", None, attrs=("type",), effects=frozenset({"alloc"}), infer=S.buffer_rule,
       doc="a kernel-local logical buffer; operands: [init value broadcast to its shape]")
define("load", "memory", None, attrs=("index", "type"), effects=frozenset({"read"}), printer=indexed_access, infer=S.load_rule,
       doc="logical-buffer load: operands buffer, then index operands (as `read`)")
define("store", "memory", None, attrs=("index",), effects=frozenset({"write"}), printer=indexed_access, infer=no_result,
       traits={"element_consumer"}, once_operands=(1,),
       doc="logical-buffer store: operands buffer, value, then index operands (as `write`)")
define("scatter_reduce", "memory", None, attrs=("combine", "has_valid", "type"), regions=1,
       effects=frozenset({"read", "write"}),
       # `type`: the tensor type of the scattered values (the index shape)
       infer=S.scatter_reduce_rule, traits={"element_consumer"}, once_operands=(1,),
       doc="operands: destination view or buffer, values, one integer index tensor per destination axis, [valid "
           "bool of the index shape]; collisions and the existing element combine with the region (a builtin or a "
           "pure helper) in unspecified order; an invalid lane combines nothing and is not bounds-checked")

# Masked access (spec §15): I.load / I.store with valid=, and I.gather of a view or buffer (proxies/masked.py;
# rules in oracle/generic_memory.py, oracle/numba/memory.py, backends/tilelang/memory.py). Coordinates are per
# element, as gather's: one integer per target axis, each a tensor of the access shape or a scalar (the same for
# every lane). A lane whose valid is False reads nothing (it gives the fill) or writes nothing, and its coordinates
# are never bounds-checked. A masked write is a unique store: the valid lanes' coordinates must be distinct;
# `data_indexed` (recorded only when set) says some coordinate is data (an integer tensor entry), so the targets
# check that at run time, as for unique_store; without it the coordinates are domains, points and whole axes.
_MASKED_READ = dict(attrs=("type",), effects=frozenset({"read"}), printer=masked_access, infer=S.masked_read_rule,
                    traits={"element_consumer", "indexed"})
_MASKED_WRITE = dict(attrs=("data_indexed",), effects=frozenset({"write"}), printer=masked_access,
                     infer=S.masked_write_rule, traits={"element_consumer"}, once_operands=(1,))
define("masked_read", "memory", None, **_MASKED_READ,
       doc="external view load: operands view, one coordinate per axis, valid, fill (the source dtype; a scalar "
           "or of the access shape)")
define("masked_load", "memory", None, **_MASKED_READ, doc="logical-buffer load: operands as masked_read")
define("masked_write", "memory", None, **_MASKED_WRITE,
       doc="external view store: operands view, value (of the access shape), one coordinate per axis, valid")
define("masked_store", "memory", None, **_MASKED_WRITE, doc="logical-buffer store: operands as masked_write")

# RNG (spec §17, numerics T8). Implemented in proxies/random.py, oracle/generic_random.py, oracle/numba/random.py.
define("random_bits", "random", 2, attrs=("type",), infer=R.random_bits_rule,
       traits={"elementwise", "element_consumer", "once"},
       doc="Philox4x32-10 bits: operands u64 seed scalar, non-negative integer counter (scalar or tensor); "
           "word counter % 4 of block counter // 4; pure and independent of execution order")

# Atomics (spec §16, numerics T9). The address is a view element: operands view, then index operands (as `read`).
# Implemented in proxies/atomic.py, oracle/generic_atomic.py, oracle/numba/atomic.py.
_ATOMIC_RW = frozenset({"read", "write"})
define("atomic_load", "atomic", None, attrs=("index", "order", "type"), effects=frozenset({"read"}),
       infer=S.atomic_load_rule, doc="operands: view, index operands; order relaxed|acquire")
define("atomic_store", "atomic", None, attrs=("index", "order"), effects=frozenset({"write"}), infer=no_result,
       doc="operands: view, value, index operands; order relaxed|release")
define("atomic_rmw", "atomic", None, attrs=("index", "kind", "order", "type"), effects=_ATOMIC_RW,
       infer=S.atomic_rmw_rule, doc="operands: view, value, index operands; kind exchange|add|max|min|and|or|xor; "
                             "returns the old value")
define("atomic_compare_exchange", "atomic", None, attrs=("index", "order", "failure_order", "type"),
       effects=_ATOMIC_RW, infer=S.atomic_compare_exchange_rule, traits={"reads_nan_bits"},
       doc="operands: view, expected, desired, index operands; returns record {old_value, success}")

# Structured control (spec §5, §6). Region parameters are listed in the printer.
_CTRL = frozenset({"control"})
define("parallel", "control", 1, regions=1, effects=_CTRL, infer=no_result, doc="unordered forall over a domain")
define("for", "control", 1, regions=1, effects=_CTRL, infer=no_result, doc="ordered effect-only iteration")
define("loop", "control", None, regions=1, attrs=("types",), effects=_CTRL, infer=R.loop_rule,
       doc="ordered iteration with carries: operands domain, *init; region (point, *carry) -> carry")
define("while", "control", None, regions=2, attrs=("types",), effects=_CTRL, region_names=("cond", "body"), infer=R.while_rule,
       doc="operands *init; regions cond(carry) -> bool, body(carry) -> carry")
define("if", "control", 1, regions=2, attrs=("types",), effects=_CTRL, region_names=("then", "else"), infer=R.if_rule,
       doc="operand: bool scalar predicate; regions then/else yield the results")
define("break", "control", None, effects=_CTRL, infer=no_result,
       doc="operands pred, *exit carry: leave the innermost ordered loop when pred holds")
define("continue", "control", None, effects=_CTRL, infer=no_result,
       doc="operands pred, *next carry: end this iteration when pred holds")


# Structured operations (spec §7, §8). The combine region is a pure helper: (lhs, rhs, *operands) -> acc.
define("reduce", "structured", None, attrs=("axes", "helper", "types"), regions=1, infer=S.reduce_rule,
       traits={"element_consumer", "looping", "reduction"}, once_operands=(0, 1),
       doc="operands: source, identity, *combine operands; reduces `axes` of every source component with an "
           "associative, commutative combine (re-association and re-ordering allowed)")
define("scan", "structured", None, attrs=("axis", "inclusive", "reverse", "helper", "types"), regions=1,
       infer=S.scan_rule, traits={"element_consumer", "reduction"}, once_operands=(0, 1),
       doc="operands: source, identity, *combine operands; prefix combine along `axis` in source order "
           "(associative only: re-association allowed, re-ordering not); reverse prefixes run from the end, "
           "still combining in source order (out[k] = x[k] + ... + x[n-1])")


# Region fold and region scan (spec §9). Regions: summarize(*slices, *operands) -> S, combine(S, S) -> S
# (+ for region_scan: apply(S, state) -> state, emit(*slices, state, *operands) -> output slices). The slice
# extent is a Dim of its own that no other value can observe.
define("region_fold", "structured", None, attrs=("axis", "helpers", "types"), regions=2, infer=S.region_fold_rule,
       doc="operands: source, identity, *operands; folds summaries of contiguous slices of `axis` in order")
define("region_scan", "structured", None, attrs=("axis", "helpers", "types"), regions=4, infer=S.region_scan_rule,
       doc="operands: source, identity, initial_state, *operands; returns (outputs, final state)")

# Named multiplication (spec §10): one canonical paired-axis multiply-add.
define("contract", "structured", 2, attrs=("reduce", "batch", "acc_dtype", "type"), infer=S.contract_rule,
       traits={"element_consumer", "looping", "contraction"},
       doc="reduce/batch are ((lhs_axis, rhs_axis), ...) pairs; result axes: lhs axes not reduced (batch "
           "representatives included) in lhs order, then rhs axes neither reduced nor batched, in rhs order; "
           "operands converted to acc_dtype, products and sums in acc_dtype")


def __getattr__(name: str) -> OpDef:
    """``ops.add``, ``ops.read``, ...; the ops named by Python keywords are ``ops.if_``, ``ops.for_``,
    ``ops.while_``, ``ops.break_`` and ``ops.continue_``."""
    op = REGISTRY.get(name)
    if op is None and name.endswith("_") and keyword.iskeyword(name[:-1]):
        op = REGISTRY.get(name[:-1])
    if op is None:
        raise AttributeError(name)
    return op


def region_effects(node) -> frozenset:
    """Effects of a node including everything its regions do."""
    eff = set(node.op.effects - {"control"})
    for r in node.regions:
        for n in r.nodes:
            eff |= region_effects(n)
    return frozenset(eff)
