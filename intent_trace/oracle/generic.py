"""Generic: the NumPy reference interpreter, the semantic authority.

Slow and obvious on purpose. Each canonical op has one rule in :data:`RULES`; numerics come from
:mod:`.numerics`. Out/InOut views are staged copies committed only when the whole run succeeds,
so a kernel that raises leaves every caller array as it was (T9).
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..arguments import bind_arguments
from ..compiler import register_target
from ..display import ExecutableDisplay
from ..graph import ops
from ..graph.interpreter import Interpreter, rule_registrar
from ..graph.values import KernelGraph, Literal
from ..limits import check_allocation
from . import numerics as N


class DomainValue:
    """Runtime value of a domain or subregion: its member coordinates."""

    __slots__ = ("coords",)

    def __init__(self, coords: np.ndarray):
        self.coords = coords

    def __len__(self) -> int:
        return len(self.coords)


class LoopExit(Exception):
    """Raised by ``break``/``continue`` nodes; carries the carry to continue with (or None)."""

    def __init__(self, kind: str, carry):
        self.kind = kind
        self.carry = carry


class GenericInterpreter(Interpreter):
    target_name = "generic"
    rules: dict = {}

    def __init__(self, graph: KernelGraph, values: list, dims: dict, rng=None, check_laws: bool = False):
        super().__init__()
        self.graph = graph
        self.rng = rng if rng is not None else np.random.default_rng(0)  # region segmentations
        self.check_laws = check_laws
        self.dims = dict(dims)
        self.views: dict = {}  # view Var -> (name, array the kernel reads/writes)
        self.parallel_writes: list = []  # stack of {view name: {flat index: point}} for conflict checks
        self._checked_results: dict = {}  # node -> its tensor result types (see _check_results)
        for p, v in zip(graph.params, values):
            self.env[p.var] = v
            if p.kind == "view":
                self.views[p.var] = p.name
        for ev in graph.extents:
            self.env[ev] = np.asarray(self.dims[ev.extent], dtype=np.int64)

    def literal(self, lit: Literal):
        return np.asarray(lit.value, dtype=lit.type.dtype.np)

    def extent(self, e) -> int:
        return e if isinstance(e, int) else self.dims[e]

    def shape(self, shape) -> tuple:
        return tuple(self.extent(e) for e in shape)

    def run_node(self, node):
        try:
            self._check_results(node)
            super().run_node(node)
        except LoopExit:
            raise
        except (IndexError, ValueError, RuntimeError, TypeError) as e:
            if not getattr(e, "_intent_located", False):
                e.add_note(f"in op `{node.op.name}` at {node.loc!r}")
                e._intent_located = True
            raise
        for v in node.outputs:
            t = v.type
            if isinstance(t, T.TensorType):
                for e, n in zip(t.shape, self.env[v].shape):
                    if not isinstance(e, int):
                        self.dims[e] = n


    def _check_results(self, node) -> None:
        """Refuse a tensor result that cannot fit (intent_trace.limits) before its rule allocates it.

        One check for every op whose result shape is known from its operands' extents (pointwise results,
        broadcasts, reads, contracts, reduces, gathers...). An op that takes new extents from runtime values
        (``full``, ``reshape``: its ``extents`` attribute; domains and buffers) checks the shape its rule
        computes, as the extents recorded here may be a previous iteration's.
        """
        checked = self._checked_results.get(node)
        if checked is None:  # the node's tensor result types, found once per run (region bodies run often)
            checked = () if node.attr("extents") else tuple(
                t for v in node.outputs for t in T.leaf_types(v.type) if t.__class__ is T.TensorType)
            self._checked_results[node] = checked
        dims = self.dims
        for t in checked:
            shape = tuple(e if isinstance(e, int) else dims.get(e) for e in t.shape)
            if None not in shape:
                check_allocation(f"the {node.op.name} result at {node.loc!r} (shape {shape})", shape,
                                 t.dtype.np.itemsize)


RULES = GenericInterpreter.rules


rule = rule_registrar(RULES)


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype in N._NARROW


# --- elementwise -------------------------------------------------------------------------------

_PLAIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


@rule("add", "sub", "mul")
def _arith(it, node, args):
    a, b = args
    fn = _PLAIN[node.op.name]
    if _is_float(a):
        return N.float_binary(fn, a, b)
    with N._errstate():
        return np.asarray(fn(a, b)).astype(a.dtype)


@rule("div")
def _div(it, node, args):
    a, b = args
    if node.attr("flush_to_zero"):
        a, b = N.flush_subnormals(a), N.flush_subnormals(b)
        return N.flush_subnormals(N.float_binary(np.divide, a, b))
    return N.float_binary(np.divide, a, b)


_INT_BINARY = {"floordiv": N.int_floordiv, "mod": N.int_mod, "shl": N.shl, "shr": N.shr}


@rule("floordiv", "mod", "shl", "shr")
def _int_binary(it, node, args):
    return _INT_BINARY[node.op.name](*args)


@rule("pow")
def _pow(it, node, args):
    a, b = args
    return N.float_pow(a, b) if _is_float(a) else N.int_pow(a, b)


@rule("maximum", "minimum")
def _minmax(it, node, args):
    return N.ieee_maximum(args[0], args[1], node.op.name == "maximum")


_BITWISE = {"and_": np.bitwise_and, "or_": np.bitwise_or, "xor": np.bitwise_xor}


@rule("and_", "or_", "xor")
def _bitwise(it, node, args):
    return np.asarray(_BITWISE[node.op.name](*args)).astype(args[0].dtype)


_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


@rule(*_COMPARE)
def _compare(it, node, args):
    a, b = args
    if _is_float(a):
        a, b = N.widen(a), N.widen(b)
    return np.asarray(_COMPARE[node.op.name](a, b))


@rule(*ops.UNARY_MATH)
def _unary_math(it, node, args):
    return N.unary_math(node.op.name, args[0], bool(node.attr("flush_to_zero")))


@rule("neg")
def _neg(it, node, args):
    (x,) = args
    if _is_float(x):
        return N.sign_bit_op(x, "neg")
    with N._errstate():
        return np.negative(x)


@rule("invert")
def _invert(it, node, args):
    return np.invert(args[0])


@rule("select")
def _select(it, node, args):
    p, a, b = args
    return np.where(p, a, b).astype(a.dtype)


@rule("fma")
def _fma(it, node, args):
    return N.fma(*args)


@rule("constant")
def _constant(it, node, args):
    return np.asarray(node.attr("value"), dtype=node.attr("type").dtype.np)


@rule("cast")
def _cast(it, node, args):
    return N.cast(args[0], node.attr("dtype"))


@rule("bitcast")
def _bitcast(it, node, args):
    return N.bitcast(args[0], node.attr("dtype"))


# --- shapes and aggregates -----------------------------------------------------------------------

@rule("broadcast")
def _broadcast(it, node, args):
    return np.broadcast_to(args[0], it.shape(node.attr("type").shape))


def _fresh_extents(it, node, operands) -> tuple:
    shape = list(node.attr("type").shape)
    for axis, value in zip(node.attr("extents"), operands):
        n = int(value)
        if n < 0:
            raise ValueError(f"extent {n} (axis {axis}) is negative")
        if n > T.index.max:
            raise ValueError(f"extent {n} (axis {axis}) does not fit the index type (at most {T.index.max})")
        shape[axis] = n
        it.dims[node.attr("type").shape[axis]] = n
    return it.shape(shape)


@rule("full")
def _full(it, node, args):
    shape = _fresh_extents(it, node, args[1:])
    dtype = node.attr("type").dtype.np
    check_allocation(f"I.full at {node.loc!r} (shape {shape})", shape, dtype.itemsize)
    return np.full(shape, args[0], dtype=dtype)


@rule("reshape")
def _reshape(it, node, args):
    x = args[0]
    shape = _fresh_extents(it, node, args[1:])
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"reshape of {x.size} elements (shape {x.shape}) into shape {shape}")
    return x.reshape(shape)


@rule("transpose")
def _transpose(it, node, args):
    return np.transpose(args[0], node.attr("perm"))


@rule("join")
def _join(it, node, args):
    return np.stack([args[0], args[1]], axis=-1)


@rule("slice")
def _slice(it, node, args):
    x, rest = args[0], iter(args[1:])
    key = []
    for axis, kind in enumerate(node.attr("axes")):
        n = x.shape[axis]
        if kind == "all":
            key.append(slice(None))
        elif kind == "range":
            start, stop = int(next(rest)), int(next(rest))
            if start < 0 or (stop > n and stop > start) or stop < 0:
                raise IndexError(f"slice [{start}:{stop}] is outside axis {axis} of extent {n} (no clamping)")
            key.append(slice(start, max(start, stop)))
        else:
            p = int(next(rest))
            if not 0 <= p < n:
                raise IndexError(f"index {p} is outside axis {axis} of extent {n}")
            key.append(p)
    return np.asarray(x[tuple(key)])


@rule("tuple", "record")
def _pack(it, node, args):
    return tuple(args)


@rule("get")
def _get(it, node, args):
    return args[0][node.attr("index")]


@rule("field")
def _field(it, node, args):
    return args[0][node.inputs[0].type.names.index(node.attr("name"))]


# --- domains -------------------------------------------------------------------------------------

@rule("domain")
def _domain(it, node, args):
    b, e, s = (int(a) for a in args)
    if s <= 0:
        raise ValueError(f"domain step must be positive, got {s}")
    n = max(0, -(-(e - b) // s))  # exact (Python ints): the bounds may be u64 values
    if n and not (T.index.min <= b and b + (n - 1) * s <= T.index.max):
        raise ValueError(f"the domain at {node.loc!r} ({b} to {e} step {s}) has members that do not fit the index "
                         f"type ({T.index.min}..{T.index.max})")
    check_allocation(f"the domain at {node.loc!r} ({n} members)", (n,), 8)
    return _bound(it, node, DomainValue(np.arange(b, e, s, dtype=np.int64) if n else np.zeros(0, np.int64)))


def _bound(it, node, d: DomainValue) -> DomainValue:
    """Record a domain's runtime member count as the value of its (dynamic) extent."""
    ext = node.attr("type").extent
    if not isinstance(ext, int):
        it.dims[ext] = len(d)
    return d


