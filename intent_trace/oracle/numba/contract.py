"""Numba rule for contract (spec §10, numerics T5).

f32/f64 accumulators (the matmul family's common case) go to BLAS. Each operand is brought into a
contiguous acc-dtype array arranged ``[B, M, K]`` (lhs) or ``[B, K, N]`` (rhs), B, M, K and N being
the products of the batch, free and reduced extents: by explicit copy loops that also convert to the
accumulator (exactly or RNE, T3), or without a copy when the operand already is such an array, in
that order or with its two matrix axes swapped (BLAS takes the transpose). ``np.dot`` then multiplies
each batch (Numba calls BLAS gemm in the accumulator dtype: no TF32, no reduced precision, and any
BLAS summation order is within T5's gamma_n bound), and the ``[B, M, N]`` result is reshaped (or,
when batch axes are not leading in the result, copied) into the result's axis order.

Integer accumulators wrap modulo 2^bits, and f16/bf16 accumulators are computed in float32 and
rounded once per output; both are loop nests with one scalar accumulator per output element.
An empty reduction gives the accumulator's zero on both paths.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .scalar_rules import NARROW, cast_expr, np_type, round_to
from .values import Array, Lazy, Scalar, View

RULES: dict = {}
rule = rule_registrar(RULES)


def _product(em, parts) -> str:
    parts = [p for p in parts if p != "1"]
    if not parts:
        return "1"
    if len(parts) == 1:
        return parts[0]
    return em.assign(" * ".join(f"({p})" for p in parts), "n")


def _tuple(shape) -> str:
    return "(" + "".join(f"{s}, " for s in shape) + ")"


def _extent(em, e, fallback: str) -> str:
    try:
        return em.extent(e)
    except KeyError:
        return fallback


class _Plan:
    """Axis bookkeeping shared by both paths."""

    def __init__(self, em, node, lhs, rhs):
        lt, rt = node.inputs[0].type, node.inputs[1].type
        self.reduce = node.attr("reduce")
        self.batch = tuple(sorted(node.attr("batch")))  # packed in lhs order: more often a plain reshape
        self.lhs_shape = tuple(_extent(em, e, s) for e, s in zip(lt.shape, lhs.shape))
        self.rhs_shape = tuple(_extent(em, e, s) for e, s in zip(rt.shape, rhs.shape))
        lhs_red = {a for a, _ in self.reduce}
        lhs_bat = {a for a, _ in self.batch}
        rhs_gone = {b for _, b in self.reduce} | {b for _, b in self.batch}
        self.lhs_free = [k for k in range(lt.rank) if k not in lhs_red and k not in lhs_bat]
        self.rhs_free = [k for k in range(rt.rank) if k not in rhs_gone]
        # Result axes (contract order): lhs axes not reduced, in lhs order, then the rhs free axes.
        self.result_lhs = [k for k in range(lt.rank) if k not in lhs_red]
        out_t = node.outputs[0].type
        result_src = [self.lhs_shape[k] for k in self.result_lhs] + [self.rhs_shape[k] for k in self.rhs_free]
        self.result_shape = tuple(_extent(em, e, s) for e, s in zip(out_t.shape, result_src))

    def operand_index(self, result_idx, red_idx) -> tuple:
        """(lhs index, rhs index) for a result position and a position of the reduced axes."""
        lhs = [None] * len(self.lhs_shape)
        rhs = [None] * len(self.rhs_shape)
        for k, i in zip(self.result_lhs, result_idx):
            lhs[k] = i
        for k, i in zip(self.rhs_free, result_idx[len(self.result_lhs):]):
            rhs[k] = i
        for a, b in self.batch:
            rhs[b] = lhs[a]
        for (a, b), i in zip(self.reduce, red_idx):
            lhs[a] = rhs[b] = i
        return lhs, rhs


def dense_contract(em, node, args, acc: T.DType):
    """A dense contract: BLAS for f32/f64 accumulators, except inside a ``prange`` body.

    Inside a parallel loop each thread calls BLAS, whose own threads then run inside an OpenMP
    parallel region: OpenBLAS detects it and prints "Detect OpenMP Loop and this application may hang"
    (and may hang). There the loop path computes the same contraction (in the accumulator dtype; T5
    leaves the summation order free), one output element per iteration of the thread's work."""
    if acc.is_float and acc.name not in NARROW and not em.prange_depth:
        return _blas(em, node, args, acc)
    return _loops(em, node, args, acc)


