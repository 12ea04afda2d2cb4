"""The row program's NaN fast path (:mod:`.cuda_rows`): each row computed by fast helper bodies, a row with a NaN
output computed again by the careful ones.

The careful helpers decide every NaN result as x86 gives it (T3: an operation's first NaN operand quieted, the default
NaN for an invalid operation; f16/bf16 conversions keep NumPy's payload bits), a compare and a select per element
op: in a row kernel's hot loops they were most of the time (softmax f32 16384x1024 on an H100: 72.5 us with them,
52.3 us without; RMSNorm f16 55.5 -> 28.2 us with the conversions' NaN cases gone too). So, as the segmented fold's
tile program (:mod:`.cuda_region_nan`) and the f32 matmul on CUDA cores do, each tier computes the row with the fast
bodies (:func:`fast_helpers`: the IEEE operation alone, the vendor function alone, the hardware's f16/bf16
conversions) and raises a per-thread flag where a value it stores to the output, or a reduction result of the row,
is NaN (one compare each, on the f32 value before it is encoded). The row's threads combine the flag (a warp's
``__any_sync``, a block's ``__syncthreads_or``), and a row whose flag is set is computed again by the careful program
(the same emitter's code under the helper prefix :data:`CAREFUL_PREFIX`, today's bodies), overwriting its outputs.
Where no NaN occurs the careful code is a branch never taken.

Why this is exact: each fast/careful helper pair differs only in the payload of a NaN result (the same NaN-ness:
IEEE fixes it on both). So, by induction over the row's values, each is bitwise equal in both programs or NaN in
both -- provided no op's non-NaN result depends on a NaN operand's payload or sign (trait ``reads_nan_bits``:
:data:`~intent_trace.graph.traits.READS_NAN_BITS`, a bitcast); a graph holding one gets no fast path. Reductions
fold in the same order in both programs (the same code, the same tree), so if no stored value and no reduction result
is NaN, the fast row is the careful row bit for bit. A row that is recomputed reads its inputs again: a graph that
writes a view it reads gets no fast path.

Emulated (the C target, which has no fast bodies), the fast program's stored NaNs are made the hardware's canonical
NaN (``0x7FFFFFFF``), as :mod:`.cuda_region_nan` does, so the emulation gets the oracle's payloads from the
recomputation alone and a test of them fails without it. Metal keeps the careful program alone (no fast bodies).
"""
from __future__ import annotations

import contextlib

import attrs

from ... import types as T
from ...graph import traits
from ...graph.values import walk_region
from . import c, cuda
from .cuda_half_hardware import HARDWARE
from .cuda_region_tiles import CANONICAL, IS_NAN, fast_helpers
from .emitter import Lazy

#: False writes the careful program alone (main's program before the fast path: the A/B's baseline)
NAN_FAST_PATH = True
#: the helper prefixes: the fast program's, and the careful one's, which is every other code's of a plan with a fast
#: path (:func:`prefix`: the columns a block computes before its rows, ``it_`` there, named the fast helpers' careful
#: bodies, which the fast program then called: the f16 decode of RMSNorm's row kept its NaN case)
FAST_PREFIX, CAREFUL_PREFIX = "it_", "itr_"
_FLOATS = frozenset({"f16", "bf16", "f32"})
#: the combine of a row's flags over its threads: a warp's vote, a block's barrier with an OR
_ANY = {"warp": "{fn} int itn_any_warp(int f) {{ return __any_sync(0xffffffffu, f); }}",
        "block": "{fn} int itn_any_block(int f) {{ return __syncthreads_or(f); }}"}


def eligible(graph, group) -> bool:
    """Whether the row group may take the fast path: no op reads a NaN's bits into a non-NaN result, the write
    stores one float or integer tensor (its NaN-ness tested per element), and no view written is read (a
    recomputed row reads its inputs again)."""
    nodes = list(graph.walk())
    if any(n.op in traits.READS_NAN_BITS for n in nodes):
        return False
    value_t = group.write.inputs[1].type
    if getattr(value_t, "dtype", None) is None:
        return False
    written = {n.inputs[0] for n in nodes if n.op.effects & {"write"}}
    return not any(n.op.effects & {"read"} and n.inputs and n.inputs[0] in written for n in nodes)


def prefix(plan, default: str) -> str:
    """The helper prefix of the row emitter's code outside the fast program."""
    return CAREFUL_PREFIX if plan.nan_fast else default


def tier_fast(em) -> bool:
    """Whether the tier being written takes the fast path: every tier of a plan that has one, but a block's rows on
    chip whose write reads per-column values from memory (layer norm's weight and bias: there the careful copy
    beside the fast one made ptxas for sm_90a spill 8 bytes a thread at the 64-register bound; the warp's rows
    read them from the block's buffer, :mod:`.cuda_rows_columns`)."""
    plan = em.plan
    if not plan.nan_fast:
        return False
    return not (em.on_chip and em.width == plan.threads and plan.group.reads_columns)


def describe(plan) -> str:
    """The schedule's note of the fast path (``RowPlan.part``)."""
    but = ", not a block's rows on chip (they read per-column values)" if plan.slots and plan.group.reads_columns \
        else ""
    return f"a NaN fast path{but}: a row with a NaN output computed again by the careful program"


