"""The tile primitives of the segmented-fold program (:mod:`.cuda_region`), spelled for tilelang-cuda or emulated on the
C target.

On CUDA they are TileLang's own: shared tiles loaded and stored with ``T.copy`` (bounds-predicated: a tile past the
tensor reads zeros and stores nothing there), register fragments, ``T.Parallel`` element loops whose thread layout
TileLang infers from the fragments, ``T.gemm`` on tensor cores, ``T.reduce_*`` and ``T.Pipelined``. Emulated (the
C target: tests and ``tools/pytest_plugins``), every tile is a local buffer of float32 values (f16/bf16 held rounded,
as the shared lowering holds them), each primitive a loop nest that computes what the CUDA one does: zero-filled
loads past the tensor, stores clipped to it, the product of a ``T.gemm`` in ascending k (f16 products are exact in
f32: any order is within T5), a tile max or min that ignores NaN operands as CUDA's ``fmaxf`` does, sums in order.

The exact max/min (when :mod:`intent_trace.schedule.region_laws` cannot prove the cheap one harmless) reduces
ordered integer keys: ``itk_key_max(x)`` maps every float to an int32 whose order is IEEE 754-2019 maximum's (-0 <
+0) and every NaN above +inf (``itk_key_min``: below -inf), so an integer max picks the result ``maximum`` gives;
``itk_unkey`` maps it back. Both spellings run the same helpers.
"""
from __future__ import annotations

import math

import attrs

from . import c, cuda
from .cuda_half_hardware import HARDWARE
from .dialect import decode, encode
from .emitter import Lazy

#: NVIDIA arithmetic's NaN for a NaN ``x`` (the emulation's staged outputs, :meth:`Emulated.hardware_nans`)
CANONICAL = "{fn} float itr_canonical(float x) {{ return x != x ? itb_f32(0x7fffffffu) : x; }}"
#: 1 where ``x`` is a NaN (a NaN output recomputed: an extern call, as TVM's simplifier takes ``x != x`` for false)
IS_NAN = "{fn} int itr_is_nan(float x) {{ return x != x; }}"
#: 1 where ``x`` is an infinity or a NaN (the exponent bits all ones; :mod:`.cuda_region_skip`'s finiteness flags)
NONFINITE = "{fn} int itr_nonfinite(float x) {{ return (itb_bits32(x) & 0x7f800000u) == 0x7f800000u; }}"

#: The key helpers, spelled for a target's dialect (``{fn}``: its qualifier for a helper TVM calls).
_KEYS = (
    "{fn} int32_t itk_key_max(float x) {{ if (x != x) return 2147483647; int32_t b = (int32_t)itb_bits32(x); "
    "return b < 0 ? (b ^ 2147483647) : b; }}",
    "{fn} int32_t itk_key_min(float x) {{ if (x != x) return -2147483647 - 1; int32_t b = (int32_t)itb_bits32(x); "
    "return b < 0 ? (b ^ 2147483647) : b; }}",
    "{fn} float itk_unkey(int32_t k) {{ return itb_f32((uint32_t)(k < 0 ? (k ^ 2147483647) : k)); }}",
)
#: CUDA's ``fmaxf``/``fminf`` (a NaN operand ignored unless both are NaN), for the emulated tile max/min.
_FMAX = ('{fn} float itr_fmax(float a, float b) {{ return fmaxf(a, b); }}',
         '{fn} float itr_fmin(float a, float b) {{ return fminf(a, b); }}')
_RAW = frozenset({"add", "sub", "mul", "div", "fma"})
_INIT = {"max": "-T.infinity('float32')", "min": "T.infinity('float32')", "sum": "T.float32(0)"}
_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int32": 4}


@attrs.frozen
class Tiling:
    """The program's tiles: ``block_M`` rows of the summary per program, the source in blocks of ``block_N``, the free
    axes of ``head`` elements, ``stages`` of the pipelined source loads, ``threads`` per block."""

    head: int
    block_M: int = 128
    block_N: int = 128
    stages: int = 1
    threads: int = 256