@rule(ops.contract)
def _contract(em, node, args):
    return dense_contract(em, node, args, node.attr("acc_dtype"))


def _pack(em, value, src: T.DType, acc: T.DType, dims: list, shape: tuple) -> str:
    """A contiguous acc-dtype copy of ``value`` with its axes in the order ``dims``; returns its name."""
    packed = tuple(shape[k] for k in dims)
    name = em.allocate(packed, np_type(acc), f"the packed {acc.name} copy of an operand of `contract`")
    with em.loop_nest(packed, parallel=True) as idx:
        full = [None] * len(shape)
        for k, i in zip(dims, idx):
            full[k] = i
        em.line(f"{name}[{', '.join(idx)}] = {cast_expr(src, acc, em.elem(value, full))}")
    return name


def _in_place(em, node, k: int, value, acc: T.DType):
    """An array expression already holding operand ``k``'s acc-dtype values with the operand's own axes, or None.

    That is a materialised array, or a whole view read ``x[:, ...]`` that the analysis fused into this node
    (nothing writes the view in between, so the caller's array is the value).
    """
    var = node.inputs[k]
    if var.type.dtype is not acc:
        return None
    if isinstance(value, Array):
        return value.name
    if isinstance(value, Lazy) and var in em.fused:
        defs = getattr(em, "_contract_defs", None)
        if defs is None:
            defs = em._contract_defs = {v: n for n in em.graph.walk() for v in n.outputs}
        read = defs.get(var)
        view = em.env.get(read.inputs[0]) if read is not None and read.op is ops.read else None
        if isinstance(view, View) and view.dtype is acc and all(kind == "all" for kind in read.attr("index")):
            return view.name
    return None


def _operand(em, node, k: int, value, acc: T.DType, normal: list, swapped: list, shape: tuple):
    """(contiguous array name, whether its matrices are stored transposed): the operand itself when its axes
    already come in the ``normal`` or ``swapped`` order, else a packed copy in ``normal`` order."""
    src = _in_place(em, node, k, value, acc)
    if src is not None:
        identity = list(range(len(shape)))
        for order, transposed in ((normal, False), (swapped, True)):
            if order == identity:
                return em.assign(f"np.ascontiguousarray({src})", "a"), transposed
    return _pack(em, value, node.inputs[k].type.dtype, acc, normal, shape), False