def fast_bodies(base):
    """``base`` (CUDA's ``helper_source``) with the row program's fast bodies: :func:`.cuda_region_tiles.fast_helpers`
    and the f16/bf16 decode, encode and widening cast without their NaN cases (the hardware's conversion alone)."""
    tiles = fast_helpers(base)

    def source(name, family, dtypes, ret, args):
        fn = cuda.DEVICE.function
        narrow = dtypes[0].name if dtypes else None
        if family in ("decode", "encode") and narrow in HARDWARE:
            hw = HARDWARE[narrow]
            body = (f"float {name}(uint16_t a) {{ return {hw.decoded('a')}; }}" if family == "decode" else
                    f"uint16_t {name}(float a) {{ return {hw.encoded('a')}; }}")
            return f"{hw.include}{fn} {body}"
        if family == "cast" and len(dtypes) == 2 and narrow in HARDWARE and dtypes[1].name == "f32":
            return f"{fn} float {name}(float a) {{ return a; }}"  # held as f32 already: only a NaN was quieted
        return tiles(name, family, dtypes, ret, args)
    return source


@attrs.define
class Fast:
    """The fast program being written: its flag's name and the qualifier of the helpers it defines."""

    flag: str
    fn: str
    emulated: bool


def _helper(em, name: str, text: str, fn: str) -> str:
    em.helpers.setdefault(name, text.format(fn=fn))
    return name


@contextlib.contextmanager
def _bodies(em, target, prefix: str):
    outer = em.target, em.helper_prefix
    em.target, em.helper_prefix = target, prefix
    try:
        yield
    finally:
        em.target, em.helper_prefix = outer


def run(em, region, params) -> list:
    """The row's program twice: fast, raising the flag, then, under the row's combined flag, careful."""
    plan = em.plan
    fn = c.C_SPELLING.function if plan.emulated else cuda.DEVICE.function
    fast_target = em.target if plan.emulated else \
        attrs.evolve(em.target, helper_source=fast_bodies(em.target.helper_source))
    em.fast = Fast(em.variable("int32", "0", "nan"), fn, plan.emulated)
    try:
        with _bodies(em, fast_target, FAST_PREFIX):
            em.run_by_level(region, params)
    finally:
        flag, em.fast = em.fast.flag, None
    if plan.emulated:  # the threads of the row ran one after another on the one flag
        any_ = flag
    else:
        scope = "warp" if em.width < plan.threads else "block"
        name = _helper(em, f"itn_any_{scope}", _ANY[scope], fn)
        any_ = em.assign(f"T.call_extern('int32', {name!r}, {flag})", "f")
    for node in walk_region(region):  # the careful program computes every value again
        if id(node) not in em.placed:
            for v in node.outputs:
                em.env.pop(v, None)
    em.loaded = set()
    with em.block(f"if {any_} != 0:"), _bodies(em, em.target, CAREFUL_PREFIX):
        _clear_slots(em)
        results = em.run_by_level(region, params)
    assert not results, "a row group's region returns nothing (its write is its effect)"
    return results


def _clear_slots(em) -> None:
    """Every slot zeroed where the careful program starts (on CUDA): it fills them again, but an edge chunk's under
    guards ptxas cannot match with the fast program's, so without this the fast program's slots stayed live to the
    careful one's reads (softmax's row and its exp at once: 1108 bytes of spills a thread). Never executed where no
    NaN comes."""
    if em.plan.emulated or not em.on_chip:
        return
    buffers = [*em.cache.values(), *em.raw.values(), *em.held_buffers.values(), *em.kept_buffers.values()]
    k = em.fresh("k")
    with em.block(f"for {k} in T.unroll({em.plan.slots}):"):
        for b in buffers:
            em.line(f"{b}[{k}] = T.Cast({em.slot_dtypes[b]!r}, 0)")


def reduced(em, acc_t, results: list) -> None:
    """The fast program's flag raised where a reduction result of the row is NaN."""
    fast = em.fast
    if fast is None:
        return
    for leaf, r in zip(T.leaf_types(acc_t), results):
        if leaf.dtype.name in _FLOATS:
            _raise(em, fast, r)


def _raise(em, fast, value: str) -> None:
    is_nan = _helper(em, "itr_is_nan", IS_NAN, fast.fn)
    em.line(f"{fast.flag} = {fast.flag} | T.call_extern('int32', {is_nan!r}, {value})")


def stored(em, write) -> contextlib.AbstractContextManager:
    """While the fast program's ``write`` is emitted: each element it stores tested for NaN (before it is encoded)
    and, emulated, a NaN made the hardware's canonical one."""
    fast, var = em.fast, write.inputs[1]
    if fast is None or var.type.dtype.name not in _FLOATS:
        return contextlib.nullcontext()
    return _tested(em, fast, var)


@contextlib.contextmanager
def _tested(em, fast, var):
    value = em.env[var]

    def elem(idx):
        v = em.elem(value, idx)
        if not v.isidentifier():
            v = em.assign(v, "w")
        _raise(em, fast, v)
        if fast.emulated:
            canonical = _helper(em, "itr_canonical", CANONICAL, fast.fn)
            return f"T.call_extern('float32', {canonical!r}, {v})"
        return v

    em.env[var] = Lazy(em.shape(var.type), elem)
    try:
        yield
    finally:
        em.env[var] = value
