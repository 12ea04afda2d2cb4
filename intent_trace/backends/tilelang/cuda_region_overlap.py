"""The segmented fold's source loop overlapped as FlashAttention-3 overlaps it (intra-warpgroup pipelining), where the
fold's structure allows it.

Why: with one ``T.gemm`` after another, each waiting for its tensor-core work (``warpgroup_wait<0>``), a block's two
products and its element work add up (flash attention on an H100: 16 HGMMA a block, about 1.1 us an SM, and about
1.3 us of element work). Issued without a wait (``T.wgmma_gemm``), the second product of block ``kb - 1`` runs on
the tensor cores while the threads do block ``kb``'s element work.

**The structure** (:func:`find`; traits of the helper regions, no expression template): ``summarize``'s first
contraction or reduction is a contraction of its inputs alone (attention's ``Q K^T``), its last node a second
contraction (``P V``) whose left operand is an f16/bf16 cast computed in the block and whose right operand is a
source component nothing else reads; that product is a leaf of the summary, and ``combine`` makes the running leaf
from it as ``a * x + b * y`` (``a`` the running leaf, ``b`` the block's, ``x`` and ``y`` per-row values broadcast
along the row). Then the running leaf is rescaled once a block (``a * x``, the graph's own multiply) and the second
product accumulates into it with ``P * y`` as its left operand: ``a * x + (P * y) V`` for ``a * x + (P V) * y`` --
FlashAttention's form, which frees the product's fragment (64 registers a thread at head 128) that the overlap needs.
Numerics (T10): the product is linear in ``P``, so this is the same value up to rounding: ``P * y`` is rounded to f16
instead of ``P`` (a relative 2^-11 on each term, as P's own rounding), and the add of the combine joins the
product's accumulation (FMA in the contraction, any order: T5's bound over one more term). NaN-ness only grows
(``f16(P * y)`` is 0 wherever ``f16(P)`` is, so a ``0 * inf`` the fold has stays; a new one where ``P * y``
underflows makes the row NaN), and a row whose output holds a NaN is recomputed by the serial program
(:mod:`.cuda_region_nan`), so NaN outputs stay the oracle's.

**The loop** (one iteration more than blocks; ``n`` blocks from ``start``): iteration ``kb`` loads the first
product's source tiles of block ``kb`` and the deferred product's of block ``kb - 1`` (a load past either end reads
zeros and is not used), issues block ``kb``'s first product, then (not at the first) block ``kb - 1``'s second, waits
for the first alone (``T.wait_wgmma(1)``; groups complete in order), runs block ``kb``'s element work and the
per-row half of ``combine``, waits for the second, rescales the running leaf and writes block ``kb``'s scaled ``P``.
A read of the iteration's tiles after the last wait keeps TileLang's release of the stage's shared buffers (its
warp-specialised producer refills them) behind the asynchronous products. The C emulation runs the same loop with
synchronous products (:class:`.cuda_region_tiles.Emulated`: the waits and the read write nothing). The loads take
two stages at least (:data:`STAGES`), and ``P``'s fragment is zeroed once before the loop (the first iteration
issues no product that reads it; TileLang's check of reads before writes cannot see the guard).

**Ping-pong** (:data:`PINGPONG`, FlashAttention-3's inter-warpgroup scheduling): the overlap above keeps only PV
running during the element work; a block's QK^T is still waited for before its softmax, and both consumer
warpgroups reach that wait together, so the tensor cores idle during their element work. With the turns, each
warpgroup issues its products (QK^T of block ``kb``, PV of ``kb - 1``) only after the other issued its own, and gives
the turn back before it waits: one warpgroup's products run while the other's softmax does. Only the order of
issue changes (every value and every rounding are the loop's above). The turns are two named barriers
(:meth:`.cuda_region_tiles.Spelling.turn`), balanced for any block count (tests/backends/
test_tilelang_cuda_region_pingpong.py models them); the C emulation, whose threads run in turn, takes none.
"""
from __future__ import annotations

