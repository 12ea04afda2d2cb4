"""The verification catalogue: which operations, plans and subjects a profile must verify, as data.

DESIGN.md §4: the logical kernels of a profile are the backend's operation catalogue, and a
verification case is a one-op KIR graph compiled by the profile's own compiler. Each
:class:`Operation` below names the canonical KIR op its kernel lowers to and an ``expr`` that builds
it through the public language, so the graph a case runs is the graph a user's code would make.
Plans are the dtype/accumulation signatures; which plans a carrier can execute (Metal has no f64)
is :data:`CARRIER_LIMITS`. Completeness (``profiles.validate_catalogue``) checks all of this against
the op registry and the backend's lowering table.
"""
from __future__ import annotations

import operator

import attrs

from ... import language as I
from ...graph import ops as kir_ops
from ...graph.traits import VENDOR_FUNCTIONS
from .coverage_ops import specs as coverage_specs
from .records import PlanKey, Subject

# Kinds of operation: how a case lays out operands and which comparison applies.
POINTWISE, REDUCE, SCAN, MATMUL = "pointwise", "reduce", "scan", "matmul"

# Unary math whose default f32 accuracy is "within 2 ulp" (T4): the CPU oracle calls the platform
# libm through LLVM, which this verifier cannot certify bit for bit against Generic's NumPy calls.
VENDOR_TRANSCENDENTALS = tuple(op.name for op in VENDOR_FUNCTIONS)  # the registry's vendor_math ops
VENDOR_REASON = ("vendor-transcendental accuracy: {op} is within 2 ulp (T4) through the platform math library, "
                 "not correctly rounded; bitwise certification is deferred until an accuracy class exists")
FLOAT_POW_REASON = ("floating pow accuracy: C99 pow is the platform math library's, not correctly rounded; "
                    "certification is deferred (integer pow is exact and active)")


CONVERSIONS = frozenset({kir_ops.cast, kir_ops.bitcast})


@attrs.frozen
class Operation:
    """One verification operation: its canonical KIR op, case layout and how to build its value."""

    name: str
    canonical_op: str
    kind: str
    expr: object  # (*operand values) -> result value, in the language
    plans: tuple  # PlanKey, ...

    @property
    def kir_op(self) -> kir_ops.OpDef:
        """The canonical KIR op, from the registry (the record keeps its name: reports print it)."""
        return kir_ops.REGISTRY[self.canonical_op]

    @property
    def converts(self) -> bool:
        """Whether the operation is a dtype conversion (its result dtype is not its operands')."""
        return self.kir_op in CONVERSIONS


def _pointwise_plans(name: str, signatures, roles) -> tuple:
    plans = []
    for sig in signatures:
        *ins, out = sig
        conversions = tuple(f"{a}->{out}" for a in dict.fromkeys(ins) if a != out and name in ("cast", "bitcast"))
        compute = out if name in ("cast", "bitcast") else ins[-1]
        plans.append(PlanKey(name, tuple(roles), tuple(ins), conversions, compute, "none", None, out))
    return tuple(plans)


_BINARY = {
    "add": (operator.add, ("f32", "i32")), "sub": (operator.sub, ("f32", "i32")),
    "mul": (operator.mul, ("f32", "i32")), "div": (operator.truediv, ("f32",)),
    "floordiv": (operator.floordiv, ("i32",)), "mod": (operator.mod, ("i32",)), "pow": (operator.pow, ("f32", "i32")),
    "maximum": (I.maximum, ("f32", "i32")), "minimum": (I.minimum, ("f32", "i32")),
    "and_": (operator.and_, ("i32", "bool")), "or_": (operator.or_, ("i32", "bool")),
    "xor": (operator.xor, ("i32", "bool")), "shl": (operator.lshift, ("i32",)), "shr": (operator.rshift, ("i32",)),
}
_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}
_UNARY_F32 = ("sqrt", "abs", "floor") + VENDOR_TRANSCENDENTALS  # every T4 function (abs also on i32)


