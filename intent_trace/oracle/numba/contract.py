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
rounded once per output; both, and a contraction inside a parallel loop where the BLAS cannot be kept to one
thread there (:mod:`.blas_threads`), are
loop nests over operands packed as above (converted once, not once per product) that sum each output
element's products in reduction order, vectorised along the output row (:func:`_loops`).
An empty reduction gives the accumulator's zero on both paths.
"""
from __future__ import annotations

from ... import types as T
from ...graph import ops
from ...graph.interpreter import rule_registrar
from . import blas_threads
from .lane_contract import LANES_BY_BITS
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
    """A dense contract: BLAS for f32/f64 accumulators; inside a ``prange`` body only where the BLAS can be kept
    to one thread while the parallel build runs (:mod:`.blas_threads`: its own threads nested in every iteration
    oversubscribe the cores and may hang), else the loop path (the same contraction in the accumulator dtype; T5
    leaves the summation order free)."""
    if acc.is_float and acc.name not in NARROW and blas_usable(em):
        return _blas(em, node, args, acc)
    return _loops(em, node, args, acc)


def blas_usable(em) -> bool:
    """Whether the code being emitted may call BLAS: anywhere outside a ``prange`` body; inside one where
    :mod:`.blas_threads` can keep it to one thread (the module then records that its parallel build needs that)."""
    if not em.prange_depth:
        return True
    if not blas_threads.available():
        return False
    em.blas_in_prange = True
    return True


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

    That is a materialised array, or a view read that the analysis fused into this node (nothing writes the view
    in between, so the caller's array is the value) taking whole trailing axes after leading points: ``x[:, :]``,
    or ``q[b, :, :]`` in a loop over a batch (``x[b]``: the read's rule checked the points against the extents).
    """
    var = node.inputs[k]
    # f16/bf16 values are held as float32 numbers: an array of them already holds their (exact) f32 conversions
    held = var.type.dtype is acc or (acc.name == "f32" and var.type.dtype.name in NARROW)
    if not held:
        return None
    if isinstance(value, Array):
        return value.name
    if isinstance(value, Lazy) and var in em.fused:
        defs = getattr(em, "_contract_defs", None)
        if defs is None:
            defs = em._contract_defs = {v: n for n in em.graph.walk() for v in n.outputs}
        read = defs.get(var)
        view = em.env.get(read.inputs[0]) if read is not None and read.op is ops.read else None
        # (an f16/bf16 caller array holds bit patterns, not the float32 values: it is never the value)
        if not (isinstance(view, View) and view.dtype is acc and acc.name not in NARROW):
            return None
        kinds = read.attr("index")
        points = next((i for i, kind in enumerate(kinds) if kind != "point"), len(kinds))  # leading points
        if any(kind != "all" for kind in kinds[points:]):
            return None
        if not points:
            return view.name
        at = ", ".join(em.operand(v).expr for v in read.inputs[1:1 + points])
        return f"{view.name}[{at}]"
    return None


def _operand(em, node, k: int, value, acc: T.DType, normal: list, swapped: list | None, shape: tuple):
    """(contiguous array name, whether its matrices are stored transposed): the operand itself when its axes
    already come in the ``normal`` or ``swapped`` order (None: only ``normal`` will do), else a packed copy in
    ``normal`` order."""
    src = _in_place(em, node, k, value, acc)
    if src is not None:
        identity = list(range(len(shape)))
        for order, transposed in ((normal, False), (swapped, True)):
            if order == identity:
                return em.assign(f"R.contiguous({src})", "a"), transposed
    return _pack(em, value, node.inputs[k].type.dtype, acc, normal, shape), False


