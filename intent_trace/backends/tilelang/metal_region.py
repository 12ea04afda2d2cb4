"""The segmented fold (:class:`~intent_trace.schedule.region.SegmentedFold`: flash attention and the other
``region_fold``s whose summary rows are independent) on tilelang-metal, as a tile program per block of rows.

The program is tilelang-cuda's (:mod:`.cuda_region`: derived from the fold's helpers node by node, the same plan, the
same element code, the same NaN-row recomputation by the serial program, :mod:`.cuda_region_nan`), written through
:class:`MetalSpelling`, which places the tiles where TileLang 0.1.15's Metal path can use them:

- **Products** are ``T.gemm`` of two threadgroup tiles (``GemmMetalSimdGroup``: ``simdgroup_load`` of 8 x 8
  operands and ``simdgroup_multiply_accumulate``, the threadgroup's simdgroups splitting the output), for f16,
  bf16 and f32 operands alike (Metal's f32 simdgroup product is a true f32 one, no TF32; FMA and any order inside
  a contraction: T10). Its result is a threadgroup tile too: a Metal fragment a ``T.gemm`` accumulates into becomes
  opaque ``simdgroup_float8x8`` matrices (``MetalFragmentToSimdgroup``) that element code cannot index, while a
  threadgroup result is ``simdgroup_store``d. The left operand, a fragment on CUDA, is a threadgroup tile too
  (Metal's ``T.gemm`` takes only two shared operands). One barrier follows each product: TileLang's barrier pass
  does not count a ``simdgroup_store`` as a write (:mod:`.metal_matmul` found that race first).
- **Row reductions** have no ``T.reduce_*`` on Metal: :meth:`MetalSpelling.reduce` is the simdgroup form, over a
  threadgroup tile: ``threads / block_M`` consecutive lanes a row, each folding a strided share of it, then
  ``simd_shuffle_xor`` butterflies (:mod:`.metal_grid`'s shuffle helpers) combining them with the serial program's
  add (``it_add_f32``), Metal's ``fmax``/``fmin`` where :mod:`~intent_trace.schedule.region_laws` proves a NaN
  operand harmless (as CUDA's ``T.reduce_max``), or an integer max/min of the ordered keys of the exact reduction
  (:mod:`.cuda_region_tiles`). A row's lanes lie in one simdgroup (``threads / block_M`` divides 32) and every lane
  takes part, so no shuffle is divergent.
- **Element code** runs in ``T.Parallel`` loops as on CUDA (TileLang's Metal pipeline has layout inference and
  partitions them over the threads); the wide running summary (attention's ``acc``) stays in a register fragment,
  per-row values (the summary's ``m`` and ``l``, a reduction's result) in threadgroup memory, since the reduction
  writes them from thread-level code. Computed threadgroup tiles are overwritten in place once dead (the scores,
  then ``p``, in the first product's tile), so the tiles fit Apple's 32 KiB of threadgroup memory: per head size the
  largest of :data:`SHAPES` that does (counted without TileLang's own reuse).
- **Shapes and threads.** ``T.gemm`` (``GemmMetalSimdGroup.lower``) splits a product's output among the simdgroups
  (``GemmWarpPolicy.compute_warp_partition``, ``m_warp * n_warp`` = simdgroups) in whole 8 x 8 matrices, so a
  product needs at least one 8 x 8 block of output per simdgroup: four simdgroups (128 threads) take 16 x 16 and up,
  and TileLang refuses 16 x 8 with them ("m_warp * n_warp must equal num_warps"). An f32 fold of head size 128 fits
  none of the 128-thread shapes (at 16 x 16 its q, K, V and product tiles are 8 KiB each: 42368 bytes counted, 34176
  in TileLang's own layout), so the last shape is 8 rows x 16 keys in two simdgroups (64 threads, each product split
  1 x 2): 29376 bytes counted, 25280 in TileLang's layout. (16 x 8 in two simdgroups, half the K/V reloads, is
  33664 bytes counted: it fits only in TileLang's layout, 25472, which places the staged output over the dead
  product tile; the count does not model that.)
- **Helpers** are the Metal target's own (:mod:`.metal`: ``metal::precise::exp``, ``exp2``, and ``fast::`` for
  ``approximate=True``; the x86 NaN-payload compare-and-select), not CUDA's bare ones, and a cast to f16 is the
  serial program's helper. The source loop is plain ``T.serial`` (no asynchronous copies on Metal); tile loads are
  ``T.Parallel`` loops reading clamped coordinates and ``0`` past the tensor, stores skip what lies past it, so no
  alignment is asked of any extent.
- **NaN outputs** are recomputed as on CUDA: a staged row holding a NaN is computed again by the serial program's
  element code inside the kernel, so NaN payloads are x86's whatever the simdgroup products and shuffles gave.
"""
from __future__ import annotations