def _unary_expr(name: str):
    return lambda x: getattr(I, name)(x)


def _operations() -> tuple:
    ops = []
    for name, (fn, dtypes) in _BINARY.items():
        ops.append(Operation(name, name, POINTWISE, fn,
                             _pointwise_plans(name, [(d, d, d) for d in dtypes], ("lhs", "rhs"))))
    for name, fn in _COMPARE.items():
        ops.append(Operation(name, name, POINTWISE, fn,
                             _pointwise_plans(name, [(d, d, "bool") for d in ("f32", "i32")], ("lhs", "rhs"))))
    for name in _UNARY_F32:
        dtypes = ("f32", "i32") if name == "abs" else ("f32",)
        ops.append(Operation(name, name, POINTWISE, _unary_expr(name),
                             _pointwise_plans(name, [(d, d) for d in dtypes], ("x",))))
    ops.append(Operation("neg", "neg", POINTWISE, operator.neg,
                         _pointwise_plans("neg", [("f32", "f32"), ("i32", "i32")], ("x",))))
    ops.append(Operation("invert", "invert", POINTWISE, operator.invert,
                         _pointwise_plans("invert", [("i32", "i32"), ("bool", "bool")], ("x",))))
    ops.append(Operation("select", "select", POINTWISE, I.select,
                         _pointwise_plans("select", [("bool", "f32", "f32", "f32"), ("bool", "i32", "i32", "i32")],
                                          ("pred", "on_true", "on_false"))))
    ops.append(Operation("fma", "fma", POINTWISE, I.fma,
                         _pointwise_plans("fma", [("f32", "f32", "f32", "f32")], ("a", "b", "c"))))
    casts = [("f32", "i32"), ("i32", "f32"), ("bool", "f32"), ("bool", "i32"), ("f32", "bool")]
    ops.append(Operation("cast", "cast", POINTWISE, None, _pointwise_plans("cast", casts, ("x",))))
    ops.append(Operation("bitcast", "bitcast", POINTWISE, None,
                         _pointwise_plans("bitcast", [("f32", "i32"), ("i32", "f32")], ("x",))))
    ops.extend(_accumulations())
    return tuple(ops)


def _acc_plan(name, roles, dtype, acc, acc_dtype, out) -> PlanKey:
    conversions = (f"{dtype}->{acc_dtype}",) if acc_dtype != dtype else ()
    if out != acc_dtype:
        conversions += (f"{acc_dtype}->{out}",)
    return PlanKey(name, roles, (dtype,) * len(roles), conversions, acc_dtype, acc, acc_dtype, out)


def _accumulations() -> tuple:
    x, ab = ("x",), ("lhs", "rhs")
    return (
        Operation("reduce_sum", "reduce", REDUCE, None, (
            _acc_plan("reduce_sum", x, "f32", "sum", "f32", "f32"),
            _acc_plan("reduce_sum", x, "f32", "sum", "f64", "f32"),
            _acc_plan("reduce_sum", x, "i32", "sum", "i64", "i32"))),
        Operation("reduce_max", "reduce", REDUCE, None, (
            _acc_plan("reduce_max", x, "f32", "max", "f32", "f32"),
            _acc_plan("reduce_max", x, "i32", "max", "i32", "i32"))),
        Operation("cumsum", "scan", SCAN, None, (
            _acc_plan("cumsum", x, "f32", "scan-sum", "f32", "f32"),
            _acc_plan("cumsum", x, "f32", "scan-sum", "f64", "f32"),
            _acc_plan("cumsum", x, "i32", "scan-sum", "i64", "i32"))),
        Operation("matmul", "contract", MATMUL, None, (
            _acc_plan("matmul", ab, "f32", "dot", "f32", "f32"),
            _acc_plan("matmul", ab, "f32", "dot", "f64", "f32"),
            _acc_plan("matmul", ab, "i32", "dot", "i32", "i32"))),
    )


def _coverage_operations() -> tuple:
    """The data-dependent, packed-format, RNG, atomic and region operations (``coverage_ops``)."""
    return tuple(Operation(name, canonical, kind, None, plans) for name, canonical, kind, plans in coverage_specs())


