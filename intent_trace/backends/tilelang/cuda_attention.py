"""A tiled flash-attention program for the batched f16 attention kernel (``examples/flash_attention.py``).

Recognised graph (every extent a full unit-step domain, every view read or written whole at the point):

    for b in parallel(domain(0, B)):
        m, l, acc = region_fold(source=(k[b], v[b]), axis=0, operands=(q[b], scale),
                                identity=(full(-inf), zeros, zeros), summarize=S, combine=C)
        out[b] = cast(acc / rows(l), f16)
    S(k, v, q, scale): s = contract(q, k, transpose) * scale; m = max_j s; p = exp(s - rows(m))
                       -> (m, sum_j p, contract(cast(p, f16), v))         (contracts: f16 operands, f32 acc)
    C(a, b):           m = maximum(ma, mb); alpha, beta = rescale(ma, m), rescale(mb, m)
                       -> (m, la * alpha + lb * beta, acc_a * rows(alpha) + acc_b * rows(beta))
    rescale(x, m) = select(x == -inf, 0, exp(x - m))

The FlashAttention spelling (``attention_f16_fast``) is recognised too: the fold's scale operand is ``scale * c``
computed once before the loop (c a literal, log2(e) there: rendered as the same one f32 multiplication) and every
``exp`` is ``exp2(approximate=True)``, rendered ``T.exp2`` (CUDA's ``exp2f``, within T4's 2 ulp; T10 allows the
hardware's approximate instruction there).

The graph is matched against these expression trees as patterns (:mod:`intent_trace.graph.patterns`: up to
operand order of add, mul and maximum, and dead nodes such as ``dim``), so dtypes, shapes, acc dtypes, casts,
attributes (no approximate division) and row broadcasts must all be the ones above.

The program is the fold as the kernel states it, segmented into key blocks of ``block_N``: per block the
summary (its own row max, ``exp`` of the scaled scores minus it, the row sums, P rounded to f16, then the
PV product on tensor cores accumulating in f32 in a fresh fragment), then ``combine`` with the running
summary, starting from the identity; the empty summary's rescale is 0 (the ``select``). At the end the
IEEE division, rounded once to f16. ``exp`` is CUDA's ``expf`` (within 2 ulp, T4: no fast math, no exp2
rescale); the target's flags forbid FMA contraction. ``T.max``/``T.reduce_max`` ignore a NaN operand
where ``maximum`` propagates it: a NaN score makes its row's ``p`` and so its ``l`` NaN either way, so
the outputs agree. The grid is (L / block_M, B); per block, Q stays in shared memory and K/V blocks are
pipelined (``T.Pipelined``) through it. The only run-time checks of the general program are the reshapes of
``rows`` (L elements into (L, 1)), which cannot fail: the specialisation needs no error record.
"""
from __future__ import annotations

import math

import attrs

from ... import types as T
from ...graph import ops
from ...graph.patterns import COMMUTATIVE, Pat, any_, lit, match, pat, producers
from ...graph.values import KernelGraph, Literal
from .cuda_access import UNIT_DOMAIN, Specialization

F16, F32 = T.f16, T.f32

# (D, block_M, block_N, stages, threads), tried in order; the first whose D and tiles fit a call is used. On an H200
# at B=32, L=S=4096, D=128 (tools/attention_sweep.py): block_N 128 beats 64 (0.75 vs 0.88 ms at 2 stages: half the
# combines), one stage beats 2 and 3 (0.68, 0.75, 0.70 ms), block_M 64 (one consumer warpgroup) is slower (1.2 ms);
# block_N 256 would spill registers.
CONFIGS = ((128, 128, 128, 1, 256), (64, 128, 128, 1, 256))


# --- the templates (patterns over one region's values) --------------------------------------------------------
# A template names a region's parameters by role (seeded captures: that position *is* that parameter) and its
# extents by the Dim objects of the graph at hand (L, D, the slice extent e), so each is built per match.

def _op(op, dtype, shape, /, *operands, **attrs) -> Pat:
    """A node of ``op`` with exactly these operands (either order for add, mul and maximum) and attributes."""
    return Pat(op=op, operands=operands, dtype=dtype, shape=shape, attrs=attrs, closed=True,
               commutative=op in COMMUTATIVE)


def _combines(op):
    """A reduce whose combine is one ``op`` of its two parameters (no attributes) yielded as is."""
    def test(node) -> bool:
        (body,) = node.regions
        if len(body.nodes) != 1 or len(body.params) != 2 or body.results != body.nodes[0].outputs:
            return False
        inner = body.nodes[0]
        return inner.op is op and set(inner.inputs) == set(body.params) and not inner.attrs
    return test


def _full(value, shape):
    return _op(ops.full, F32, shape, lit(value, F32))


