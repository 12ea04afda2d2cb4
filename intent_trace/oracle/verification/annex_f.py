"""The exact special values of the deferred math functions (T4's C99 Annex F list, and C99 pow).

Accuracy of a vendor transcendental is deferred (kernel-verification): within 2 ulp is not a bit-exact
obligation. Its special values are: ``exp(-inf) = +0`` holds on every target (T10), so a deferred plan
still runs on the candidate, against this independent table. A NaN result need only be NaN (Annex F
says "NaN", not which payload; policy ``exact-bits-nan-ness-v1``); every other result, zero signs
included, is exact.
"""
from __future__ import annotations

import math

from ...graph.traits import VENDOR_FUNCTIONS
from .cases import Case, _f32
from .payloads import EncodedInputs
from .records import PlanKey, VerificationClass as VC

INF, NAN = math.inf, math.nan

# function -> ((input, expected), ...): T4's list plus C99 Annex F's other exact cases of the same functions
# (exp(+-0) = 1, log(1) = +0, lgamma(1) = lgamma(2) = +0, ...), as each op's MathSpec lists them (graph/ops.py);
# NaN in gives NaN out (added to each)
UNARY: dict = {op.name: op.math.specials for op in VENDOR_FUNCTIONS}

# C99 7.12.7.4 / F.9.4.4 pow special cases: ((x, y), expected)
POW: tuple = (
    ((NAN, 0.0), 1.0), ((NAN, -0.0), 1.0), ((INF, 0.0), 1.0), ((-3.0, -0.0), 1.0),
    ((1.0, NAN), 1.0), ((1.0, INF), 1.0), ((1.0, -INF), 1.0), ((-1.0, INF), 1.0), ((-1.0, -INF), 1.0),
    ((0.0, -3.0), INF), ((-0.0, -3.0), -INF), ((0.0, -2.0), INF), ((-0.0, -2.0), INF), ((0.0, -INF), INF),
    ((0.0, 3.0), 0.0), ((-0.0, 3.0), -0.0), ((-0.0, 2.0), 0.0), ((-2.0, 0.5), NAN),
    ((0.5, -INF), INF), ((2.0, -INF), 0.0), ((0.5, INF), 0.0), ((2.0, INF), INF),
    ((-INF, -3.0), -0.0), ((-INF, -2.0), 0.0), ((-INF, 3.0), -INF), ((-INF, 2.0), INF),
    ((INF, -1.0), 0.0), ((INF, 2.0), INF), ((NAN, 1.0), NAN), ((2.0, NAN), NAN),
)


def annex_f_case(plan: PlanKey) -> Case | None:
    """The special-value witness of a deferred floating math plan (None when the table has no entry)."""
    base = f"{plan.plan_id}/{VC.SPECIAL_VALUES.value}/annex-f"
    if plan.operation == "pow" and plan.operand_dtypes == ("f32", "f32"):
        xs, ys = [p[0][0] for p in POW], [p[0][1] for p in POW]
        expected = tuple(p[1] for p in POW)
        n = len(POW)
        return Case(base, VC.SPECIAL_VALUES, EncodedInputs.of(_f32(xs), _f32(ys)), ((n,), (n,)), ((n,),),
                    (plan.output_dtype,), None, None, expected, nan_payloads_free=True)
    table = UNARY.get(plan.operation)
    if table is None or plan.operand_dtypes != ("f32",):
        return None
    pairs = table + ((NAN, NAN), (-NAN, NAN))
    n = len(pairs)
    return Case(base, VC.SPECIAL_VALUES, EncodedInputs.of(_f32([p[0] for p in pairs])), ((n,),), ((n,),),
                (plan.output_dtype,), None, None, tuple(p[1] for p in pairs), nan_payloads_free=True)