OPERATIONS: tuple = _operations() + _coverage_operations()

# Movement and structural subjects every profile must show (exact, one witness kernel each, in
# ``subjects.py``). ``covers`` is checked against the witness's traced graph.
SUBJECTS: tuple = (
    Subject("movement", "copy", ("read", "write", "domain"), "compact"),
    Subject("movement", "transpose", ("transpose",), "compact"),
    Subject("movement", "broadcast", ("broadcast",), "compact"),
    Subject("movement", "strided-read", ("read", "write", "domain"), "non-compact"),
    Subject("movement", "tensor-slice", ("slice",), "compact"),
    Subject("movement", "reshape", ("reshape",), "compact"),
    Subject("movement", "join", ("join",), "compact"),
    Subject("movement", "gather", ("gather",), "compact"),
    Subject("movement", "masked-access", ("masked_read", "masked_write", "masked_load", "masked_store"), "compact"),
    Subject("structural", "subregion-write", ("subregion", "indices"), "compact"),
    Subject("structural", "fill", ("full", "constant", "dim", "assume_equal"), "compact"),
    Subject("structural", "multi-output", ("record", "field"), "multi-output"),
    Subject("structural", "carried-loop", ("loop",), "compact"),
    Subject("structural", "while-loop", ("while", "break", "continue", "tuple", "get"), "compact"),
    Subject("structural", "branch", ("if",), "compact"),
    Subject("structural", "forall", ("parallel", "for"), "compact"),
    Subject("structural", "staging-buffer", ("buffer", "load", "store"), "compact"),
    Subject("structural", "hierarchical-contraction", ("contract",), "hierarchical"),
    *(Subject("movement", name, ("read", "write", "domain"), "non-compact")  # real views: layouts.py
      for name in ("strided-view", "transposed-view", "offset-view")),
)

# Registry ops that are neither a verification operation nor exercised by a subject, and why.
EXCLUDED_OPS: dict = {}

# What a carrier cannot execute: plans that use these dtypes are not advertised by it.
CARRIER_LIMITS: dict = {"tilelang-metal": frozenset({"f64"})}  # Metal has no 64-bit float (it has long)


def plan_uses(plan: PlanKey) -> frozenset:
    """Every dtype a plan touches (operands, conversions, compute, accumulator, output)."""
    names = set(plan.operand_dtypes) | {plan.compute_dtype, plan.output_dtype}
    names |= {d for c in plan.conversions for d in c.split("->")}
    if plan.accumulation_dtype:
        names.add(plan.accumulation_dtype)
    return frozenset(names)


def oracle_deferral(plan: PlanKey) -> str | None:
    """Why the CPU oracle cannot certify this plan (None when it can)."""
    if plan.operation in VENDOR_TRANSCENDENTALS and plan.operand_dtypes[0] == "f32":
        return VENDOR_REASON.format(op=plan.operation)
    if plan.operation == "pow" and plan.operand_dtypes[0] == "f32":
        return FLOAT_POW_REASON
    return None


F64_AUTHORITY_OPERATIONS = ("reduce_sum", "matmul", "cumsum")


def f64_authority(plan: PlanKey) -> PlanKey | None:
    """The oracle plan a float32 accumulating target is compared with: the same operands with a float64
    accumulator (kernel-verification: "Float32 reduce_sum and matmul targets SHALL require certified
    CPU Float64-accumulator oracle coverage"; cumsum follows the same rule here, so that Stage Two's
    single-path bound compares the target with a reference that is nearly exact)."""
    if plan.operation not in F64_AUTHORITY_OPERATIONS or plan.operand_dtypes[0] != "f32":
        return None
    for op in OPERATIONS:
        if op.name == plan.operation:
            for p in op.plans:
                if p.operand_dtypes == plan.operand_dtypes and p.accumulation_dtype == "f64":
                    return p
    raise ValueError(f"no float64-accumulator plan for {plan.plan_id}")
