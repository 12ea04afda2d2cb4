"""Blocks of one grid that wait for each other: an atomic ticket, release/acquire status flags and a fence, the
primitives of a one-kernel full reduction (:mod:`.cuda_reduce`: the last block to finish folds the partials) and of
a single-pass scan (:mod:`.cuda_scan_lookback`: decoupled look-back, Merrill & Garland 2016, CUB's ``DeviceScan``).

Both take their state from a workspace that starts at zero per call (``storage.Workspace(zeroed=True)``): word 0 is
the ticket, word ``1 + t`` the status of tile ``t`` (0 invalid, :data:`AGGREGATE`, :data:`INCLUSIVE`). The words are
int32 flags, whose values live in arrays of their own, or (``wide``) int64 words holding the flag in the high half
and a 32-bit value's bits in the low half: one store publishes both, one load reads both, so neither needs a fence.

On CUDA (:data:`CUDA_HELPERS`, device functions in the program's prelude):

- ``itg_ticket(&F[0])``: a relaxed ``atomicAdd`` -- the order in which blocks *start*, so every tile before a
  block's own has a block running it (forward progress whatever order the hardware schedules blocks in; a scan's
  values travel through the statuses, so the ticket orders nothing else);
- ``itg_ticket_acq_rel(&F[0])``: the same add, ``atom.acq_rel.gpu``: release orders the thread's stores before it (a
  full reduction's partial), acquire its reads after it (the last block's reads of the partials);
- ``itg_publish(&F[0], t, f)``: ``st.release.gpu`` of the flag, after the value it announces (release: the value's
  store is visible to whoever sees the flag);
- ``itg_wait(&F[0], j, ns)``: ``ld.relaxed.gpu`` of tile ``j``'s flag until it is not 0 (``j < 0``:
  :data:`INCLUSIVE`, the identity before the first tile), ``__nanosleep(ns)`` between polls when ``ns`` is not 0
  (a back-off: the spinning warps leave the L2 to the tiles' loads, CUB's delay constructors), then
  ``fence.acq_rel.gpu`` (the acquire pattern: one L1 invalidation after the wait, not one a poll as ``ld.acquire``
  gave, CCTL.IVALL in the spin loop's SASS); the values read after it are the ones published before the flag;
- ``itg_window(&F[0], j, ns)``: the same for a warp's window of 32 tiles, polled together until every lane up to
  the first holding INCLUSIVE has a flag (``itg_settled``: two ballots), so a lane past the nearest inclusive
  prefix, whose tile may not have published yet, holds nobody back (``itg_wait`` waits for all 32 lanes);
- wide words: ``itg_ticket64``, ``itg_publish64`` (``st.relaxed.gpu`` of the word), ``itg_wait64`` and
  ``itg_window64`` (``ld.relaxed.gpu`` until its flag half is set), no fence: the value travels in the word;
- ``itg_sleep(ns)``: ``__nanosleep``, before a look-back's first poll (its predecessors' stores reaching the L2
  meanwhile: CUB's ``L2WriteLatency``);
- ``itg_first(p)``: the first lane of the warp whose ``p`` holds (``__ballot_sync``), 32 if none;
- ``itg_fence()``: ``fence.acq_rel.gpu``, in each thread of the block whose ticket says every partial is stored,
  before it reads them (``__threadfence()`` is ``fence.sc``: MEMBAR.SC.GPU in the SASS, heavier than needed).

With ``emulated`` (the C target running the CUDA mapping) blocks run one after another in block order, which is
their ticket order, so each of these is the plain memory access it stands for and nothing waits: a look-back finds
every predecessor's inclusive prefix already published (its window loop is bounded by the tiles before it anyway).

Metal keeps the two-kernel programs: TileLang's Metal code generator gives relaxed 32-bit atomics and no
device-scope fence, and Metal does not promise that one threadgroup makes progress while another waits for it.
"""
from __future__ import annotations

AGGREGATE, INCLUSIVE = 1, 2  # a tile's status: its own total published, or the combine of it and all before it

