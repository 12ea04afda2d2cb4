"""The unmasked SGEMM tilings (cuda_matmul_simt.SimtTiling ``unmasked``, ``tn``) on the targets that run the CUDA
program: tilelang-c emulates it (its blocks one after another, each phase between barriers a serial loop over the
block's threads), tilelang-cuda runs it on the GPU (INTENT_TRACE_TEST_TARGETS=tilelang-cuda). Each test picks the
tiling as the module's (``SIMT``), so a call compiles that tiling's program.

What the unmasked mainloop changes, and what is checked here against NumPy float64 within T5's bound ((K + 1) u
sum |a||b|) and against the serial program's NaN payloads:

- K's partial tile is the first (k < 0 read as zeros): K of 1, 127, 129, 2047, 2044 (tk 8 and 16 leave every
  residue from 1 to 15), and K a whole number of tiles;
- rows of A past M and columns of B past N are read clamped (A's last row, B's last column, again): M and N of 1,
  127, 129, tails of a 256-column block, more than one block of each; NaN and inf planted in A's last row and
  B's last column (which the clamped rows and columns read again, for outputs never stored), in the leading
  partial tile, at k = 0 and k = K - 1;
- the last tile's multiply-adds peeled after the loop: one tile of K (no loop), two, many.
"""
import numpy as np
import pytest
from backends.test_tilelang_cuda_matmul_f32 import EMULATED, SIMT_TARGETS, _check, _check_random, matmul_f32
from backends.tilelang_support import cuda_source
from conftest import EXECUTABLE_TARGETS

import intent_trace as intent

pytest.importorskip("tilelang")
from intent_trace.backends.tilelang import cuda_matmul_simt, targets
from intent_trace.backends.tilelang import target as tl_target

RNG = np.random.default_rng(1717)
S = cuda_matmul_simt.SimtTiling
#: the default (256 columns, the next tile in registers) and one of each other mainloop: 128 columns, fragments
#: double-buffered, the next tile by cp.async (tk 16)
TILINGS = (cuda_matmul_simt.SIMT, S(8, 2, unmasked=True), S(16, 2, False, True, unmasked=True),
           S(8, 1, True, unmasked=True, tn=256), S(16, 1, False, True, unmasked=True, tn=256))
SIMT = [t for t in EXECUTABLE_TARGETS if t in SIMT_TARGETS]


def _name(t) -> str:
    return f"tk{t.tk}-n{t.tn}" + ("-prefetch" if t.prefetch else "") + ("-async" if t.async_copy else "")


@pytest.fixture(params=TILINGS, ids=_name)
def tiled(request, monkeypatch):
    """``compiled(target, sizes)``: matmul_f32 built for ``target`` with the tiling as the module's; asserts that
    the call's sizes select the unmasked program of that tiling (16-byte accesses where K and N allow them)."""
    tiling = request.param
    monkeypatch.setattr(cuda_matmul_simt, "SIMT", tiling)
    monkeypatch.setattr(cuda_matmul_simt, "WIDE_BLOCKS", 0)  # a 256-column tiling at every size
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", EMULATED)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(target, sizes):
        exe = intent.compile(matmul_f32, target=target)
        spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), sizes)))
        assert spec is not None and f"B_s = T.alloc_{'local' if target == 'tilelang-c' else 'shared'}((2, " \
            f"{tiling.tk}, {tiling.tn}), 'float32')" in spec.program
        assert "(T.ceildiv(d1, " in spec.program  # the leading tile's zeros
        assert ("16-byte accesses" in spec.program) == (sizes[1] % 4 == 0 and sizes[2] % 4 == 0)
        return exe

    return compiled


def test_the_unmasked_loop_has_no_check_and_peels_its_last_tile():
    """The program text: the K loop runs over every tile but the last, its loads carry no condition (A's row and
    B's columns clamped, a tile's k inside K), only tile 0 checks k >= 0; the last tile's multiply-adds follow the
    loop."""
    for t in TILINGS:
        for spec in cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, t):
            p = spec.program
            loop = p[p.index("for ko in T.serial(T.ceildiv(d1, "):p.index("nan_l[0] = 0")]
            assert f"for ko in T.serial(T.ceildiv(d1, {t.tk}) - 1):" in p
            assert "if " not in loop.split("T.sync_threads()")[0].replace("T.if_then_else", "")
            assert "T.min(by * 128 + tx // 2, d0 - 1)" in loop and "0 <= " not in loop
            head = p[:p.index("for ko in")]
            assert "0 <= " in head  # the first tile: k < 0 are zeros
            after = p[p.index("T.sync_threads()", p.index("for ko in")):p.index("nan_l[0] = 0")]
            # the peeled tile (prefetching: the loop's last k after its barrier, the tile's k, its last k)
            assert after.count("'fmaf'") == (3 if t.prefetch else 1)
            assert spec.part.param("tile") == f"128x{t.tn}x{t.tk}" and spec.part.param("per_thread") == \
                f"8x{t.tn // 16}"


