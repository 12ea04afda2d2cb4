"""``combine`` of the segmented-fold program (:mod:`.cuda_region`): the running summary updated from a block's.

Two loops, so no loop reads a leaf another overwrote: the per-row leaves (and the per-row values the wider leaves
broadcast, kept in fragments) first, then the wider leaves, each element reading only its own element of the old
leaf and the row values from those fragments. The overlapped loop (:mod:`.cuda_region_overlap`) runs the first alone
(:func:`combine_rows`) and writes its one wide leaf itself.
"""
from __future__ import annotations

from ...graph import ops
from ...graph.lowering import assemble, broadcast_index, leaf_values
from ...graph.values import Var
from ...schedule.region import ROW
from .emitter import Aggregate, Lazy


def combine(program, region, running: list, block) -> None:
    """``running = combine(running, block)``: the per-row leaves and the per-row values the wider leaves broadcast
    first (into fragments), then the wider leaves (each reads only its own element of the old)."""
    temps, leaves, spread = _rows(program, region, running, block)
    em, t = program.em, program.t
    wide = [k for k, r in enumerate(running) if len(r.shape) == 2]
    if not wide:
        return
    i, j = em.fresh("i"), em.fresh("j")
    with em.block(program.sp.parallel([i, j], (t.block_M, t.head))):
        for n in spread:  # the broadcast operands read their fragments (em.elem finds them memoised)
            x = n.inputs[0]
            at = broadcast_index(x.type.shape, n.outputs[0].type.shape, [i, j])
            tile, _ = temps[id(em.env[x])]
            em.memo[-1][(id(em.env[x]), tuple(at))] = (em.env[x], f"{tile.buf}[{i}]")
        exprs = {k: em.assign(em.elem(leaves[k], [i, j])) for k in wide}
        for k in wide:
            em.line(f"{running[k].buf}[{i}, {j}] = {exprs[k]}")


def combine_rows(program, region, running: list, block) -> dict:
    """The per-row half of :func:`combine` alone; the fragments of the broadcast row values (``id`` of the value
    -> (fragment, expression))."""
    return _rows(program, region, running, block)[0]


def _rows(program, region, running: list, block) -> tuple:
    em, t = program.em, program.t
    a, b = region.params
    em.env[a] = assemble(a.type, [program.tile_value(r) for r in running], Aggregate)
    em.env[b] = block
    for node in region.nodes:
        if node.op is not ops.dim:
            program.run(node)
    leaves = leaf_values(em.env[region.results[0]], Aggregate)
    narrow = [k for k, r in enumerate(running) if len(r.shape) == 1]
    spread = [n for n in region.nodes if n.op is ops.broadcast and isinstance(n.inputs[0], Var)
              and len(program.layout(n.outputs[0].type)) == 2 and ROW in program.layout(n.inputs[0].type)]
    temps = {}
    i = em.fresh("i")
    with em.block(program.sp.parallel([i], (t.block_M,))):
        exprs = {}
        for n in spread:
            x = n.inputs[0]
            if id(em.env[x]) not in temps:
                core = program.row_core(x)  # through unit reshapes: memoised with the leaves that use it
                at = [i, *(["0"] * (len(core.type.shape) - 1))]
                temps[id(em.env[x])] = (program.fragment((t.block_M,), prefix="row"), em.elem(em.env[core], at))
        for k in narrow:  # each bound before any store (a leaf may be another's old value)
            exprs[k] = em.assign(em.elem(leaves[k], [i]) if isinstance(leaves[k], Lazy) else leaves[k].expr)
        for tile, expr in temps.values():
            em.line(f"{tile.buf}[{i}] = {expr}")
        for k in narrow:
            em.line(f"{running[k].buf}[{i}] = {exprs[k]}")
    return temps, leaves, spread
