"""Catalogue entries for the data-dependent, packed-format, RNG, atomic and region operations.

These ops have no elementwise, fibre or matmul layout, so each gets a *kind* of its own: the witness
kernel (:mod:`.coverage_witnesses`) and the case generator (:mod:`.coverage_cases`) are chosen by it.
Everything crosses the comparison boundary as the spec's Float32/Int32/Boolean payloads: packed
carriers (u8 MX codes and e8m0 scales, 2:4 metadata) and u32/u64 words travel as exact int32 words
and the witness converts them (exactly) to the op's own dtypes, and results narrower or wider than
32 bits come back as exact int32 or f32 values. A plan names the op's real dtypes; the carriers are
an implementation detail of the witness.

Classes: ``bit-exact`` and ``special-values`` where the result is exact whatever the order (Philox
bits, integer histograms and scatters, commutative atomics' final state, unique stores, quantize's
bytes); ``structural-exact`` for floating accumulations fed with exactly representable terms (every
association gives one result: scaled/sparse contract, float scatter-add, float atomic add, region
fold/scan), then ``numerical-gamma`` for ordinary terms of those and of quantized_dot, each output
element within its own gamma-K envelope.

This module imports only records, so ``catalogue`` can append its entries without an import cycle.
"""
from __future__ import annotations

from .records import PlanKey, VerificationClass as VC

RANDOM, HISTOGRAM, UNIQUE_STORE, SCATTER, ATOMIC_RMW, ATOMIC_LOAD, ATOMIC_STORE, ATOMIC_CAS = (
    "random", "histogram", "unique-store", "scatter", "atomic-rmw", "atomic-load", "atomic-store", "atomic-cas")
QUANTIZE, QUANTIZED_DOT, SCALED, SPARSE, REGION_FOLD, REGION_SCAN = (
    "quantize", "quantized-dot", "scaled-contract", "sparse-contract", "region-fold", "region-scan")
KINDS = (RANDOM, HISTOGRAM, UNIQUE_STORE, SCATTER, ATOMIC_RMW, ATOMIC_LOAD, ATOMIC_STORE, ATOMIC_CAS, QUANTIZE,
         QUANTIZED_DOT, SCALED, SPARSE, REGION_FOLD, REGION_SCAN)

EXACT_CLASSES = (VC.BIT_EXACT, VC.SPECIAL_VALUES)
# floating accumulations: exactly representable terms (every association agrees), then ordinary terms
# within each output element's own gamma-K envelope (``bounds.OutputBound``)
ACCUMULATING_CLASSES = (VC.STRUCTURAL, VC.NUMERICAL)

# kind -> the classes an active plan of that kind must pass, by whether the plan accumulates in floating point
_CLASSES = {
    RANDOM: EXACT_CLASSES, HISTOGRAM: EXACT_CLASSES, UNIQUE_STORE: EXACT_CLASSES, ATOMIC_LOAD: EXACT_CLASSES,
    ATOMIC_STORE: EXACT_CLASSES, ATOMIC_CAS: EXACT_CLASSES, QUANTIZE: EXACT_CLASSES,
    SCALED: ACCUMULATING_CLASSES, SPARSE: ACCUMULATING_CLASSES, QUANTIZED_DOT: (VC.NUMERICAL,),
}


def _plan(name, operands, out, *, conversions=(), compute=None, acc="none", acc_dtype=None) -> PlanKey:
    roles, dtypes = tuple(r for r, _ in operands), tuple(d for _, d in operands)
    return PlanKey(name, roles, dtypes, tuple(conversions), compute or out, acc, acc_dtype, out)


# scatter_reduce and atomic_rmw combine kinds, each its own logical kernel (one canonical op each):
# integer kinds are exact; float add accumulates (structural witness), float max/min are exact.
SCATTER_KINDS = {"add": ("i32", "f32"), "max": ("i32", "f32"), "min": ("i32", "f32"), "and": ("i32",),
                 "or": ("i32",), "xor": ("i32",)}
ATOMIC_KINDS = {"add": ("i32", "f32"), "max": ("i32", "f32"), "min": ("i32", "f32"), "and": ("i32",),
                "or": ("i32",), "xor": ("i32",), "exchange": ("i32",)}
SPARSE_SCHEMAS = ("two_of_four", "one_of_two")
_ACCUMULATION = {"add": "sum", "max": "max"}  # the record has no "min" accumulation: min plans say "none"


def _combine_plan(name: str, kind: str, dtype: str) -> PlanKey:
    acc = _ACCUMULATION.get(kind, "none")
    return _plan(name, (("index", "i32"), ("values", dtype), ("initial", dtype)), dtype, acc=acc,
                 acc_dtype=None if acc == "none" else dtype)