import attrs

from ... import types as T
from ...graph import ops
from ...graph.lowering import broadcast_index
from ...graph.values import Var
from ...schedule.region import ROW, SLICE
from .cuda_region_combine import combine_rows
from .emitter import Lazy, Scalar
from .scalar_rules import cast_expr

_NARROW = frozenset({T.f16, T.bf16})
#: at least two stages of the loop's loads: a stage is released after the iteration's last wait, so with one the
#: producer could not load the next block's tiles while this block's products run (measured: 0.46 of SDPA at one
#: stage against 0.59 at two, accurate, one H100)
STAGES = 2
#: FlashAttention-3's ping-pong between the two consumer warpgroups (:func:`pingpong`): warpgroup ``w`` issues
#: block ``kb``'s products after the other issued its block ``kb - 1 + w``'s, so one's products run while the
#: other's element work does (named barriers: :meth:`.cuda_region_tiles.Spelling.turn`). Off: not yet measured on a
#: GPU (2026-12-07: no machine started); ``tools/attention_sweep.py``'s ``/pingpong`` measures it (its docstring has
#: the A/B command). Lowered and assembled for sm_90a here: 168 registers, no spills, as without it.
PINGPONG = False
#: the schedule's note (``exe.schedule``) on a fold whose loop is overlapped
NOTE = "; overlapped: a block's second product (T.wgmma_gemm, accumulating) runs during the next block's element work"
PINGPONG_NOTE = "; ping-pong: the two consumer warpgroups issue their products in turn"


@attrs.frozen
class Overlap:
    """What :func:`find` found: the two contractions, the deferred one's operands, its summary leaf and the two
    multiplies of ``combine`` (``keep``: the running leaf's, ``scale``: the block's) and their per-row factors."""

    first: object = attrs.field(eq=False)
    last: object = attrs.field(eq=False)
    cast: object = attrs.field(eq=False)  # the node rounding P to the product's dtype
    rhs: Var = attrs.field(eq=False)  # the source component the deferred product reads
    leaf: int
    keep: object = attrs.field(eq=False)  # combine's mul(a_leaf, broadcast x)
    spread: object = attrs.field(eq=False)  # the broadcast of x in it
    factor: Var = attrs.field(eq=False)  # y (as broadcast: a per-row value as (R, 1)) of combine's other multiply


def _users(nodes) -> dict:
    users: dict = {}
    for n in nodes:
        for x in n.inputs:
            if isinstance(x, Var):
                users.setdefault(x, []).append(n)
    return users


def find(program, summarize, combine) -> Overlap | None:
    """The overlapped form of the fold's loop, when its helpers have the structure the module docstring says.
    Measured (one H100, L = S = 4096, d 128, the same process; ``docs/gpu-attention-overlap-2026-12-07-h100-
    session11.jsonl``): against the waiting loop, accurate 0.642 of SDPA against 0.604, FlashAttention spelling 0.839
    against 0.751, fma 0.811 against 0.716; causal 0.574 against 0.534 (an earlier session). A fold of another
    structure (one product, none, f32 products) keeps the waiting loop."""
    nodes = [n for n in summarize.nodes if n.op is not ops.dim]
    products = [n for n in nodes if n.op is ops.contract]
    if len(products) != 2 or nodes[-2] is not products[1] or nodes[-1].op is not ops.tuple:
        return None
    first, last = products
    if any(id(n) in program.reductions for n in nodes[:next(k for k, n in enumerate(nodes) if n is first)]):
        return None  # only element work (written before the first product, in every iteration) may precede it
    params = set(summarize.params)
    if not all(x in params and x.type.dtype in _NARROW for x in first.inputs):
        return None  # tensor-core operands loaded as they are (f32 products run on CUDA cores, and wait)
    lhs, rhs = last.inputs
    users = _users(nodes)
    cast = program.producers.get(lhs)
    if rhs not in params or len(users.get(rhs, ())) != 1 or cast is None or cast.op is not ops.cast or \
            lhs.type.dtype not in _NARROW or cast.inputs[0].type.dtype is not T.f32:
        return None
    if program.layout(lhs.type)[last.attr("reduce")[0][0]] != SLICE:
        return None  # P's contracted axis is the source's
    leaves = list(nodes[-1].inputs)
    if leaves.count(last.outputs[0]) != 1 or len(users.get(last.outputs[0], ())) != 1:
        return None
    leaf = leaves.index(last.outputs[0])
    widths = [len(program.layout(x.type)) for x in leaves]
    if widths.count(2) != 1:
        return None  # the deferred product's leaf is the one wide leaf
    return _combine_form(program, combine, first, last, cast, rhs, leaf)