def _rows(x, shape, L):
    """[L] -> [L, 1] -> broadcast over a row of ``shape``."""
    return _op(ops.broadcast, F32, shape, _op(ops.reshape, F32, (L, 1), x))


def _reduce(op, x, init, L):
    return attrs.evolve(_op(ops.reduce, F32, (L,), x, _op(ops.full, F32, (L,), _op(ops.constant, F32, (), value=init)),
                            axes=(1,)), where=_combines(op))


def _exp(x, shape, fast: bool) -> Pat:
    """``exp(x)``, or in the FlashAttention spelling (``fast``) ``exp2(x, approximate=True)``."""
    return _op(ops.exp2, F32, shape, x, approximate=True) if fast else _op(ops.exp, F32, shape, x)


def _summarize_template(L, D, e, fast):
    s = _op(ops.mul, F32, (L, e), _op(ops.contract, F32, (L, e), any_("q"), any_("k"), reduce=((1, 1),), batch=(),
                                      acc_dtype=F32),
            _op(ops.broadcast, F32, (L, e), any_("scale")))
    m = _reduce(ops.maximum, s, -math.inf, L)
    p = _exp(_op(ops.sub, F32, (L, e), s, _rows(m, (L, e), L)), (L, e), fast)
    pv = _op(ops.contract, F32, (L, D), _op(ops.cast, F16, (L, e), p, dtype=F16), any_("v"),
             reduce=((1, 0),), batch=(), acc_dtype=F32)
    return _op(ops.tuple, None, (), m, _reduce(ops.add, p, 0.0, L), pv)


def _combine_template(L, D, fast):
    def get(side, k, shape):
        return _op(ops.get, F32, shape, any_(side), index=k)

    ma, mb = get("a", 0, (L,)), get("b", 0, (L,))
    m = _op(ops.maximum, F32, (L,), ma, mb)

    def rescale(x):
        return _op(ops.select, F32, (L,), _op(ops.eq, T.bool_, (L,), x, lit(-math.inf, F32)),
                   _full(0.0, (L,)), _exp(_op(ops.sub, F32, (L,), x, m), (L,), fast))

    alpha, beta = rescale(ma), rescale(mb)
    lsum = _op(ops.add, F32, (L,), _op(ops.mul, F32, (L,), get("a", 1, (L,)), alpha),
               _op(ops.mul, F32, (L,), get("b", 1, (L,)), beta))
    acc = _op(ops.add, F32, (L, D),
              _op(ops.mul, F32, (L, D), get("a", 2, (L, D)), _rows(alpha, (L, D), L)),
              _op(ops.mul, F32, (L, D), get("b", 2, (L, D)), _rows(beta, (L, D), L)))
    return _op(ops.tuple, None, (), m, lsum, acc)


def _outer_template(L, D):
    def get(k, shape):
        return _op(ops.get, F32, shape, any_("fold"), index=k)

    quotient = _op(ops.div, F32, (L, D), get(2, (L, D)), _rows(get(1, (L,)), (L, D), L))
    return _op(ops.cast, F16, (L, D), quotient, dtype=F16)


def _read(role, rows, D):
    return _op(ops.read, F16, (rows, D), any_(role), any_("b"), index=("point", "all", "all"))


def _is(template: Pat, value, defs: dict, roles: dict) -> bool:
    """Whether ``value`` is ``template`` with its roles the seeded values (a role left unseeded is no match)."""
    caps = match(template, value, defs, roles)
    return caps is not None and caps.keys() == roles.keys()


def _region_ok(region) -> bool:
    """No effect other than a read anywhere in the region (nested regions included)."""
    return not any(ops.region_effects(node) - {"read"} for node in region.nodes)


# --- recognition ---------------------------------------------------------------------------------------

def _folded_scale(node, views) -> tuple:
    """(the scale parameter, the f32 factor) of ``scale * c`` (``c`` a literal: log2(e) in the FlashAttention
    spelling), else (None, None)."""
    if node.op is not ops.mul or len(node.inputs) != 2:
        return None, None
    for x, c in (node.inputs, node.inputs[::-1]):
        if x in views and isinstance(c, Literal) and c.type.dtype is F32 and math.isfinite(c.value):
            return views[x], float(c.value)
    return None, None


