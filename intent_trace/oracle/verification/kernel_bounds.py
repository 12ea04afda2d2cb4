"""Per-output error bounds of a user kernel, derived from its KIR: what ``intent.verify`` accepts by default.

``intent.verify`` compares a target with the CPU oracle on the same inputs. Where the language fixes
every rounding (T3: ``+ - * /``, ``sqrt``, ``fma``, casts are correctly rounded; movement, integer and
max/min are exact) two correct implementations agree bit for bit, and the comparison must be exact.
Where it does not (T4/T10 vendor math, T5 accumulations whose order is the target's), two correct
implementations differ, and the tolerance must follow from the graph, not from a guess.

So this module runs one forward pass over the graph and gives every value a :class:`Bound`:

* ``rel``: a bound on the relative difference between the target's and the oracle's value, as a real
  number. Exact ops keep it; a correctly rounded op on inexact operands adds 2u (each side rounds once,
  u the unit roundoff of the result dtype) to the sum (mul/div) or max (add/sub) of its operands';
  a vendor function adds its two documented ulp bounds (1 ulp <= 2u) to ``cond * rel_in``, where
  ``cond`` bounds the function's relative condition number over the finite f32 range (exp: |x| <= 104);
  a floating accumulation of K terms adds K * 2u_acc (gamma_K of each of two associations, T5) and a
  contraction adds its operands' bounds as a product does.
* ``cancel`` (with the op that caused it): a value that may have lost its relative accuracy to
  cancellation (an add of operands of unknown or opposite signs that are inexact, a sum of terms of
  unknown sign, a function whose condition number is unbounded near a root). Its ``rel`` is then
  relative to the magnitude of the terms, not of the result: such an output element is accepted when
  its absolute difference is at most ``rel * max |oracle output|`` (a normwise bound: the output's
  largest magnitude stands in for the terms', which it does not exceed for one-signed reductions and
  rarely does otherwise; documented as the one heuristic here).
* ``unbounded`` (with a reason): the value depends through a comparison, a rounding to an integer, an
  atomic's returned old value, or a data-dependent control decision on an inexact value, so no bound
  follows; such an output is compared exactly and the reason says to give a Tolerance.
* ``sign``: +1 when provably >= 0, -1 when provably <= 0, 0 when unknown (inputs' signs come from the
  actual arguments). A sum of one-signed terms cannot cancel, which is what keeps softmax's
  denominator a relative bound.

``accumulates`` notes that a floating accumulation fed the value: with several NaN inputs its NaN
payload depends on the association, so only NaN-ness is then an obligation.
Sign analysis and condition numbers are per value, not per element; the bound is per output.
"""
from __future__ import annotations

import math

import attrs
import numpy as np

from ... import types as T
from ...graph import ops as kir
from ...graph.values import Literal, walk_region
from ...graph.traits import APPROXIMATE, MATH_FUNCTIONS, VENDOR_FUNCTIONS, VENDOR_MATH
from .bounds import FLOAT_ROUNDING

UNIT_ROUNDOFF = {name: u for name, (u, _) in FLOAT_ROUNDING.items()}

# T4's bound for the oracle's own math library (and for targets that call a C library).
DEFAULT_VENDOR_ULPS = 2
# Documented accuracy (ulp) of the precise device libraries each GPU target calls, from each op's MathSpec
# (graph/ops.py cites the tables: the CUDA C Programming Guide's single-precision table, the MSL specification's).
_LIBRARY = {"tilelang-cuda": "cuda", "tilelang-metal": "metal"}
VENDOR_ULPS = {target: {op.name: op.math.ulps(library) for op in VENDOR_FUNCTIONS if op.math.ulps(library) is not None}
               for target, library in _LIBRARY.items()}
# Relative condition number |x f'(x) / f(x)| over the finite f32 domain; None: unbounded near a root
# (the value may cancel: its bound becomes absolute, see the module docstring). Each op's MathSpec says.
_CONDITION = {op.name: op.math.condition for op in VENDOR_FUNCTIONS}
_POSITIVE = tuple(op.name for op in MATH_FUNCTIONS if op.math.positive)

