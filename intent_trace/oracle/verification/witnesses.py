"""Witness kernels: the one-op KIR programs a verification case compiles on a profile's own target.

Each is an ordinary ``@intent.kernel`` written in the public language, so the graph a case runs
is exactly what a user's code would trace (DESIGN.md §4: catalogue and compiler cannot drift).
Operation kernels are built per plan from the catalogue's ``expr``; subject kernels are written
out below, one per movement or structural subject. (No ``from __future__ import annotations`` here:
the annotations name dtypes held in local variables.)
"""
import functools

from ... import language as I
from ... import types as T
from ...graph import ops as kir_ops
from ...kernel import Kernel
from .catalogue import MATMUL, POINTWISE, REDUCE, SCAN, Operation
from .coverage_ops import KINDS as COVERAGE_KINDS
from .coverage_witnesses import coverage_kernel
from .records import PlanKey


def _dt(name: str) -> T.DType:
    return T.DTYPES[name]


def _named(fn, name: str) -> Kernel:
    fn.__name__ = fn.__qualname__ = name
    return Kernel(fn)


def _pointwise_value(op: Operation, plan: PlanKey):
    if op.kir_op is kir_ops.cast:
        return lambda x: I.cast(x, _dt(plan.output_dtype))
    if op.kir_op is kir_ops.bitcast:
        return lambda x: I.bitcast(x, _dt(plan.output_dtype))
    return op.expr


def _accumulated(op: Operation, plan: PlanKey, x, axis: int):
    acc = _dt(plan.accumulation_dtype)
    if op.name == "reduce_sum":
        value = I.reduce.sum(x, axis=axis, acc_dtype=acc)
    elif op.name == "reduce_max":
        value = I.reduce.max(x, axis=axis)
    else:
        value = I.cumsum(x, axis=axis, acc_dtype=acc)
    return I.cast(value, _dt(plan.output_dtype)) if plan.output_dtype != plan.accumulation_dtype else value


def _broadcast_pointwise(value, ins: list, out, k: int, name: str) -> Kernel:
    """``value`` of the operands with operand ``k`` read once (its element 0) for every element: invariant over the
    loop, so a compiler holds it in a register, as it does a scalar argument or a row's reduced value (LLVM then
    made it the first source of a commuted add, whose NaN x86 returns)."""
    shapes = [("One",) if i == k else ("N",) for i in range(len(ins))]

    def operands(xs, d):
        return [x[0] if i == k else x[d] for i, x in enumerate(xs)]

    if len(ins) == 2:
        def b2(a: I.In[ins[0], shapes[0]], b: I.In[ins[1], shapes[1]], y: I.Out[out, ("N",)]):
            d = I.domain(0, y.shape[0])
            y[d] = value(*operands((a, b), d))
        return _named(b2, name)

    def b3(a: I.In[ins[0], shapes[0]], b: I.In[ins[1], shapes[1]], c: I.In[ins[2], shapes[2]], y: I.Out[out, ("N",)]):
        d = I.domain(0, y.shape[0])
        y[d] = value(*operands((a, b, c), d))
    return _named(b3, name)