CUDA_HELPERS = {
    "itg_ticket": "__device__ __forceinline__ int itg_ticket(int* f) { return atomicAdd(f, 1); }",
    "itg_ticket_acq_rel": ("__device__ __forceinline__ int itg_ticket_acq_rel(int* f) { int t; asm volatile(\"atom."
                           "acq_rel.gpu.global.add.u32 %0, [%1], 1;\" : \"=r\"(t) : \"l\"(f) : \"memory\"); return t; }"),
    "itg_fence": ("__device__ __forceinline__ int itg_fence() { asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); "
                  "return 0; }"),
    "itg_publish": ("__device__ __forceinline__ int itg_publish(int* f, long long t, int v) { "
                    "asm volatile(\"st.release.gpu.global.s32 [%0], %1;\" :: \"l\"(f + 1 + t), \"r\"(v) : \"memory\"); "
                    "return 0; }"),
    "itg_wait": ("__device__ __forceinline__ int itg_wait(int* f, long long j, int ns) { if (j < 0) return 2; int v; "
                 "for (;;) { asm volatile(\"ld.relaxed.gpu.global.s32 %0, [%1];\" : \"=r\"(v) : \"l\"(f + 1 + j) : "
                 "\"memory\"); if (v != 0) break; if (ns) __nanosleep(ns); } "
                 "asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); return v; }"),
    "itg_ticket64": ("__device__ __forceinline__ int itg_ticket64(int64_t* f) { "
                     "return (int)atomicAdd((unsigned long long*)f, 1ull); }"),
    "itg_publish64": ("__device__ __forceinline__ int itg_publish64(int64_t* f, long long t, int64_t w) { "
                    "asm volatile(\"st.relaxed.gpu.global.s64 [%0], %1;\" :: \"l\"(f + 1 + t), \"l\"(w) : \"memory\"); "
                    "return 0; }"),
    "itg_wait64": ("__device__ __forceinline__ int64_t itg_wait64(int64_t* f, long long j, int ns) { "
                   "if (j < 0) return (int64_t)2 << 32; int64_t w; for (;;) { asm volatile(\"ld.relaxed.gpu.global.s64 "
                   "%0, [%1];\" : \"=l\"(w) : \"l\"(f + 1 + j) : \"memory\"); if ((w >> 32) != 0) break; "
                   "if (ns) __nanosleep(ns); } return w; }"),
    # the window's statuses once every lane up to the nearest inclusive prefix has one (all 32 where none has):
    # a warp-wide poll, so a lane past that prefix whose tile has not published holds nobody back
    "itg_window": ("__device__ __forceinline__ int itg_window(int* f, long long j, int ns) { int v = 2; for (;;) { "
                   "if (j >= 0) asm volatile(\"ld.relaxed.gpu.global.s32 %0, [%1];\" : \"=r\"(v) : \"l\"(f + 1 + j) : "
                   "\"memory\"); if (itg_settled(v != 0, v == 2)) break; if (ns) __nanosleep(ns); } "
                   "asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); return v; }"),
    "itg_window64": ("__device__ __forceinline__ int64_t itg_window64(int64_t* f, long long j, int ns) { "
                     "int64_t w = (int64_t)2 << 32; for (;;) { if (j >= 0) asm volatile(\"ld.relaxed.gpu.global.s64 "
                     "%0, [%1];\" : \"=l\"(w) : \"l\"(f + 1 + j) : \"memory\"); "
                     "if (itg_settled((w >> 32) != 0, (w >> 32) == 2)) break; if (ns) __nanosleep(ns); } return w; }"),
    # lanes 0..k set, k the first lane holding an inclusive prefix (x ^ (x - 1): the bits up to x's lowest)
    "itg_settled": ("__device__ __forceinline__ bool itg_settled(bool set, bool inclusive) { "
                    "unsigned s = __ballot_sync(0xffffffffu, set), i = __ballot_sync(0xffffffffu, inclusive); "
                    "unsigned need = i ? i ^ (i - 1u) : 0xffffffffu; return (s & need) == need; }"),
    "itg_sleep": "__device__ __forceinline__ int itg_sleep(int ns) { __nanosleep(ns); return 0; }",
    "itg_first": ("__device__ __forceinline__ int itg_first(bool p) { unsigned b = __ballot_sync(0xffffffffu, p); "
                  "return b ? __ffs(b) - 1 : 32; }"),
}