VENDOR = {op: op.name for op in VENDOR_MATH}  # T4's library functions, each with its _CONDITION
_SHAPED = {kir.broadcast, kir.reshape, kir.transpose, kir.slice, kir.full}
_ROUNDED = {kir.add, kir.sub, kir.mul, kir.div, kir.fma, kir.sqrt, kir.cast, kir.pow}
_ADDITIVE = {kir.add, kir.sub}
_MULTIPLICATIVE = {kir.mul, kir.div}
_PASSING = {kir.broadcast, kir.reshape, kir.transpose, kir.slice, kir.join, kir.tuple, kir.get, kir.record, kir.field,
            kir.neg, kir.abs, kir.maximum, kir.minimum, kir.full, kir.buffer}
_DISCRETE = {kir.floor, kir.bitcast, kir.quantize, kir.histogram, kir.random_bits, kir.floordiv, kir.mod, kir.and_,
             kir.or_, kir.xor, kir.shl, kir.shr, kir.invert} | {kir.REGISTRY[n] for n in kir.COMPARE}
_READS = {kir.read, kir.load, kir.gather, kir.atomic_load, kir.masked_read, kir.masked_load}
_MASKED_READS = {kir.masked_read, kir.masked_load}  # operands: target, coordinates, valid, fill (the other value)
_SINKS = {kir.write, kir.store, kir.unique_store, kir.atomic_store, kir.masked_write, kir.masked_store}
_CONTRACTIONS = {kir.contract, kir.scaled_contract, kir.sparse_contract, kir.quantized_dot}
_FOLDS = {kir.reduce, kir.scan, kir.region_fold, kir.region_scan}
_ORDERED = {kir.loop, kir.while_}
_NESTS = {kir.parallel, kir.for_}


@attrs.frozen
class Bound:
    rel: float = 0.0
    cancel: str | None = None
    unbounded: str | None = None
    sign: int = 0
    accumulates: bool = False
    why: tuple = ()  # human-readable contributions, in graph order

    @property
    def exact(self) -> bool:
        return self.rel == 0.0 and self.unbounded is None


EXACT = Bound()


def join(bounds, sign: int | None = None) -> Bound:
    """The bound of a value that may be any of ``bounds`` (the worst of each component)."""
    bounds = list(bounds) or [EXACT]
    signs = {b.sign for b in bounds}
    return Bound(max(b.rel for b in bounds), next((b.cancel for b in bounds if b.cancel), None),
                 next((b.unbounded for b in bounds if b.unbounded), None),
                 (signs.pop() if len(signs) == 1 else 0) if sign is None else sign,
                 any(b.accumulates for b in bounds), _merged_why(bounds))


def _merged_why(bounds) -> tuple:
    return tuple(dict.fromkeys(w for b in bounds for w in b.why))


def _where(node) -> str:
    return f" at {node.loc!r}" if node.loc is not None else ""


def _dtype(var) -> T.DType | None:
    return getattr(var.type, "dtype", None)


def _unit(dtype) -> float:
    return UNIT_ROUNDOFF.get(getattr(dtype, "name", ""), 0.0)