#: The ping-pong's turns (:meth:`Spelling.turn`): named barrier ``8 + w`` is consumer warpgroup ``w``'s turn, its
#: 128 threads wait there (``bar.sync``) and the other's 128 arrive (``bar.arrive``). Written on the hardware thread
#: index (``w`` = bit 7 of ``threadIdx.x``): TileLang's warp specialisation puts its producer warpgroup first and
#: keeps the consumers' ``threadIdx`` (128..383), and an expression in the program would be simplified on the
#: declared 256 threads, and a barrier call ahead of the products moved to the producer (its loop-prefix rule);
#: an opaque call stays where it is. TileLang's own partial syncs take the low ids (3 and 4 here), 0 is
#: ``__syncthreads``.
TURN = ('{fn} int itp_turn(int later) {{ int w = (threadIdx.x >> 7) & 1; '
        'if (later || w == 0) asm volatile("bar.sync %0, 256;" :: "r"(8 + w) : "memory"); return 0; }}',
        '{fn} int itp_pass_turn(int more) {{ int w = (threadIdx.x >> 7) & 1; '
        'if (more || w == 1) asm volatile("bar.arrive %0, 256;" :: "r"(9 - w) : "memory"); return 0; }}')


class Spelling:
    """The CUDA spelling; :class:`Emulated` overrides what differs. ``em`` is the shared emitter writing the lines.

    The class attributes say what the program (:mod:`.cuda_region`) does around the primitives, per target."""

    emulated = False
    dialect = cuda.DEVICE
    language = "tilelang.language"  # the module the program imports as T
    note = ""  # added to the program's first comment line
    extent_dtype = "int32"  # the dynamic extents' dtype
    shared_limit = 227 * 1024  # a block's shared memory (an sm_90 block's)
    tma = True  # tile copies are TMA copies: rows of whole 16-byte units (cuda_access.tma_rows)
    fast_bodies = True  # the element code's f32 ops and vendor functions without the x86-NaN decision (fast_helpers)
    value_views = True  # views declared in their value dtypes (f16 as float16), not their storage dtypes
    hardware_casts = True  # a tile of a cast to f16/bf16 rounds by the tile's own conversion (RNE)
    stage_in_place = False  # outputs staged straight into their shared tile (else through a fragment and T.copy)
    reuse_shared = False  # a computed shared tile may be overwritten in place once its readers are dead
    product_scope = "fragment"  # where a product's result lives
    reduced_scope = "fragment"  # where a row reduction's source lives
    masked_skip = True  # source blocks a coordinate mask empties are skipped (cuda_region_skip: a second kernel)
    overlap = True  # a block's second product may overlap the next block's element work (cuda_region_overlap)

    @staticmethod
    def pipelined(f32: bool) -> str:
        """The schedule's note on the source loop and the products."""
        cores = "CUDA cores (f32: FMA)" if f32 else "T.gemm on tensor cores"
        return f"T.Pipelined source loads, products on {cores}"

    @staticmethod
    def left_scope(simt: bool) -> str:
        """Where a product's left operand lives: f16/bf16 in a register fragment (``T.gemm`` reads it there), f32
        in shared memory (the product on CUDA cores)."""
        return "shared" if simt else "fragment"

    @staticmethod
    def place(shape: tuple, scope: str) -> str:
        """Where a computed tile the program asks for in ``scope`` lives (on CUDA: there)."""
        return scope

    def __init__(self, em, tiling: Tiling):
        self.em, self.t = em, tiling
        self.allocs: list = []
        self.shared_bytes = 0  # what the block's shared tiles take (an sm_90 block has 227 KiB)

    # -- buffers ----------------------------------------------------------------------------------------
    def tile_dtype(self, tir: str) -> str:
        """The buffer dtype of a tile of values of TIR dtype ``tir`` ('float16' stays itself on CUDA)."""
        return tir

    def alloc(self, prefix: str, shape: tuple, dtype: str, scope: str) -> str:
        name = self.em.fresh(prefix)
        kind = {"shared": "alloc_shared", "fragment": "alloc_fragment"}[scope]
        if scope == "shared":
            self.shared_bytes += math.prod(shape) * _BYTES[dtype]
        self.allocs.append(f"{name} = T.{kind}(({', '.join(map(str, shape))},), {dtype!r})")
        return name

    def element(self, buf: str, dtype: str, idx) -> str:
        """A tile element as the shared emitter holds values (f16/bf16 as float32)."""
        at = f"{buf}[{', '.join(idx)}]"
        return f"T.Cast('float32', {at})" if dtype in ("float16", "bfloat16") else at

    def stored(self, dtype: str, expr: str) -> str:
        """``expr`` (a value as the emitter holds it) as stored in a tile of ``dtype``."""
        return f"T.Cast({dtype!r}, {expr})" if dtype in ("float16", "bfloat16") else expr

    @staticmethod
    def narrow_pad(dtype: str, pad: str) -> str:
        """The padding ``pad`` (a float32 expression) in a tile of f16/bf16 ``dtype``."""
        return f"T.Cast({dtype!r}, {pad})"

    def helper(self, name: str, text: str) -> str:
        self.em.helpers.setdefault(name, text.format(fn=self.dialect.function))
        return name

    # -- loops --------------------------------------------------------------------------------------------
    def parallel(self, names: list, shape: tuple) -> str:
        return f"for {', '.join(names)} in T.Parallel({', '.join(map(str, shape))}):"

    def source_loop(self, var: str, count: str, start: str | None = None, stages: int = 1) -> str:
        """The loop over the source's blocks ``[start, count)`` (from 0 without ``start``), at least ``stages``
        stages of its loads."""
        bounds = f"{start}, {count}" if start is not None else count
        return f"for {var} in T.Pipelined({bounds}, num_stages={max(self.t.stages, stages)}):"

    def kernel(self, blocks: list, prelude: str | None, names: tuple = ("bx", "bz")) -> tuple:
        """(the launch line, the lines that name the block coordinates ``names``); ``prelude`` None: none (a
        program's helpers are given once, to its first kernel: TileLang writes each kernel's prelude into the one
        source). A program of several kernels names each one's coordinates apart (TileLang's builder keeps a name
        bound to the kernel that bound it first)."""
        bound = f"({names[0]}, {names[1]})" if len(blocks) == 2 else names[0]
        return (f"with T.Kernel({', '.join(blocks)}, threads={self.t.threads}{_prelude(prelude)}) as {bound}:", [])

    # -- memory -------------------------------------------------------------------------------------------
    # ``axes``: per view axis, ``("point", expr)`` or ``("tile", first, size, extent)``: the tile's axes in order,
    # from view coordinate ``first``, ``size`` long, zero past ``extent`` (loads) or clipped there (stores).
    def load(self, tile: str, view, axes: list) -> None:
        self.em.line(f"T.copy({view.name}[{', '.join(a[1] for a in axes)}], {tile})")

    def store(self, tile: str, view, axes: list) -> None:
        self.em.line(f"T.copy({tile}, {view.name}[{', '.join(a[1] for a in axes)}])")

    # element by element (the emulation's and Metal's loads and stores; CUDA's are T.copy): ``index`` casts an index
    # expression to the coordinates' integer type, ``one`` is 1 in it
    index, one = "T.Cast('int64', {})", "T.int64(1)"

    def _tile_loop(self, axes: list):
        names = [self.em.fresh("e") for a in axes if a[0] == "tile"]
        return names, self.em.block(self.parallel(names, tuple(a[2] for a in axes if a[0] == "tile")))

    def _coords(self, axes: list, names: list) -> tuple:
        """The clamped view coordinates of a tile element and whether it is inside the view."""
        coords, inside, k = [], [], 0
        for a in axes:
            if a[0] == "point":
                coords.append(a[1])
                continue
            _, first, _, extent = a
            at = f"{self.index.format(first)} + {self.index.format(names[k])}"
            coords.append(f"T.min({at}, {self.index.format(extent)} - {self.one})")
            inside.append(f"{at} < {self.index.format(extent)}")
            k += 1
        return coords, " and ".join(inside) or "True"

    # -- compute ------------------------------------------------------------------------------------------
    def gemm(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple) -> None:
        flags = (", transpose_A=True" if trans_a else "") + (", transpose_B=True" if trans_b else "")
        self.em.line(f"T.gemm({a}, {b}, {out}{flags}, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)")

    def gemm_async(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple, clear: bool) -> None:
        """``T.gemm`` issued without its wait (Hopper's ``wgmma``): ``out`` is not read or written by the threads
        until a :meth:`wait` has seen it complete; ``clear`` False accumulates into ``out``."""
        flags = (", transpose_A=True" if trans_a else "") + (", transpose_B=True" if trans_b else "")
        self.em.line(f"T.wgmma_gemm({a}, {b}, {out}{flags}, clear_accum={clear}, policy=T.GemmWarpPolicy.FullRow)")

    def wait(self, pending: int) -> None:
        """Until at most ``pending`` of the issued products are running (they complete in the order issued)."""
        self.em.line(f"T.wait_wgmma({pending})")

    def turn(self, later: str) -> None:
        """Wait, at a block after the first (``later``) or always in the second consumer warpgroup, until the other
        warpgroup has issued its products: FlashAttention-3's ping-pong, one warpgroup's products on the tensor
        cores while the other's element work runs (:data:`TURN`)."""
        name = self.helper("itp_turn", TURN[0])
        self.em.line(f"T.evaluate(T.call_extern('int32', {name!r}, T.Cast('int32', {later})))")

    def pass_turn(self, more: str) -> None:
        """Give the other consumer warpgroup its turn (arrive, not wait), except in the second warpgroup at the last
        block (``more`` false): every wait of :meth:`turn` has its one arrive."""
        name = self.helper("itp_pass_turn", TURN[1])
        self.em.line(f"T.evaluate(T.call_extern('int32', {name!r}, T.Cast('int32', {more})))")

    def hold(self, tiles: list) -> None:
        """A read of the loop's shared ``tiles``: TileLang releases a pipelined stage's buffers to its producer after
        their last read in the iteration, and cannot see an asynchronous product's; this read is after its wait."""
        name = self.em.fresh("hold")
        self.allocs.append(f"{name} = T.alloc_local((1,), 'float32')")
        self.em.line(f"{name}[0] = {' + '.join(self.element(t, 'float16', ['0', '0']) for t in tiles)}")

    def simt_gemm(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple) -> None:
        """An f32 product on CUDA cores (never ``T.gemm``: tensor cores would make it TF32): each output element a
        thread's, its products added in ascending k with fused multiply-adds (T10), from shared operand tiles."""
        m, n, k = shape
        em = self.em
        i, j, kk = em.fresh("gi"), em.fresh("gj"), em.fresh("gk")
        x = f"{a}[{kk}, {i}]" if trans_a else f"{a}[{i}, {kk}]"
        y = f"{b}[{j}, {kk}]" if trans_b else f"{b}[{kk}, {j}]"
        with em.block(self.parallel([i, j], (m, n))):
            em.line(f"{out}[{i}, {j}] = T.float32(0)")
            with em.block(f"for {kk} in T.serial({k}):"):
                em.line(f"{out}[{i}, {j}] = T.call_extern('float32', 'fmaf', {x}, {y}, {out}[{i}, {j}])")

    def reduce(self, kind: str, src: str, out: str, shape: tuple, clear: bool, dtype: str = "float32") -> None:
        """``out[i] = kind(out[i] if not clear, src[i, :])`` (a tile max or min ignores NaN operands)."""
        self.em.line(f"T.reduce_{kind}({src}, {out}, dim=1, clear={clear})")

    def reduce_vector(self, kind: str, src: str, out: str, n: int, clear: bool) -> None:
        """``out[0] = kind(out[0] if not clear, src[:])`` over a fragment of ``n`` values."""
        self.em.line(f"T.reduce_{kind}({src}, {out}, dim=0, clear={clear})")

    def init_of(self, kind: str) -> str:
        return _INIT[kind]

    # -- NaN rows recomputed by the serial program (:mod:`.cuda_region_nan`; ``em``: its row emitter) ---------
    def barrier(self) -> None:
        """The block's threads wait for one another (TileLang makes it the consumer threads' barrier)."""
        self.em.line("T.sync_threads()")

    def hardware_nans(self, value):
        """An output's value as the tile program stages it (on CUDA: as computed, NaNs the hardware's)."""
        return value

    def read(self, em, view, at: list) -> str:
        """A view element as the serial program reads it: f16/bf16 by their bits (the view is declared in its value
        dtype for the tile copies; a conversion instruction would not keep a NaN's payload)."""
        if view.dtype.name not in ("f16", "bf16"):
            return f"{view.name}[{', '.join(at)}]"
        bits = f"T.reinterpret({view.name}[{', '.join(at)}], 'uint16')"
        return decode(em, attrs.evolve(view, storage="uint16"), bits)

    def fixed(self, em, dtype: str, view, value: str) -> str:
        """A recomputed value as a staged tile of ``dtype`` holds it (f16/bf16: the serial program's bits)."""
        if dtype not in ("float16", "bfloat16"):
            return value
        return f"T.reinterpret({encode(em, attrs.evolve(view, storage='uint16'), value)}, {dtype!r})"

    def keys(self) -> tuple:
        """The names of the exact key helpers (defined in the prelude)."""
        return tuple(self.helper(text.split("(")[0].split()[-1], text) for text in _KEYS)


