"""NaN outputs of the segmented-fold tile program (:mod:`.cuda_region`) recomputed as the serial program computes them.

T10 asks for the oracle's NaN payloads (x86's: an operation's first NaN operand, quieted; ``0xFFC00000`` for an
invalid operation). The tile program does not give them, and paying for them in its hot loop would cost every run:
``T.gemm`` runs on tensor cores (PTX leaves an ``mma``'s accumulation order unspecified, so not even which NaN operand
wins is defined, and NVIDIA arithmetic returns its canonical NaN), and the element code's f32 ``+ - * /`` and vendor
functions are the bare instructions (:func:`.cuda_region.fast_helpers`). So, as the f32 matmul on CUDA cores does
(:func:`.cuda_matmul_simt.simt`), the tile program stays as it is and only a NaN output pays: after the block's outputs are
staged (in shared memory on CUDA), one loop over the block's rows tests each staged output element (one compare each),
and a row holding a NaN is computed again by the serial program -- the fold over the whole source in order, in slices
of :data:`~intent_trace.codegen.folds.SLICE` members, then its consumers -- written by the shared emitter with the
target's own helpers (the general program's element code, restricted to that one row), and its staged elements are
replaced before the store. Where no output is NaN the recomputation is a branch never taken.

The recomputation's buffers (a slice's scores, the summary of one row) are small and static: the slice axis is
sized by its bound, the rows by 1, the free axes by the tile's head. They and its mutable locals are allocated once
at the top of the kernel (:class:`RowEmitter`); a fold whose row would need more than the stack limit gets no tile
program (:class:`~intent_trace.errors.LoweringError`: the general program runs it). Its helpers are named ``its_*``
so they stand beside the tile program's fast bodies of the same ops.

Emulated (the C target), the tile's staged NaN outputs are first made the hardware's canonical NaN (``0x7FFFFFFF``),
so the emulation, like the GPU, gets the oracle's payloads from the recomputation alone, and a test of them fails
without it. The same elements are recomputed on both: the test is NaN-ness, which IEEE arithmetic fixes on both.
"""
from __future__ import annotations

import contextlib
import math
import re

from ... import types as T
from ...errors import LoweringError
from ...graph import ops
from ...graph.lowering import assemble, leaf_values
from ...graph.values import Literal
from ...schedule import region as schedule_region
from ...schedule.region import ROW
from .cuda_region_tiles import IS_NAN
from .dialect import as_index
from .emitter import Aggregate, Lazy, Scalar, TileLangEmitter
from .rules import REJECTED, RULES
from .storage import STACK_LIMIT

#: a mutable local's allocation (``name = T.alloc_var(dtype[, init=value])``)
_VAR = re.compile(r"^(\s*)(\w+) = T\.alloc_var\(('\w+')(?:, init=(.+))?\)$")


class RowEmitter(TileLangEmitter):
    """The shared emitter for the serial program of one row: its helpers named ``its_*`` (beside the tile program's
    fast ones), every buffer a static stack buffer sized by its bound and allocated at the top of the kernel
    (``allocs``), never a workspace or the heap."""

    helper_prefix = "its_"

    def __init__(self, graph, target, allocs: list):
        super().__init__(graph, target, RULES, REJECTED, checks=False)
        self.allocs = allocs

    def allocate(self, shape, dtype: str, zero: bool = False) -> str:
        dims = tuple(self.host_sizes.get(s, s) for s in (tuple(shape) or ("1",)))
        if not all(str(s).isdigit() for s in dims) or math.prod(int(s) for s in dims) > STACK_LIMIT:
            raise LoweringError(f"recomputing a NaN row of the segmented fold needs a buffer of {dims} (more than "
                                f"{STACK_LIMIT} elements on the stack)")
        name = self.fresh("a")
        self.allocs.append(f"{name} = T.alloc_local(({', '.join(map(str, dims))},), {dtype!r})")
        self.zero_fill(name, dims, dtype, zero)
        return name