def _combine_form(program, combine, first, last, cast, rhs, leaf) -> Overlap | None:
    """``combine``'s new leaf ``leaf`` as ``a * x + b * y`` (either order of each operation)."""
    nodes = [n for n in combine.nodes if n.op is not ops.dim]
    producers = {v: n for n in nodes for v in n.outputs}
    users = _users(nodes)
    gets = {(n.inputs[0], n.attr("index")): n.outputs[0] for n in nodes if n.op is ops.get}
    a, b = (gets.get((p, leaf)) for p in combine.params)
    out = nodes[-1]
    if out.op is not ops.tuple or a is None or b is None or len(users.get(b, ())) != 1:
        return None
    total = producers.get(out.inputs[leaf])
    if total is None or total.op is not ops.add:
        return None
    terms = [producers.get(x) for x in total.inputs]
    if any(t is None or t.op is not ops.mul for t in terms):
        return None

    def spread(term, leaf_var):
        others = [x for x in term.inputs if x is not leaf_var]
        if len(others) != 1 or leaf_var not in term.inputs:
            return None
        node = producers.get(others[0])
        if node is None or node.op is not ops.broadcast or not isinstance(node.inputs[0], Var) or \
                ROW not in program.layout(node.inputs[0].type):
            return None
        return node

    for keep, scale in (terms, terms[::-1]):
        x, y = spread(keep, a), spread(scale, b)
        if x is not None and y is not None:
            return Overlap(first, last, cast, rhs, leaf, keep, x, y.inputs[0])
    return None


class Deferred(Lazy):
    """The deferred product's value inside the block: the program never reads it (combine's use is rewritten)."""

    def __init__(self, shape):
        super().__init__(shape, self._never)

    @staticmethod
    def _never(idx):
        raise AssertionError("the deferred product is read only through the overlapped combine")


