"""tilelang-metal's parallel programs: the schedule's mappings, planned and written by the same planners and emitters
as tilelang-cuda's (:mod:`.cuda_kernels`, :mod:`.cuda_rows`, :mod:`.cuda_reduce`, :mod:`.cuda_scan`,
:mod:`.cuda_histogram`, :mod:`.cuda_scatter`), in Metal's spelling (:data:`LANES`), joined to the target in
:mod:`.targets`.

What TileLang 0.1.15's Metal code generator (``src/metal/codegen/codegen_metal.cc``) takes, and so what the programs
use: ``T.Kernel(blocks, threads=n)`` (threadgroups of ``n`` threads; ``max_total_threads_per_threadgroup(n)``),
``T.get_thread_binding()`` (``thread_position_in_threadgroup``; ``tx // 32`` becomes the simdgroup index),
``T.alloc_shared`` (``threadgroup`` arrays, merged into one byte buffer when there are several),
``T.sync_threads()`` (``threadgroup_barrier(mem_flags::mem_threadgroup)``), ``T.atomic_add`` on 32-bit integers
(``atomic_fetch_add_explicit`` on a ``reinterpret_cast`` atomic, device or threadgroup) and ``T.call_extern`` of
anything else. It has no ``T.shfl_*`` (``tl.shfl_xor_sync`` is an unresolved call) and no ``T.reduce``, so a
shuffle is a prelude helper over ``simd_shuffle_xor``/``simd_shuffle_up`` (:func:`shuffle_source`).

The butterflies shuffle and combine with the reduce's own combine helper rather than calling ``simd_sum`` or
``simd_max``: those have Metal's arithmetic, not the serial program's (``simd_max`` returns the non-NaN operand, a
sum's NaN payload is the GPU's), so the combine stays the one source of numerics (T10 lets a reduction re-associate,
never change its combine).

What Metal lacks, the planners here refuse, so those graphs keep the serial program (``exe.schedule`` says why):
atomics other than relaxed ones on 32-bit elements in a parallel loop or a scatter (:mod:`.metal_atomics`).
"""
from __future__ import annotations

from ... import types as T
from ...graph.values import walk_region
from . import cuda_kernels, cuda_region_carry, cuda_rows, cuda_scan, metal_atomics
from .cuda_gather import gather_plan
from .cuda_histogram import histogram_plan
from .cuda_scatter import scatter_plan
from .lanes import Lanes

# A shuffle of a TIR dtype: its Metal type and how it travels (simd_shuffle takes 32-bit scalars and float; smaller
# values, bool among them, widen to a 32-bit word; 64-bit values travel as two words).
_SHUFFLED = {"float32": ("float", None), "int32": ("int", None), "uint32": ("uint", None), "bool": ("bool", "int"),
             "int8": ("char", "int"), "int16": ("short", "int"), "uint8": ("uchar", "uint"),
             "uint16": ("ushort", "uint"), "int64": ("long", "uint2"), "uint64": ("ulong", "uint2")}


def shuffle_source(kind: str, dtype: str) -> tuple:
    """(name, definition) of the prelude helper shuffling a ``dtype`` value: lane ``l`` gets lane ``l ^ s``'s
    (``kind`` "xor") or ``l - s``'s ("up")."""
    t, word = _SHUFFLED[dtype]
    fn, name = f"simd_shuffle_{kind}", f"itm_shuffle_{kind}_{dtype}"
    if word is None:
        body = f"return {fn}(v, s);"
    elif word == "uint2":
        body = f"uint2 w = as_type<uint2>(v); return as_type<{t}>(uint2({fn}(w.x, s), {fn}(w.y, s)));"
    else:
        body = f"return ({t}){fn}(({word})v, s);"
    return name, f"static inline {t} {name}({t} v, ushort s) {{ {body} }}"


def _shuffle(em, kind: str, value: str, step: int, dtype: str) -> str:
    if dtype not in _SHUFFLED:
        raise em.reject(f"a simdgroup shuffle of {dtype} is not written for Metal")
    name, source = shuffle_source(kind, dtype)
    em.helpers.setdefault(name, source)
    return f"T.call_extern({dtype!r}, {name!r}, {value}, T.uint16({step}))"


_ADD64 = ("template <typename P, typename V> static inline int itm_atomic_add64(P p, V v) { "
          "return itb_atomic_add64(p, v); }")