def fix_rows(prog, staged: list) -> None:
    """After the block's outputs are staged (``staged``: (write, tile, the view's emitter value) per output), the
    loop over the block's rows that recomputes each row holding a NaN output by the serial program."""
    em, sp, t, plan = prog.em, prog.sp, prog.t, prog.plan
    if any(prog.layout(write.inputs[1].type)[:1] != (ROW,) for write, _, _ in staged):
        raise LoweringError("an output of the segmented fold has no rows (a NaN is recomputed row by row)")
    is_nan = sp.helper("itr_is_nan", IS_NAN)
    flag = em.fresh("nan")
    sp.allocs.append(f"{flag} = T.alloc_local((1,), 'int32')")
    sp.barrier()  # every thread's staged elements written before a row's are read
    i = em.fresh("i")
    row = f"(T.Cast('int64', bx) * T.int64({t.block_M}) + T.Cast('int64', {i}))"
    with em.block(sp.parallel([i], (t.block_M,))):
        # 1: a NaN in the row, 2: a row past the last (never stored, never recomputed)
        em.line(f"{flag}[0] = T.if_then_else({row} < T.Cast('int64', {prog.dims[plan.rows]}), 0, 2)")
        for _, tile, _ in staged:
            rest = [em.fresh("j") for _ in tile.shape[1:]]
            with contextlib.ExitStack() as loops:
                # unrolled: the row's loads issue back to back (a rolled loop waited for each load in turn: 3-5% of
                # flash attention on one H100, the NaN-free run's whole cost of this test)
                for j, n in zip(rest, tile.shape[1:]):
                    loops.enter_context(em.block(f"for {j} in T.unroll({n}):"))
                nan = f"T.call_extern('int32', {is_nan!r}, {sp.element(tile.buf, tile.dtype, [i, *rest])})"
                em.line(f"{flag}[0] = {flag}[0] | {nan}")
        with em.block(f"if {flag}[0] == 1:"):
            _serial_row(prog, row, i, staged)


def _serial_row(prog, row: str, i: str, staged: list) -> None:
    """The serial program of row ``row`` (the block's row ``i``), its outputs written into the staged tiles."""
    em, plan, graph = prog.em, prog.plan, prog.graph
    allocs: list = []
    rem = RowEmitter(graph, prog.target, allocs)
    rem.counter = em.counter  # fresh names and constants shared with the tile program's
    rem.constants, rem.constant_lines = em.constants, em.constant_lines
    rem.depth = em.depth
    for k, ev in enumerate(graph.extents):
        rem.env[ev] = Scalar(prog.dims[k])
        rem.dim_names[ev.extent] = prog.dims[k]
    rem.env.update(prog.scalars)
    for node in plan.before:
        if node.op is not ops.indices:
            rem.run_node(node)
    for d, role in plan.roles.items():
        if role == ROW:
            rem.dim_names[d] = "1"
        elif role is d:
            rem.dim_names[d] = str(prog.t.head)
    fold = plan.fold
    sources = [_source(prog, rem, s, row) for s in plan.sources]
    rem.env[fold.inputs[0]] = assemble(fold.inputs[0].type, sources, Aggregate)
    fills = leaf_values(prog.identity_fills(fold, rem), Aggregate)
    leaves = T.leaf_types(fold.inputs[1].type)
    rem.env[fold.inputs[1]] = assemble(fold.inputs[1].type, [
        Lazy(rem.shape(lt), lambda idx, f=f: f.expr) for lt, f in zip(leaves, fills)], Aggregate)
    for x, operand in zip(fold.inputs[2:], plan.operands):
        if isinstance(operand, Literal):
            rem.env[x] = rem.literal(operand)
        elif isinstance(operand, schedule_region.Source):
            rem.env[x] = _source(prog, rem, operand, row)
    rem.run_node(fold)
    for node in plan.after:
        rem.run_node(node)
    for write, tile, view in staged:
        value = rem.env[write.inputs[1]]
        rest = [rem.fresh("j") for _ in tile.shape[1:]]
        with rem.block(f"for {', '.join(rest)} in T.grid({', '.join(map(str, tile.shape[1:]))}):") if rest \
                else contextlib.nullcontext():
            fixed = prog.sp.fixed(rem, tile.dtype, view, rem.elem(value, ["T.int64(0)", *rest]))  # the rows first
            rem.line(f"{tile.buf}[{', '.join([i, *rest])}] = {fixed}")
    em.counter = rem.counter
    prog.sp.allocs.extend(allocs)
    for line in rem.lines:  # mutable locals too are allocated once, at the top, and set where the serial code sets them
        var = _VAR.match(line)
        if var is None:
            em.lines.append(line)
            continue
        pad, name, dtype, init = var.groups()
        prog.sp.allocs.append(f"{name} = T.alloc_var({dtype})")
        if init is not None:
            em.lines.append(f"{pad}{name} = {init}")
    em.helpers.update(rem.helpers)


def _source(prog, rem, source, row: str) -> Lazy:
    """A source component or an operand, read whole from its view (the row's own row where it has the rows)."""
    graph = prog.graph
    if source.param is None:  # the indices of the source axis or of the rows
        if source.layout[0] == ROW:
            return Lazy(("1",), lambda idx: f"({row} + {as_index(idx[0])})")
        return Lazy((rem.extent(graph.extents[prog.plan.source].extent),), lambda idx: as_index(idx[0]))
    p = graph.params[source.param]
    view = prog.views[p.var]
    shape = rem.shape(source.node.outputs[0].type)
    batch = ["T.Cast('int64', bz)"] * (len(p.type.shape) - len(source.layout))  # the batch point

    def element(idx):
        at = [*batch, *((f"({row} + {as_index(x)})" if r == ROW else as_index(x)) for r, x in zip(source.layout, idx))]
        return prog.sp.read(rem, view, at)

    return Lazy(shape, element)
