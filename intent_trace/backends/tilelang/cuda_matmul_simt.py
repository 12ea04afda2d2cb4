"""The f32 matmul on CUDA cores: ``C[m, n] = contract(A[m, k], B[k, n], acc_dtype=f32)`` as an SGEMM of the kind
CUTLASS's SIMT kernels are (never ``T.gemm``: f32 tensor-core MMAs are TF32, a reduced-precision product, and
Hopper's wgmma takes no FP32 operands).

The block computes a 128 x ``SimtTiling.tn`` (128 or 256) tile of C with 256 threads, ``SimtTiling.tk`` values of
k at a time:

- Each thread owns an 8 x 8 (8 x 16) block of C in registers, as blocks of 4 x 4: rows ``4 ty + {0..3}`` and
  ``64 + 4 ty + {0..3}``, columns ``4 tc + {0..3}`` + 64 h (h < 2, or 4). Its A and B fragments of one k are then
  16-byte shared loads (LDS.128): two of A, two (four) of B. A warp is 4 ``ty`` by 8 ``tc``: the eight threads of
  a quarter warp read 128 contiguous bytes of B and one broadcast float4 of A, so no shared load conflicts.
- Products are added with one fused multiply-add each (``fmaf``; T10 allows FMA inside a contraction; the result
  is within T5's bound, not the serial program's bits) in ascending k.
- A's tile is stored k-major (``A_s[k, m]``, so that a thread's four rows are contiguous); its rows are padded to
  132 floats, which puts the two threads that load the two halves of one A row (k 0-3 and 4-7) 16 banks apart:
  the transposed stores have no bank conflict.
- Double buffering: the next tile's global loads go into registers before the current tile's multiply-adds, and
  into the other shared buffer after them; one barrier a tile. Variants (``SimtTiling``, timed by
  ``tools/simt_ab.py``): ``async_copy`` copies the next tile by ``cp.async`` instead (zero-filled past the matrix,
  waited for before the barrier; no staging registers, so tk 16 fits two blocks an SM); ``prefetch`` double-buffers
  the fragments in registers (each k's loaded during the previous k's multiply-adds, the next tile's first ones
  right after the barrier, before the tile's last multiply-adds).
- Global loads and the stores of C are 16 bytes (``T.vectorized``) where every row of A, B and C is a whole
  number of 16-byte units (K and N multiples of 4: ``Specialization.aligned``; the executable gives every view a
  16-byte aligned start); a 4-element group is then inside the matrix or wholly outside it, so one bounds check a
  group. Other K, N take the same program with element loads and stores, each checked.
- Tails: loads past M, N and K read zeros (an exact ``+0`` product each: both operands of a k past K are zero),
  and only elements inside C are stored, so any M, N, K > 0 runs. ``unmasked`` (CUTLASS's residue-first
  mainloop) takes the checks out of the K loop: K's partial tile comes first (its k < 0 are the zeros, so the sum
  is still in ascending k, from +0), rows of A past M and columns of B past N are read clamped into the matrix
  (they feed only outputs that are never stored), the loop runs over every tile but the last with no condition
  and no branch, and the last tile's multiply-adds follow it (sm_90a: a tile's non-FFMA instructions 112 -> 66 at
  tk 8, 128 columns).
- NaN: NVIDIA arithmetic gives a NaN result its canonical payload, so a thread whose block holds a NaN recomputes
  each of its NaN outputs with the serial program's own helpers (x86 NaN rules, :mod:`.cuda`) before storing; the
  flag check keeps that loop off the common path.

``target`` other than CUDA (the C target: tests and ``tools/pytest_plugins``): the same program emulated -- the
grid's blocks one after another (the block index split into ``bx, by``), each phase between barriers a serial loop
over the block's 256 threads, every thread's register block a row of one local buffer, 16-byte accesses as loops
of four elements.
"""
from __future__ import annotations

import attrs

from ... import types as DT
from ...schedule.plan import Part
from . import cuda, cuda_epilogue
from .cuda_access import Specialization
from .cuda_matmul import match_matmul

TILE, THREADS, PAD = 128, 256, 4  # the block's tile of C, its threads, the padding of A_s's rows (bank conflicts)
PER = 8  # a thread's rows (and columns) of C