@rule("subregion")
def _subregion(it, node, args):
    parent, b, e = args[0], int(args[1]), int(args[2])
    n = len(parent)
    if b < 0 or e < 0:
        raise IndexError(f"subregion [{b}:{e}] has a negative bound")
    if e > b and e > n:
        raise IndexError(f"subregion [{b}:{e}] ends past its parent's extent {n} (subregions never clamp)")
    return _bound(it, node, DomainValue(parent.coords[b:e] if e > b else np.zeros(0, np.int64)))


@rule("indices")
def _indices(it, node, args):
    return args[0].coords.copy()


@rule("dim")
def _dim(it, node, args):
    x = args[0]
    n = len(x) if isinstance(x, DomainValue) else x.shape[node.attr("axis")]
    return np.asarray(n, dtype=np.int64)


# --- views ---------------------------------------------------------------------------------------

def _index_arrays(it, node, view_var, array: np.ndarray, operands) -> tuple:
    """NumPy integer index arrays (outer indexing) for a read/write, bounds-checked (T9)."""
    kinds = node.attr("index")
    result_rank = sum(1 if k in ("domain", "all") else (np.ndim(o) if k == "tensor" else 0)
                      for k, o in zip(kinds, _align(kinds, operands)))
    name = it.views[view_var]
    arrays, axis_pos = [], 0
    for axis, (kind, op) in enumerate(zip(kinds, _align(kinds, operands))):
        n = array.shape[axis]
        if kind == "all":
            idx = np.arange(n, dtype=np.int64)
        elif kind == "domain":
            idx = op.coords
        else:
            idx = np.asarray(op).astype(np.int64, copy=False)
        bad = (idx < 0) | (idx >= n)
        if np.any(bad):
            coord = idx[bad].reshape(-1)[0]
            raise IndexError(f"{name}: coordinate {int(coord)} on axis {axis} is outside its extent {n}")
        k = idx.ndim
        shape = [1] * result_rank
        shape[axis_pos:axis_pos + k] = idx.shape
        arrays.append(idx.reshape(shape) if result_rank else idx)
        axis_pos += k
    return tuple(arrays)