@functools.lru_cache(maxsize=None)
def operation_kernel(op: Operation, plan: PlanKey, broadcast: int | None = None) -> Kernel:
    """The kernel of one plan; extents are dynamic, so one compilation serves every case shape. ``broadcast``: the
    pointwise operand read once for every element (:func:`_broadcast_pointwise`; a case's ``broadcast``)."""
    ins = [_dt(d) for d in plan.operand_dtypes]
    out = _dt(plan.output_dtype)
    name = f"verify_{plan.operation}"
    if broadcast is not None:
        return _broadcast_pointwise(_pointwise_value(op, plan), ins, out, broadcast, f"{name}_broadcast{broadcast}")
    if op.kind == POINTWISE:
        value = _pointwise_value(op, plan)
        if len(ins) == 1:
            def k1(x: I.In[ins[0], ("N",)], y: I.Out[out, ("N",)]):
                d = I.domain(0, x.shape[0])
                y[d] = value(x[d])
            return _named(k1, name)
        if len(ins) == 2:
            def k2(a: I.In[ins[0], ("N",)], b: I.In[ins[1], ("N",)], y: I.Out[out, ("N",)]):
                d = I.domain(0, a.shape[0])
                y[d] = value(a[d], b[d])
            return _named(k2, name)

        def k3(a: I.In[ins[0], ("N",)], b: I.In[ins[1], ("N",)], c: I.In[ins[2], ("N",)], y: I.Out[out, ("N",)]):
            d = I.domain(0, a.shape[0])
            y[d] = value(a[d], b[d], c[d])
        return _named(k3, name)
    if op.kind == REDUCE:
        def reduce_rows(x: I.In[ins[0], ("R", "K")], y: I.Out[out, ("R",)]):
            r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
            y[r] = _accumulated(op, plan, x[r, c], 1)
        return _named(reduce_rows, name)
    if op.kind == SCAN:
        def scan_rows(x: I.In[ins[0], ("R", "K")], y: I.Out[out, ("R", "K")]):
            r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
            y[r, c] = _accumulated(op, plan, x[r, c], 1)
        return _named(scan_rows, name)
    if op.kind == MATMUL:
        acc = _dt(plan.accumulation_dtype)

        def matmul(a: I.In[ins[0], ("M", "K")], b: I.In[ins[1], ("K", "N")], y: I.Out[out, ("M", "N")]):
            m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
            value = I.matmul(a[m, k], b[k, n], acc_dtype=acc)
            y[m, n] = I.cast(value, out) if acc is not out else value
        return _named(matmul, name)
    if op.kind in COVERAGE_KINDS:
        return coverage_kernel(op.name, op.kind, plan)
    raise ValueError(f"operation {op.name}: unknown kind {op.kind!r}")


# --- subjects ---------------------------------------------------------------------------------
# Each takes f32 (or i32) inputs and writes every element of its outputs, so an unwritten element
# can never pass by coincidence.