@attrs.frozen
class SimtTiling:
    """``tk``: the values of k a shared tile holds (a multiple of 8: each of 256 threads loads whole float4 groups
    of A's 128 x tk and B's tk x 128); ``min_blocks``: the blocks an SM must hold at once (``__launch_bounds__``:
    registers are capped at 65536 / (256 * min_blocks))."""

    tk: int = 8
    min_blocks: int = 2
    #: fragments double-buffered in registers (CUTLASS's SIMT mainloop): each k's fragments are loaded while the
    #: previous k's multiply-adds run, and the next tile's first fragments right after the barrier, before the
    #: tile's last multiply-adds, so no multiply-add waits on a shared load at a tile's start
    prefetch: bool = False
    #: the next tile goes from global to shared memory by ``cp.async`` (Ampere's LDGSTS; zero-filled past the
    #: matrix) instead of through registers: no staging registers, no shared stores, a wait before the barrier
    async_copy: bool = False
    #: the K loop's global loads unmasked (CUTLASS's residue-first mainloop): rows of A past M and columns of B past
    #: N are read clamped into the matrix (they feed only outputs that are never stored), and K's partial tile is
    #: the first one (k < 0 read as zeros), so every later tile lies inside K: no check, no branch in the loop
    unmasked: bool = False
    #: the block tile's columns: 128, or 256 (a thread's 8 x 16 block of C: six 16-byte shared loads for 128
    #: multiply-adds a k instead of four for 64; 128 accumulators, so one block an SM)
    tn: int = 128


#: the tiling the programs use (tools/simt_ab.py compares others on the GPU): on one H100 at 2048^3 and 4096^3 it
#: ran at 0.94 of torch.matmul with TF32 off (46-48 TFLOPS; the masked 128 x 128 program before it 0.79), at 2047^3
#: (element accesses) 0.835 (0.58)
SIMT = SimtTiling(8, 1, unmasked=True, tn=256)
#: the tiling of the calls whose grid of 128 x 256 tiles would have fewer than ``WIDE_BLOCKS`` blocks (one block an
#: SM: fewer blocks than the H100's 132 SMs leave SMs idle, where 128 x 128 tiles at two blocks an SM spread over
#: twice as many): the unmasked 128 x 128 program (0.90, 0.91, 0.75 at 2048^3, 4096^3, 2047^3, against the masked
#: one's 0.79, 0.79, 0.58 on the same grid). 2048^3 is 128 blocks of 128 x 256 (measured: 0.94 against 0.90);
#: smaller grids are unmeasured
SMALL = SimtTiling(8, 2, unmasked=True)
WIDE_BLOCKS = 128
#: the tilings tools/simt_ab.py times side by side (tests run each emulated and assemble each for sm_90a without
#: spills): the default, the masked 128 x 128 program it replaced, the unmasked 128 x 128 one (0.90 at 2048^3 and
#: 4096^3, 0.75 at 2047^3), fragments double-buffered at 256 columns (0.91, 0.84), the next tile by cp.async at
#: 128 columns (0.78, 0.83). tk 16 by cp.async (128 or 256 columns) lost to each at every size.
CANDIDATES = (SIMT, SimtTiling(), SimtTiling(8, 2, unmasked=True), SimtTiling(8, 1, True, unmasked=True, tn=256),
              SimtTiling(8, 2, False, True, unmasked=True))

# a thread's place in the 16 x 16 grid of 4 x 4 groups: warp w = tx // 32 covers ty 4 (w // 2) .. +3, tc 8 (w % 2) .. +7
_TY, _TC = "(tx // 64 * 4 + tx % 32 // 8)", "(tx // 32 % 2 * 8 + tx % 8)"


def _row(i: str) -> str:
    """The tile row of a thread's register row ``i`` (0..7)."""
    return f"{_TY} * 4 + ({i}) // 4 * 64 + ({i}) % 4"


def _col(j: str) -> str:
    return f"{_TC} * 4 + ({j}) // 4 * 64 + ({j}) % 4"