def _align(kinds, operands):
    it = iter(operands)
    return [None if k == "all" else next(it) for k in kinds]


@rule("read")
def _read(it, node, args):
    array = args[0]
    idx = _index_arrays(it, node, node.inputs[0], array, args[1:])
    return np.array(array[idx]) if idx else np.array(array)


@rule("write", "unique_store")
def _write(it, node, args):
    array, value = args[0], args[1]
    view_var = node.inputs[0]
    idx = _index_arrays(it, node, view_var, array, args[2:])
    target_shape = np.broadcast_shapes(*(a.shape for a in idx)) if idx else ()
    flat = np.ravel_multi_index(np.broadcast_arrays(*idx), array.shape).reshape(-1) if idx else np.zeros(1, np.int64)
    if "tensor" in node.attr("index") and len(np.unique(flat)) != flat.size:
        raise RuntimeError(f"{it.views[view_var]}: a unique store writes one element twice (its index relation is "
                           f"not injective); use scatter_reduce to combine collisions")
    if it.parallel_writes:
        _record_parallel_writes(it, it.views[view_var], flat)
    array[idx] = np.broadcast_to(value, target_shape)


def _record_parallel_writes(it, name: str, flat: np.ndarray) -> None:
    point, seen = it.parallel_writes[-1]
    owners = seen.setdefault(name, {})
    for f in flat.tolist():
        other = owners.setdefault(f, point)
        if other != point:
            raise RuntimeError(f"{name}: parallel points {other} and {point} both write element {f} (flat index); "
                               f"parallel writes must not conflict")