from ... import types as T
from ...errors import LoweringError
from ...schedule import region as schedule_region
from . import c, metal_grid
from .cuda_region import TooLarge, specialization
from .cuda_region_tiles import Spelling, Tiling

THREADS = 128  # four simdgroups: Metal's T.gemm splits each product 2 x 2 among them
HEADS = (128, 64, 32, 16)  # head sizes with a program, as on CUDA
#: (block_M, block_N, threads) tried in order per head size; the first whose threadgroup tiles fit 32 KiB is the
#: program's. The last, two simdgroups of 8 x 16 tiles, is for f32 at head size 128 (the module docstring).
SHAPES = ((32, 32, THREADS), (16, 32, THREADS), (16, 16, THREADS), (8, 16, 64))
_TILE_TIR = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}  # a view's tiles (views in value dtypes)
THREADGROUP_BYTES = 32 * 1024  # threadgroup memory of every Apple GPU (MTLDevice.maxThreadgroupMemoryLength)
#: Metal's fmax/fmin: a NaN operand ignored (the cheap max/min, where region_laws proves it harmless)
_FMAX = {"max": "{fn} float itr_fmax(float a, float b) {{ return fmax(a, b); }}",
         "min": "{fn} float itr_fmin(float a, float b) {{ return fmin(a, b); }}"}


def specializations(graph, target) -> list:
    """The segmented-fold programs of ``graph`` on tilelang-metal, one per head size of :data:`HEADS` whose tiles fit
    (a fold without a free axis: one)."""
    plan = schedule_region.recognise(graph)
    if not isinstance(plan, schedule_region.SegmentedFold):
        return []
    out = []
    for head in HEADS if plan.free else HEADS[:1]:
        for block_m, block_n, threads in SHAPES:
            tiling = Tiling(head, block_M=block_m, block_N=block_n, threads=threads)
            try:
                out.append(specialization(graph, target, plan, tiling, MetalSpelling))
                break
            except TooLarge:
                continue  # smaller tiles may fit
            except LoweringError:
                return []  # an op the element code cannot place here: the general program
    return out