def test_the_default_is_the_unmasked_256_column_program():
    """What the calls get (the fastest in tools/simt_ab.py on the H100): a 128 x 256 block tile, each thread's 8 x 16
    block of C (four float4 of B's columns a k, 128 multiply-adds), the next tile staged in registers, one block an
    SM (241 registers), the unmasked loop; sm_90a source with 16-byte shared and global loads."""
    t = cuda_matmul_simt.SIMT
    assert (t.tk, t.min_blocks, t.prefetch, t.async_copy, t.unmasked, t.tn) == (8, 1, False, False, True, 256)
    vector, element, *small = cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA)
    assert [s.part.param("tile") for s in small] == ["128x128x8", "128x128x8"]  # grids under WIDE_BLOCKS
    for spec in (vector, element):
        p = spec.program
        assert "T.Kernel(T.ceildiv(d2, 256), T.ceildiv(d0, 128), threads=256" in p
        assert "B_s = T.alloc_shared((2, 8, 256), 'float32')" in p and "acc = T.alloc_local((128,), 'float32')" in p
        assert "for h in T.unroll(4):" in p and "for j in T.unroll(16):" in p
        assert "gb = T.alloc_local((8,), 'float32')" in p and "B_s[(ko + 1) % 2, tx // 32 + 8 * (l // 2), " \
            "tx % 32 * 4 + l % 2 * 128 + v] = gb[l * 4 + v]" in p
        source = cuda_source(p)
        assert "__launch_bounds__(256, 1)" in source and "*(float4*)(b + (h" in source
        assert ("*(float4*)(B + " in source) == (spec is vector)


@pytest.mark.parametrize("m,n,tn", [(2048, 2048, 256), (2047, 2047, 256), (4096, 4096, 256), (2048, 1792, 128),
                                    (1024, 1024, 128), (1000, 1000, 128), (3, 5, 128), (16384, 256, 256),
                                    (8192, 256, 128)])
def test_grids_of_fewer_than_128_wide_blocks_take_the_128_column_program(m, n, tn):
    """A 128 x 256 tile a block at one block an SM leaves SMs idle on small grids: below WIDE_BLOCKS (128) such
    blocks the calls take SMALL's 128 x 128 program (unmasked too), at or above it the default's."""
    exe = intent.compile(matmul_f32, target="tilelang-cuda")
    spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), (m, 64, n))))
    assert spec.part.param("tile") == f"128x{tn}x8" and "unmasked K loop" in spec.part.param("pipelining")
    assert (-(-m // 128) * -(-n // 256) >= cuda_matmul_simt.WIDE_BLOCKS) == (tn == 256)


# (M, K, N): residues of K against tk 8 and 16, one tile of K, M and N of 1, 127, 129, a 256-column block's tail,
# more than one block of each axis; 16-byte variant where K and N are multiples of 4
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (127, 129, 129), (129, 127, 127), (3, 2047, 5), (130, 2044, 260),
                                   (257, 16, 516), (5, 40, 4)])
@pytest.mark.parametrize("target", SIMT)
def test_unmasked_tilings_within_t5s_bound(tiled, target, m, k, n):
    _check_random(tiled(target, (m, k, n)), (m, k, n), target, RNG)


@pytest.mark.parametrize("m,k,n", [(131, 37, 263), (130, 36, 260)], ids=["elements", "16-byte"])
@pytest.mark.parametrize("target", SIMT)
def test_unmasked_tilings_nans_and_infs_where_the_clamps_read(tiled, target, m, k, n):
    """NaN and inf in A's last row and B's last column (read again by the clamped rows and columns past M, N,
    whose outputs are never stored), at k = 0, K - 1 and inside the leading partial tile: the outputs inside C
    keep the serial program's NaNs (payload bits) and values, and no other output turns NaN (:func:`_check`)."""
    exe = tiled(target, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    a[m - 1, 0] = np.array([0x7FC0_0ABC], np.uint32).view(np.float32)[0]  # the last row, k = 0
    b[k - 1, n - 1] = np.inf  # the last column, k = K - 1
    a[0, k - 1] = np.array([0xFF80_0011], np.uint32).view(np.float32)[0]  # a signalling NaN, k = K - 1: row 0
    a[7, 2], b[2, 9] = 0.0, np.inf  # 0 * inf at (7, 9), k = 2: inside the leading partial tile
    a[m - 2, :], b[:, n - 2] = 1e30, 1e30  # overflow to inf at (M - 2, N - 2)
    c = np.full((m, n), 7.0, np.float32)
    exe(a, b, c)
    want = _check(c, a, b, target)
    assert np.isnan(want[m - 1]).all() and np.isnan(want[0]).all() and np.isnan(want[7, 9])
    assert np.isinf(c[m - 2, n - 2]) and np.isinf(c[1:m - 1, n - 1]).all()
