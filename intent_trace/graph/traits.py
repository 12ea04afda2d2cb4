"""Every set of ops that a backend or an analysis asks about, derived from the ops' traits in one place.

An op's traits (:data:`intent_trace.graph.ops.TRAITS`) say what kind of computation it is; the sets below
are what code elsewhere tests membership in (``node.op in POINTWISE``), so no backend keeps a list of op
names of its own that could drift from the registry when an op is added.
"""
from __future__ import annotations

from .ops import APPROXIMATE_BOUNDS, REGISTRY, OpDef


def ops_with(*traits: str) -> frozenset:
    """The ops that have every one of ``traits``."""
    return frozenset(op for op in REGISTRY.values() if op.traits.issuperset(traits))


#: Computes each element from the operand elements at its position: commutes with indexing.
POINTWISE = ops_with("pointwise")
#: Consumes every operand element by element at the result's position.
ELEMENTWISE = ops_with("elementwise")
#: Builds or takes apart a tuple or record.
AGGREGATE = ops_with("aggregate")
#: Rearranges elements without computing.
PERMUTATION = ops_with("permutation")
#: What a reduce's or scan's combine may contain to be inlined per accumulator element: pointwise math,
#: aggregates, and the broadcasts and fills of scalars a traced helper writes.
INLINE_COMBINE = POINTWISE | AGGREGATE | {REGISTRY["broadcast"], REGISTRY["full"]}
#: Evaluates its operands' elements one at a time, so a fused operand is computed per element read.
ELEMENT_CONSUMERS = ops_with("element_consumer")
#: Evaluates each element of every operand at most once per result element.
EVALUATES_ONCE = ops_with("once")
#: Recomputed per consumer instead of materialised when used more than once.
REMATERIALIZED = ops_with("rematerialized")
#: Runs a loop for every result element.
LOOPING = ops_with("looping")
#: Reads one source element per result element at given coordinates (gathers, masked reads): no loop.
INDEXED_READS = ops_with("indexed")
#: Computes each result element with constant work, no loop (domain arithmetic included): a nest of only these
#: may be unrolled without copying any loop.
CONSTANT_WORK = (POINTWISE | PERMUTATION | AGGREGATE | REMATERIALIZED | INDEXED_READS
                 | frozenset(op for op in REGISTRY.values() if op.family == "domain"))
#: T4 library functions (T10: a GPU target may use the vendor's precise implementation).
VENDOR_MATH = ops_with("vendor_math")
#: Paired-axis multiply-adds (T10: FMA allowed inside).
CONTRACTIONS = ops_with("contraction")
#: Associative combines along axes (T10: any order the language allows).
REDUCTIONS = ops_with("reduction")
#: Ops whose non-NaN result may depend on a NaN operand's payload or sign (a NaN fast path that changes payloads
#: is exact only without them: :mod:`intent_trace.backends.tilelang.cuda_rows_nan`).
READS_NAN_BITS = ops_with("reads_nan_bits")


def evaluates_once(consumer_op: OpDef, position: int) -> bool:
    """Whether an op evaluates each element of its operand at ``position`` at most once per result element."""
    return consumer_op in EVALUATES_ONCE or position in consumer_op.once_operands


#: The ops with T4's ``approximate=True`` option, each with that option's bound (``("ulp", n)`` or
#: ``("absolute", e)``; :data:`intent_trace.graph.ops.APPROXIMATE_BOUNDS`): what the verifier charges for it.
APPROXIMATE = {op: APPROXIMATE_BOUNDS[op.name] for op in REGISTRY.values() if "approximate" in op.attrs}

#: The unary functions of T4, in registry order: each carries its :class:`~intent_trace.graph.ops.MathSpec`, from
#: which the I.* functions, the TileLang scalar rules and the verifier's tables are derived.
MATH_FUNCTIONS = tuple(op for op in REGISTRY.values() if op.math is not None)
#: The vendor functions among them, in registry order (the verification catalogue's deferred transcendentals).
VENDOR_FUNCTIONS = tuple(op for op in MATH_FUNCTIONS if op in VENDOR_MATH)
