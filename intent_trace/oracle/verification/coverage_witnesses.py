"""Witness kernels of the operations in :mod:`.coverage_ops`, one builder per kind.

Each is an ordinary ``@intent.kernel`` in the public language (as ``witnesses`` does for the
elementwise, fibre and matmul kinds). Operands arrive as f32/i32/bool payload arrays; a witness
converts carrier words to the op's dtypes exactly (i32 -> u8 for MX codes and e8m0 scales, two i32
words -> one u64 seed, i32 -> index counters) and returns narrower or unsigned results as exact i32
(or f32 for f16 fields), so the comparison sees every bit the op produced. Every witness writes every
element of its outputs, except where the op itself leaves elements alone (a unique store's untouched
elements keep the witness's own fill, written first).
(No ``from __future__ import annotations``: the annotations name dtypes held in local variables.)
"""
import functools

from ... import language as I
from ... import types as T
from ...kernel import Kernel
from . import coverage_ops as K

MX_FORMATS = {"e2m1": I.e2m1, "e4m3": I.e4m3}
MX_CARRIERS = {"e2m1": 16, "e4m3": 32}  # carrier u8 elements per 32-element scale group (T6)
GROUP = 32
HISTOGRAM_BINS = 16
QUANT_K = 512  # two k-quant super-blocks per row
STORE_FILL = -1


def _dt(name: str) -> T.DType:
    return T.DTYPES[name]


def _named(fn, name: str) -> Kernel:
    fn.__name__ = fn.__qualname__ = name
    return Kernel(fn)


def _random_bits():
    def random_bits(seed: I.In[I.i32, (2,)], counter: I.In[I.i32, ("N",)], y: I.Out[I.i32, ("N",)]):
        lo = I.cast(I.bitcast(seed[0], I.u32), I.u64)
        hi = I.cast(I.bitcast(seed[1], I.u32), I.u64)
        d = I.domain(0, counter.shape[0])
        y[d] = I.bitcast(I.random.bits((hi << 32) | lo, I.cast(counter[d], I.index)), I.i32)
    return random_bits


def _histogram():
    def histogram(v: I.In[I.i32, ("N",)], ok: I.In[I.bool, ("N",)], out: I.Out[I.i32, (HISTOGRAM_BINS,)]):
        x = v[:]
        out[:] = I.histogram(x, bins=HISTOGRAM_BINS, valid=ok[:] & (x >= 0) & (x < HISTOGRAM_BINS),
                             count_dtype=I.i32)
    return histogram


def _unique_store(dt):
    def unique_store(idx: I.In[I.i32, ("K",)], x: I.In[dt, ("K",)], y: I.Out[dt, ("N",)]):
        y[I.domain(0, y.shape[0])] = I.cast(STORE_FILL, dt)
        y[idx[:]] = x[:]
    return unique_store