class Emulated(Spelling):
    """The same program on the C target: tiles are local float32 buffers, primitives loop nests."""

    emulated = True
    dialect = c.C_SPELLING
    note = ", the CUDA program emulated"
    extent_dtype = "int64"
    fast_bodies = value_views = hardware_casts = False
    stage_in_place = True

    def tile_dtype(self, tir: str) -> str:
        return "float32" if tir in ("float16", "bfloat16") else tir

    def alloc(self, prefix: str, shape: tuple, dtype: str, scope: str) -> str:
        name = self.em.fresh(prefix)
        if scope == "shared":  # counted as CUDA's would be: the same head sizes get programs
            self.shared_bytes += math.prod(shape) * _BYTES[dtype]
        self.allocs.append(f"{name} = T.alloc_local(({', '.join(map(str, shape))},), {self.tile_dtype(dtype)!r})")
        return name

    def element(self, buf: str, dtype: str, idx) -> str:
        return f"{buf}[{', '.join(idx)}]"

    def stored(self, dtype: str, expr: str) -> str:
        return expr

    def barrier(self) -> None:
        pass  # the threads run one after another

    def hardware_nans(self, value):
        """NaNs made NVIDIA arithmetic's canonical one, as the CUDA program's would be (tests of the payloads then
        fail unless the recomputation gives them)."""
        name = self.helper("itr_canonical", CANONICAL)
        return Lazy(value.shape, lambda idx: f"T.call_extern('float32', {name!r}, {self.em.elem(value, idx)})")

    def read(self, em, view, at: list) -> str:
        return decode(em, view, f"{view.name}[{', '.join(at)}]")

    def fixed(self, em, dtype: str, view, value: str) -> str:
        return value  # tiles hold f16/bf16 values as floats; the store encodes them

    def parallel(self, names: list, shape: tuple) -> str:
        return f"for {', '.join(names)} in T.grid({', '.join(map(str, shape))}):"

    def source_loop(self, var: str, count: str, start: str | None = None, stages: int = 1) -> str:
        return f"for {var} in T.serial({start + ', ' if start is not None else ''}{count}):"

    def kernel(self, blocks: list, prelude: str | None, names: tuple = ("bx", "bz")) -> tuple:
        x, z = names
        if len(blocks) == 1:
            return f"with T.Kernel(T.max({blocks[0]}, 1){_prelude(prelude)}) as {x}:", []
        nbx, nbz = blocks
        flat = "blk" if x == "bx" else f"{x}{z}"  # the fold's own launch as before (programs of one kernel unchanged)
        return (f"with T.Kernel(T.max({nbx} * {nbz}, 1){_prelude(prelude)}) as {flat}:",
                [f"{x} = {flat} % {nbx}", f"{z} = {flat} // {nbx}"])

    def load(self, tile: str, view, axes: list) -> None:
        from .views import decode

        names, loop = self._tile_loop(axes)
        with loop:
            coords, inside = self._coords(axes, names)
            value = decode(self.em, view, f"{view.name}[{', '.join(coords)}]")
            zero = f"T.Cast({self.em.tir(view.dtype)!r}, 0)"
            self.em.line(f"{tile}[{', '.join(names)}] = T.if_then_else({inside}, {value}, {zero})")

    def store(self, tile: str, view, axes: list) -> None:
        from .views import encode

        names, loop = self._tile_loop(axes)
        with loop:
            coords, inside = self._coords(axes, names)
            element = f"{tile}[{', '.join(names)}]"
            with self.em.block(f"if {inside}:"):
                self.em.line(f"{view.name}[{', '.join(coords)}] = {encode(self.em, view, element)}")

    def simt_gemm(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple) -> None:
        self.gemm(a, b, out, trans_a, trans_b, shape)

    def gemm_async(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple, clear: bool) -> None:
        self.gemm(a, b, out, trans_a, trans_b, shape, clear)  # complete when issued: the waits are no-ops

    def wait(self, pending: int) -> None:
        pass

    def hold(self, tiles: list) -> None:
        pass

    def turn(self, condition: str) -> None:
        pass  # a block's threads run in turn: no warpgroups

    def pass_turn(self, condition: str) -> None:
        pass

    def gemm(self, a: str, b: str, out: str, trans_a: bool, trans_b: bool, shape: tuple, clear: bool = True) -> None:
        from ... import types as T

        m, n, k = shape
        em = self.em
        add = em.helper("add", (T.f32,), T.f32, (T.f32, T.f32))
        mul = em.helper("mul", (T.f32,), T.f32, (T.f32, T.f32))
        i, j, kk = em.fresh("gi"), em.fresh("gj"), em.fresh("gk")
        with em.block(f"for {i}, {j} in T.grid({m}, {n}):"):
            if clear:  # else accumulated into: the running value first, then the products in ascending k
                em.line(f"{out}[{i}, {j}] = T.float32(0)")
            x = f"{a}[{kk}, {i}]" if trans_a else f"{a}[{i}, {kk}]"
            y = f"{b}[{j}, {kk}]" if trans_b else f"{b}[{kk}, {j}]"
            with em.block(f"for {kk} in T.serial({k}):"):
                em.line(f"{out}[{i}, {j}] = T.call_extern('float32', {add!r}, {out}[{i}, {j}], "
                        f"T.call_extern('float32', {mul!r}, {x}, {y}))")

    def reduce(self, kind: str, src: str, out: str, shape: tuple, clear: bool, dtype: str = "float32") -> None:
        from ... import types as T

        m, n = shape
        em = self.em
        if dtype == "int32":
            step = lambda acc, x: f"T.max({acc}, {x})" if kind == "max" else f"T.min({acc}, {x})"  # noqa: E731
            init = "T.int32(-2147483648)" if kind == "max" else "T.int32(2147483647)"
        elif kind == "sum":
            add = em.helper("add", (T.f32,), T.f32, (T.f32, T.f32))
            step = lambda acc, x: f"T.call_extern('float32', {add!r}, {acc}, {x})"  # noqa: E731
            init = _INIT[kind]
        else:
            name = self.helper(f"itr_f{kind}", _FMAX[0 if kind == "max" else 1])
            step = lambda acc, x: f"T.call_extern('float32', {name!r}, {acc}, {x})"  # noqa: E731
            init = _INIT[kind]
        i, j = em.fresh("ri"), em.fresh("rj")
        with em.block(f"for {i} in T.serial({m}):"):
            if clear:
                em.line(f"{out}[{i}] = {init}")
            with em.block(f"for {j} in T.serial({n}):"):
                em.line(f"{out}[{i}] = {step(f'{out}[{i}]', f'{src}[{i}, {j}]')}")

    def reduce_vector(self, kind: str, src: str, out: str, n: int, clear: bool) -> None:
        name = self.helper(f"itr_f{kind}", _FMAX[0 if kind == "max" else 1])
        j = self.em.fresh("rj")
        if clear:
            self.em.line(f"{out}[0] = {_INIT[kind]}")
        with self.em.block(f"for {j} in T.serial({n}):"):
            self.em.line(f"{out}[0] = T.call_extern('float32', {name!r}, {out}[0], {src}[{j}])")


