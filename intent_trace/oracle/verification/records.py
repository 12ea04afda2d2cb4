"""The immutable identity records of verification: profiles, logical kernels, plans, classifications.

These are values: frozen, slotted, hashable, comparable. They carry no behaviour beyond
normalisation (``PlanKey.from_plan_like``) and a canonical JSON form for reports and digests, so
that a certificate or a report can be rebuilt from them and compared field by field.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs
import numpy as np

from ... import types as T


class VerificationStage(enum.Enum):
    """The role a profile plays: the oracle that is certified, or a target that is checked against it."""

    ORACLE = "oracle"
    TARGET = "target"


class VerificationClass(enum.Enum):
    """One kind of witness a plan must pass. The order here is the canonical order of a plan's classes."""

    BIT_EXACT = "bit-exact"  # ordinary inputs, results compared bit for bit
    SIGNED_ZERO = "signed-zero"  # witnesses whose results are ±0 (the sign must survive)
    SPECIAL_VALUES = "special-values"  # NaN payloads, ±inf, subnormals, extremes (or integer edge values)
    STRUCTURAL = "structural-exact"  # exactly representable accumulations: every association gives one result
    ANALYTIC = "analytic"  # independent, hand-derived expected results
    NUMERICAL = "numerical-gamma"  # ordinary inputs within the versioned gamma-K envelope
    WIDE_EXPONENT = "wide-exponent"  # widely spread exponents within the gamma-K envelope

    @property
    def exact(self) -> bool:
        return self not in (VerificationClass.NUMERICAL, VerificationClass.WIDE_EXPONENT)


CLASS_ORDER = tuple(VerificationClass)


class ClassificationDisposition(enum.Enum):
    ACTIVE = "active"
    DEFERRED = "deferred"


def _str_field(instance, attribute, value) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{type(instance).__name__}.{attribute.name} must be a non-empty str, got {value!r}")


@attrs.frozen
class VerificationProfile:
    """One installed oracle or target identity. ``target`` is the compile target that executes it."""

    profile_id: str = attrs.field(validator=_str_field)
    carrier: str = attrs.field(validator=_str_field)
    provider: str = attrs.field(validator=_str_field)
    stages: tuple = attrs.field()
    target: str = attrs.field(validator=_str_field)

    @stages.validator
    def _stages(self, attribute, value) -> None:
        if not isinstance(value, tuple) or not value or not all(isinstance(s, VerificationStage) for s in value):
            raise TypeError(f"VerificationProfile.stages must be a non-empty tuple of VerificationStage, got {value!r}")
        if len(set(value)) != len(value) or tuple(sorted(value, key=list(VerificationStage).index)) != value:
            raise ValueError(f"VerificationProfile.stages must be distinct and in canonical order, got {value!r}")

    def serves(self, stage: VerificationStage) -> bool:
        return stage in self.stages

    def to_json(self) -> dict:
        return {"profile_id": self.profile_id, "carrier": self.carrier, "provider": self.provider,
                "stages": [s.value for s in self.stages], "target": self.target}


@attrs.frozen
class LogicalKernel:
    """One bounded operation of a profile. Shapes, layouts and JIT specialisations are not part of it."""

    profile_id: str = attrs.field(validator=_str_field)
    operation: str = attrs.field(validator=_str_field)
    kernel_id: str = attrs.field(validator=_str_field)
    variant: str = attrs.field(validator=_str_field)

    def to_json(self) -> dict:
        return {"profile_id": self.profile_id, "operation": self.operation, "kernel_id": self.kernel_id,
                "variant": self.variant}


def dtype_name(value) -> str:
    """Canonical dtype spelling (``f32``) of a DType, a NumPy dtype or a name such as ``float32``."""
    if isinstance(value, T.DType):
        return value.name
    if isinstance(value, str) and value in T.DTYPES:
        return value
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"not a dtype: {value!r}") from None
    for name, d in T.DTYPES.items():
        if d.kind != "mx" and d.np == np_dtype:
            return name
    raise ValueError(f"dtype {value!r} has no intent_trace counterpart")


ACCUMULATIONS = ("none", "sum", "max", "scan-sum", "dot")


