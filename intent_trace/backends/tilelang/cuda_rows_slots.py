"""What a thread of a row group (:mod:`.cuda_rows`) holds on chip between the row's passes, and the occupancy that
leaves: the slots of the row's element reads, the computed sources its folds keep for later passes, how many
registers they take at once and how many blocks an SM can then hold.

A row that fits on chip is read into a thread's *slots* (registers: every slot loop is unrolled, so each index is
a constant) once; every later pass -- a level's fold, the final write -- reads them there, in chunks of
:data:`UNROLL` slots. A fold whose source a later pass uses again (softmax's ``exp(x - max)``, summed, then divided
by the sum) keeps each element in slots of its own. A pass that reads some slots for the last time and fills
others replaces them chunk by chunk (both parts of a chunk in one iteration of the pass's loop), so what a thread
holds at once is what it still has to read plus what it has filled, never both buffers whole
(:func:`live_registers`). From that the kernel asks ptxas for enough resident blocks (:func:`min_blocks`):
without the bound ptxas spent registers on scheduling freedom (softmax 71, log-softmax 86 a thread on sm_90a: 3
blocks of 256 an SM instead of 4, with no spill under the bound).
"""
from __future__ import annotations

from collections.abc import Callable

import attrs

from ... import types as T
from ...graph.traits import POINTWISE
from ...graph.values import Var, walk_region

UNROLL = 4  # elements a thread reads before it combines any (its reads in flight): a chunk of slots
#: A thread's registers for the row's elements it holds between passes: 32 f32 values, so rows of up to
#: 256 * 32 = 8192 f32 elements (4096 f64) are read from memory once.
CACHE_BYTES = 128
MAX_SLOTS = 32  # the unrolled slots per thread (each a register): more only lengthens the program
#: 32-bit registers of an SM (sm_70 to sm_90): the blocks it holds at once share them.
SM_REGISTERS = 65536
#: The registers a row kernel's thread uses beside its slots (the row's addresses and extents, the accumulators,
#: a chunk's temporaries, the exp's and the division's steps). Measured with ptxas for sm_90a: softmax (both
#: spellings), log-softmax, layer norm and RMSNorm f16 hold 32 registers of slots and fit 64 a thread with no
#: spills (softmax with 32 slots of ``x`` and 32 of ``exp`` both live to the write spilled at 64: :func:`min_blocks`
#: then asks for fewer blocks).
BESIDE_SLOTS = 32


@attrs.frozen(slots=True)
class Stored:
    """A row read loaded from its view's storage by the load phase itself: the slots the load fills, the load of the
    stored element at an index, and the decoding of the slots' bits to the value the passes read (f16, bf16: the
    bits are held until every load is issued) or None where the slots hold the values (a streaming load of them)."""

    bits: str
    cell: Callable
    decode: Callable | None = None


def streaming(dtype: str, cell: str) -> str:
    """CUDA's load of a row element into its slot: ``ld.global.cs`` (``__ldcs``, streaming: read once), which ptxas
    cannot issue again where the value is used. The read-only load (``ld.global.nc``, what nvcc makes of a
    ``const __restrict__`` view) it may: under register pressure ptxas dropped slots of the first chunk from the
    load phase and loaded them again in the fold, after the loads in flight had returned -- the row sum on sm_90a
    loaded 3 of its 16 slots a thread that way (one round trip to memory more per row; three in a row, each after
    the previous add, in the program measured at 0.71x torch; the program at 1.03x loaded every slot first, each
    load under its own guard). ``dtype`` is the view's stored TIR dtype (every one has an ``__ldcs``: bool is
    stored as uint8)."""
    return f"T.call_extern({dtype!r}, '__ldcs', T.access_ptr({cell}, 'r'))"


def read_key(node) -> tuple:
    """What a read reads: its view and index (``x[:, :]`` spelled twice is one value, held in one set of slots)."""
    return (node.inputs[0], node.attr("index"), tuple(node.inputs[1:]))


def distinct_reads(group) -> list:
    """The group's element reads, one per :func:`read_key`, in program order."""
    return list({read_key(n): n for n in reversed(group.element_reads)}.values())[::-1]