def loop(program, ov: Overlap, summarize, combine, running: list, operands: list, start, count: str) -> None:
    """The overlapped source loop (the module docstring), written by ``program`` (a cuda_region._Program)."""
    em, sp, t = program.em, program.sp, program.t
    first = start if start is not None else "0"
    before = len(em.lines)  # where P's fill goes
    with em.block(sp.source_loop("kb", f"{count} + 1", start, STAGES)):
        values, tiles = [], []
        for s, param in zip(program.plan.sources, summarize.params):
            if s.param is None:
                values.append(program.index(SLICE, "kb"))
                continue
            late = param is ov.rhs
            tile = program.view_tile(s, {SLICE: f"(kb - 1) * {t.block_N}" if late else f"kb * {t.block_N}"})
            tiles.append(tile.buf)
            values.append(program.tile_value(tile))
        program.overlap = ov
        body, em.lines = em.lines, []
        try:
            block = program.summarize(summarize, [*values, *operands])
            mark = program.issued
            temps = combine_rows(program, combine, running, block)
            sp.wait(0)
            sp.hold(tiles)
            _rescale(program, ov, running[ov.leaf], temps)
            p = _scaled(program, ov, temps)
            issue, em.lines = em.lines, []
            ((la, ra),) = ov.last.attr("reduce")
            v = program.tile_of(em.env[ov.rhs])
            shape = running[ov.leaf].shape
            sp.gemm_async(p.buf, v.buf, running[ov.leaf].buf, la == 0, ra == 1, (*shape, p.shape[la]), False)
            second, em.lines = em.lines, issue
        finally:
            program.overlap = None
            lines, em.lines = em.lines, body
        turns = pingpong(program)
        em.lines.extend(lines[:program.turn])
        if turns:  # one warpgroup first: at the first block it does not wait; the other gives no turn after its last
            sp.turn(f"kb > {first}")
        em.lines.extend(lines[program.turn:mark])
        with em.block(f"if kb > {first}:"):
            em.lines.extend("    " + x for x in second)
            if turns:
                sp.pass_turn(f"kb < {count}")
            sp.wait(1)
        with em.block("else:"):
            if turns:
                sp.pass_turn(f"kb < {count}")
            sp.wait(0)
        with em.block(f"if kb < {count}:"):
            em.lines.extend("    " + x for x in lines[mark:])
        with em.block("else:"):
            sp.wait(0)
            sp.hold(tiles)
    loop_lines, em.lines = em.lines[before:], em.lines[:before]
    program.fill(p, Scalar("T.float32(0)"))  # never read before written (kb > start); TileLang's check cannot see it
    em.lines.extend(loop_lines)


def note(program) -> str:
    """The schedule's note on the overlapped loop ``program`` wrote."""
    return NOTE + (PINGPONG_NOTE if pingpong(program) else "")


def pingpong(program) -> bool:
    """Whether the loop's two consumer warpgroups take turns issuing their products (:data:`PINGPONG`; 256
    threads: two warpgroups, each its half of the rows under the FullRow policy; not in the C emulation, whose
    threads run in turn)."""
    return PINGPONG and program.t.threads == 256 and not program.sp.emulated


def _rescale(program, ov: Overlap, run, temps: dict) -> None:
    """``a = a * x``: the running leaf rescaled once a block, by the graph's own multiply, ``x`` read from the
    fragment the per-row half of combine stored it in (the running leaves it reads are overwritten there)."""
    em = program.em
    value, x = em.env[ov.keep.outputs[0]], ov.spread.inputs[0]
    i, j = em.fresh("i"), em.fresh("j")
    with em.block(program.sp.parallel([i, j], run.shape)):
        at = broadcast_index(x.type.shape, ov.spread.outputs[0].type.shape, [i, j])
        em.memo[-1][(id(em.env[x]), tuple(at))] = (em.env[x], f"{temps[id(em.env[x])][0].buf}[{i}]")
        em.line(f"{run.buf}[{i}, {j}] = {em.elem(value, [i, j])}")


def _scaled(program, ov: Overlap, temps: dict):
    """``P * y`` rounded to the product's dtype in a fragment (the left operand), zeros past the source's end."""
    em, sp = program.em, program.sp
    lhs = ov.last.inputs[0]
    p = em.env[ov.cast.inputs[0]]
    y = temps[id(em.env[ov.factor])][0].buf
    mul = em.helper("mul", (T.f32,), T.f32, (T.f32, T.f32))
    dtype = lhs.type.dtype

    row = program.layout(lhs.type).index(ROW)

    def elem(idx):
        scaled = f"T.call_extern('float32', {mul!r}, {em.elem(p, idx)}, {y}[{idx[row]}])"
        return scaled if sp.hardware_casts else cast_expr(em, T.f32, dtype, scaled)

    shape = tuple(int(s) for s in p.shape)
    tile = program.fragment(shape, {"f16": "float16", "bf16": "bfloat16"}[dtype.name], "m",
                            sp.left_scope(False))
    axis = program.layout(lhs.type).index(SLICE)
    program.write_cases(tile, Lazy(p.shape, elem), lhs, (axis, "T.float32(0)"))
    return tile
