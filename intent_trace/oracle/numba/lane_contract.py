"""A float contraction's short output rows in whole blocks of lanes, summed in registers (issue 19).

(Where this runs: f16/bf16 accumulators, and f32/f64 contractions inside a ``prange`` body on a machine whose BLAS
cannot be kept to one thread there, :mod:`.blas_threads`; elsewhere BLAS computes them.) The loop nests of
:mod:`.contract` accumulate each output row as ``row += x * rhs[k, :]`` over the reduced
positions ``k`` in order: every output element loaded, added to and stored again at every ``k``, a store-bound
loop where the row is short (attention's ``p @ v``: 64 outputs a row, 1024 reduced positions, 39 ms for B8 L1024
where NumPy's BLAS took 12.6). :func:`lane_row` holds each block of ``W`` outputs of such a row
(:data:`.lanes.LANES_BY_BITS`: 64 f32, 32 f64) in a register vector across the whole reduction
(:func:`~.lanes.lanes_axpy`: an ``fmul`` then an ``fadd`` per lane, never contracted) and stores it once, so every
output element is still its products summed from zero in reduction order with one rounding per product and per
sum: bit for bit the scalar loop's; the outputs after the row's last whole block are summed as that loop does.

Only rows of at most :data:`SHORT_ROW_BYTES`: a block's reduced loop reads the rhs a row (``N`` values) apart,
and for a long row those loads fall in a few L1 sets (at N = 1024 floats, 4 KiB apart, all in the same ones):
attention's ``q @ k.T`` (N = 1024) ran 2x slower so; copied into ``[N // W, K, W]`` panels first it ran 12%
faster than the row-streaming loop, but the copy cost ``attention_f16``'s first parallel-build call 1.1 CPU-s as a
generated loop nest and 0.6 as a second outlined helper (its limit is 5), so long rows keep the row-streaming loop:
``row[:] = 0; for k: row += x[k] * rhs[k, :]`` (outputs along the innermost loop, where LLVM vectorises it), run
here too, so a kernel's own code holds one call per contraction and no loop nest of its own (it was one per
contraction in every build of every kernel: 0.3 CPU-s of ``attention_f16``'s first parallel-build call).
This helper costs that call nothing measurable once it is in Numba's cache, and its own compile (about 0.3
CPU-s) the first time on a machine.

A runtime helper called through :func:`~.outlined_call.call_outlined`: compiled once per argument types and cached
on disk, never linked into and optimised again with every kernel that calls it.
"""
from __future__ import annotations

from numba import njit

from .bits import JIT_FLAGS
from .lanes import LANES_BY_BITS, lanes_axpy, lanes_fill, lanes_store

SHORT_ROW_BYTES = 1024  # 256 f32 or 128 f64 outputs: the rhs rows a block's loop reads lie 1 KiB apart at most
_W32, _W64 = LANES_BY_BITS[32], LANES_BY_BITS[64]  # (module constants: Numba freezes them into the code)


@njit(**JIT_FLAGS)
def lane_row(crow, arow, rhs, b, zero):
    """``crow[j] = sum over k in order of arow[k] * rhs[b, k, j]`` from ``zero``: a short row's whole blocks of W
    outputs in registers, the outputs after them (and every output of a long row) by the row-streaming loop
    (k outer). Every output is the same ordered sum either way."""
    n, nk = crow.shape[0], arow.shape[0]
    if n * crow.itemsize > SHORT_ROW_BYTES:
        # the streaming loop over whole rows, indexed from 0 (an offset index ``whole + j`` is not known
        # non-negative to LLVM: Numba's wraparound of a negative index made every load a gather, 6x slower)
        for j in range(n):
            crow[j] = zero
        for k in range(nk):
            x = arow[k]
            r = rhs[b, k]
            for j in range(n):
                crow[j] = crow[j] + x * r[j]
        return
    width = _W32 if crow.itemsize == 4 else _W64
    whole = n // width * width
    for q in range(n // width):
        v = lanes_fill(zero)
        for k in range(nk):
            v = lanes_axpy(v, arow[k], rhs[b, k], q * width)
        lanes_store(v, crow, q * width)
    for j in range(n - whole):
        crow[whole + j] = zero
    for k in range(nk):
        x = arow[k]
        for j in range(n - whole):
            crow[whole + j] = crow[whole + j] + x * rhs[b, k, whole + j]