class Analysis:
    """One forward pass over a graph with the actual arguments' shapes and signs bound."""

    def __init__(self, graph, args, target: str):
        self.graph, self.target = graph, target
        self.env: dict = {}
        self.dims: dict = {}
        self.largest = 1
        for p, a in zip(graph.params, args):
            arr = np.asarray(a) if hasattr(a, "__array__") else None
            if p.kind == "view" and arr is not None:
                self.largest = max(self.largest, int(arr.size))
                for d, n in zip(p.type.shape, arr.shape):
                    if isinstance(d, T.Dim):
                        self.dims[d] = int(n)
            self.env[p.var] = Bound(sign=_sign_of(arr if arr is not None else a))
        self.params = {p.var: p for p in graph.params}
        self.sinks: dict = {}  # view/buffer Var -> Bound of everything stored into it

    def run(self) -> dict:
        """{param name: Bound} for every Out/InOut view, in one pass in program order (a load sees the
        stores made before it; an ordered loop's body is walked twice, see ``_ordered``)."""
        self._region(self.graph.body)
        return {p.name: self.env[p.var] if p.type.access == "InOut" else self.sinks.get(p.var, EXACT)
                for p in self.graph.params if getattr(p.type, "access", None) in ("Out", "InOut")}

    # --- extents -------------------------------------------------------------------------------
    def extent(self, e) -> int:
        """A static extent, a bound parameter extent, or (a derived extent) the largest argument's size."""
        if isinstance(e, int):
            return e
        return self.dims.get(e, self.largest)

    def count(self, shape) -> int:
        return math.prod(self.extent(e) for e in shape)

    # --- the walk ------------------------------------------------------------------------------
    def _get(self, x) -> Bound:
        if isinstance(x, Literal):
            return Bound(sign=_sign_of(x.value))
        return self.env.get(x, EXACT)

    def _region(self, region, params=()) -> tuple:
        for var, bound in zip(region.params, params):
            self.env[var] = bound
        for node in region.nodes:
            self._node(node)
        return tuple(self._get(r) for r in region.results)

    def _set(self, node, bound: Bound) -> None:
        for out in node.outputs:
            self.env[out] = bound

    def _node(self, node) -> None:  # noqa: C901 - one dispatch over the op families
        op, ins = node.op, [self._get(x) for x in node.inputs]
        out_dtype = _dtype(node.outputs[0]) if node.outputs else None
        if op in _SINKS:
            value = ins[1]
            if any(not b.exact for b in ins[2:]):
                value = _unbound(value, f"{op.name} at an inexact index{_where(node)}")
            self._store(node.inputs[0], value)
        elif op in _READS:
            self._set(node, self._read(node, ins))
        elif op is kir.REGISTRY["select"]:
            b = join(ins[1:])
            self._set(node, b if ins[0].exact else _unbound(b, f"a select on an inexact predicate{_where(node)}"))
        elif op in _PASSING:
            self._set(node, self._passing(node, ins))
        elif op in _DISCRETE:
            b = join(ins, sign=1 if out_dtype is not None and out_dtype.kind in ("uint", "bool") else 0)
            self._set(node, b if b.exact else _unbound(b, f"{op.name} of an inexact value{_where(node)}"))
        elif op in APPROXIMATE and node.attr("approximate"):
            self._set(node, self._approximate(node, ins, out_dtype))
        elif op in _ROUNDED:
            self._set(node, self._rounded(node, ins, out_dtype))
        elif op in VENDOR:
            self._set(node, self._vendor(node, ins[0], out_dtype))
        elif op in _CONTRACTIONS:
            self._set(node, self._contraction(node, ins, out_dtype))
        elif op in _FOLDS:
            self._set(node, self._fold(node, ins))
        elif op is kir.REGISTRY["scatter_reduce"]:
            self._scatter(node, ins)
        elif op in (kir.REGISTRY["atomic_rmw"], kir.REGISTRY["atomic_compare_exchange"]):
            self._atomic(node, ins)
        elif op in _NESTS:
            self._region(node.regions[0], (EXACT,) * len(node.regions[0].params))
        elif op is kir.REGISTRY["if"]:
            then, other = (self._region(r) for r in node.regions)
            results = [join(pair) for pair in zip(then, other)]
            if not ins[0].exact:
                results = [_unbound(b, f"an if on an inexact predicate{_where(node)}") for b in results]
            for out, b in zip(node.outputs, results):
                self.env[out] = b
        elif op in _ORDERED:
            self._ordered(node, ins)
        elif op is kir.REGISTRY["constant"]:
            self._set(node, Bound(sign=_sign_of(node.attr("value"))))
        else:  # domains, dims, constants, indices, break/continue: exact values of exact operands
            b = join(ins)
            self._set(node, b if b.exact else _unbound(b, f"{op.name} of an inexact value{_where(node)}"))

    def _store(self, dest, value: Bound) -> None:
        """Everything stored into a view or buffer joins its bound (flow-insensitively: reads see it)."""
        self.sinks[dest] = join([self.sinks[dest], value]) if dest in self.sinks else value
        self.env[dest] = join([self.env[dest], value]) if dest in self.env else value

    def _read(self, node, ins) -> Bound:
        source, index = ins[0], ins[1:]
        if node.op in _MASKED_READS:  # a lane gives the element or the fill
            source, index = join([ins[0], ins[-1]]), ins[1:-1]
        if any(not b.exact for b in index):
            return _unbound(source, f"{node.op.name} at an inexact index{_where(node)}")
        return source

    def _passing(self, node, ins) -> Bound:
        op = node.op
        if op is kir.abs:
            return attrs.evolve(ins[0], sign=1)
        if op is kir.neg:
            return attrs.evolve(ins[0], sign=-ins[0].sign)
        if op in (kir.maximum, kir.minimum):
            signs = {b.sign for b in ins}
            sign = 1 if (op is kir.maximum and 1 in signs) else (-1 if op is kir.minimum and -1 in signs else None)
            return join(ins, sign=sign)
        return join(ins[:1] if op in _SHAPED else ins)  # extents after the value are exact coordinates

    def _rounded(self, node, ins, out_dtype) -> Bound:
        op, u = node.op, _unit(out_dtype)
        if op is kir.cast and out_dtype is not None and not out_dtype.is_float:
            b = ins[0]
            return b if b.exact else _unbound(b, f"cast of an inexact value to {out_dtype}{_where(node)}")
        if all(b.exact for b in ins) and op is not kir.pow:
            return Bound(sign=self._rounded_sign(node, ins))
        if op is kir.pow:
            b = join(ins)
            vendor = 2 * u * (self._vendor_ulps("pow") + DEFAULT_VENDOR_ULPS)
            return Bound(b.rel + vendor, b.cancel or f"pow{_where(node)}", b.unbounded, 0, b.accumulates,
                         b.why + (f"pow{_where(node)}: vendor math",))
        sign = self._rounded_sign(node, ins)
        if op in _MULTIPLICATIVE or op is kir.fma:
            rel = sum(b.rel for b in ins[:2]) + (ins[2].rel if len(ins) > 2 else 0.0)
        elif op is kir.sqrt:
            rel = ins[0].rel / 2
        else:
            rel = max(b.rel for b in ins)
        b = join(ins, sign=sign)
        cancel = b.cancel
        if op in _ADDITIVE or op is kir.fma:
            same = ins[0].sign * (ins[1].sign if op is kir.add else -ins[1].sign) if len(ins) > 1 else 1
            if same <= 0 and any(not x.exact for x in ins):
                cancel = cancel or f"{op.name} of inexact values of unknown sign{_where(node)}"
        return Bound(rel + 2 * u, cancel, b.unbounded, sign, b.accumulates, b.why)

    @staticmethod
    def _rounded_sign(node, ins) -> int:
        op = node.op
        if op in _MULTIPLICATIVE:
            if node.inputs[0] is node.inputs[1] and op is kir.mul:
                return 1
            return ins[0].sign * ins[1].sign
        if op is kir.add and ins[0].sign == ins[1].sign:
            return ins[0].sign
        if op is kir.sub and ins[0].sign == -ins[1].sign:
            return ins[0].sign
        if op is kir.sqrt:
            return 1
        if op is kir.cast:
            return ins[0].sign
        return 0

    def _vendor_ulps(self, name: str) -> int:
        return VENDOR_ULPS.get(self.target, {}).get(name, DEFAULT_VENDOR_ULPS)

    def _vendor(self, node, x: Bound, out_dtype) -> Bound:
        name = VENDOR[node.op]
        u = _unit(out_dtype)
        ulps = self._vendor_ulps(name) + DEFAULT_VENDOR_ULPS
        cond = _CONDITION[name]
        cancel = x.cancel
        if cond is None:
            cond = 1.0
            cancel = cancel or (f"{name} of an inexact value{_where(node)} (condition unbounded near its roots)"
                                if not x.exact else None)
        why = x.why + (f"{name}{_where(node)}: vendor math, {self._vendor_ulps(name)} ulp ({self.target}) + "
                       f"{DEFAULT_VENDOR_ULPS} ulp (oracle)",)
        return Bound(cond * x.rel + 2 * u * ulps, cancel, x.unbounded, 1 if name in _POSITIVE else 0,
                     x.accumulates, why)

    def _approximate(self, node, ins, out_dtype) -> Bound:
        """An ``approximate=True`` op: T4's bound of the option (graph.traits.APPROXIMATE) on every target, its
        inputs' bounds propagated as the exact op's are. ``ulp``: n ulp of the target beside the oracle's own
        (correctly rounded for ``div``, T4's 2 ulp for a library function); ``absolute``: an error that is no
        relative bound near the function's root, so the value is accepted normwise (``cancel``: against the
        output's largest magnitude, which for tanh is at most 1, where T4's absolute bound is the relative one)."""
        kind, size = APPROXIMATE[node.op]
        u, name = _unit(out_dtype), node.op.name
        what = f"{name}(approximate=True){_where(node)}: T4's {size:.3g} {kind}"
        if node.op in _MULTIPLICATIVE:
            b = join(ins, sign=self._rounded_sign(node, ins))
            return Bound(sum(x.rel for x in ins[:2]) + 2 * u * (size + 1), b.cancel, b.unbounded, b.sign,
                         b.accumulates, b.why + (f"{what} + 1 ulp (oracle)",))
        x, cond = ins[0], _CONDITION[name]
        vendor = self._vendor(node, x, out_dtype)
        if kind == "ulp":
            extra = 2 * u * max(0, size - self._vendor_ulps(name))
            return attrs.evolve(vendor, rel=vendor.rel + extra, why=vendor.why + (what,))
        return attrs.evolve(vendor, rel=(cond or 1.0) * x.rel + size + 2 * u * DEFAULT_VENDOR_ULPS,
                            cancel=vendor.cancel or what, why=vendor.why + (what,))

    def _accumulated(self, node, terms: Bound, k: int, acc_unit: float, out_dtype, what: str) -> Bound:
        """``terms`` summed K at a time in an accumulator of unit roundoff ``acc_unit``, rounded to ``out_dtype``."""
        rel = terms.rel + 2 * k * acc_unit
        u_out = _unit(out_dtype)
        if u_out > acc_unit:
            rel += 2 * u_out
        cancel = terms.cancel or (None if terms.sign else f"{what} of terms of unknown sign{_where(node)}")
        why = terms.why + (f"{what}{_where(node)}: K={k} terms, gamma_K for each of two associations",)
        return Bound(rel, cancel, terms.unbounded, terms.sign, True, why)

    def _contraction(self, node, ins, out_dtype) -> Bound:
        acc = node.attr("acc_dtype") or out_dtype
        n = len(ins)
        value_ins = [ins[0], ins[-1]] if n in (2, 3) else [ins[0], ins[2]]
        if not (acc is not None and acc.is_float):
            b = join(ins)
            return b if b.exact else _unbound(b, f"{node.op.name} of inexact values{_where(node)}")
        k = self._contraction_length(node)
        sign = value_ins[0].sign * value_ins[1].sign
        terms = Bound(value_ins[0].rel + value_ins[1].rel, join(ins).cancel, join(ins).unbounded, sign,
                      join(ins).accumulates, _merged_why(ins))
        return self._accumulated(node, terms, k, _unit(acc), out_dtype, node.op.name)

    def _contraction_length(self, node) -> int:
        op = node.op
        a = node.inputs[0].type
        if op in (kir.contract, kir.sparse_contract):
            k = math.prod(self.extent(a.shape[i]) for i, _ in node.attr("reduce"))
            return 2 * k if op is kir.sparse_contract else k  # the compressed axis holds half of K
        if op is kir.scaled_contract:
            g = node.attr("group_size") or 32
            return self.extent(a.shape[1]) * g
        return self.largest  # quantized_dot: blocks x block length, bounded by the largest argument

    def _fold(self, node, ins) -> Bound:
        src = ins[0]
        regions = node.regions
        step_rounds = any(_rounds(r) for r in regions)
        out_dtype = _dtype(node.outputs[0]) if node.outputs else None
        for r in regions:  # effects and nested values of the helpers
            self._region(r, (src,) * len(r.params))
        if not step_rounds or out_dtype is None or not out_dtype.is_float:
            exacts = [_region_discrete(r) for r in regions]
            if src.exact or not any(exacts):
                return join(ins[:2])
            return _unbound(src, f"{node.op.name} combining inexact values through a comparison{_where(node)}")
        if node.op is kir.reduce:
            k = math.prod(self.extent(node.inputs[0].type.shape[a]) for a in node.attr("axes"))
        else:
            k = self.extent(node.inputs[0].type.shape[node.attr("axis")])
        terms = join(ins[:2])
        return self._accumulated(node, terms, k, _unit(out_dtype), out_dtype, node.op.name)

    def _scatter(self, node, ins) -> None:
        dest = node.inputs[0]
        before = self.env.get(dest, EXACT)
        values = join(ins[1:2])
        if any(not b.exact for b in ins[2:]):
            values = _unbound(values, f"scatter_reduce at inexact indices{_where(node)}")
        dtype = _dtype(node.inputs[1]) or getattr(dest.type, "dtype", None)
        terms = join([before, values])
        if node.regions and _rounds(node.regions[0]) and dtype is not None and dtype.is_float:
            k = self.count(node.attr("type").shape) + 1
            result = self._accumulated(node, terms, k, _unit(dtype), dtype, "scatter_reduce")
        else:
            result = terms
        self._store(dest, result)

    def _atomic(self, node, ins) -> None:
        dest = node.inputs[0]
        dtype = getattr(dest.type, "dtype", None)
        values = join(ins[1:])
        kind = node.attr("kind")
        floating = dtype is not None and dtype.is_float
        if node.op is kir.REGISTRY["atomic_compare_exchange"] or kind == "exchange":
            final = _unbound(values, f"{node.op.name} ({kind or 'cas'}): the final state depends on the order"
                                     f"{_where(node)}")
        elif floating and kind == "add":
            final = self._accumulated(node, values, self.largest + 1, _unit(dtype), dtype, "atomic add")
        else:
            final = values  # integer kinds and float max/min commute: the final state is exact
        self._store(dest, final)
        self._set(node, _unbound(final, f"the old value an atomic returns depends on the order{_where(node)}"))

    def _ordered(self, node, ins) -> None:
        is_loop = node.op is kir.REGISTRY["loop"]
        init = ins[1:] if is_loop else ins
        body = node.regions[0] if is_loop else node.regions[1]
        carries = list(init)
        for _ in range(2):
            if not is_loop:
                cond = self._region(node.regions[0], carries)
                if any(not c.exact for c in cond):
                    carries = [_unbound(c, f"a while condition on an inexact value{_where(node)}") for c in carries]
            params = ([EXACT] + carries) if is_loop else carries
            results = self._region(body, params)
            grown = [join([c, r]) for c, r in zip(carries, results)]
            for i, (c, g) in enumerate(zip(carries, grown)):
                if g.rel > c.rel:  # an inexact carry compounds every iteration
                    grown[i] = _unbound(g, f"an ordered loop carry that compounds an inexact value{_where(node)}")
            carries = grown
        for out, b in zip(node.outputs, carries):
            self.env[out] = b


def _unbound(b: Bound, reason: str) -> Bound:
    return attrs.evolve(b, unbounded=b.unbounded or reason)


def _rounds(region) -> bool:
    """Whether a helper region performs a floating rounding or vendor function (its steps are inexact)."""
    for n in walk_region(region):
        d = _dtype(n.outputs[0]) if n.outputs else None
        if (n.op in _ROUNDED or n.op in VENDOR) and d is not None and d.is_float:
            return True
    return False


def _region_discrete(region) -> bool:
    return any(n.op in _DISCRETE or n.op is kir.REGISTRY["select"] for n in walk_region(region))


def _sign_of(value) -> int:
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - an argument without a numeric meaning has no sign
        return 0
    if a.dtype.kind == "b" or a.dtype.kind == "u":
        return 1
    if a.dtype.kind not in "if" or a.size == 0:
        return 0
    if a.dtype.kind == "f" and np.isnan(a).any():
        return 0
    if np.all(a >= 0):
        return 1
    if np.all(a <= 0):
        return -1
    return 0


def output_bounds(graph, args, target: str) -> dict:
    """{Out/InOut parameter name: Bound} for ``graph`` run on ``args`` by ``target``."""
    return Analysis(graph, args, target).run()