def _match(graph: KernelGraph):
    """({role: graph param index}, {"B"/"L"/"S"/"D": graph extent index}, the variant) when ``graph`` is the
    attention above, else None. The variant is (the literal factor of the scale or None, whether the exponentials
    are ``exp2(approximate=True)``)."""
    nodes = graph.body.nodes
    views = {p.var: p for p in graph.params}
    factor = None
    if len(nodes) == 3 and nodes[0].op is ops.mul:  # ``scale * c`` computed once before the loop
        scale_param, factor = _folded_scale(nodes[0], views)
        if scale_param is None:
            return None
        folded, nodes = nodes[0].outputs[0], nodes[1:]
    if [n.op for n in nodes] != [ops.domain, ops.parallel]:
        return None
    domain, par = nodes
    unit = match(UNIT_DOMAIN, domain, {})
    if unit is None:
        return None
    end = unit["end"]
    if par.inputs != domain.outputs or end not in graph.extents or len(par.regions) != 1:
        return None
    (body,) = par.regions
    effects = [n for n in body.nodes if n.op.effects - {"read"}]
    folds = [n for n in body.nodes if n.op is ops.region_fold]
    if len(folds) != 1 or len(effects) != 1 or effects[0].op is not ops.write or len(body.params) != 1:
        return None
    (fold,), (write,), (point,) = folds, effects, body.params
    if len(fold.inputs) != 4 or fold.attr("axis") != 0 or len(fold.regions) != 2 or len(write.inputs) != 3:
        return None
    out = views.get(write.inputs[0])
    scale = views.get(fold.inputs[3]) if factor is None else (scale_param if fold.inputs[3] is folded else None)
    if out is None or out.kind != "view" or len(out.type.shape) != 3 or write.inputs[2] is not point:
        return None
    if scale is None or scale.kind != "scalar" or scale.type.dtype is not F32:
        return None
    B, L, D = out.type.shape
    extents = {ev.extent: k for k, ev in enumerate(graph.extents)}
    if B is not end.extent or not all(x in extents for x in (B, L, D)) or out.type.access != "Out":
        return None
    # the fold's inputs: tuple(read k[b], read v[b]), the identity, read q[b], the scale parameter
    top = producers(body, nested=False)
    source, identity, queries, _ = fold.inputs
    keys_values = match(_op(ops.tuple, None, (), pat(ops.read, name="k", more=True),
                            pat(ops.read, name="v", more=True)), source, top)
    q_read = match(pat(ops.read, name="q", more=True), queries, top)
    if keys_values is None or q_read is None:
        return None
    reads = {role: top[x] for role, x in {**keys_values, **q_read}.items()}
    if any(n.inputs[0] not in views for n in reads.values()):
        return None
    names = {n.inputs[0]: role for role, n in reads.items()}
    if len(names) != 3 or out.var in names:
        return None
    S = views[reads["k"].inputs[0]].type.shape[1]
    if S not in extents or S in (B, L, D):
        return None
    want = {"q": (B, L, D), "k": (B, S, D), "v": (B, S, D)}
    for var, role in names.items():
        p = views[var]
        if p.type.access != "In" or p.type.dtype is not F16 or tuple(p.type.shape) != want[role]:
            return None
        if not _is(_read(role, L if role == "q" else S, D), reads[role].outputs[0], top, {role: var, "b": point}):
            return None
    zeros = _op(ops.tuple, None, (), _full(-math.inf, (L,)), _full(0.0, (L,)), _full(0.0, (L, D)))
    if out.type.dtype is not F16 or not _is(zeros, identity, top, {}):
        return None
    # the summarizer and the combine, against their templates
    summarize, combine = fold.regions
    if len(summarize.params) != 4 or len(combine.params) != 2 or len(summarize.results) != 1:
        return None
    k_p, v_p, q_p, s_p = summarize.params
    e = getattr(k_p.type, "shape", (None,))[0]
    if not _region_ok(summarize) or not _region_ok(combine) or len(combine.results) != 1:
        return None
    a, b = combine.params
    for fast in (False, True):
        if _is(_summarize_template(L, D, e, fast), summarize.results[0], producers(summarize, nested=False),
               {"k": k_p, "v": v_p, "q": q_p, "scale": s_p}):
            break
    else:
        return None
    if not _is(_combine_template(L, D, fast), combine.results[0], producers(combine, nested=False), {"a": a, "b": b}):
        return None
    if not _is(_outer_template(L, D), write.inputs[1], top, {"fold": fold.outputs[0]}) or \
            write.attr("index") != ("point", "all", "all"):
        return None
    params = {p.var: k for k, p in enumerate(graph.params)}
    order = {role: params[var] for var, role in names.items()}
    order.update(out=params[out.var], scale=params[scale.var])
    return order, {"B": extents[B], "L": extents[L], "S": extents[S], "D": extents[D]}, (factor, fast)


