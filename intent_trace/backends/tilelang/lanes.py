"""How a GPU target's threads of one block exchange values: the spelling the block programs (row groups, full
reductions, scans, histograms: :mod:`.cuda_rows`, :mod:`.cuda_reduce`, :mod:`.cuda_scan`, :mod:`.cuda_grid`) write
where CUDA and Metal differ, so one emitter serves both (:attr:`.spec.TileLangTarget.lanes`).

What the two have in common is written once by the emitters: a block's threads (``T.get_thread_binding()``), shared
(threadgroup) memory (``T.alloc_shared``), barriers (``T.sync_threads()``, which TileLang prints as
``__syncthreads()`` or ``threadgroup_barrier(mem_flags::mem_threadgroup)``) and 32 lanes a warp or simdgroup (every
NVIDIA GPU; every Apple GPU's SIMD-group). What differs is a value:

- ``shuffle(em, kind, value, step, dtype)``: lane ``l``'s read of lane ``l ^ step`` (``kind`` "xor") or ``l - step``
  ("up") of ``value``, a TIR ``dtype`` -- CUDA ``T.shfl_xor``/``T.shfl_up``; Metal has no TileLang shuffle, so a
  ``T.call_extern`` of a prelude helper over ``simd_shuffle_xor``/``simd_shuffle_up`` (:mod:`.metal_grid`);
- ``atomic_add(em, cell, value, dtype)``: one device or shared-memory atomic ``cell += value`` whose old value is
  not read (a histogram's counts) -- ``T.atomic_add`` where the target's atomics take the dtype, else a helper;
- ``repeat_writes``: whether threads may store the same bits to one element at once. A flat nest's threads past the
  end recompute and store the last element (no branch per element: :meth:`.emitter.TileLangEmitter._flat_loop`);
  CUDA's memory model gives the element that value, Metal's calls it a data race, so Metal's threads past the end
  skip their elements instead.
"""
from __future__ import annotations

from collections.abc import Callable

import attrs

WIDTH = 32  # lanes of a CUDA warp and of an Apple GPU's SIMD-group: the butterflies' width


@attrs.frozen(slots=True)
class Lanes:
    """A target's spelling of its lanes' exchanges (see the module docstring)."""

    shuffle: Callable  # (emitter, "xor" | "up", value expression, step: int, TIR dtype) -> expression
    atomic_add: Callable  # (emitter, "buffer[index]", value expression, TIR dtype) -> statement
    repeat_writes: bool = True
    width: int = WIDTH