def _blas(em, node, args, acc: T.DType):
    lhs, rhs = args
    p = _Plan(em, node, lhs, rhs)
    bat_l = [a for a, _ in p.batch]
    bat_r = [b for _, b in p.batch]
    red_l = [a for a, _ in p.reduce]
    red_r = [b for _, b in p.reduce]
    nb = _product(em, [p.lhs_shape[k] for k in bat_l])
    nm = _product(em, [p.lhs_shape[k] for k in p.lhs_free])
    nk = _product(em, [p.lhs_shape[k] for k in red_l])
    nn = _product(em, [p.rhs_shape[k] for k in p.rhs_free])
    a, ta = _operand(em, node, 0, lhs, acc, bat_l + p.lhs_free + red_l, bat_l + red_l + p.lhs_free, p.lhs_shape)
    b, tb = _operand(em, node, 1, rhs, acc, bat_r + red_r + p.rhs_free, bat_r + p.rhs_free + red_r, p.rhs_shape)
    a3 = em.assign(f"{a}.reshape(({nb}, {nk}, {nm}))" if ta else f"{a}.reshape(({nb}, {nm}, {nk}))", "a")
    b3 = em.assign(f"{b}.reshape(({nb}, {nn}, {nk}))" if tb else f"{b}.reshape(({nb}, {nk}, {nn}))", "a")
    dtype = np_type(acc)
    c3 = em.allocate((nb, nm, nn), dtype, f"the {acc.name} product workspace of `contract`")
    with em.block(f"if {nk} == 0:"):
        em.line(f"{c3}.fill(0)")
    with em.block(f"if {nk} > 0 and {nm} > 0 and {nn} > 0:"):
        j = em.fresh("b")
        with em.block(f"for {j} in range({nb}):"):
            lhs_j, rhs_j = f"{a3}[{j}]" + (".T" if ta else ""), f"{b3}[{j}]" + (".T" if tb else "")
            em.line(f"np.dot({lhs_j}, {rhs_j}, {c3}[{j}])")
    out_t = node.outputs[0].type
    if not out_t.rank:
        return Scalar(em.assign(f"{c3}[0, 0, 0]", "v"))
    # c3's axes, unflattened: batch (lhs order), lhs free, rhs free.
    natural = [p.lhs_shape[k] for k in bat_l + p.lhs_free] + [p.rhs_shape[k] for k in p.rhs_free]
    order = bat_l + p.lhs_free
    if order == p.result_lhs:
        return Array(em.assign(f"{c3}.reshape({_tuple(p.result_shape)})", "a"), p.result_shape)
    c = em.assign(f"{c3}.reshape({_tuple(natural)})", "a")
    out = em.allocate(p.result_shape, dtype, "the result of `contract`")
    with em.loop_nest(p.result_shape, parallel=True) as idx:
        pos = dict(zip(p.result_lhs, idx))
        src_idx = [pos[k] for k in order] + list(idx[len(p.result_lhs):])
        em.line(f"{out}[{', '.join(idx)}] = {c}[{', '.join(src_idx)}]")
    return Array(out, p.result_shape)


def _int_ops(acc: T.DType):
    if acc.kind == "int" and acc.bits == 64:
        return (lambda x, y: f"R.mul_i64({x}, {y})"), (lambda s, t: f"R.add_i64({s}, {t})")
    ty = np_type(acc)
    return (lambda x, y: f"{ty}({x} * {y})"), (lambda s, t: f"{ty}({s} + {t})")


def _loops(em, node, args, acc: T.DType):
    """Integer and f16/bf16 accumulators: one scalar accumulator per output element."""
    lhs, rhs = (em.materialize(v, x.type) if isinstance(v, Lazy) else v for v, x in zip(args, node.inputs))
    src = node.inputs[0].type.dtype
    p = _Plan(em, node, lhs, rhs)
    if acc.is_float:  # f16/bf16: float32 products and sums, one rounding per output (f32/f64: their own)
        work = T.f32 if acc.name in NARROW else acc
        mul, add = (lambda x, y: f"{x} * {y}"), (lambda s, t: f"{s} + {t}")
    else:
        work = acc
        mul, add = _int_ops(acc)
    out_t = node.outputs[0].type
    out = None
    if out_t.rank:
        out = em.allocate(p.result_shape, np_type(acc), "the result of `contract`")
    red_shape = [p.lhs_shape[a] for a, _ in p.reduce]
    with em.loop_nest(p.result_shape, parallel=True) as idx:
        s = em.assign(f"{np_type(work)}(0)", "c")
        red_idx = []
        for n in red_shape:
            k = em.fresh("k")
            em.line(f"for {k} in range({n}):")
            em.depth += 1
            red_idx.append(k)
        em.loop_depth += 1
        li, ri = p.operand_index(list(idx), red_idx)
        x = em.assign(cast_expr(acc, work, cast_expr(src, acc, em.elem(lhs, li))), "x")
        y = em.assign(cast_expr(acc, work, cast_expr(src, acc, em.elem(rhs, ri))), "x")
        em.line(f"{s} = {add(s, mul(x, y))}")
        em.loop_depth -= 1
        em.depth -= len(red_shape)
        value = round_to(acc, s) if acc.is_float else s
        if out is not None:
            em.line(f"{out}[{', '.join(idx)}] = {value}")
        else:
            result = Scalar(em.assign(value, "v"))
    if out is None:
        return result
    return Array(out, p.result_shape)