@attrs.frozen
class _Program:
    """The text of one variant: ``vector`` its 16-byte accesses (K, N multiples of 4), ``emulated`` on the C
    target. ``m, k, n``: the graph extent indices."""

    m: int
    k: int
    n: int
    t: SimtTiling
    vector: bool
    emulated: bool

    @property
    def vec(self) -> str:
        """The loop of a 16-byte access (emulated: four element accesses)."""
        return "T.serial" if self.emulated else "T.vectorized"

    @property
    def pn(self) -> int:
        """A thread's columns of C (8 or 16: two or four 4-column groups 64 apart)."""
        return self.t.tn // 16

    @property
    def cq(self) -> int:
        """The 128-column pieces of B's tile: a thread loads a float4 group of each a row."""
        return self.t.tn // 128

    def acc(self, j: str = "j") -> str:
        """Register ``(i, j)`` of the thread's block (emulated: of thread ``tx``'s row of the block's buffer)."""
        return f"acc[tx * {PER * self.pn} + i * {self.pn} + {j}]" if self.emulated else f"acc[i * {self.pn} + {j}]"

    def b_in_tile(self) -> tuple:
        """(k, column) in B's tile of the float4 group ``l`` this thread loads: k ``tx // 32 + 8 l``, columns
        ``tx % 32 * 4`` (a warp 512 contiguous bytes); in a 256-column tile, ``l``'s parity picks the piece."""
        if self.cq == 1:
            return "tx // 32 + 8 * l", "tx % 32 * 4"
        return f"tx // 32 + 8 * (l // {self.cq})", f"tx % 32 * 4 + l % {self.cq} * 128"

    def b_at(self, tile: str) -> tuple:
        """(k, column) in B of that group of tile ``tile``."""
        k, c = self.b_in_tile()
        return f"({tile}) * {self.t.tk} + {k}", f"bx * {self.t.tn} + {c}"

    def loops(self, a: list, b: list) -> list:
        """A's lines and B's (indented) in the loop over this thread's float4 groups: one loop for both when B's
        tile is 128 wide, else one each (B has ``cq`` times as many)."""
        n = self.t.tk // 8
        if self.cq == 1:
            return [f"for l in T.unroll({n}):", *a, *b]
        return [f"for l in T.unroll({n}):", *a, f"for l in T.unroll({n * self.cq}):", *b]

    def fetch(self, tile: str) -> list:
        """Tile ``tile``'s global loads into this thread's registers ``ga``, ``gb`` (``tk / 8`` float4 groups each):
        A's row ``tx // 2``, k ``tx % 2 * 4 + 8 l`` (two threads a 32-byte row piece); B's k ``tx // 32 + 8 l``,
        columns ``tx % 32 * 4`` (a warp 512 contiguous bytes)."""
        m, k, n = f"d{self.m}", f"d{self.k}", f"d{self.n}"
        ar, ak = f"by * {TILE} + tx // 2", f"({tile}) * {self.t.tk} + tx % 2 * 4 + 8 * l"
        (bk, bc) = self.b_at(tile)
        if self.t.unmasked:
            return self.loops(*self._unmasked(tile))
        if self.vector:  # a group is wholly inside or wholly outside (K, N multiples of 4)
            a, b = ([f"    if {cond}:", f"        for v in {self.vec}(4):", f"            {g}[l * 4 + v] = {x}[{at}]",
                     "    else:", f"        for v in {self.vec}(4):", f"            {g}[l * 4 + v] = T.float32(0)"]
                    for g, x, cond, at in (("ga", "A", f"{ar} < {m} and {ak} < {k}", f"{ar}, {ak} + v"),
                                           ("gb", "B", f"{bk} < {k} and {bc} < {n}", f"{bk}, {bc} + v")))
            return self.loops(a, b)
        return self.loops(["    for v in T.unroll(4):",
                           f"        ga[l * 4 + v] = T.if_then_else({ar} < {m} and {ak} + v < {k}, "
                           f"A[T.min({ar}, {m} - 1), T.min({ak} + v, {k} - 1)], T.float32(0))"],
                          ["    for v in T.unroll(4):",
                           f"        gb[l * 4 + v] = T.if_then_else({bk} < {k} and {bc} + v < {n}, "
                           f"B[T.min({bk}, {k} - 1), T.min({bc} + v, {n} - 1)], T.float32(0))"])

    def _unmasked_sources(self, tile: str) -> tuple:
        """(A's condition, A's element, B's condition, B's element or 16-byte group start without its closing
        bracket) of :meth:`copy` for an ``unmasked`` tiling (see :meth:`_unmasked`): only tile 0 checks k >= 0."""
        m, k, n, tk = f"d{self.m}", f"d{self.k}", f"d{self.n}", self.t.tk
        pad = f"(T.ceildiv({k}, {tk}) * {tk} - {k})"
        (bk, bc), ak = self.b_at(tile), f"({tile}) * {tk} + tx % 2 * 4 + 8 * l - {pad}"
        ar, bk = f"T.min(by * {TILE} + tx // 2, {m} - 1)", f"{bk} - {pad}"
        bc = f"T.min({bc}, {n} - 4)" if self.vector else f"T.min({bc} + v, {n} - 1)"
        if tile != "0":
            return "True", f"A[{ar}, {ak} + v]", "True", f"B[{bk}, {bc}"
        a = f"{ak}" if self.vector else f"{ak} + v"  # 16-byte: a group is wholly before K or inside it
        return (f"0 <= {a}", f"A[{ar}, T.max({ak}, 0) + v]" if self.vector else f"A[{ar}, T.max({a}, 0)]",
                f"0 <= {bk}", f"B[T.max({bk}, 0), {bc}")

    def _unmasked(self, tile: str) -> list:
        """:meth:`fetch`'s loads of an ``unmasked`` tiling (sources: :meth:`_unmasked_sources`); 16-byte: a group
        is wholly before K or inside it, since the zeros' count is a multiple of 4 when K is."""
        a_ok, a_src, b_ok, b_src = self._unmasked_sources(tile)
        b_src += " + v]" if self.vector else "]"
        both = []
        for g, ok, src in (("ga", a_ok, a_src), ("gb", b_ok, b_src)):
            if ok == "True":
                loop = self.vec if self.vector else "T.unroll"
                lines = [f"    for v in {loop}(4):", f"        {g}[l * 4 + v] = {src}"]
            elif self.vector:
                lines = [f"    if {ok}:", f"        for v in {self.vec}(4):", f"            {g}[l * 4 + v] = {src}",
                         "    else:", f"        for v in {self.vec}(4):", f"            {g}[l * 4 + v] = T.float32(0)"]
            else:
                lines = ["    for v in T.unroll(4):",
                         f"        {g}[l * 4 + v] = T.if_then_else({ok}, {src}, T.float32(0))"]
            both.append(lines)
        return both

    def copy(self, tile: str, buf: str) -> list:
        """Tile ``tile`` of A and B from global memory into shared buffer ``buf`` by ``cp.async`` (``async_copy``):
        A's float4 groups transposed as four 4-byte copies, B's as one 16-byte copy (element variant: four 4-byte
        copies), each zero-filled where it lies past the matrix (its source address clamped into it). Emulated: the
        same elements assigned."""
        m, k, n = f"d{self.m}", f"d{self.k}", f"d{self.n}"
        ar, ak = f"by * {TILE} + tx // 2", f"({tile}) * {self.t.tk} + tx % 2 * 4 + 8 * l"
        (bk, bc), (sk, sc) = self.b_at(tile), self.b_in_tile()
        a_dst, b_dst = f"A_s[{buf}, tx % 2 * 4 + 8 * l + v, tx // 2]", f"B_s[{buf}, {sk}, {sc}"
        if self.t.unmasked:
            a_ok, a_src, b_ok, b_src = self._unmasked_sources(tile)
        elif self.vector:  # a group is wholly inside or wholly outside (K, N multiples of 4)
            a_ok, a_src = f"{ar} < {m} and {ak} < {k}", f"A[T.min({ar}, {m} - 1), T.min({ak}, {k} - 4) + v]"
            b_ok, b_src = f"{bk} < {k} and {bc} < {n}", f"B[T.min({bk}, {k} - 1), T.min({bc}, {n} - 4)"
        else:
            a_ok, a_src = f"{ar} < {m} and {ak} + v < {k}", f"A[T.min({ar}, {m} - 1), T.min({ak} + v, {k} - 1)]"
            b_ok, b_src = f"{bk} < {k} and {bc} + v < {n}", f"B[T.min({bk}, {k} - 1), T.min({bc} + v, {n} - 1)"
        each = "    for v in T.unroll(4):"
        if self.emulated:
            b_whole = f"{b_src} + v]" if self.vector else f"{b_src}]"
            return self.loops([each, f"        {a_dst} = T.if_then_else({a_ok}, {a_src}, T.float32(0))"],
                              [each, f"        {b_dst} + v] = T.if_then_else({b_ok}, {b_whole}, T.float32(0))"])

        def cp(size: int, dst: str, src: str, ok: str) -> str:
            flag = "1" if ok == "True" else f"T.Cast('int32', {ok})"
            return (f"T.evaluate(T.call_extern('int32', 'itc_cp_async{size}', T.access_ptr({dst}, 'w'), "
                    f"T.access_ptr({src}, 'r'), {flag}))")

        a = [each, f"        {cp(4, a_dst, a_src, a_ok)}"]
        if self.vector:
            return self.loops(a, [f"    {cp(16, b_dst + ']', b_src + ']', b_ok)}"])
        return self.loops(a, [each, f"        {cp(4, b_dst + ' + v]', b_src + ']', b_ok)}"])

    def stash(self, buf: str) -> list:
        """The registers ``ga``, ``gb`` into shared buffer ``buf``: A transposed (four element stores, no bank
        conflict: the padded rows), B as it is (one 16-byte store a group)."""
        sk, sc = self.b_in_tile()
        return self.loops(["    for v in T.unroll(4):",
                           f"        A_s[{buf}, tx % 2 * 4 + 8 * l + v, tx // 2] = ga[l * 4 + v]"],
                          [f"    for v in {self.vec}(4):", f"        B_s[{buf}, {sk}, {sc} + v] = gb[l * 4 + v]"])

    def reg(self, name: str, at: str) -> str:
        """Fragment register ``name[at]`` of a prefetching program (emulated: of thread ``tx``'s row, since the
        registers live across a barrier)."""
        size = 2 * (PER if name == "a" else self.pn)
        return f"{name}[tx * {size} + {at}]" if self.emulated else f"{name}[{at}]"

    def fragments(self, buf: str, kk: str, slot: str | None = None) -> list:
        """Value ``kk`` of shared buffer ``buf``'s fragments (two float4 of A's rows, two or four of B's columns)
        into fragment slot ``slot`` (None: the one slot of a program that does not prefetch)."""
        def at(name: str, per: int) -> str:
            return f"{name}[h * 4 + v]" if slot is None else self.reg(name, f"{slot} * {per} + h * 4 + v")

        return ["for h in T.unroll(2):", f"    for v in {self.vec}(4):",
                f"        {at('a', PER)} = A_s[{buf}, {kk}, {_TY} * 4 + h * 64 + v]",
                f"for h in T.unroll({self.pn // 4}):", f"    for v in {self.vec}(4):",
                f"        {at('b', self.pn)} = B_s[{buf}, {kk}, {_TC} * 4 + h * 64 + v]"]

    def products(self, slot: str | None = None) -> list:
        """The fused multiply-adds of fragment slot ``slot`` (64 or 128)."""
        a, b = ("a[i]", "b[j]") if slot is None else (self.reg("a", f"{slot} * {PER} + i"),
                                                      self.reg("b", f"{slot} * {self.pn} + j"))
        return [f"for i in T.unroll({PER}):", f"    for j in T.unroll({self.pn}):",
                f"        {self.acc()} = T.call_extern('float32', 'fmaf', {a}, {b}, {self.acc()})"]

    def step(self, buf: str) -> list:
        """The multiply-adds of shared buffer ``buf``: per k, the thread's fragments and its multiply-adds."""
        return [f"for kk in T.unroll({self.t.tk}):", *(f"    {x}" for x in self.fragments(buf, "kk")),
                *(f"    {x}" for x in self.products())]

    def store(self) -> list:
        """The thread's block into C (inside C only). A thread whose block holds a NaN first recomputes each NaN
        output with the serial program's helpers (x86's payloads) into its register; the recomputing loops,
        unrolled once per element, stay behind one flag, off the common path, and the stores are the common
        path's (one copy: nvcc merged a second copy's element stores with the 16-byte ones and split those)."""
        m, k, n, acc = f"d{self.m}", f"d{self.k}", f"d{self.n}", self.acc()
        row, col = f"by * {TILE} + {_row('i')}", f"bx * {self.t.tn} + {_col('j')}"
        each = [f"for i in T.unroll({PER}):", f"    for j in T.unroll({self.pn}):"]
        lines = ["nan_l[0] = 0", *each,
                 f"        if T.call_extern('int32', 'itc_is_nan', {acc}) != 0:",
                 "            nan_l[0] = 1",
                 "if nan_l[0] != 0:", *(f"    {x}" for x in each),
                 f"            if {row} < {m} and {col} < {n} and "
                 f"T.call_extern('int32', 'itc_is_nan', {acc}) != 0:  # the serial program",
                 "                s[0] = T.float32(0)",
                 f"                for kr in T.serial({k}):",
                 "                    s[0] = T.call_extern('float32', 'it_add_f32', s[0],",
                 f"                                         T.call_extern('float32', 'it_mul_f32', A[{row}, kr], "
                 f"B[kr, {col}]))",
                 f"                {acc} = s[0]"]
        if not self.vector:
            return lines + each + [f"        if {row} < {m} and {col} < {n}:", f"            C[{row}, {col}] = {acc}"]
        # a group of four columns: inside C or wholly outside it (N a multiple of 4), one 16-byte store
        group = f"bx * {self.t.tn} + {_col('h * 4')}"
        return lines + [f"for i in T.unroll({PER}):", f"    for h in T.unroll({self.pn // 4}):",
                        f"        if {row} < {m} and {group} < {n}:",
                        f"            for v in {self.vec}(4):",
                        f"                C[{row}, {group} + v] = {self.acc('h * 4 + v')}"]

    def phase(self, lines: list, depth: int) -> str:
        """One phase between barriers: every thread's code (emulated: a serial loop over the block's threads)."""
        pad = " " * depth
        if self.emulated:
            return f"{pad}for tx in T.serial({THREADS}):\n" + "\n".join(f"{pad}    {x}" for x in lines)
        return "\n".join(f"{pad}{x}" for x in lines)

    def steps(self, buf: str) -> list:
        """A prefetching program's multiply-adds of shared buffer ``buf`` but its last k's: each k's after the next
        k's fragments are loaded."""
        return [f"for kk in T.unroll({self.t.tk - 1}):",
                *(f"    {x}" for x in self.fragments(buf, "kk + 1", "(kk + 1) % 2")),
                *(f"    {x}" for x in self.products("kk % 2"))]

    def loop(self, nxt: str, sync: list, depth: int) -> str:
        """One tile of the K loop: the next tile's global loads, this tile's multiply-adds, the next tile stored to
        the other buffer, one barrier. Prefetching: each k's multiply-adds after the next k's fragments are loaded,
        the last k's after the barrier and the next tile's first fragments."""
        fetch, stash = self.fetch("ko + 1"), self.stash("(ko + 1) % 2")
        if self.t.async_copy:  # the next tile's copies in flight through this tile's multiply-adds, waited for last
            fetch, stash = self.copy("ko + 1", "(ko + 1) % 2"), [] if self.emulated else [_WAIT]
        if not self.t.unmasked:  # unmasked: branch-free, the loop runs over every tile but the last (body peels it)
            fetch = [f"if {nxt}:", *(f"    {x}" for x in fetch)]
            stash = stash if self.t.async_copy else [f"if {nxt}:", *(f"    {x}" for x in stash)]
        pad = " " * depth
        if not self.t.prefetch:
            return "\n".join([self.phase(fetch + self.step("ko % 2") + stash, depth), *(pad + x for x in sync)])
        tk, steps = self.t.tk, self.steps("ko % 2")
        first = self.fragments("(ko + 1) % 2", "0", "0")
        after = [*(first if self.t.unmasked else [f"if {nxt}:", *(f"    {x}" for x in first)]),
                 *self.products(str((tk - 1) % 2))]
        return "\n".join([self.phase(fetch + steps + stash, depth), *(pad + x for x in sync), self.phase(after, depth)])

    def body(self) -> str:
        """The kernel's body: registers, the first tile staged (and, prefetching, its first fragments), the K loop
        (:meth:`loop`), the stores."""
        tk, nk = self.t.tk, f"T.ceildiv(d{self.k}, {self.t.tk})"
        sync = [] if self.emulated else ["T.sync_threads()"]
        nxt = "ko + 1 < " + nk
        init = [f"for i in T.unroll({PER}):", f"    for j in T.unroll({self.pn}):",
                f"        {self.acc()} = T.float32(0)"]
        regs = (THREADS if self.emulated else 1) * PER * self.pn
        memory = "alloc_local" if self.emulated else "alloc_shared"
        a_frag, b_frag = ((THREADS if self.emulated else 1) * 2 * x if self.t.prefetch else x for x in (PER, self.pn))
        staging = [] if self.t.async_copy else [f"ga = T.alloc_local(({tk // 2},), 'float32')",
                                                 f"gb = T.alloc_local(({tk // 2 * self.cq},), 'float32')"]
        head = [f"A_s = T.{memory}((2, {tk}, {TILE + PAD}), 'float32')  # A's tiles, k-major, rows padded",
                f"B_s = T.{memory}((2, {tk}, {self.t.tn}), 'float32')",
                f"acc = T.alloc_local(({regs},), 'float32')",
                f"a = T.alloc_local(({a_frag},), 'float32')", f"b = T.alloc_local(({b_frag},), 'float32')",
                *staging, "s = T.alloc_local((1,), 'float32')", "nan_l = T.alloc_local((1,), 'int32')"]
        if not self.emulated:
            head += ["tx = T.get_thread_binding()", f"T.annotate_min_blocks_per_sm({self.t.min_blocks})"]
        if self.vector:  # lets TileLang prove the 16-byte alignment of the row starts
            head += [f"T.assume(d{self.k} % 4 == 0)", f"T.assume(d{self.n} % 4 == 0)"]
        if self.t.unmasked:  # the clamped indices are inside the matrix (the specialisation applies to M, N, K > 0)
            least = 4 if self.vector else 1
            head += [f"T.assume(1 <= d{self.m})", f"T.assume({least} <= d{self.n})", f"T.assume({least} <= d{self.k})"]
        pad = " " * 8
        first = self.fetch("0") + self.stash("0")
        if self.t.async_copy:
            first = self.copy("0", "0") + ([] if self.emulated else [_WAIT])
        primed = [self.phase(self.fragments("0", "0", "0"), 8)] if self.t.prefetch else []
        last = []
        if self.t.unmasked:  # the loop's tiles all have a next one; the last tile's multiply-adds come after it
            nk, tail = f"{nk} - 1", f"({nk} - 1) % 2"
            last = [self.phase(self.step(tail) if not self.t.prefetch else
                               self.steps(tail) + self.products(str((tk - 1) % 2)), 8)]
        return "\n".join([*(pad + x for x in head), self.phase(init, 8), self.phase(first, 8),
                          *(pad + x for x in sync), *primed, f"{pad}for ko in T.serial({nk}):",
                          self.loop(nxt, sync, 12), *last, self.phase(self.store(), 8)])