def _registers(t) -> int:
    """32-bit registers one slot of element type ``t`` takes (f16 and bf16 one each, as f32)."""
    return max(t.dtype.bits // 32, 1)


def slots(group) -> int:
    """Slots per thread for the element reads' values (a multiple of UNROLL within CACHE_BYTES; f16 and bf16
    are held as f32), 0 when not even one chunk fits: the row is then read from memory by every pass."""
    size = 0
    for node in distinct_reads(group):
        for t in T.leaf_types(node.outputs[0].type):
            size += 4 if t.dtype.name in ("f16", "bf16") else max(t.dtype.bits // 8, 1)
    if not size:
        return 0
    return min(MAX_SLOTS, CACHE_BYTES // size) // UNROLL * UNROLL


def _consumers(graph) -> dict:
    consumers: dict = {}
    for node in walk_region(graph.body):
        for x in node.inputs:
            if isinstance(x, Var):
                consumers.setdefault(x, []).append(node)
    return consumers


def _held_as(t):
    """The dtype a slot holds a value of ``t`` in (f16 and bf16 as f32: :func:`slots`)."""
    return T.f32 if t.dtype.name in ("f16", "bf16") else t.dtype


def applied(graph, group) -> dict:
    """The element reads whose one use is a unary pointwise op of the read alone, of the same slot dtype (RMSNorm's
    ``cast(x, f32)`` of an f16 row): ``id(read node) -> the op``. The load phase applies the op to the slots once
    (:mod:`.cuda_rows_load`) and every pass reads its value there, instead of computing it in each pass."""
    consumers, out = _consumers(graph), {}
    keys = [read_key(n) for n in group.element_reads]
    for read in group.element_reads:
        (value,) = read.outputs
        users = consumers.get(value, [])
        if keys.count(read_key(read)) != 1 or len(users) != 1:
            continue
        (op,) = users
        if op.op not in POINTWISE or op.regions or tuple(op.inputs) != (value,) or len(op.outputs) != 1:
            continue
        (before,), (after,) = T.leaf_types(value.type), T.leaf_types(op.outputs[0].type)
        if isinstance(after, T.TensorType) and _held_as(before) == _held_as(after):
            out[id(read)] = op
    return out


def held_sources(graph, group) -> dict:
    """The reductions whose source -- a computed element value, one leaf -- a later pass uses again (softmax's
    ``exp(x - max)``, summed, then divided by the sum): on chip the fold keeps each element in a slot, so the
    later passes read it instead of computing it again (its producers, an exp, run once per element). A read's
    :func:`applied` op is in the read's slots already.
    ``id(reduce node) -> the source``."""
    reads = {n.outputs[0] for n in group.element_reads} | {op.outputs[0] for op in applied(graph, group).values()}
    level = {id(n): k for n, k in zip(group.reductions, group.levels)}
    consumers = _consumers(graph)
    held, seen = {}, set()
    for node in group.reductions:
        source = node.inputs[0]
        if source in reads or source in seen or not isinstance(source.type, T.TensorType):
            continue
        if any(id(c) not in level or level[id(c)] != level[id(node)] for c in consumers.get(source, ())):
            held[id(node)] = source
            seen.add(source)
    return held


def _passes(graph, group, held_at: dict) -> dict:
    """``var -> the passes that compute its elements`` (pass k: the fold of the reductions of level k; the last, one
    past the highest level: the write). A held source is computed in its fold's pass and read from its slots
    after, so its producers run in that pass alone."""
    level = {id(n): k for n, k in zip(group.reductions, group.levels)}
    write = max(group.levels) + 1
    uses: dict = {}
    for node in reversed(list(walk_region(graph.body))):
        if node is group.write:
            passes, inputs = {write}, node.inputs[1:2]
        elif id(node) in level:
            passes, inputs = {level[id(node)]}, node.inputs[:1]
        else:
            passes, inputs = set().union(*(uses.get(v, ()) for v in node.outputs)), node.inputs
            for v in node.outputs:
                if v in held_at:
                    passes = {p for p in passes if p <= held_at[v]}
        for x in inputs:
            if isinstance(x, Var):
                uses.setdefault(x, set()).update(passes)
    return uses


def held_operands(graph, group) -> dict:
    """Values a fold computes on the way to its source -- pointwise, of the row's shape -- that a later pass uses
    again (log-softmax's ``x - max``, summed as ``exp(x - max)``, then written as ``x - max - log(sum)``; layer norm's
    ``x - mean``, squared and summed, then scaled): the fold keeps each element in a slot, so the later passes read
    it instead of computing it again. Held only where the slots held at once do not grow (:func:`live_registers`:
    the read it replaces is not used past it). ``id(reduce node) -> the values``."""
    reads = {n.outputs[0] for n in group.element_reads} | {op.outputs[0] for op in applied(graph, group).values()}
    level = {id(n): k for n, k in zip(group.reductions, group.levels)}
    sources = held_sources(graph, group)
    held_at = {var: level[key] for key, var in sources.items()}
    producer = {v: n for n in walk_region(graph.body) for v in n.outputs}
    out: dict = {}
    for node in group.reductions:
        source, p = node.inputs[0], level[id(node)]
        stack, seen = [source], set()
        while stack:
            var = stack.pop()
            made = producer.get(var)
            if var in seen or var in reads or made is None or made.op not in POINTWISE or made.regions:
                continue
            seen.add(var)
            stack.extend(x for x in made.inputs if isinstance(x, Var))
            if var is source or var in held_at or not isinstance(var.type, T.TensorType):
                continue
            if len(made.outputs) != 1 or var.type.shape != source.type.shape:
                continue
            uses = _passes(graph, group, held_at).get(var, set())
            if not uses or min(uses) != p or max(uses) <= p:
                continue
            if _peak(graph, group, 1, {**held_at, var: p}) <= _peak(graph, group, 1, held_at):
                held_at[var] = p
                out.setdefault(id(node), []).append(var)
    return {key: tuple(vs) for key, vs in out.items()}


def live_registers(graph, group, count: int) -> int:
    """The most registers a thread's slots (``count`` per buffer) hold at once (:func:`_peak`), with every held
    source and held operand."""
    level = {id(n): k for n, k in zip(group.reductions, group.levels)}
    held_at = {var: level[key] for key, var in held_sources(graph, group).items()}
    for key, values in held_operands(graph, group).items():
        held_at.update((v, level[key]) for v in values)
    return _peak(graph, group, count, held_at)


def _peak(graph, group, count: int, held_at: dict) -> int:
    """The most registers the slots hold at once where ``held_at`` (var -> the pass whose fold fills its slots) are
    held. Each buffer lives from the pass that fills it (the load, pass 0, for the reads; its fold's for a held
    value) to the last pass that reads it; within a pass the buffers it reads for the last time and those it starts
    to fill replace each other chunk by chunk (the larger of the two counts), the buffers read on past it are held
    whole."""
    if not count:
        return 0
    uses = _passes(graph, group, held_at)
    spans = []  # (first pass, last pass, registers)
    for node in distinct_reads(group):
        last = max((max(uses.get(n.outputs[0], {0})) for n in group.element_reads if read_key(n) == read_key(node)))
        spans.append((0, last, count * sum(map(_registers, T.leaf_types(node.outputs[0].type)))))
    for var, first in held_at.items():
        spans.append((first, max(uses.get(var, {first})), count * _registers(T.leaf_types(var.type)[0])))
    peak = 0
    for p in range(max(group.levels) + 2):
        through = sum(r for a, b, r in spans if a < p < b)
        ending = sum(r for a, b, r in spans if a < p == b)
        starting = sum(r for a, b, r in spans if a == p)
        peak = max(peak, through + max(ending, starting))
    return peak


def min_blocks(threads: int, held: int) -> int:
    """The blocks of ``threads`` an SM must hold at once (``__launch_bounds__``' second operand, which caps ptxas'
    registers a thread at SM_REGISTERS / (threads * blocks)) so that a thread keeps its ``held`` slot registers and
    BESIDE_SLOTS more; 0 where the row is not held on chip (no bound)."""
    return SM_REGISTERS // (threads * (held + BESIDE_SLOTS)) if held else 0