def _prelude(prelude: str | None) -> str:
    return f", prelude={prelude}" if prelude is not None else ""



def fast_helpers(base):
    """``base`` (a target's ``helper_source``) with the tile program's fast bodies: f32 ``+ - * /`` as the IEEE
    operation alone (``fma`` the fused one), f32 vendor functions as the CUDA call alone (no x86-NaN decision around
    them), approximate options as their PTX instruction alone, casts to f16/bf16 and vendor functions of f16/bf16
    rounded by the hardware's RNE conversion."""
    def source(name, family, dtypes, ret, args):
        fn = cuda.DEVICE.function
        same = dtypes == (ret,) and all(a == ret for a in args)
        if same and ret.name == "f32" and family in cuda.APPROXIMATE_PTX:
            return cuda.approximate_math(name, family, x86_nan=False)
        if same and ret.name == "f32" and family in _RAW:
            return c.helper_source(name, family, dtypes, ret, args, cuda.DEVICE)
        if same and ret.name in ("f32", "f16", "bf16") and family in c.CUDA_F32_MATH:
            call = f"{c.CUDA_F32_MATH[family]}(a)"
            hw = HARDWARE.get(ret.name)
            if hw is not None:
                return f"{hw.include}{fn} float {name}(float a) {{ return {hw.rounded(call)}; }}"
            return f"{fn} float {name}(float a) {{ return {call}; }}"
        if family == "cast" and len(dtypes) == 2 and dtypes[0].name == "f32" and dtypes[1].name in HARDWARE:
            hw = HARDWARE[dtypes[1].name]
            return f"{hw.include}{fn} float {name}(float a) {{ return {hw.rounded('a')}; }}"
        return base(name, family, dtypes, ret, args)
    return source


def float_literal(x: float) -> str:
    """``x`` as a TIR float32 literal (NaN and the infinities spelled)."""
    if math.isnan(x):
        return "T.float32(float('nan'))"
    if math.isinf(x):
        return "T.infinity('float32')" if x > 0 else "-T.infinity('float32')"
    return f"T.float32({x!r})"


def clears_to(kind: str, value: float) -> bool:
    """Whether ``value`` is what TileLang's reduction starts from when cleared (-inf, +inf, +0)."""
    start = {"max": -math.inf, "min": math.inf, "sum": 0.0}[kind]
    return value == start and math.copysign(1.0, value) == math.copysign(1.0, start)