@attrs.frozen
class PlanKey:
    """One exact executable plan: operand roles and dtypes, conversions, compute, accumulation, output."""

    operation: str
    operand_roles: tuple
    operand_dtypes: tuple
    conversions: tuple
    compute_dtype: str
    accumulation: str
    accumulation_dtype: str | None
    output_dtype: str

    @classmethod
    def from_plan_like(cls, plan) -> "PlanKey":
        """Normalise a PlanKey, a mapping, or an object with the same attribute names.

        ``operands`` (a sequence of ``(role, dtype)`` pairs) may stand for ``operand_roles`` plus
        ``operand_dtypes``; dtypes may be DTypes, NumPy dtypes or names; conversions are
        ``"src->dst"`` strings or ``(src, dst)`` pairs.
        """
        # a PlanKey is normalised like any other plan-like value: a directly constructed one may hold
        # non-canonical spellings (lists, "float32", ("f32", "f64") conversion pairs)
        get = plan.get if isinstance(plan, Mapping) else (lambda k, d=None: getattr(plan, k, d))
        operation = get("operation")
        if not isinstance(operation, str) or not operation:
            raise TypeError(f"a plan needs a non-empty str operation, got {operation!r}")
        operands = get("operands")
        if operands is not None:
            pairs = tuple(operands)
            if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
                raise TypeError(f"plan {operation}: operands must be (role, dtype) pairs, got {operands!r}")
            roles, dtypes = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        else:
            roles, dtypes = get("operand_roles"), get("operand_dtypes")
            if roles is None or dtypes is None:
                raise TypeError(f"plan {operation}: needs operands or operand_roles and operand_dtypes")
            roles, dtypes = tuple(roles), tuple(dtypes)
        if len(roles) != len(dtypes) or not roles:
            raise ValueError(f"plan {operation}: {len(roles)} operand roles for {len(dtypes)} dtypes")
        if not all(isinstance(r, str) and r for r in roles) or len(set(roles)) != len(roles):
            raise ValueError(f"plan {operation}: operand roles must be distinct non-empty strings, got {roles!r}")
        conversions = []
        for c in get("conversions", ()) or ():
            src, dst = c.split("->") if isinstance(c, str) else c
            conversions.append(f"{dtype_name(src.strip() if isinstance(src, str) else src)}->"
                               f"{dtype_name(dst.strip() if isinstance(dst, str) else dst)}")
        accumulation = get("accumulation", "none") or "none"
        if accumulation not in ACCUMULATIONS:
            raise ValueError(f"plan {operation}: accumulation {accumulation!r} is not one of {ACCUMULATIONS}")
        acc_dtype = get("accumulation_dtype")
        if (accumulation == "none") != (acc_dtype is None):
            raise ValueError(f"plan {operation}: accumulation {accumulation!r} with accumulation_dtype {acc_dtype!r}")
        compute, output = get("compute_dtype"), get("output_dtype")
        if compute is None or output is None:
            raise TypeError(f"plan {operation}: needs compute_dtype and output_dtype")
        return cls(operation, roles, tuple(dtype_name(d) for d in dtypes), tuple(conversions), dtype_name(compute),
                   accumulation, None if acc_dtype is None else dtype_name(acc_dtype), dtype_name(output))

    @property
    def plan_id(self) -> str:
        """A canonical one-line spelling, unique per plan: ``matmul(lhs:f32,rhs:f32|f32->f64|sum:f64)->f32``."""
        operands = ",".join(f"{r}:{d}" for r, d in zip(self.operand_roles, self.operand_dtypes))
        parts = [operands]
        if self.conversions:
            parts.append(";".join(self.conversions))
        parts.append(f"compute:{self.compute_dtype}")
        if self.accumulation != "none":
            parts.append(f"{self.accumulation}:{self.accumulation_dtype}")
        return f"{self.operation}({'|'.join(parts)})->{self.output_dtype}"

    def to_json(self) -> dict:
        return {"operation": self.operation, "operand_roles": list(self.operand_roles),
                "operand_dtypes": list(self.operand_dtypes), "conversions": list(self.conversions),
                "compute_dtype": self.compute_dtype, "accumulation": self.accumulation,
                "accumulation_dtype": self.accumulation_dtype, "output_dtype": self.output_dtype}


@attrs.frozen
class PlanClassification:
    """The complete ordered obligation of one logical kernel and one plan, active or deferred."""

    kernel: LogicalKernel
    plan: PlanKey
    classes: tuple
    disposition: ClassificationDisposition
    reason: str = ""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.kernel, LogicalKernel) or not isinstance(self.plan, PlanKey):
            raise TypeError("PlanClassification binds a LogicalKernel and a PlanKey")
        if self.plan.operation != self.kernel.operation:
            raise ValueError(f"plan {self.plan.plan_id} does not belong to kernel {self.kernel.kernel_id} "
                             f"({self.kernel.operation})")
        if not isinstance(self.classes, tuple) or not all(isinstance(c, VerificationClass) for c in self.classes):
            raise TypeError(f"classes must be a tuple of VerificationClass, got {self.classes!r}")
        if len(set(self.classes)) != len(self.classes) or \
                tuple(sorted(self.classes, key=CLASS_ORDER.index)) != self.classes:
            raise ValueError(f"classes of {self.plan.plan_id} must be distinct and in canonical order")
        if self.disposition is ClassificationDisposition.ACTIVE:
            if not self.classes:
                raise ValueError(f"active plan {self.plan.plan_id} names no verification class")
        elif self.disposition is ClassificationDisposition.DEFERRED:
            if self.classes:
                raise ValueError(f"deferred plan {self.plan.plan_id} must carry no active classes")
            if not isinstance(self.reason, str) or not self.reason.strip():
                raise ValueError(f"deferred plan {self.plan.plan_id} needs a non-empty reason")
        else:
            raise TypeError(f"disposition must be a ClassificationDisposition, got {self.disposition!r}")

    @property
    def active(self) -> bool:
        return self.disposition is ClassificationDisposition.ACTIVE

    def to_json(self) -> dict:
        return {"kernel": self.kernel.to_json(), "plan": self.plan.to_json(), "plan_id": self.plan.plan_id,
                "classes": [c.value for c in self.classes], "disposition": self.disposition.value,
                "reason": self.reason}


@attrs.frozen
class Subject:
    """A required movement or structural subject: a behaviour every profile must show, not a numeric kernel."""

    kind: str  # "movement" | "structural"
    name: str
    covers: tuple  # canonical KIR ops the witness exercises
    layout: str  # "compact" | "non-compact" | "hierarchical" | "multi-output"

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "covers": list(self.covers), "layout": self.layout}