def specs() -> tuple:
    """(name, canonical op, kind, plans) of every operation this module adds, in catalogue order."""
    out = [
        ("random_bits", "random_bits", RANDOM,
         (_plan("random_bits", (("seed", "u64"), ("counter", "i32")), "u32", conversions=("i32->index",)),)),
        ("histogram", "histogram", HISTOGRAM,
         (_plan("histogram", (("values", "i32"), ("valid", "bool")), "i32", acc="sum", acc_dtype="i32"),)),
        ("unique_store", "unique_store", UNIQUE_STORE,
         (_plan("unique_store", (("index", "i32"), ("values", "f32")), "f32"),
          _plan("unique_store", (("index", "i32"), ("values", "i32")), "i32"))),
    ]
    for kind, dtypes in SCATTER_KINDS.items():
        name = f"scatter_reduce_{kind}"
        out.append((name, "scatter_reduce", SCATTER, tuple(_combine_plan(name, kind, d) for d in dtypes)))
    for kind, dtypes in ATOMIC_KINDS.items():
        name = f"atomic_{kind}"
        out.append((name, "atomic_rmw", ATOMIC_RMW, tuple(_combine_plan(name, kind, d) for d in dtypes)))
    out += [
        ("atomic_load", "atomic_load", ATOMIC_LOAD,
         tuple(_plan("atomic_load", (("source", d),), d) for d in ("i32", "f32"))),
        ("atomic_store", "atomic_store", ATOMIC_STORE,
         tuple(_plan("atomic_store", (("values", d),), d) for d in ("i32", "f32"))),
        ("atomic_compare_exchange", "atomic_compare_exchange", ATOMIC_CAS,
         (_plan("atomic_compare_exchange", (("cell", "i32"), ("expected", "i32"), ("desired", "i32")), "i32"),)),
        ("quantize_q8_k", "quantize", QUANTIZE,
         (_plan("quantize_q8_k", (("values", "f32"),), "i8", compute="f32", conversions=("f32->i8", "f32->i16")),)),
        ("quantize_q4_k", "quantize", QUANTIZE,
         (_plan("quantize_q4_k", (("values", "f32"),), "u8", compute="f32",
                conversions=("f32->f16", "f32->u8")),)),
        *((f"quantized_dot_{lf}_q8_k", "quantized_dot", QUANTIZED_DOT,
           (_plan(f"quantized_dot_{lf}_q8_k", (("lhs", "f32"), ("rhs", "f32")), "f32", acc="dot", acc_dtype="f32",
                  conversions=(f"f32->{lf}", "f32->q8_k")),))
          for lf in ("q4_k", "q8_k")),
        ("scaled_contract", "scaled_contract", SCALED,
         tuple(_plan("scaled_contract", (("lhs", fl), ("lhs_scale", "e8m0"), ("rhs", fr), ("rhs_scale", "e8m0")),
                     "f32", compute="f32", acc="dot", acc_dtype="f32")
               for fl, fr in (("e2m1", "e2m1"), ("e4m3", "e4m3"), ("e2m1", "e4m3")))),
        *((f"sparse_contract_{schema}", "sparse_contract", SPARSE,
           (_plan(f"sparse_contract_{schema}", (("compressed", "f32"), ("metadata", "i32"), ("rhs", "f32")), "f32",
                  compute="f32", acc="dot", acc_dtype="f32"),))
          for schema in SPARSE_SCHEMAS),
        ("region_fold", "region_fold", REGION_FOLD,
         (_plan("region_fold", (("source", "f32"),), "f32", acc="sum", acc_dtype="f32"),
          _plan("region_fold", (("source", "i32"),), "i32", acc="sum", acc_dtype="i32"))),
        ("region_scan", "region_scan", REGION_SCAN,
         (_plan("region_scan", (("source", "f32"),), "f32", acc="scan-sum", acc_dtype="f32"),
          _plan("region_scan", (("source", "i32"),), "i32", acc="scan-sum", acc_dtype="i32"))),
    ]
    return tuple(out)


def required_classes(kind: str, plan: PlanKey) -> tuple | None:
    """The classes of a plan of one of this module's kinds (None for any other kind)."""
    if kind not in KINDS:
        return None
    if kind in _CLASSES:
        return _CLASSES[kind]
    floating_sum = plan.accumulation in ("sum", "scan-sum") and plan.accumulation_dtype == "f32"
    return ACCUMULATING_CLASSES if floating_sum else EXACT_CLASSES