class GridSync:
    """The primitives for one emitter (``em``: its ``line``/``assign``/``variable``/``helpers``), on CUDA or
    emulated. ``flags`` is the zeroed workspace's name (int32, or int64 ``wide``); ``backoff_ns`` the sleep
    between polls of a wait (0: spin)."""

    def __init__(self, em, flags: str, emulated: bool, wide: bool = False, backoff_ns: int = 0):
        self.em, self.flags, self.emulated, self.wide, self.backoff_ns = em, flags, emulated, wide, backoff_ns

    def _call(self, name: str, *args: str, dtype: str = "int32") -> str:
        if self.wide and name + "64" in CUDA_HELPERS:  # the ticket, publish and wait of 64-bit words
            name += "64"
        self.em.helpers.setdefault(name, CUDA_HELPERS[name])
        return f"T.call_extern({dtype!r}, {name!r}, {', '.join(args)})"

    def _base(self) -> str:
        return f"T.access_ptr({self.flags}[0], 'rw')"

    def ticket(self, ordered: bool = False) -> str:
        """A local holding this block's ticket (one thread's statement: the caller broadcasts it); ``ordered``:
        acq_rel, ordering this thread's stores before it and its reads after it."""
        if self.emulated:
            t = self.em.variable("int32", f"T.Cast('int32', {self.flags}[0])", "t")
            self.em.line(f"{self.flags}[0] = {self.flags}[0] + {'T.int64(1)' if self.wide else '1'}")
            return t
        name = "itg_ticket_acq_rel" if ordered else "itg_ticket"
        return self.em.variable("int32", self._call(name, self._base()), "t")

    def fence(self) -> None:
        if not self.emulated:
            self.em.line(f"T.evaluate({self._call('itg_fence')})")

    def publish(self, tile: str, status: str) -> None:
        """Tile ``tile``'s status: a flag, stored after the value it announces (stored by this thread before), or
        (wide) the word holding the flag and the value, in one store."""
        if self.emulated:
            self.em.line(f"{self.flags}[{tile} + T.int64(1)] = {status}")
        else:
            self.em.line(f"T.evaluate({self._call('itg_publish', self._base(), tile, status)})")

    def wait(self, tile: str, nearest: bool = False) -> str:
        """A local holding tile ``tile``'s status (its flag, or the wide word) once its flag is set (``tile < 0``:
        INCLUSIVE, value bits 0). ``nearest`` (all 32 lanes of a warp call it, a window of tiles): once the flags
        of every lane up to the first holding INCLUSIVE are set; a lane past it may hold an unset status."""
        dtype, before = ("int64", f"T.int64({INCLUSIVE << 32})") if self.wide else ("int32", str(INCLUSIVE))
        if self.emulated:  # blocks in ticket order: every earlier tile is done
            read = f"{self.flags}[T.max({tile}, T.int64(0)) + T.int64(1)]"
            return self.em.variable(dtype, f"T.if_then_else({tile} < T.int64(0), {before}, {read})", "f")
        if nearest:
            self.em.helpers.setdefault("itg_settled", CUDA_HELPERS["itg_settled"])  # before its caller
        name = "itg_window" if nearest else "itg_wait"
        return self.em.variable(dtype, self._call(name, self._base(), tile, str(self.backoff_ns), dtype=dtype), "f")

    def sleep(self, ns: int) -> None:
        """CUDA: this thread sleeps about ``ns`` nanoseconds (emulated: nothing, blocks run in turn)."""
        if not self.emulated:
            self.em.line(f"T.evaluate({self._call('itg_sleep', str(ns))})")

    def first(self, predicate: str) -> str:
        """CUDA: a local holding the first lane of the warp where ``predicate`` holds, 32 if none."""
        return self.em.variable("int32", self._call("itg_first", predicate), "k")