def _packed_dims(p: _Plan):
    """(lhs packing order [B, M, K], rhs packing order [B, K, N], rhs's swapped order [B, N, K], lhs's [B, K, M])."""
    bat_l, bat_r = [a for a, _ in p.batch], [b for _, b in p.batch]
    red_l, red_r = [a for a, _ in p.reduce], [b for _, b in p.reduce]
    return (bat_l + p.lhs_free + red_l, bat_r + red_r + p.rhs_free, bat_r + p.rhs_free + red_r,
            bat_l + red_l + p.lhs_free)


def _sizes(em, p: _Plan) -> tuple:
    """(B, M, K, N): the products of the batch, lhs free, reduced and rhs free extents."""
    return (_product(em, [p.lhs_shape[a] for a, _ in p.batch]), _product(em, [p.lhs_shape[k] for k in p.lhs_free]),
            _product(em, [p.lhs_shape[a] for a, _ in p.reduce]), _product(em, [p.rhs_shape[k] for k in p.rhs_free]))


def _blas(em, node, args, acc: T.DType):
    lhs, rhs = args
    p = _Plan(em, node, lhs, rhs)
    lhs_order, rhs_order, rhs_swapped, lhs_swapped = _packed_dims(p)
    nb, nm, nk, nn = _sizes(em, p)
    a, ta = _operand(em, node, 0, lhs, acc, lhs_order, lhs_swapped, p.lhs_shape)
    b, tb = _operand(em, node, 1, rhs, acc, rhs_order, rhs_swapped, p.rhs_shape)
    a3 = em.assign(f"{a}.reshape(({nb}, {nk}, {nm}))" if ta else f"{a}.reshape(({nb}, {nm}, {nk}))", "a")
    b3 = em.assign(f"{b}.reshape(({nb}, {nn}, {nk}))" if tb else f"{b}.reshape(({nb}, {nk}, {nn}))", "a")
    c3 = em.allocate((nb, nm, nn), np_type(acc), f"the {acc.name} product workspace of `contract`")
    with em.block(f"if {nk} == 0:"):
        em.line(f"{c3}.fill(0)")
    with em.block(f"if {nk} > 0 and {nm} > 0 and {nn} > 0:"):
        j = em.fresh("b")
        with em.block(f"for {j} in range({nb}):"):
            lhs_j, rhs_j = f"{a3}[{j}]" + (".T" if ta else ""), f"{b3}[{j}]" + (".T" if tb else "")
            em.line(f"R.gemm({lhs_j}, {rhs_j}, {c3}[{j}])")
    return _result(em, node, p, c3, acc)


def _result(em, node, p: _Plan, c3: str, acc: T.DType):
    """The contract's value from the ``[B, M, N]`` workspace ``c3`` (work-dtype sums; f16/bf16 rounded here once):
    a reshape of it when the result's axes come in its order and nothing is rounded, else a copy."""
    rounds = acc.name in NARROW
    out_t = node.outputs[0].type
    if not out_t.rank:
        return Scalar(em.assign(round_to(acc, f"{c3}[0, 0, 0]") if rounds else f"{c3}[0, 0, 0]", "v"))
    # c3's axes, unflattened: batch (lhs order), lhs free, rhs free.
    bat_l = [a for a, _ in p.batch]
    natural = [p.lhs_shape[k] for k in bat_l + p.lhs_free] + [p.rhs_shape[k] for k in p.rhs_free]
    order = bat_l + p.lhs_free
    if order == p.result_lhs and not rounds:
        return Array(em.assign(f"{c3}.reshape({_tuple(p.result_shape)})", "a"), p.result_shape)
    c = em.assign(f"{c3}.reshape({_tuple(natural)})", "a")
    out = em.allocate(p.result_shape, np_type(acc), "the result of `contract`")
    with em.loop_nest(p.result_shape, parallel=True) as idx:
        pos = dict(zip(p.result_lhs, idx))
        src_idx = [pos[k] for k in order] + list(idx[len(p.result_lhs):])
        value = f"{c}[{', '.join(src_idx)}]"
        em.line(f"{out}[{', '.join(idx)}] = {round_to(acc, value) if rounds else value}")
    return Array(out, p.result_shape)