def _subject_kernels() -> dict:
    f32, i32 = I.f32, I.i32

    def copy(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]

    def transpose(x: I.In[f32, ("M", "N")], y: I.Out[f32, ("N", "M")]):
        m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[n, m] = I.transpose(x[m, n], (1, 0))

    def broadcast(x: I.In[f32, ("N",)], z: I.In[f32, ("M", "N")], y: I.Out[f32, ("M", "N")]):
        m, n = I.domain(0, z.shape[0]), I.domain(0, z.shape[1])
        y[m, n] = z[m, n] + x[n]

    def strided_read(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d, odd = I.domain(0, x.shape[0]), I.domain(1, x.shape[0], 2)
        y[d] = x[d]
        y[odd] = -x[odd]

    def tensor_slice(x: I.In[f32, ("M", "N")], y: I.Out[f32, ("M",)]):
        m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[m] = I.reduce.max(x[m, n][:, 1:], axis=1)

    def reshape(x: I.In[f32, ("M", "N")], y: I.Out[f32, ("N", "M")]):
        m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[n, m] = I.reshape(x[m, n], (y.shape[0], y.shape[1]))

    def join(a: I.In[f32, ("N",)], b: I.In[f32, ("N",)], y: I.Out[f32, ("N", 2)]):
        d = I.domain(0, a.shape[0])
        y[d, :] = I.join(a[d], b[d])

    def gather(x: I.In[f32, ("N",)], idx: I.In[i32, ("M",)], y: I.Out[f32, ("M",)]):
        d = I.domain(0, idx.shape[0])
        y[d] = I.gather(x[I.domain(0, x.shape[0])], I.cast(idx[d] & 1023, I.index) % x.shape[0])

    def masked_access(x: I.In[f32, ("N",)], y: I.Out[f32, ("M",)]):
        d = I.domain(0, y.shape[0])  # y is longer than x: the tail of x is masked off
        c = I.indices(d)
        buf = I.buffer((y.shape[0],), I.f32, init=-1.0)
        I.store(buf, d, I.load(x, d, valid=c < x.shape[0], fill=0.5) * 2.0, valid=c % 3 != 0)
        I.store(y, d, I.gather(buf, c - 1, valid=c > 0, fill=4.0), valid=c < y.shape[0])

    def subregion_write(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d]
        inner = d[1:x.shape[0] - 1]
        y[inner] = x[inner] * 2.0 + I.cast(I.indices(inner), I.f32)

    def fill(x: I.In[f32, ("M", "N")], y: I.Out[f32, ("P", "N")]):
        I.assume_equal(y.shape[0], x.shape[0])  # an extent equality the run checks
        m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        t = x[m, n]
        tail = t[:, 1:]  # a derived extent: its length is a dim of the value, not a parameter extent
        y[m, n] = t + I.full((x.shape[0], x.shape[1]), 0.5, I.f32) + I.cast(tail.shape[1], I.f32) * I.cast(1.5, I.f32)

    def multi_output(x: I.In[f32, ("R", "K")], s: I.Out[f32, ("R",)], mx: I.Out[f32, ("R",)]):
        r, c = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        pair = (I.reduce.max(x[r, c], axis=1), I.reduce.max(-x[r, c], axis=1))
        rec = I.record(hi=pair[0], lo=pair[1])
        s[r] = rec.lo
        mx[r] = rec.hi

    def carried_loop(x: I.In[f32, ("N",)], y: I.Out[f32, (1,)]):
        y[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), lambda i, acc: I.maximum(acc * 0.5, x[i]))

    def while_loop(x: I.In[i32, ("N",)], y: I.Out[i32, (2,)]):
        def body(c):
            i, total = c
            I.continue_(when=x[i] < 0, carry=(i + 1, total))
            I.break_(when=total > 1 << 20, carry=(i + 1, total))
            return i + 1, total + (x[i] & 255)
        i, total = I.while_(lambda c: c[0] < x.shape[0], body, (I.cast(0, I.index), I.cast(0, I.i32)))
        y[0] = I.cast(i, I.i32)
        y[1] = total

    def branch(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = I.if_(x[0] > 0.0, lambda: x[d] * 2.0, lambda: x[d] - 1.0)

    def forall(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        for i in I.parallel(d):
            y[i] = x[i] * 3.0
        for i in d[0:1]:
            y[i] = x[i]

    def staging_buffer(x: I.In[f32, ("N",)], y: I.Out[f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        buf = I.buffer((x.shape[0],), I.f32)
        buf[d] = x[d] * 0.25
        y[d] = buf[d] + 1.0

    def hierarchical_contraction(a: I.In[i32, ("B", "M", "K")], b: I.In[i32, ("B", "K", "N")],
                                 y: I.Out[i32, ("B", "M", "N")]):
        bb, m = I.domain(0, a.shape[0]), I.domain(0, a.shape[1])
        k, n = I.domain(0, a.shape[2]), I.domain(0, b.shape[2])
        y[bb, m, n] = I.contract(a[bb, m, k], b[bb, k, n], reduce=((2, 1),), batch=((0, 0),), acc_dtype=I.i32)

    def view_copy(x: I.In[f32, ("M", "N")], z: I.In[f32, ("M", "N")], y: I.Out[f32, ("M", "N")]):
        m, n = I.domain(0, x.shape[0]), I.domain(0, x.shape[1])
        y[m, n] = x[m, n] * 2.0 + z[m, n]  # x and y are non-compact views (layouts.py), z compact

    fns = {"copy": copy, "transpose": transpose, "broadcast": broadcast, "strided-read": strided_read, "tensor-slice": tensor_slice,
           "reshape": reshape, "join": join, "gather": gather, "masked-access": masked_access, "subregion-write": subregion_write, "fill": fill,
           "multi-output": multi_output, "carried-loop": carried_loop, "while-loop": while_loop, "branch": branch,
           "forall": forall, "staging-buffer": staging_buffer, "hierarchical-contraction": hierarchical_contraction,
           "strided-view": view_copy, "transposed-view": view_copy, "offset-view": view_copy}
    return {name: _named(fn, "verify_" + name.replace("-", "_")) for name, fn in fns.items()}


@functools.lru_cache(maxsize=None)
def subject_kernels() -> dict:
    return _subject_kernels()