def attention(graph: KernelGraph, config=None) -> Specialization | None:
    """The tiled program for ``graph`` with ``config`` = (D, block_M, block_N, stages, threads), or None when
    the graph is not the attention above."""

    match = _match(graph)
    if match is None:
        return None
    order, dims, (factor, fast) = match
    exp = "T.exp2" if fast else "T.exp"
    # the scale the fold is given: the parameter, or the parameter times the literal, one f32 rounding as in KIR
    scaled = "scale" if factor is None else "scale_s[0]"
    folded = "" if factor is None else (f"        scale_s = T.alloc_local((1,), 'float32')\n"
                                        f"        scale_s[0] = scale * T.float32({factor!r})\n")
    dim, bm, bn, stages, threads = config or CONFIGS[0]
    b, l, s = (f"d{dims[r]}" for r in "BLS")
    shapes = {"q": (b, l, dim), "k": (b, s, dim), "v": (b, s, dim), "out": (b, l, dim)}
    names = {"q": "Q", "k": "K", "v": "V", "out": "O", "scale": "scale"}
    params = []
    for role, k in sorted(order.items(), key=lambda kv: kv[1]):
        params.append("scale: T.float32" if role == "scale" else
                      f"{names[role]}: T.Tensor(({', '.join(map(str, shapes[role]))}), 'float16')")
    used = sorted({dims[r] for r in "BLS"})
    decls = "\n".join(f"d{k} = T.dynamic('d{k}', 'int32')" for k in used)
    program = f'''# Generated by intent_trace (target tilelang-cuda): tiled flash attention specialising a KIR graph.
import tilelang.language as T

{decls}


@T.prim_func
def kernel({", ".join(params)}):
    with T.Kernel(T.ceildiv({l}, {bm}), {b}, threads={threads}) as (bx, bz):
        Q_s = T.alloc_shared(({bm}, {dim}), 'float16')
        K_s = T.alloc_shared(({bn}, {dim}), 'float16')
        V_s = T.alloc_shared(({bn}, {dim}), 'float16')
        O_s = T.alloc_shared(({bm}, {dim}), 'float16')
        S_f = T.alloc_fragment(({bm}, {bn}), 'float32')  # the block's scaled scores, then p
        P_f = T.alloc_fragment(({bm}, {bn}), 'float16')  # p rounded to f16
        PV_f = T.alloc_fragment(({bm}, {dim}), 'float32')  # the block summary's acc
        acc_f = T.alloc_fragment(({bm}, {dim}), 'float32')  # the running summary (m_f, l_f, acc_f)
        m_f = T.alloc_fragment(({bm},), 'float32')
        l_f = T.alloc_fragment(({bm},), 'float32')
        mb_f = T.alloc_fragment(({bm},), 'float32')
        lb_f = T.alloc_fragment(({bm},), 'float32')
        alpha_f = T.alloc_fragment(({bm},), 'float32')
        beta_f = T.alloc_fragment(({bm},), 'float32')
{folded}        T.copy(Q[bz, bx * {bm}, 0], Q_s)
        T.fill(m_f, -T.infinity('float32'))
        T.fill(l_f, 0)
        T.fill(acc_f, 0)
        for kb in T.Pipelined(T.ceildiv({s}, {bn}), num_stages={stages}):
            T.copy(K[bz, kb * {bn}, 0], K_s)
            T.copy(V[bz, kb * {bn}, 0], V_s)
            # summarize(k block, v block, q, scale)
            T.gemm(Q_s, K_s, S_f, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel({bm}, {bn}):
                S_f[i, j] = S_f[i, j] * {scaled}
            T.reduce_max(S_f, mb_f, dim=1, clear=True)
            for i, j in T.Parallel({bm}, {bn}):
                S_f[i, j] = {exp}(S_f[i, j] - mb_f[i])
            T.reduce_sum(S_f, lb_f, dim=1, clear=True)
            T.copy(S_f, P_f)
            T.gemm(P_f, V_s, PV_f, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            # combine(running, block)
            for i in T.Parallel({bm}):
                m_new = T.max(m_f[i], mb_f[i])
                alpha_f[i] = T.if_then_else(m_f[i] == -T.infinity('float32'), T.float32(0), {exp}(m_f[i] - m_new))
                beta_f[i] = T.if_then_else(mb_f[i] == -T.infinity('float32'), T.float32(0), {exp}(mb_f[i] - m_new))
                l_f[i] = l_f[i] * alpha_f[i] + lb_f[i] * beta_f[i]
                m_f[i] = m_new
            for i, j in T.Parallel({bm}, {dim}):
                acc_f[i, j] = acc_f[i, j] * alpha_f[i] + PV_f[i, j] * beta_f[i]
        for i, j in T.Parallel({bm}, {dim}):
            acc_f[i, j] = acc_f[i, j] / l_f[i]
        T.copy(acc_f, O_s)
        T.copy(O_s, O[bz, bx * {bm}, 0])
'''
    return Specialization(f"attention_d{dim}", program, ((dims["L"], bm), (dims["S"], bn), (dims["B"], 1)),
                          equals=((dims["D"], dim),),
                          operands=((dims["B"], dims["L"], dims["D"]), (dims["B"], dims["S"], dims["D"])))
