"""Verification cases: the encoded inputs, shapes and acceptance policy of every required witness.

A case is data (an immutable :class:`Case`); running it is ``execute``. Every input comes from an
encoded payload, so the oracle and the target decode the same words (the comparison boundary), and
every seed is derived from the case's identity, so evidence is deterministic run to run.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...graph import ops
from .bounds import fibre_sums, prefix_sums, product_sums
from .case import INT_EDGES as _INT_EDGES, Case, case_seed  # noqa: F401  (Case: the name the stages import)
from .catalogue import MATMUL, POINTWISE, REDUCE, SCAN, Operation
from .layouts import SUBJECT_LAYOUTS, place
from .payloads import (EncodedBoolPayload, EncodedFloat32Payload, EncodedInputs, EncodedInt32Payload,
                       adversarial_float32_payload, analytic_cases, arbitrary_float32_payload,
                       exact_structural_payload, wide_exponent_float32_payload)
from .records import PlanKey, Subject, VerificationClass as VC

_SIGNED_ZERO_F32 = (0.0, -0.0, 1.0, -1.0, 2.0 ** -149, -2.0 ** -149, math.inf, -math.inf)


# --- payload builders -----------------------------------------------------------------------

def _f32(values) -> EncodedFloat32Payload:
    return EncodedFloat32Payload.from_bits(np.asarray(values, np.float32).reshape(-1).view(np.uint32).tolist())


def _random(dtype: str, seed: int, count: int, operation: str = "", role: str = ""):
    if dtype == "f32":
        return arbitrary_float32_payload(seed, count)
    rng = np.random.Generator(np.random.PCG64(seed))
    if dtype == "bool":
        return EncodedBoolPayload.from_values(bool(b) for b in rng.integers(0, 2, count))
    if operation in ("shl", "shr") and role == "rhs":
        return EncodedInt32Payload.from_values(rng.integers(0, 40, count).tolist())
    if operation == "pow" and role == "rhs":
        return EncodedInt32Payload.from_values(rng.integers(-2, 13, count).tolist())
    return EncodedInt32Payload.from_values(rng.integers(-2**31, 2**31, count).tolist())


def _edges(dtype: str) -> list:
    if dtype == "f32":
        return list(adversarial_float32_payload().bits)
    if dtype == "bool":
        return [0, 1]
    return [v & 0xFFFFFFFF for v in _INT_EDGES]


def _payload_of_words(dtype: str, words):
    cls = {"f32": EncodedFloat32Payload, "i32": EncodedInt32Payload, "bool": EncodedBoolPayload}[dtype]
    return cls.from_bits([int(w) for w in words])


def _is_nan_word(dtype: str, word: int) -> bool:
    return dtype == "f32" and (word & 0x7FFFFFFF) > 0x7F800000


def _all_combinations(dtypes, pools, nan_operands: int = 1) -> tuple:
    """Every combination of one value per operand (the cross product), as one payload per operand.

    Combinations with more than ``nan_operands`` NaN operands are left out: IEEE 754 (§6.2.3) lets the result
    carry either payload, so no exact witness can be built from them, except for an op whose NaN result T3 fixes as
    its first NaN operand (trait ``first_nan``: add, sub, mul, div, fma), where every combination is exact.
    """
    combos = [c for c in itertools.product(*pools)
              if sum(_is_nan_word(d, w) for d, w in zip(dtypes, c)) <= nan_operands]
    return tuple(_payload_of_words(d, [c[i] for c in combos]) for i, d in enumerate(dtypes))


# --- operation cases --------------------------------------------------------------------------

def operation_cases(op: Operation, plan: PlanKey, classes: tuple) -> list:
    build = {POINTWISE: _pointwise_cases, REDUCE: _fibre_cases, SCAN: _fibre_cases, MATMUL: _matmul_cases}.get(op.kind)
    if build is None:  # the kinds of coverage_ops
        from .coverage_cases import coverage_cases as build
    cases = []
    for cls in classes:
        cases.extend(build(op, plan, cls))
    return cases


def _pointwise_cases(op: Operation, plan: PlanKey, cls: VC) -> list:
    dtypes = plan.operand_dtypes
    base = f"{plan.plan_id}/{cls.value}"
    if cls is VC.BIT_EXACT:
        n, seed = 4099, case_seed(base)
        operands = tuple(_random(d, seed + i, n, plan.operation, role)
                         for i, (d, role) in enumerate(zip(dtypes, plan.operand_roles)))
    elif cls is VC.SIGNED_ZERO:
        seed = None
        pools = [[_f32([v]).bits[0] for v in _SIGNED_ZERO_F32] if d == "f32" else _edges(d) for d in dtypes]
        operands = _all_combinations(dtypes, pools)
    elif cls is VC.SPECIAL_VALUES:
        seed = None
        op = ops.REGISTRY.get(plan.operation)
        first_nan = op is not None and "first_nan" in op.traits
        pools = [_edges(d) for d in dtypes]
        operands = _all_combinations(dtypes, pools, len(dtypes) if first_nan else 1)
        if first_nan and any(_is_nan_word(d, w) for d, pool in zip(dtypes, pools) for w in pool):
            return [_case(f"{base}/0", cls, plan, operands), *_several_nan_cases(base, cls, plan, pools)]
    else:
        raise ValueError(f"{plan.plan_id}: class {cls.value} does not apply to a pointwise plan")
    return [_case(f"{base}/0", cls, plan, operands, seed=seed)]


def _case(case_id: str, cls: VC, plan: PlanKey, operands: tuple, broadcast: int | None = None, seed=None) -> Case:
    n = max(len(x) for x in operands)
    shapes = tuple((1,) if i == broadcast else (n,) for i in range(len(operands)))
    return Case(case_id, cls, EncodedInputs.of(*operands), shapes, ((n,),), (plan.output_dtype,), None, seed,
                broadcast=broadcast)


_BLOCK = 64  # elements per iteration of the widest unrolled vector loop (16 f32 lanes, 4 interleaved)


def _in_tails(dtypes, combos: list) -> tuple:
    """``combos`` (each a tuple of words) at least twice a block's worth, then padding, then the combinations in which
    every operand is a NaN as the last elements of a length one short of a block multiple: two NaNs meet both in a
    vector loop's body and in its remainder, whatever the vector width (the case of 400 combinations, a multiple of
    16, had no remainder: NumPy's and LLVM's scalar tails commuted there)."""
    every_nan = [c for c in combos if all(_is_nan_word(d, w) for d, w in zip(dtypes, c))]
    body = combos * -(-2 * _BLOCK // len(combos))
    pad = [combos[0]] * ((-len(body) - len(every_nan) - 1) % _BLOCK)
    rows = body + pad + every_nan
    return tuple(_payload_of_words(d, [r[i] for r in rows]) for i, d in enumerate(dtypes))


def _several_nan_cases(base: str, cls: VC, plan: PlanKey, pools: list) -> list:
    """Where T3 fixes a NaN result (trait ``first_nan``): every combination again at a length with a remainder, and
    with each operand in turn read once for every element (a scalar argument, a row's value: loop-invariant) at each
    of its NaN words. Commutative add and mul kept the invariant's NaN in LLVM's loops (x + s returned s's) while the
    witnesses' array operands kept the first one's."""
    dtypes = plan.operand_dtypes
    cases = [_case(f"{base}/tail", cls, plan, _in_tails(dtypes, list(itertools.product(*pools))))]
    for k, d in enumerate(dtypes):
        others = [p for i, p in enumerate(pools) if i != k]
        rest = [x for i, x in enumerate(dtypes) if i != k]
        for j, word in enumerate(w for w in pools[k] if _is_nan_word(d, w)):
            columns = list(_in_tails(rest, list(itertools.product(*others))))
            columns.insert(k, _payload_of_words(d, [word]))
            cases.append(_case(f"{base}/broadcast{k}/{j}", cls, plan, tuple(columns), broadcast=k))
    return cases


def _fibre_shapes(cls: VC) -> list:
    return {VC.STRUCTURAL: [(8, 64), (3, 1), (2, 1000)], VC.NUMERICAL: [(16, 257)], VC.WIDE_EXPONENT: [(4, 1000)],
            VC.BIT_EXACT: [(16, 257)], VC.SIGNED_ZERO: [(4, 4)], VC.SPECIAL_VALUES: [(0, 0)],
            VC.ANALYTIC: []}[cls]


def _signed_zero_rows(k: int) -> np.ndarray:
    return np.array([[-0.0] * k, [0.0, -0.0] * (k // 2), [1.5, -1.5] * (k // 2), [-0.0, -1.0, 1.0, -0.0][:k]],
                    np.float32)


def _fibre_cases(op: Operation, plan: PlanKey, cls: VC) -> list:
    dtype = plan.operand_dtypes[0]
    base = f"{plan.plan_id}/{cls.value}"
    out_shape = (lambda r, k: (r, k)) if op.kind == SCAN else (lambda r, k: (r,))
    cases = []
    if cls is VC.ANALYTIC:
        for a in analytic_cases():
            if a.operation == plan.operation:
                x = _f32(a.inputs[0])
                k = len(x)
                cases.append(Case(f"{base}/{a.case_id}", cls, EncodedInputs.of(x), ((1, k),), (out_shape(1, k),),
                                  (plan.output_dtype,), k, None, tuple(a.expected)))
        return cases
    if cls is VC.SPECIAL_VALUES and dtype == "f32" and plan.accumulation in SUMMING:
        for i, rows in enumerate(special_sum_rows()):
            r, k = rows.shape
            cases.append(Case(f"{base}/{i}", cls, EncodedInputs.of(_payload_of_words(dtype, rows.reshape(-1))),
                              ((r, k),), (out_shape(r, k),), (plan.output_dtype,), k, nan_payloads_free=i == 1))
        return cases
    if cls is VC.SPECIAL_VALUES:
        rows = _edge_fibres(dtype)
        k = len(rows[0])
        x = _payload_of_words(dtype, np.concatenate(rows))
        return [Case(f"{base}/0", cls, EncodedInputs.of(x), ((k, k),), (out_shape(k, k),), (plan.output_dtype,), k)]
    for i, (r, k) in enumerate(_fibre_shapes(cls)):
        seed = case_seed(base, i)
        bounds = None
        if cls is VC.STRUCTURAL:
            x = exact_structural_payload(seed, k, product=False, rows=r).lhs
        elif cls is VC.NUMERICAL:
            x = arbitrary_float32_payload(seed, r * k)
        elif cls is VC.WIDE_EXPONENT:
            x = wide_exponent_float32_payload(seed, r * k)
        elif cls is VC.SIGNED_ZERO:
            x, seed = _f32(_signed_zero_rows(k)), None
        else:  # BIT_EXACT
            x = _random(dtype, seed, r * k)
        if cls in (VC.NUMERICAL, VC.WIDE_EXPONENT):
            build = prefix_sums if op.kind == SCAN else fibre_sums
            bounds = (build(x.as_array().reshape(r, k), plan.accumulation_dtype, plan.output_dtype),)
        cases.append(Case(f"{base}/{i}", cls, EncodedInputs.of(x), ((r, k),), (out_shape(r, k),),
                          (plan.output_dtype,), k, seed, None, bounds))
    return cases


def _edge_fibres(dtype: str) -> list:
    """Fibres holding every edge value at every position, with at most one NaN encoding per fibre (which
    of several NaN payloads a reduction returns depends on its association, so it is not exact)."""
    edges = _edges(dtype)
    plain = [w for w in edges if not _is_nan_word(dtype, w)]
    nans = [w for w in edges if _is_nan_word(dtype, w)] or [plain[0]]
    rows = []
    for i in range(len(plain) + 1):
        row = list(np.roll(plain, i))
        row.insert(i % (len(plain) + 1), nans[i % len(nans)] if i < len(plain) else plain[i % len(plain)])
        rows.append(np.asarray(row, np.uint32))
    return rows


SUMMING = ("sum", "scan-sum", "dot")  # accumulations that add (their special values are built below)

_QNANS = (0x7FC00000, 0x7FC00001, 0xFFC00123, 0x7FFFFFFF, 0xFFC00000, 0x7FC12345, 0xFFFFFFFF, 0x7FD00000)
_MAX, _INF, _SPECIAL_K = 0x7F7FFFFF, 0x7F800000, 8


def special_sum_rows() -> tuple:
    """Fibres (rows of 8 binary32 words) whose sums, prefix sums and products with 1 or 2 have one result
    in every association, so special values are exact obligations of floating accumulations:

    * one NaN per fibre (a distinct quiet payload, at every position): the result is that NaN, payload and
      all; the other terms are small dyadic values whose partial sums are exact;
    * +inf / -inf at several positions: an infinity of that sign; +inf and -inf together: the default NaN
      of the invalid operation (x86's 0xFFC00000, which T10 makes every target's);
    * two largest finite values of one sign: overflow to an infinity of that sign (prefixes before the
      second stay at the largest finite value, small terms being below its half ulp);
    * subnormals of both signs small enough (< 2^-129 each) that every partial sum, doubled, is exact, and
      a fibre that cancels to +0: a target that flushes subnormals fails.

    The second array holds fibres with two distinct NaN payloads, where the association may return
    either: those cases require NaN-ness only (``Case.nan_payloads_free``).
    """
    small = np.array([1.0, 2.0, -3.0, 0.5, 4.0, -0.25, 8.0, 1.5], np.float32).view(np.uint32)
    rows = []
    for i, nan in enumerate(_QNANS):  # one NaN at position i
        row = np.roll(small, i).copy()
        row[i] = nan
        rows.append(row)
    for sign, positions in ((0, (0, 3, 7)), (0x80000000, (1, 5))):
        for p in positions:
            row = small.copy()
            row[p] = _INF | sign
            rows.append(row)
    for a, b in ((0, 7), (2, 3), (6, 1)):
        row = small.copy()
        row[a], row[b] = _INF, _INF | 0x80000000
        rows.append(row)
    for sign in (0, 0x80000000):
        for a, b in ((0, 1), (3, 6)):
            row = np.abs(small.view(np.float32)).view(np.uint32) | sign
            row[a], row[b] = _MAX | sign, _MAX | sign
            rows.append(row)
    subnormals = np.array([0x00000001, 0x000FFFFF, 0x80000003, 0x00080000, 0x800ABCDE, 0x00000000, 0x80000000,
                           0x00012345], np.uint32)
    for i in range(0, 8, 3):
        rows.append(np.roll(subnormals, i))
    rows.append(np.array([0x00000005, 0x80000005, 0x000FFFFF, 0x800FFFFF, 0x80000000, 0x00000000, 0x00001000,
                          0x80001000], np.uint32))  # cancels to +0
    multi = []
    for i in range(8):
        row = small.copy()
        row[i], row[(i + 3) % 8] = _QNANS[i], _QNANS[(i + 1) % 8]
        multi.append(row)
    return np.stack(rows), np.stack(multi)


def _matmul_shapes(cls: VC) -> list:
    return {VC.STRUCTURAL: [(8, 64, 8), (1, 1, 1), (3, 700, 3)], VC.NUMERICAL: [(16, 129, 16)],
            VC.WIDE_EXPONENT: [(8, 64, 8)], VC.BIT_EXACT: [(9, 33, 7)], VC.SIGNED_ZERO: [(2, 3, 2)],
            VC.SPECIAL_VALUES: [(0, 0, 0)], VC.ANALYTIC: []}[cls]


def _matmul_cases(op: Operation, plan: PlanKey, cls: VC) -> list:
    dtype = plan.operand_dtypes[0]
    base = f"{plan.plan_id}/{cls.value}"
    if cls is VC.ANALYTIC:
        cases = []
        for a in analytic_cases():
            if a.operation == "matmul":
                n = math.isqrt(len(a.inputs[0]))
                cases.append(Case(f"{base}/{a.case_id}", cls, EncodedInputs.of(_f32(a.inputs[0]), _f32(a.inputs[1])),
                                  ((n, n), (n, n)), ((n, n),), (plan.output_dtype,), n, None, tuple(a.expected)))
        return cases
    if cls is VC.SPECIAL_VALUES and dtype == "f32":
        cases = []
        for i, rows in enumerate(special_sum_rows()):
            m, k = rows.shape  # rhs: a column of ones and a column of twos (products exact or overflowing)
            b = _f32(np.stack([np.ones(k), np.full(k, 2.0)], axis=1))
            cases.append(Case(f"{base}/{i}", cls, EncodedInputs.of(_payload_of_words(dtype, rows.reshape(-1)), b),
                              ((m, k), (k, 2)), ((m, 2),), (plan.output_dtype,), k, nan_payloads_free=i == 1))
        return cases
    if cls is VC.SPECIAL_VALUES:
        rows = _edge_fibres(dtype)
        k = len(rows[0])
        a = _payload_of_words(dtype, np.concatenate(rows[:3]))
        ones = _f32([1.0]).bits[0] if dtype == "f32" else 1  # the other side plain, so one NaN meets no other
        b = _payload_of_words(dtype, [ones, *([rows[-1][0]] * (k - 1))] * 2)
        return [Case(f"{base}/0", cls, EncodedInputs.of(a, b), ((3, k), (k, 2)), ((3, 2),), (plan.output_dtype,), k)]
    cases = []
    for i, (m, k, n) in enumerate(_matmul_shapes(cls)):
        seed = case_seed(base, i)
        if cls is VC.STRUCTURAL:
            # rows=m fibres of length k for lhs; rhs holds m*k values: a (k, m) matrix, so n = m here
            p = exact_structural_payload(seed, k, product=True, rows=m)
            a, b, n = p.lhs, p.rhs, m
        elif cls is VC.SIGNED_ZERO:
            a = _f32([[-0.0, -0.0, -0.0], [0.0, -0.0, 0.0]])
            b = _f32([[1.0, -0.0], [2.0, 0.0], [0.5, -1.0]])
            seed = None
        elif cls in (VC.NUMERICAL, VC.BIT_EXACT) and dtype == "f32":
            a, b = arbitrary_float32_payload(seed, m * k), arbitrary_float32_payload(seed + 1, k * n)
        elif cls is VC.WIDE_EXPONENT:
            a, b = wide_exponent_float32_payload(seed, m * k), wide_exponent_float32_payload(seed + 1, k * n)
        else:
            a, b = _random(dtype, seed, m * k), _random(dtype, seed + 1, k * n)
        bounds = None
        if cls in (VC.NUMERICAL, VC.WIDE_EXPONENT):
            bounds = (product_sums(a.as_array().reshape(m, k), b.as_array().reshape(k, n), plan.accumulation_dtype,
                                   plan.output_dtype),)
        cases.append(Case(f"{base}/{i}", cls, EncodedInputs.of(a, b), ((m, k), (k, n)), ((m, n),),
                          (plan.output_dtype,), k, seed, None, bounds))
    return cases


# --- subject cases ------------------------------------------------------------------------------

# subject -> (operand shapes, output shapes). Dtypes come from the witness kernel's annotations.
SUBJECT_SHAPES = {
    "copy": (((37,),), ((37,),)), "transpose": (((5, 7),), ((7, 5),)), "broadcast": (((7,), (5, 7)), ((5, 7),)),
    "strided-read": (((9,),), ((9,),)), "tensor-slice": (((3, 7),), ((3,),)), "reshape": (((4, 6),), ((6, 4),)), "join": (((5,), (5,)), ((5, 2),)),
    "gather": (((11,), (13,)), ((13,),)), "masked-access": (((11,),), ((16,),)), "subregion-write": (((10,),), ((10,),)), "fill": (((3, 4),), ((3, 4),)),
    "multi-output": (((4, 9),), ((4,), (4,))), "carried-loop": (((17,),), ((1,),)),
    "while-loop": (((23,),), ((2,),)), "branch": (((8,),), ((8,),)), "forall": (((12,),), ((12,),)),
    "staging-buffer": (((15,),), ((15,),)), "hierarchical-contraction": (((2, 3, 4), (2, 4, 5)), ((2, 3, 5),)),
    **dict.fromkeys(("strided-view", "transposed-view", "offset-view"), (((5, 7), (5, 7)), ((5, 7),))),
}


def subject_case(subject: Subject, kernel) -> Case:
    in_shapes, out_shapes = SUBJECT_SHAPES[subject.name]
    specs = list(kernel.specs.values())
    ins = [s for s in specs if s.access == "In"]
    outs = [s for s in specs if s.access == "Out"]
    seed = case_seed("subject", subject.name)
    operands = tuple(_random(s.dtype.name, seed + i, int(np.prod(shape)))
                     for i, (s, shape) in enumerate(zip(ins, in_shapes)))
    return Case(f"subject/{subject.name}/{VC.BIT_EXACT.value}/0", VC.BIT_EXACT, EncodedInputs.of(*operands),
                in_shapes, out_shapes, tuple(s.dtype.name for s in outs), None, seed,
                layouts=SUBJECT_LAYOUTS.get(subject.name))


# --- execution ------------------------------------------------------------------------------------

# Two poison fills per output: an element is unwritten when it holds the first fill after the run that
# started from it *and* the second fill after the run that started from that one. One fill is not enough:
# a Boolean output pre-filled with False hides a kernel that never stores False, and a caller's buffer
# that already holds the answer hides a kernel that writes nothing. Two fills no single result equals
# (NaN patterns for floats, bytes 0xA5 / 0x5A elsewhere, False / True for Booleans) cannot both be hidden.
POISON_BYTES = (0xA5, 0x5A)
_POISON_F32 = (0x7FBADBAD, 0xFFD5A5A5)  # two NaNs of different sign and payload


def poison(shape, dtype, which: int) -> np.ndarray:
    """An array of ``shape`` and NumPy ``dtype`` holding poison fill ``which`` (0 or 1)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.full(shape, bool(which), np.bool_)
    if dtype == np.float32:
        return np.full(shape, np.uint32(_POISON_F32[which]), np.uint32).view(np.float32)
    return np.full(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, POISON_BYTES[which], np.uint8) \
        .view(dtype).reshape(shape)


def poisoned_run(call, specs) -> tuple:
    """Run ``call(outputs)`` twice, its outputs (``specs``: ``(shape, numpy dtype)`` each) poisoned with two
    different fills; return (the first run's outputs, per output the number of elements neither run wrote).

    The reusable form of the two-fill rule, for every runner that owns its output buffers (the stages here,
    ``intent.verify``). ``call`` must run the kernel with fresh inputs each time and synchronise before
    returning. Nondeterministic results are fine: an element counts as unwritten only when each run left
    its own fill in place.
    """
    runs = []
    for which in (0, 1):
        outputs = [poison(shape, dtype, which) for shape, dtype in specs]
        call(outputs)
        runs.append(outputs)
    unwritten = []
    for (shape, dtype), first, second in zip(specs, *runs):
        a, b = (np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(-1, np.dtype(dtype).itemsize)
                for x in (first, second))
        fill_a, fill_b = (poison((1,), dtype, w).view(np.uint8) for w in (0, 1))
        unwritten.append(int(np.sum(np.all(a == fill_a, axis=1) & np.all(b == fill_b, axis=1))))
    return tuple(runs[0]), tuple(unwritten)


_NUMPY = {"f32": np.float32, "i32": np.int32, "bool": np.bool_, "f64": np.float64, "i64": np.int64}


def execute(executable, case: Case, arrays: tuple) -> tuple:
    """Run one case on decoded ``arrays`` under the two-fill rule (``poisoned_run``); returns (flat outputs,
    unwritten counts per output)."""
    def call(outputs):
        inputs = [np.array(a, copy=True).reshape(shape) for a, shape in zip(arrays, case.shapes)]
        if case.layouts:  # real non-compact views (layouts.place); outputs read back after the run
            n = len(inputs)
            inputs = [place(a, lay) for a, lay in zip(inputs, case.layouts[:n])]
            views = [place(o, lay) for o, lay in zip(outputs, case.layouts[n:])]
            executable(*inputs, *views)
            for o, v in zip(outputs, views):
                o[...] = v
        else:
            executable(*inputs, *outputs)
        sync = getattr(executable, "synchronize", None)
        if sync is not None:  # queued target work completes before anything is decoded or compared
            sync()

    specs = [(tuple(shape), _NUMPY[dtype]) for shape, dtype in zip(case.output_shapes, case.output_dtypes)]
    outputs, unwritten = poisoned_run(call, specs)
    return tuple(o.reshape(-1) for o in outputs), unwritten