def _scatter(kind: str, dt):
    def scatter(idx: I.In[I.i32, ("K",)], v: I.In[dt, ("K",)], init: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        y[I.domain(0, y.shape[0])] = init[I.domain(0, init.shape[0])]
        I.scatter_reduce(y, idx[:], v[:], combine=kind)
    return scatter


def _atomic_rmw(kind: str, dt):
    rmw = getattr(I.atomic, {"and": "and_", "or": "or_"}.get(kind, kind))

    def atomic_rmw(idx: I.In[I.i32, ("K",)], v: I.In[dt, ("K",)], init: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        y[I.domain(0, y.shape[0])] = init[I.domain(0, init.shape[0])]
        for i in I.parallel(I.domain(0, idx.shape[0])):
            rmw(y[idx[i]], v[i], order="relaxed")
    return atomic_rmw


def _atomic_load(dt):
    def atomic_load(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        for i in I.parallel(I.domain(0, x.shape[0])):
            y[i] = I.atomic.load(x[i], order="acquire")
    return atomic_load


def _atomic_store(dt):
    def atomic_store(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)]):
        y[I.domain(0, y.shape[0])] = I.cast(STORE_FILL, dt)  # an atomic store's address must be written first
        for i in I.parallel(I.domain(0, x.shape[0])):
            I.atomic.store(y[i], x[i], order="release")
    return atomic_store


CLAIMED = 7  # every contended compare-exchange writes this, so the final state does not depend on the winner


def _atomic_cas():
    def atomic_cas(cell: I.In[I.i32, ("N",)], expected: I.In[I.i32, ("N",)], desired: I.In[I.i32, ("N",)],
                   target: I.In[I.i32, ("K",)], y: I.Out[I.i32, ("N",)], old: I.Out[I.i32, ("N",)],
                   ok: I.Out[I.bool, ("N",)], slots: I.Out[I.i32, ("M",)], wins: I.Out[I.i32, ("M",)]):
        n, m = I.domain(0, cell.shape[0]), I.domain(0, slots.shape[0])
        y[n] = cell[n]
        slots[m] = 0
        wins[m] = 0
        for i in I.parallel(n):  # one address per point: old value and success are exact
            r = I.atomic.compare_exchange(y[i], expected[i], desired[i], order="acq_rel")
            old[i] = r.old_value
            ok[i] = r.success
        for j in I.parallel(I.domain(0, target.shape[0])):  # contended: exactly one success per slot
            r = I.atomic.compare_exchange(slots[target[j]], 0, CLAIMED, order="acq_rel")
            I.atomic.add(wins[target[j]], I.cast(r.success, I.i32), order="relaxed")
    return atomic_cas


def _quantize_q8_k():
    nb = QUANT_K // 256

    def quantize_q8_k(x: I.In[I.f32, ("R", QUANT_K)], d: I.Out[I.f32, ("R", nb)], qs: I.Out[I.i32, ("R", nb, 256)],
                      bsums: I.Out[I.i32, ("R", nb, 16)]):
        r = I.quantize(x[:, :], format=I.quant.q8_k)
        d[:, :] = r.d
        qs[:, :, :] = I.cast(r.qs, I.i32)
        bsums[:, :, :] = I.cast(r.bsums, I.i32)
    return quantize_q8_k


def _quantize_q4_k():
    nb = QUANT_K // 256

    def quantize_q4_k(x: I.In[I.f32, ("R", QUANT_K)], d: I.Out[I.f32, ("R", nb)], dmin: I.Out[I.f32, ("R", nb)],
                      scales: I.Out[I.i32, ("R", nb, 8)], mins: I.Out[I.i32, ("R", nb, 8)],
                      q: I.Out[I.i32, ("R", nb, 256)]):
        r = I.quantize(x[:, :], format=I.quant.q4_k)
        d[:, :] = I.cast(r.d, I.f32)  # f16 -> f32 is exact
        dmin[:, :] = I.cast(r.dmin, I.f32)
        scales[:, :, :] = I.cast(r.scales, I.i32)
        mins[:, :, :] = I.cast(r.mins, I.i32)
        q[:, :, :] = I.cast(r.q, I.i32)
    return quantize_q4_k


def _quantized_dot(lf: str):
    lhs_format = getattr(I.quant, lf)

    def quantized_dot(x: I.In[I.f32, ("R", QUANT_K)], y: I.In[I.f32, ("R", QUANT_K)], o: I.Out[I.f32, ("R",)]):
        a = I.quantize(x[:, :], format=lhs_format)
        b = I.quantize(y[:, :], format=I.quant.q8_k)
        o[:] = I.quantized_dot(a, b, lhs_format=lhs_format, rhs_format=I.quant.q8_k, acc_dtype=I.f32)
    return quantized_dot


def _scaled(plan):
    fl, fr = plan.operand_dtypes[0], plan.operand_dtypes[2]
    cl, cr = MX_CARRIERS[fl], MX_CARRIERS[fr]

    def scaled_contract(a: I.In[I.i32, ("M", "G", cl)], sa: I.In[I.i32, ("M", "G")], b: I.In[I.i32, ("G", cr, "N")],
                        sb: I.In[I.i32, ("N", "G")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.scaled_matmul(I.cast(a[:, :, :], I.u8), I.cast(sa[:, :], I.u8), I.cast(b[:, :, :], I.u8),
                                  I.cast(sb[:, :], I.u8), lhs_format=MX_FORMATS[fl], rhs_format=MX_FORMATS[fr],
                                  group_size=GROUP, acc_dtype=I.f32)
    return scaled_contract


SPARSE_KC = 32  # compressed extent along K (static: the schema checks it at trace time); K = 2 * KC


def _sparse(schema: str):
    fmt = getattr(I.sparse, schema)

    def sparse_contract(a: I.In[I.f32, ("M", SPARSE_KC)], meta: I.In[I.i32, ("M", SPARSE_KC)],
                        b: I.In[I.f32, (2 * SPARSE_KC, "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.sparse_matmul(a[:, :], meta[:, :], b[:, :], format=fmt(), acc_dtype=I.f32)
    return sparse_contract


def _lowest(dt):
    return I.cast(-2**31, dt) if dt is I.i32 else I.cast(float("-inf"), dt)


def _region_fold(dt):
    def region_fold(x: I.In[dt, ("N",)], y: I.Out[dt, (2,)]):
        d = I.domain(0, x.shape[0])
        total, top = I.region_fold(
            source=x[d], axis=0,
            summarize=lambda s: (I.reduce.sum(s, axis=0, acc_dtype=dt), I.reduce.max(s, axis=0)),
            combine=lambda a, b: (a[0] + b[0], I.maximum(a[1], b[1])),
            identity=(I.cast(0, dt), _lowest(dt)))
        y[0] = total
        y[1] = top
    return region_fold


def _region_scan(dt):
    def region_scan(x: I.In[dt, ("N",)], y: I.Out[dt, ("N",)], total: I.Out[dt, (1,)]):
        d = I.domain(0, x.shape[0])
        outs, final = I.region_scan(
            source=x[d], axis=0,
            summarize=lambda s: I.reduce.sum(s, axis=0, acc_dtype=dt), combine=lambda a, b: a + b,
            identity=I.cast(0, dt), initial_state=I.cast(0, dt), apply=lambda t, state: state + t,
            emit=lambda s, state: I.cumsum(s, axis=0, acc_dtype=dt) + state)
        y[d] = outs
        total[0] = final
    return region_scan


@functools.lru_cache(maxsize=None)
def coverage_kernel(op_name: str, kind: str, plan) -> Kernel:
    """The witness kernel of one plan of one of :mod:`.coverage_ops`' operations."""
    out = plan.output_dtype
    suffix = op_name.rsplit("_", 1)[-1]
    build = {
        K.RANDOM: _random_bits, K.HISTOGRAM: _histogram, K.ATOMIC_CAS: _atomic_cas,
        K.UNIQUE_STORE: lambda: _unique_store(_dt(out)),
        K.SCATTER: lambda: _scatter(suffix, _dt(out)), K.ATOMIC_RMW: lambda: _atomic_rmw(suffix, _dt(out)),
        K.ATOMIC_LOAD: lambda: _atomic_load(_dt(out)), K.ATOMIC_STORE: lambda: _atomic_store(_dt(out)),
        K.QUANTIZE: _quantize_q8_k if op_name == "quantize_q8_k" else _quantize_q4_k,
        K.QUANTIZED_DOT: lambda: _quantized_dot(op_name.split("_")[2] + "_k"),
        K.SCALED: lambda: _scaled(plan), K.SPARSE: lambda: _sparse(op_name.split("sparse_contract_")[1]),
        K.REGION_FOLD: lambda: _region_fold(_dt(out)), K.REGION_SCAN: lambda: _region_scan(_dt(out)),
    }[kind]
    return _named(build(), f"verify_{op_name}_{plan.output_dtype}")