def _int_ops(acc: T.DType):
    if acc.kind == "int" and acc.bits == 64:
        return (lambda x, y: f"R.mul_i64({x}, {y})"), (lambda s, t: f"R.add_i64({s}, {t})")
    ty = np_type(acc)
    return (lambda x, y: f"{ty}({x} * {y})"), (lambda s, t: f"{ty}({s} + {t})")


def _loops(em, node, args, acc: T.DType):
    """Integer and f16/bf16 accumulators, and a contraction inside a parallel loop without a one-thread BLAS: loop nests.

    Each operand is converted once into a contiguous array (lhs ``[B, M, K]``, rhs ``[B, K, N]``; f16/bf16 values
    are held as float32), not once per product, or used in place when it already is one. Each output row then
    accumulates ``x * rhs[k, :]`` for the reduced positions k in order into its row of the workspace, starting from
    zero, so every output element is its products summed in reduction order with one rounding per product and per
    sum (f16/bf16: in float32, rounded once at the end; integers wrap), as one scalar accumulator per element gives,
    while the innermost loop runs along the row, over independent elements, where LLVM vectorises it. A float row is
    summed by :func:`~.lane_contract.lane_row` instead (the same sums; held in registers across the reduction where
    the row is at most 1 KiB), so the kernel's own code holds one call, not a loop nest LLVM compiles again per
    kernel."""
    lhs, rhs = args
    p = _Plan(em, node, lhs, rhs)
    if acc.is_float:  # f16/bf16: float32 products and sums (their values are float32 numbers already)
        work = T.f32 if acc.name in NARROW else acc
        mul, add = (lambda x, y: f"{x} * {y}"), (lambda s, t: f"{s} + {t}")
    else:
        work = acc
        mul, add = _int_ops(acc)
    lhs_order, rhs_order, _, _ = _packed_dims(p)
    nb, nm, nk, nn = _sizes(em, p)
    a, _ = _operand(em, node, 0, lhs, acc, lhs_order, None, p.lhs_shape)  # in place when it can be
    b, _ = _operand(em, node, 1, rhs, acc, rhs_order, None, p.rhs_shape)
    a3 = em.assign(f"{a}.reshape(({nb}, {nm}, {nk}))", "a")
    b3 = em.assign(f"{b}.reshape(({nb}, {nk}, {nn}))", "a")
    c3 = em.allocate((nb, nm, nn), np_type(work), f"the {work.name} product workspace of `contract`")
    lanes = work.is_float and work.bits in LANES_BY_BITS
    rows = _product(em, [nb, nm])
    with em.loop_nest((rows,), parallel=True) as (q,):
        bq = em.assign(f"{q} // {nm}", "b") if nb != "1" else "0"
        iq = em.assign(f"{q} - {bq} * {nm}", "i") if nb != "1" else q
        crow, arow = em.assign(f"{c3}[{bq}, {iq}]", "c"), em.assign(f"{a3}[{bq}, {iq}]", "a")
        if lanes:  # in registers where the row is short, else streamed along it (:mod:`.lane_contract`)
            em.line(f"R.call_outlined(R.lane_row, {crow}, {arow}, {b3}, np.int64({bq}), {np_type(work)}(0))")
        else:
            j = em.fresh("j")
            with em.block(f"for {j} in range({nn}):"):
                em.line(f"{crow}[{j}] = {np_type(work)}(0)")
            k = em.fresh("k")
            with em.block(f"for {k} in range({nk}):"):
                x = em.assign(cast_expr(acc, work, f"{arow}[{k}]"), "x")
                brow = em.assign(f"{b3}[{bq}, {k}]", "r")
                with em.block(f"for {j} in range({nn}):"):
                    em.line(f"{crow}[{j}] = {add(f'{crow}[{j}]', mul(x, cast_expr(acc, work, f'{brow}[{j}]')))}")
    return _result(em, node, p, c3, acc)