#: waits for this thread's ``cp.async`` copies (the barrier after it makes every thread's visible)
_WAIT = "T.evaluate(T.call_extern('int32', 'itc_cp_async_wait'))"
#: ``cp.async`` of 4 or 16 bytes into shared memory, ``src-size`` 0 (zero fill, nothing read) when not ``ok``; no
#: memory clobber (as CUTLASS's): the fragments' shared loads may be scheduled across it, the wait orders the rest
_CP_ASYNC = [
    *(f"__device__ __forceinline__ int itc_cp_async{n}(void* dst, const void* src, int ok) {{ "
      f"asm volatile(\"cp.async.{cache}.shared.global [%0], [%1], {n}, %2;\\n\" :: "
      f"\"r\"((unsigned)__cvta_generic_to_shared(dst)), \"l\"(src), \"r\"(ok ? {n} : 0)); return 0; }}"
      for n, cache in ((4, "ca"), (16, "cg"))),
    '__device__ __forceinline__ int itc_cp_async_wait() { asm volatile("cp.async.wait_all;\\n" ::: "memory"); '
    'return 0; }']

_REASON = ("a recognised f32 contraction: an SGEMM on CUDA cores (f32 tensor-core MMAs are TF32), fused "
           "multiply-adds (T10), tails masked, NaN outputs recomputed by the serial program")


