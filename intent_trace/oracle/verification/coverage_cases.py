"""Cases of the operations in :mod:`.coverage_ops`: encoded inputs, shapes and classes, one builder per kind.

Every input is an Int32/Float32/Boolean payload drawn from a seed derived from the case identity
(``cases.case_seed``), so evidence is deterministic. Where the result depends on which of several
colliding updates lands first the witnesses are built so that it cannot: collisions combine with a
commutative kind, contended compare-exchanges all write one value, exchanges and unique stores get
permutations, floating accumulations get terms whose every partial sum is exact (``structural``:
small integers times a power of two, far inside 24 bits), and no destination receives two NaNs.
Special-value cases put every edge value at every collision position ("collisions at every index").
Some cases pass real non-compact views (``layouts``): scatters and atomics on their interleaved layout,
scaled and sparse contractions on their third shape (a transposed, Fortran-order rhs among them).
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import _format_mx as mx
from .. import generic_quant
from . import coverage_ops as K
from .bounds import OutputBound, fibre_sums, inflate, magnitude_of, prefix_sums, product_sums
from .case import INT_EDGES as _INT_EDGES, Case, case_seed
from .layouts import COMPACT, OFFSET, STRIDED, TRANSPOSED
from .coverage_witnesses import HISTOGRAM_BINS, MX_CARRIERS, QUANT_K, SPARSE_KC
from .payloads import (EncodedBoolPayload, EncodedFloat32Payload, EncodedInputs, EncodedInt32Payload,
                       adversarial_float32_payload, arbitrary_float32_payload)
from .records import VerificationClass as VC

INT_EDGES = np.array(_INT_EDGES, np.int64)


def _i32(values) -> EncodedInt32Payload:
    return EncodedInt32Payload.from_values(np.asarray(values, np.int64).reshape(-1))


def _f32(values) -> EncodedFloat32Payload:
    return EncodedFloat32Payload.from_bits(np.asarray(values, np.float32).reshape(-1).view(np.uint32))


def _bool(values) -> EncodedBoolPayload:
    return EncodedBoolPayload.from_values(np.asarray(values, np.bool_).reshape(-1))


def _rng(*parts) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(case_seed(*parts)))


def _case(plan, cls: VC, i: int, operands, outputs, seed=None, bounds=None, k=None, layouts=None) -> Case:
    """``operands``: (payload, shape) pairs; ``outputs``: (shape, dtype) pairs; ``bounds``: one
    ``bounds.OutputBound`` (or None) per output, for the numerical class; ``layouts``: one ``layouts``
    name per operand then output (real non-compact views), or None for compact arrays."""
    return Case(f"{plan.plan_id}/{cls.value}/{i}", cls, EncodedInputs.of(*(p for p, _ in operands)),
                tuple(tuple(s) for _, s in operands), tuple(tuple(s) for s, _ in outputs),
                tuple(d for _, d in outputs), k, seed, None, None if bounds is None else tuple(bounds),
                layouts=layouts)


def _nan_free_edges() -> np.ndarray:
    words = np.asarray(adversarial_float32_payload().bits, np.uint32)
    return words[(words & 0x7FFFFFFF) <= 0x7F800000].view(np.float32)


def _nans() -> np.ndarray:
    words = np.asarray(adversarial_float32_payload().bits, np.uint32)
    return words[(words & 0x7FFFFFFF) > 0x7F800000].view(np.float32)


def _values(dtype: str, rng, n: int, *, structural=False) -> np.ndarray:
    if dtype == "i32":
        return rng.integers(-2**31, 2**31, n)
    if structural:  # multiples of 1/8 of magnitude <= 64: any 4099-term partial sum is exact in binary32
        return (rng.integers(-512, 513, n) / 8.0).astype(np.float32)
    return np.asarray(arbitrary_float32_payload(int(rng.integers(0, 2**31)), n).as_array())


def _edge_values(dtype: str, n: int, shift: int) -> np.ndarray:
    """``n`` edge values, rotated by ``shift`` so every edge meets every position; no NaN (see _one_nan)."""
    pool = INT_EDGES if dtype == "i32" else _nan_free_edges()
    return np.roll(np.resize(pool, n), shift)


# --- builders per kind ---------------------------------------------------------------------------------

def _random_cases(op, plan, cls):
    if cls is VC.BIT_EXACT:
        rng = _rng(plan.plan_id, cls.value)
        seeds = [rng.integers(-2**31, 2**31, 2) for _ in range(2)]
        counters = [rng.integers(0, 2**31, 4099) for _ in seeds]
    else:
        seeds = [(0, 0), (-1, -1), (0, -1), (-1, 0), (0x7F4A7C15, -0x61C88647)]
        edge = np.array([0, 1, 2, 3, 4, 5, 7, 8, 2**24 - 1, 2**24, 2**31 - 5, 2**31 - 4, 2**31 - 2, 2**31 - 1])
        counters = [np.roll(edge, i) for i in range(len(seeds))]
    return [_case(plan, cls, i, ((_i32(s), (2,)), (_i32(c), (len(c),))), (((len(c),), "i32"),))
            for i, (s, c) in enumerate(zip(seeds, counters))]


def _histogram_cases(op, plan, cls):
    out = (((HISTOGRAM_BINS,), "i32"),)
    if cls is VC.BIT_EXACT:
        rng = _rng(plan.plan_id, cls.value)
        v, ok = rng.integers(-3, HISTOGRAM_BINS + 4, 4099), rng.integers(0, 2, 4099).astype(bool)
        sets = [(v, ok)]
    else:
        every = np.repeat(np.arange(HISTOGRAM_BINS), 37)  # every bin collides 37 times
        one = np.full(2048, HISTOGRAM_BINS - 1)
        one[::97] = [(-2**31, 2**31 - 1, -1, HISTOGRAM_BINS)[i % 4] for i in range(len(one[::97]))]  # invalid values
        sets = [(every, np.ones(len(every), bool)), (one, np.ones(len(one), bool)),
                (every, np.zeros(len(every), bool))]
    return [_case(plan, cls, i, ((_i32(v), (len(v),)), (_bool(ok), (len(v),))), out) for i, (v, ok) in enumerate(sets)]


def _permutations(rng, n: int, k: int) -> list:
    return [rng.permutation(n)[:k], np.arange(n)[::-1][:k], np.arange(n)[:k]]


def _unique_store_cases(op, plan, cls):
    dtype, rng = plan.operand_dtypes[1], _rng(plan.plan_id, cls.value)
    n = 257
    cases = []
    for i, idx in enumerate(_permutations(rng, n, n) + [rng.permutation(n)[:100]]):
        if cls is VC.BIT_EXACT:
            v = _values(dtype, rng, len(idx))
        else:
            v = _edge_values(dtype, len(idx), i)
            if dtype == "f32":
                v = v.copy()
                v[::7] = np.resize(_nans(), len(v[::7]))  # NaN payloads move as they are
        payload = _i32(v) if dtype == "i32" else _f32(v)
        cases.append(_case(plan, cls, i, ((_i32(idx), (len(idx),)), (payload, (len(idx),))), (((n,), dtype),)))
    return cases


def _one_nan_per_destination(idx: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """NaN payloads placed so each destination receives at most one (which NaN a max keeps is not exact)."""
    v = v.copy()
    nans = _nans()
    for d in range(0, n, 2):
        hits = np.flatnonzero(idx == d)
        if len(hits):
            v[hits[len(hits) // 2]] = nans[d % len(nans)]
    return v


def _combine_cases(op, plan, cls):
    """Scatter-reduce and atomic read-modify-write: (index, values, initial) -> final destination."""
    dtype, rng = plan.operand_dtypes[1], _rng(plan.plan_id, cls.value)
    exchange = op.name == "atomic_exchange"
    structural = cls is VC.STRUCTURAL
    n, k = (257, 257) if exchange else (7, 4099)
    if cls is VC.SPECIAL_VALUES:
        if exchange:
            layouts = _permutations(rng, n, n)
        else:  # every destination collides: sorted runs, then interleaved
            layouts = [np.repeat(np.arange(n), k // n + 1)[:k], np.resize(np.arange(n), k)]
    else:
        layouts = [rng.permutation(n)] if exchange else [rng.integers(0, n, k), np.resize(np.arange(n), k)]
    cases = []
    for i, idx in enumerate(layouts):
        if cls is VC.SPECIAL_VALUES:
            v, init = _edge_values(dtype, len(idx), i), _edge_values(dtype, n, 3 * i + 1)
            if dtype == "f32" and op.name.endswith(("max", "min")):
                v = _one_nan_per_destination(idx, v, n)
        else:
            v, init = _values(dtype, rng, len(idx), structural=structural), _values(dtype, rng, n, structural=structural)
        enc = _i32 if dtype == "i32" else _f32
        bounds = (_collision_sums(idx, v, init),) if cls is VC.NUMERICAL else None
        views = (STRIDED, OFFSET, COMPACT, STRIDED) if i == 1 else None  # real views for the second layout
        cases.append(_case(plan, cls, i, ((_i32(idx), (len(idx),)), (enc(v), (len(idx),)), (enc(init), (n,))),
                           (((n,), dtype),), bounds=bounds, layouts=views))
    return cases


def _collision_sums(idx, v, init) -> OutputBound:
    """Destination d sums its initial value and every value scattered to it, in any order: K_d terms."""
    n = len(init)
    t, i0 = np.asarray(v, np.float64), np.asarray(init, np.float64)
    counts = np.bincount(idx, minlength=n) + 1
    s = inflate(np.abs(i0) + np.bincount(idx, np.abs(t), minlength=n), counts)
    total = i0 + np.bincount(idx, t, minlength=n)
    return OutputBound.of(counts, s, "f32", "f32", magnitude_of(total, s, counts))


def _load_store_cases(op, plan, cls):
    dtype, rng = plan.operand_dtypes[0], _rng(plan.plan_id, cls.value)
    if cls is VC.BIT_EXACT:
        v = _values(dtype, rng, 4099)
    else:
        v = np.concatenate([_edge_values(dtype, 64, 0)] + ([_nans()] if dtype == "f32" else []))
    return [_case(plan, cls, 0, (((_i32 if dtype == "i32" else _f32)(v), (len(v),)),), (((len(v),), dtype),))]


def _cas_cases(op, plan, cls):
    rng = _rng(plan.plan_id, cls.value)
    m = 13
    if cls is VC.BIT_EXACT:
        n = 4099
        cell, expected = rng.integers(0, 4, n), rng.integers(0, 4, n)
        desired, targets = rng.integers(-2**31, 2**31, n), [rng.integers(0, m, n)]
    else:
        cell = np.resize(INT_EDGES, 64)
        n = len(cell)
        expected = np.where(np.arange(n) % 2 == 0, cell, np.roll(cell, 5))  # half succeed, at every position
        desired = np.roll(cell, 3)
        targets = [np.zeros(500, np.int64) + 6, np.resize(np.arange(m), 500)]  # one slot; every slot
    outs = (((n,), "i32"), ((n,), "i32"), ((n,), "bool"), ((m,), "i32"), ((m,), "i32"))
    return [_case(plan, cls, i, ((_i32(cell), (n,)), (_i32(expected), (n,)), (_i32(desired), (n,)),
                                 (_i32(t), (len(t),))), outs) for i, t in enumerate(targets)]


def _quantize_rows(cls, rng, q4: bool) -> np.ndarray:
    if cls is VC.BIT_EXACT:
        scales = np.array([1e-3, 0.1, 1.0, 7.5, 300.0, 2e3])[:, None]
        return (rng.standard_normal((6, QUANT_K)) * scales).astype(np.float32)
    rows = np.zeros((8, QUANT_K), np.float32)
    rows[1, 300] = -3.0  # one nonzero element, negative (d < 0 for q8_k)
    rows[2] = 1.25  # constant
    rows[3] = np.resize([1.0, -1.0], QUANT_K)
    rows[4] = np.resize(np.arange(-127, 128) + 0.5, QUANT_K).astype(np.float32)  # q8_k: nearest_int ties
    rows[4, 0] = 127.0
    rows[5] = np.resize([1e-6, -2e-6, 3e-7], QUANT_K)  # tiny: f16 d / dmin go subnormal
    rows[6] = np.resize([2.0 ** -100, -2.0 ** -99], QUANT_K) if not q4 else np.resize([6e4, -1.0], QUANT_K) / 64
    rows[7, :256] = 5.0  # the first super-block constant, the second zero
    return rows


def _quantize_cases(op, plan, cls):
    q4 = op.name == "quantize_q4_k"
    x = _quantize_rows(cls, _rng(plan.plan_id, cls.value), q4)
    r, nb = x.shape[0], QUANT_K // 256
    outs = (((r, nb), "f32"), ((r, nb), "f32"), ((r, nb, 8), "i32"), ((r, nb, 8), "i32"), ((r, nb, 256), "i32")) \
        if q4 else (((r, nb), "f32"), ((r, nb, 256), "i32"), ((r, nb, 16), "i32"))
    return [_case(plan, cls, 0, ((_f32(x), x.shape),), outs)]


# e4m3 codes with exponent field 7 or 8 (|value| in [1, 4)), either sign, and the two zeros
_E4M3_STRUCTURAL = np.array([s | (e << 3) | m for s in (0, 0x80) for e in (7, 8) for m in range(8)] + [0, 0x80])


_E4M3_FINITE = np.array([c for c in range(256) if c & 0x7F != 0x7F])  # every code but the two NaNs


def _mx_codes(fmt: str, rng, shape, numerical: bool = False) -> np.ndarray:
    if fmt == "e2m1":  # every byte is two valid e2m1 codes (no NaN, no inf): |value| <= 6 in steps of 0.5
        return rng.integers(0, 256, shape)
    return rng.choice(_E4M3_FINITE if numerical else _E4M3_STRUCTURAL, shape)


def _scaled_cases(op, plan, cls):
    """Structural: decoded values with 1-3 significant bits, scales 2^-1..2^1, so every partial sum over
    G*32 <= 96 products needs at most 21 bits: every association gives the one exact result."""
    fl, fr = plan.operand_dtypes[0], plan.operand_dtypes[2]
    rng = _rng(plan.plan_id, cls.value)
    numerical = cls is VC.NUMERICAL
    cases = []
    for i, (m, g, n) in enumerate(((5, 3, 4), (1, 1, 1), (2, 2, 7))):
        a, b = (_mx_codes(fl, rng, (m, g, MX_CARRIERS[fl]), numerical),
                _mx_codes(fr, rng, (g, MX_CARRIERS[fr], n), numerical))
        lo, hi = (112, 143) if numerical else (126, 129)  # scales 2^-15..2^15, or 2^-1..2^1
        sa, sb = rng.integers(lo, hi, (m, g)), rng.integers(lo, hi, (n, g))
        bounds = (_scaled_sums(fl, fr, a, sa, b, sb),) if numerical else None
        views = (OFFSET, STRIDED, TRANSPOSED, COMPACT, STRIDED) if i == 2 else None
        cases.append(_case(plan, cls, i, ((_i32(a), a.shape), (_i32(sa), sa.shape), (_i32(b), b.shape),
                                          (_i32(sb), sb.shape)), (((m, n), "f32"),), bounds=bounds, k=g * 32,
                           layouts=views))
    return cases


def _scaled_sums(fl, fr, a, sa, b, sb) -> OutputBound:
    """The decoded operands (T6: value = 2^(s-127) * decode(code)) as an (M, G*32) @ (G*32, N) contraction;
    every product is exact in float64 (and in the f32 accumulator: no exponent leaves its range here)."""
    m, g, _ = a.shape
    n = b.shape[2]
    lhs = mx.decode_elements(a, fl, axis=2) * mx.decode_scales(sa)[:, :, None]  # (m, g, 32)
    rhs = mx.decode_elements(b, fr, axis=1) * mx.decode_scales(sb).T[:, None, :]  # (g, 32, n)
    return product_sums(lhs.reshape(m, g * 32), rhs.reshape(g * 32, n), "f32", "f32")


def _sparse_metadata(schema: str, rng, m: int) -> np.ndarray:
    if schema == "one_of_two":
        return rng.integers(0, 2, (m, SPARSE_KC))
    pairs = np.array(list(itertools.combinations(range(4), 2)))  # strictly increasing within each group
    return pairs[rng.integers(0, len(pairs), (m, SPARSE_KC // 2))].reshape(m, SPARSE_KC)


def _sparse_cases(op, plan, cls):
    """Structural: nonzero integers of magnitude <= 16, so every partial sum of <= 64 products is exact."""
    schema = op.name.split("sparse_contract_")[1]
    rng = _rng(plan.plan_id, cls.value)
    numerical = cls is VC.NUMERICAL
    cases = []
    for i, (m, n) in enumerate(((5, 6), (1, 1), (3, 9))):
        if numerical:
            a, b = _values("f32", rng, m * SPARSE_KC).reshape(m, SPARSE_KC), \
                _values("f32", rng, 2 * SPARSE_KC * n).reshape(2 * SPARSE_KC, n)
        else:
            a = rng.choice(np.r_[-16:0, 1:17], (m, SPARSE_KC)).astype(np.float32)
            b = rng.choice(np.r_[-16:0, 1:17], (2 * SPARSE_KC, n)).astype(np.float32)
        meta = _sparse_metadata(schema, rng, m)
        bounds = (product_sums(_dense(schema, a, meta), b, "f32", "f32"),) if numerical else None
        views = (STRIDED, STRIDED, TRANSPOSED, OFFSET) if i == 2 else None  # a Fortran-order rhs
        cases.append(_case(plan, cls, i, ((_f32(a), a.shape), (_i32(meta), meta.shape), (_f32(b), b.shape)),
                           (((m, n), "f32"),), bounds=bounds, k=2 * SPARSE_KC, layouts=views))
    return cases


def _dense(schema: str, a: np.ndarray, meta: np.ndarray) -> np.ndarray:
    """T7's logical dense lhs: the kept value whose metadata is p at position p of its group, else 0."""
    keep, group = (1, 2) if schema == "one_of_two" else (2, 4)
    m, kc = a.shape
    dense = np.zeros((m, kc // keep * group))
    cols = (np.arange(kc) // keep) * group + meta
    np.put_along_axis(dense, cols, a.astype(np.float64), axis=1)
    return dense


def _region_cases(op, plan, cls):
    dtype, rng = plan.operand_dtypes[0], _rng(plan.plan_id, cls.value)
    cases = []
    lengths = {VC.STRUCTURAL: (1, 37, 1000), VC.NUMERICAL: (37, 1000), VC.BIT_EXACT: (4099,)}.get(cls, (64,))
    for i, n in enumerate(lengths):
        if cls is VC.SPECIAL_VALUES:
            x = _edge_values(dtype, n, i)
        else:
            x = _values(dtype, rng, n, structural=cls is VC.STRUCTURAL)
        outs = (((2,), dtype),) if op.kind == K.REGION_FOLD else (((n,), dtype), ((1,), dtype))
        bounds = _region_bounds(op.kind, x) if cls is VC.NUMERICAL else None
        cases.append(_case(plan, cls, i, (((_i32 if dtype == "i32" else _f32)(x), (n,)),), outs, bounds=bounds,
                           k=n))
    return cases


def _region_bounds(kind: str, x: np.ndarray) -> tuple:
    """The fold's (sum, max): the sum of all n terms in any legal segmentation, the max exact (K = 0); the
    scan's outputs: prefix j sums its j + 1 terms (any segmentation re-associates only), the state all n."""
    whole = fibre_sums(np.asarray(x).reshape(1, -1), "f32", "f32")
    if kind == K.REGION_FOLD:
        return (OutputBound.of([whole.terms[0], 0], [whole.sum_absolute_terms[0], 0.0], "f32", "f32",
                               [whole.magnitude[0], 0.0]),)
    return prefix_sums(np.asarray(x).reshape(1, -1), "f32", "f32"), whole


def _quantized_dot_cases(op, plan, cls):
    lf = op.name.split("_")[2] + "_k"
    rng = _rng(plan.plan_id, cls.value)
    x, y = _quantize_rows(VC.BIT_EXACT, rng, lf == "q4_k"), _quantize_rows(VC.BIT_EXACT, rng, False)
    y = y[::-1].copy()  # pair large rows with small ones
    return [_case(plan, cls, 0, ((_f32(x), x.shape), (_f32(y), y.shape)), (((x.shape[0],), "f32"),),
                  bounds=(_quantized_sums(lf, x, y),), k=QUANT_K)]


def _quantized_sums(lf: str, x: np.ndarray, y: np.ndarray) -> OutputBound:
    """quantization.md Q3: per block, f32(x.d) * y.d * (exact integer sum) [- f32(x.dmin) * y.d * (exact
    integer sum)], the block terms summed in f32. The quantized fields are quantize's (bit-exact on every
    target, its own plan verifies that), computed here by the reference's host codec; every piece of a
    term passes through at most nb + 6 roundings (two products, the integer sum's conversion, the
    subtraction, nb additions), so K = nb + 6 and S = sum over blocks of |pieces|."""
    yd, yqs, ybs = (np.asarray(v) for v in generic_quant.quantize_q8_k(y))
    nb = yd.shape[-1]
    if lf == "q8_k":
        xd, xqs, _ = (np.asarray(v) for v in generic_quant.quantize_q8_k(x))
        isum = np.einsum("rbi,rbi->rb", xqs.astype(np.int64), yqs.astype(np.int64))
        pieces = np.abs(xd.astype(np.float64) * yd.astype(np.float64) * isum)
    else:
        xd, xdmin, sc, mn, q = (np.asarray(v) for v in generic_quant.quantize_q4_k(x))
        prod = (q.astype(np.int64) * yqs.astype(np.int64)).reshape(q.shape[:-1] + (8, 32)).sum(axis=-1)
        blockint = (prod * sc.astype(np.int64)).sum(axis=-1)
        sumi = (ybs.astype(np.int64) * np.repeat(mn.astype(np.int64), 2, axis=-1)).sum(axis=-1)
        pieces = np.abs(xd.astype(np.float64) * yd.astype(np.float64) * blockint) + \
            np.abs(xdmin.astype(np.float64) * yd.astype(np.float64) * sumi)
    s = inflate(pieces.sum(axis=-1), 4 * nb)
    return OutputBound.of(nb + 6, s, "f32", "f32")


BUILDERS = {
    K.QUANTIZED_DOT: _quantized_dot_cases,
    K.RANDOM: _random_cases, K.HISTOGRAM: _histogram_cases, K.UNIQUE_STORE: _unique_store_cases,
    K.SCATTER: _combine_cases, K.ATOMIC_RMW: _combine_cases, K.ATOMIC_LOAD: _load_store_cases,
    K.ATOMIC_STORE: _load_store_cases, K.ATOMIC_CAS: _cas_cases, K.QUANTIZE: _quantize_cases,
    K.SCALED: _scaled_cases, K.SPARSE: _sparse_cases, K.REGION_FOLD: _region_cases, K.REGION_SCAN: _region_cases,
}


def coverage_cases(op, plan, cls: VC) -> list:
    """The cases of one class of one plan of a :mod:`.coverage_ops` operation."""
    return BUILDERS[op.kind](op, plan, cls)