# --- control -------------------------------------------------------------------------------------

@rule("parallel")
def _parallel(it, node, args):
    domain = args[0]
    (region,) = node.regions
    it.parallel_writes.append([None, {}])
    try:
        for c in domain.coords:
            it.parallel_writes[-1][0] = int(c)
            it.run_region(region, (np.asarray(c),))
    finally:
        it.parallel_writes.pop()


@rule("for")
def _for(it, node, args):
    (region,) = node.regions
    for c in args[0].coords:
        try:
            it.run_region(region, (np.asarray(c),))
        except LoopExit as e:
            if e.kind == "break":
                break


@rule("loop")
def _loop(it, node, args):
    domain, carry = args
    (region,) = node.regions
    for c in domain.coords:
        try:
            (carry,) = it.run_region(region, (np.asarray(c), carry))
        except LoopExit as e:
            carry = e.carry
            if e.kind == "break":
                break
    return carry


@rule("while")
def _while(it, node, args):
    (carry,) = args
    cond, body = node.regions
    while True:
        (p,) = it.run_region(cond, (carry,))
        if not bool(p):
            return carry
        try:
            (carry,) = it.run_region(body, (carry,))
        except LoopExit as e:
            carry = e.carry
            if e.kind == "break":
                return carry


@rule("if")
def _if(it, node, args):
    then_r, else_r = node.regions
    results = it.run_region(then_r if bool(args[0]) else else_r)
    return results[0] if results else None


@rule("break", "continue")
def _exit(it, node, args):
    if bool(args[0]):
        raise LoopExit(node.op.name, args[1] if len(args) > 1 else None)


# --- the target ----------------------------------------------------------------------------------

class GenericExecutable(ExecutableDisplay):
    """``intent.compile(k, target="generic")``: runs the reference interpreter on NumPy arrays.

    ``seed`` seeds the random segmentation that every region fold/scan picks anew on each run (so
    tests exercise the §9 laws); ``check_laws=True`` also re-evaluates every reduce, scan and region
    combine under other associations and segmentations and raises :class:`LawViolation` naming the
    helper, the law and a small counterexample when they disagree beyond the T5 bound."""

    target = "generic"
    source = None

    def __init__(self, graph: KernelGraph, seed: int | None = 0, check_laws: bool = False):
        self.graph = graph
        self.rng = np.random.default_rng(seed)
        self.check_laws = bool(check_laws)

    def __call__(self, *args) -> None:
        values, dims = bind_arguments(self.graph, args)
        staged = []
        for i, p in enumerate(self.graph.params):
            if p.kind == "view" and p.type.access != "In":
                check_allocation(f"the staging copy of {p.name}", values[i].shape, values[i].itemsize)
        for i, p in enumerate(self.graph.params):
            if p.kind == "view" and p.type.access != "In":
                copy = np.array(values[i], copy=True)
                staged.append((values[i], copy))
                values[i] = copy
        GenericInterpreter(self.graph, values, dims, self.rng, self.check_laws).run_region(self.graph.body)
        for caller, copy in staged:  # commit only after the whole run succeeded
            np.copyto(caller, copy)

    def __repr__(self) -> str:
        return f"<generic executable {self.graph.name}>"


register_target("generic", lambda graph, **options: GenericExecutable(graph, **options))


from . import generic_structured  # noqa: E402,F401  (registers reduce and scan)
from . import generic_contract  # noqa: E402,F401  (registers contract)
from . import generic_region  # noqa: E402,F401  (registers region_fold and region_scan)
from . import generic_memory  # noqa: E402,F401  (registers gather, histogram, buffers, scatter_reduce)
from . import generic_random  # noqa: E402,F401  (registers random_bits)
from . import generic_atomic  # noqa: E402,F401  (registers the atomic ops)
from . import generic_scaled  # noqa: E402,F401  (registers scaled_contract and sparse_contract)
from . import generic_quant  # noqa: E402,F401  (registers quantize and quantized_dot)