def _atomic_add(em, cell: str, value: str, dtype: str) -> str:
    if dtype in ("int32", "uint32"):  # TileLang's: atomic_fetch_add_explicit, device or threadgroup
        return f"T.atomic_add({cell}, {value})"
    if dtype in ("int64", "uint64"):  # device memory: two 32-bit atomic adds (metal_atomics.ADD64)
        em.helpers.setdefault("itm_atomic_add64", _ADD64)
        return f"T.evaluate(T.call_extern('int32', 'itm_atomic_add64', T.access_ptr({cell}, 'rw'), {value}))"
    raise em.reject(f"an atomic add of {dtype} (Metal's atomics act on 32-bit words)")


LANES = Lanes(shuffle=_shuffle, atomic_add=_atomic_add, repeat_writes=False)


def claim_source() -> str:
    """``itc_claim(&E[0], code)``: the first thread whose check fails records it. The record's first word starts 0
    and codes are small positive integers, so a compare-and-swap of its low 32-bit word claims it (Metal has no
    64-bit compare-and-swap); a weak swap that fails spuriously (the word still 0) is tried again."""
    return ("static inline bool itc_claim(device long* e, long code) { device atomic_int* w = (device atomic_int*)e; "
            "int seen = 0; while (!atomic_compare_exchange_weak_explicit(w, &seen, (int)code, memory_order_relaxed, "
            "memory_order_relaxed)) { if (seen != 0) return false; } return true; }")


# --- the planners: CUDA's, less what Metal's atomics cannot do ------------------------------------------------

def flat_nest(graph):
    """CUDA's flat nest with element accesses: a 16-byte group's tail repeats the last element's store, a data race
    in Metal's memory model (lanes.repeat_writes), and its alignment test reads a pointer's bits."""
    return cuda_kernels.flat_nest(graph, grouped=False)


def row_group(graph):
    """CUDA's row group (:func:`.cuda_rows.row_plan`) without its launch bound: a threadgroup's registers are
    Metal's compiler's to choose."""
    return cuda_rows.row_plan(graph, bounded=False)


def multi_block(graph):
    """CUDA's full reductions and scans in their two-kernel forms: Metal's blocks cannot wait for each other
    (:mod:`.grid_sync`: relaxed 32-bit atomics only, no device-scope fence, no forward-progress promise)."""
    return cuda_scan.multi_block(graph, single_pass=False)


carried_lanes = cuda_region_carry.lane_plan  # one thread a lane: no atomics, no shuffles


def parallel_grid(graph):
    """The top-level parallel loop as a grid (:func:`.cuda_kernels.parallel_grid`), unless an atomic in it is one
    Metal cannot do at once in many threads (:func:`.metal_atomics.grid_refusal`)."""
    grid = cuda_kernels.parallel_grid(graph)
    return grid if grid is not None and _loop_refusal(grid) is None else None


def _loop_refusal(grid) -> str | None:
    return metal_atomics.grid_refusal([n for region in grid.node.regions for n in walk_region(region)])


def indexed_grid(graph):
    """A histogram's privatised grid (counts i32 or i64: :func:`_atomic_add`), a scatter's, when Metal's atomics
    do its combine: any combine on 32-bit elements, an integer add on 64-bit ones (metal_atomics.ADD64), or a row
    gather's (:mod:`.cuda_gather`: element copies, no atomics)."""
    plan = histogram_plan(graph)
    if plan is not None:
        return plan
    plan = scatter_plan(graph)
    if plan is not None:
        return plan if _scatter_refusal(plan) is None else None
    return gather_plan(graph)


def _scatter_refusal(plan) -> str | None:
    d = T.DTYPES[plan.scatter.dtype]
    if metal_atomics.native(d) or (plan.native and d.bits == 64):
        return None
    return f"a scatter's {plan.scatter.kind} on {d} elements (Metal has no {d.bits}-bit compare-and-swap)"


def refusal(graph) -> str | None:
    """Why tilelang-metal keeps ``graph`` serial where tilelang-cuda's planners give it a grid, or None: the only
    difference of the two targets' mappings is what Metal's atomics cannot do (:mod:`.metal_atomics`)."""
    grid = cuda_kernels.parallel_grid(graph)
    if grid is not None and _loop_refusal(grid) is not None:
        return f"its parallel loop has {_loop_refusal(grid)}"
    plan = scatter_plan(graph)
    return None if plan is None else _scatter_refusal(plan)