class MetalSpelling(Spelling):
    """The segmented fold's tile primitives in TileLang's Metal spelling (see the module docstring)."""

    dialect = c.Spelling(function="static inline", static="static inline", table="constant", clz="clz")
    note = " on Metal (simdgroup matrices)"
    shared_limit = THREADGROUP_BYTES
    tma = False
    fast_bodies = hardware_casts = False
    stage_in_place = reuse_shared = True
    product_scope = reduced_scope = "shared"
    masked_skip = False  # the skip's finiteness pass is a second kernel: TileLang's Metal runtime launches one
    overlap = False  # no asynchronous product on Metal (simdgroup matrices complete when issued)

    def __init__(self, em, tiling: Tiling):
        super().__init__(em, tiling)
        self._thread = None
        self._locals: dict = {}

    @staticmethod
    def pipelined(f32: bool) -> str:
        operands = "f32 operands, FMA" if f32 else "f16/bf16 operands, f32 accumulation"
        return f"source blocks through threadgroup memory, products T.gemm on simdgroup matrices ({operands})"

    @staticmethod
    def left_scope(simt: bool) -> str:
        return "shared"  # Metal's T.gemm takes two threadgroup operands

    @staticmethod
    def place(shape: tuple, scope: str) -> str:
        """Per-row values live in threadgroup memory: the reductions write them from thread-level code, and every
        thread reading a row's elements reads them."""
        return "shared" if scope == "fragment" and len(shape) == 1 else scope

    def source_loop(self, var: str, count: str, start: str | None = None) -> str:
        return f"for {var} in T.serial({start + ', ' if start is not None else ''}{count}):"

    # -- memory: element by element, in 32-bit coordinates (every operand stays under 2**31 elements) ----------
    index, one = "{}", "1"

    def load(self, tile: str, view, axes: list) -> None:
        names, loop = self._tile_loop(axes)
        with loop:
            coords, inside = self._coords(axes, names)
            zero = self.narrow_pad(_TILE_TIR[view.dtype.name], "T.float32(0)")
            self.em.line(f"{tile}[{', '.join(names)}] = T.if_then_else({inside}, "
                         f"{view.name}[{', '.join(coords)}], {zero})")

    def store(self, tile: str, view, axes: list) -> None:
        names, loop = self._tile_loop(axes)
        with loop:
            coords, inside = self._coords(axes, names)
            with self.em.block(f"if {inside}:"):
                self.em.line(f"{view.name}[{', '.join(coords)}] = {tile}[{', '.join(names)}]")

    @staticmethod
    def narrow_pad(dtype: str, pad: str) -> str:
        """A tile's padding in its dtype. A bfloat zero is its bits: TVM's Metal code generator prints a bfloat
        constant with the half suffix (``0.000000e+00h``), which Metal does not convert to bfloat implicitly."""
        if dtype == "bfloat16":
            if pad != "T.float32(0)":  # only a product pads a bf16 tile (its operand), with 0
                raise LoweringError(f"a bf16 tile padded with {pad}")
            return "T.reinterpret(T.uint16(0), 'bfloat16')"
        return pad if dtype == "float32" else Spelling.narrow_pad(dtype, pad)

    # -- compute ------------------------------------------------------------------------------------------
    def gemm(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple) -> None:
        flags = (", transpose_A=True" if trans_a else "") + (", transpose_B=True" if trans_b else "")
        self.em.line(f"T.gemm({a}, {b}, {out}{flags}, clear_accum=True)")
        self.em.line("T.sync_threads()  # the simdgroup_stores done before any thread reads the product")

    simt_gemm = gemm  # f32 simdgroup matrices are f32 products (no TF32 on Metal)

    def thread(self) -> str:
        """The thread's index in its threadgroup (bound once, at the top of the kernel)."""
        if self._thread is None:
            self._thread = self.em.fresh("tx")
            self.allocs.append(f"{self._thread} = T.get_thread_binding()")
        return self._thread

    def local(self, dtype: str) -> str:
        """A one-element local of ``dtype`` (allocated once, at the top of the kernel)."""
        if dtype not in self._locals:
            name = self._locals[dtype] = self.em.fresh("racc")
            self.allocs.append(f"{name} = T.alloc_local((1,), {dtype!r})")
        return self._locals[dtype]

    def reduce(self, kind: str, src: str, out: str, shape: tuple, clear: bool, dtype: str = "float32") -> None:
        """``out[i] = kind(out[i] if not clear, src[i, :])`` by the simdgroup form (the module docstring): a row's
        ``lanes`` lanes fold its columns ``lane, lane + lanes, ...`` in turn, then butterflies combine them."""
        m, n = shape
        lanes = self.t.threads // m
        if self.t.threads % m or lanes > 32 or lanes & (lanes - 1) or n % lanes:
            raise LoweringError(f"a row reduction of a {m} x {n} tile by {self.t.threads} threads")
        em = self.em
        if dtype == "int32":
            step = lambda a, b: f"T.max({a}, {b})" if kind == "max" else f"T.min({a}, {b})"  # noqa: E731
        else:
            if kind == "sum":
                name = em.helper("add", (T.f32,), T.f32, (T.f32, T.f32))
            else:
                name = self.helper(f"itr_f{kind}", _FMAX[kind])
            step = lambda a, b: f"T.call_extern('float32', {name!r}, {a}, {b})"  # noqa: E731
        tx, acc = self.thread(), self.local(dtype)
        row, lane = f"{tx} // {lanes}", f"{tx} % {lanes}"
        em.line(f"{acc}[0] = {src}[{row}, {lane}]")
        if n > lanes:
            col = em.fresh("rc")
            with em.block(f"for {col} in T.serial(1, {n // lanes}):"):
                em.line(f"{acc}[0] = {step(f'{acc}[0]', f'{src}[{row}, {col} * {lanes} + {lane}]')}")
        s = lanes // 2
        while s:
            em.line(f"{acc}[0] = {step(f'{acc}[0]', metal_grid.LANES.shuffle(em, 'xor', f'{acc}[0]', s, dtype))}")
            s //= 2
        with em.block(f"if {lane} == 0:"):
            start = self.init_of(kind) if clear else f"{out}[{row}]"  # cleared: T.reduce_*'s start (+0, -inf, inf)
            em.line(f"{out}[{row}] = {step(start, f'{acc}[0]')}")
        em.line("T.sync_threads()  # the row's result written before any thread reads it")