def simt(graph, target, tiling: SimtTiling | None = None) -> list:
    """The f32 programs on CUDA cores (see the module's docstring) for a plain f32 matmul, or ``[]``: the variant
    with 16-byte accesses for K, N multiples of 4 first, then the one with element accesses for every other call.
    No ``tiling``: ``SIMT``'s, and where its tiles are 256 columns wide, for grids of fewer than ``WIDE_BLOCKS`` of
    them, ``SMALL``'s after them."""
    specs = _simt(graph, target, tiling or SIMT)
    if tiling is not None or not specs or SIMT.tn == SMALL.tn:
        return specs
    fill = f"; for grids of at least {WIDE_BLOCKS} of its tiles (fewer leave SMs idle: those take 128x128 tiles)"
    wide = [attrs.evolve(s, part=attrs.evolve(s.part, reason=s.part.reason + fill), least=WIDE_BLOCKS) for s in specs]
    return wide + _simt(graph, target, SMALL)


def _simt(graph, target, t: SimtTiling) -> list:
    """:func:`simt` for one tiling."""
    match = match_matmul(graph)
    if match is None or match.dtype != "f32" or match.out != "f32" or match.batch is not None or match.epilogue:
        return []
    emulated = target.name != cuda.NAME
    f32 = DT.f32
    helpers = [target.helper_source(f"it_{op}_f32", op, (f32,), f32, (f32, f32)) for op in ("mul", "add")]
    # in C: TVM's simplifier takes ``x != x`` on floats for false
    spelling = 'extern "C" inline' if emulated else "__device__ __forceinline__"
    helpers.append(f"{spelling} int itc_is_nan(float x) {{ return x != x; }}")
    if t.async_copy and not emulated:
        helpers += _CP_ASYNC
    names = {match.a: "A", match.b: "B", match.c: "C"}
    dims, params = match.header(graph) if not emulated else (
        "\n".join(f"d{x} = T.dynamic('d{x}', 'int32')" for x in range(len(graph.extents))),
        cuda_epilogue.declare_params(graph, target, names)[0])
    m, n = match.m, match.n
    if emulated:
        launch = (f"with T.Kernel(T.ceildiv(d{n}, {t.tn}) * T.ceildiv(d{m}, {TILE}), prelude=PRELUDE) as blk:\n"
                  f"        bx = blk % T.ceildiv(d{n}, {t.tn})\n        by = blk // T.ceildiv(d{n}, {t.tn})")
    else:
        launch = (f"with T.Kernel(T.ceildiv(d{n}, {t.tn}), T.ceildiv(d{m}, {TILE}), threads={THREADS}, "
                  f"prelude=PRELUDE) as (bx, by):")
    specs = []
    for vector in (True, False):
        body = _Program(m, match.k, n, t, vector, emulated).body()
        what = f"{', the CUDA program emulated' if emulated else ''}{', 16-byte accesses' if vector else ''}"
        title = (f"# Generated by intent_trace (target {target.name}): tiled f32 matmul specialisation of a KIR "
                 f"graph{what}.")
        if t.async_copy and not emulated:
            title += f"\n{cuda.OWN_BARRIERS}"
        program = f'''{title}
import tilelang.language as T

PRELUDE = {target.prelude(helpers)!r}

{dims}


@T.prim_func
def kernel({params}):
    {launch}
{body}
'''
        spec = match.specialization(program, 1, 1, 1, tiles=(TILE, t.tn))
        accesses = "16-byte (K and N multiples of 4)" if vector else "elements (K or N not a multiple of 4)"
        pipelining = "double-buffered shared tiles, next tile " + (
            "by cp.async" if t.async_copy else "in registers") + (
            ", fragments double-buffered in registers" if t.prefetch else "") + (
            ", unmasked K loop (K's partial tile first, the last peeled)" if t.unmasked else "")
        described = (("program", spec.name), ("operands", "f32"), ("tile", f"{TILE}x{t.tn}x{t.tk}"),
                     ("threads", THREADS), ("per_thread", f"{PER}x{t.tn // 16}"), ("pipelining", pipelining),
                  ("accesses", accesses))
        part = Part("tiled_matmul", _REASON, described, nodes=tuple(graph.body.nodes))
        aligned = ((match.k, 4), (match.n, 4)) if vector else ()
        specs.append(attrs.evolve(spec, part=part, aligned=aligned))
    return specs
