"""The f32 matmul on CUDA cores (cuda_matmul_simt): an SGEMM -- 256 threads a block, a thread's 8 x 8 (or 8 x 16)
register block of C (two float4 fragments of A and two or four of B a k), double-buffered shared tiles, the next
tile's global loads in registers before the current tile's multiply-adds, 16-byte global loads and stores where K
and N are multiples of 4 (element ones otherwise), one fused multiply-add a product (T10), tails read as zeros and
stored only inside C, NaN outputs recomputed by the serial program (x86's payloads). The calls get
``cuda_matmul_simt.SIMT`` (the unmasked 128 x 256 program: test_tilelang_cuda_matmul_simt_tilings.py reads its
text); the structure tests here read the masked 128 x 128 program's (``STAGED``), the kernel tests run the default.

On the H100 (the lead's run)::

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/backends/test_tilelang_cuda_matmul_f32.py tests/backends/test_tilelang_cuda.py -k "f32"

The program text: never ``T.gemm`` (f32 tensor-core MMAs are TF32: Hopper's wgmma has no FP32 operands), ``fmaf``
in the inner loop; TileLang lowers it for sm_90a and the local nvcc assembles it without spills, with 16-byte
global and shared loads. The numbers: on every executable target against NumPy float64 within T5's bound ((K + 1) u
sum |a||b|, plus the subnormal products' absolute error), at extents no tile divides, both variants; NaN results keep
the serial program's payload bits; on tilelang-c the C target runs the CUDA program emulated (its blocks one after
another, each phase between barriers a serial loop over the block's threads).
"""
import re
import shutil
import subprocess

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source
from intent_trace.backends.tilelang import cuda, cuda_kernels, cuda_matmul_simt, targets
from intent_trace.backends.tilelang import target as tl_target

RNG = np.random.default_rng(3232)
U32 = 2.0 ** -24
EMULATED = attrs.evolve(targets.C, specializations=cuda_kernels.emulated_specializations)
SIMT_TARGETS = ("tilelang-c", "tilelang-cuda")
VECTOR = "16-byte accesses"  # the first line of the variant with 16-byte loads and stores


@intent.kernel
def matmul_f32(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
    m, k, n = I.domain(0, a.shape[0]), I.domain(0, a.shape[1]), I.domain(0, b.shape[1])
    c[m, n] = I.matmul(a[m, k], b[k, n], acc_dtype=I.f32)


def _sizes(m, k, n) -> dict:
    return {0: m, 1: k, 2: n}


#: the tiling whose program text the structure tests below read (the next tile staged in registers, one fragment
#: slot); the programs a call gets are cuda_matmul_simt.SIMT's, whichever candidate that is
STAGED = cuda_matmul_simt.SimtTiling()


def test_the_calls_get_the_module_s_tiling():
    got = [s.program for s in cuda_kernels.specializations(matmul_f32.trace(), targets.CUDA)]
    assert got == [s.program for s in cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA)]
    default = cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, cuda_matmul_simt.SIMT)
    assert got[:2] == [s.program for s in default]
    assert cuda_matmul_simt.SIMT in cuda_matmul_simt.CANDIDATES


def test_the_program_is_an_sgemm_on_cuda_cores_at_any_extents():
    vector, element = cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, STAGED)
    tk = STAGED.tk
    for spec in (vector, element):
        p = spec.program
        assert "T.gemm" not in p and "T.call_extern('float32', 'fmaf', a[i], b[j], acc[i * 8 + j])" in p
        # double-buffered shared tiles (A's k-major, rows padded), one barrier a tile
        assert f"A_s = T.alloc_shared((2, {tk}, 132), 'float32')" in p and p.count("T.sync_threads()") == 2
        assert "a[h * 4 + v] = A_s[ko % 2, kk, " in p and "B_s[(ko + 1) % 2, tx // 32 + 8 * l, " in p
        # the next tile's loads (into registers) come before this tile's multiply-adds
        assert p.index("ga[l * 4 + v] = ", p.index("for ko in")) < p.index("'fmaf'")
        assert spec.applies(_sizes(1, 4, 4)) and spec.applies(_sizes(130, 36, 132))
        assert not spec.applies(_sizes(0, 4, 4))  # an empty extent: the general program
    # 16-byte global loads and stores of whole 4-element groups, only where K and N are multiples of 4
    assert VECTOR in vector.program and VECTOR not in element.program
    assert "for v in T.vectorized(4):\n                    ga[l * 4 + v] = A[by * 128 + tx // 2, " in vector.program
    assert "T.vectorized" in element.program and "A[T.min(by * 128 + tx // 2, d0 - 1), " in element.program
    assert not vector.applies(_sizes(130, 37, 132)) and not vector.applies(_sizes(130, 36, 130))
    assert element.applies(_sizes(130, 37, 129))
    # the schedule says which program a call gets and why
    assert vector.part.mapping == element.part.mapping == "tiled_matmul" and "CUDA cores" in vector.part.reason
    assert vector.part.param("tile") == f"128x128x{tk}" and vector.part.param("accesses").startswith("16-byte")
    assert element.part.param("accesses").startswith("elements")
    for spec in (vector, element):
        source = cuda_source(spec.program)
        assert "fmaf(a[" in source and "mma" not in source.replace("#pragma", "") and "__syncthreads()" in source
        assert "__launch_bounds__(256, 2)" in source
        assert ("*(float4*)(A + " in source) == (spec is vector)  # A's global loads
        assert "*(float4*)(a + (h" in source  # the fragments: 16-byte shared loads


def test_a_prefetching_program_loads_each_k_s_fragments_before_the_previous_k_s_products():
    """CUTLASS's SIMT mainloop (``SimtTiling.prefetch``): fragments in two register slots, k + 1's loaded before k's
    multiply-adds; the tile's last k's multiply-adds after the barrier and the next tile's first fragments."""
    t = cuda_matmul_simt.SimtTiling(8, 2, True)
    for spec in cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, t):
        p = spec.program
        assert "a = T.alloc_local((16,), 'float32')" in p and p.count("T.sync_threads()") == 2
        loop = p[p.index("for ko in"):p.index("nan_l[0] = 0")]
        steps = loop.index("for kk in T.unroll(7):")
        ahead = loop.index("a[(kk + 1) % 2 * 8 + h * 4 + v] = A_s[ko % 2, kk + 1, ")
        assert steps < ahead < loop.index("'fmaf', a[kk % 2 * 8 + i], b[kk % 2 * 8 + j], ")
        barrier = loop.index("T.sync_threads()")
        assert loop.index("A_s[(ko + 1) % 2, tx % 2 * 4 + 8 * l + v, tx // 2] = ga[") < barrier
        assert barrier < loop.index("a[0 * 8 + h * 4 + v] = A_s[(ko + 1) % 2, 0, ") < loop.index(
            "'fmaf', a[1 * 8 + i], b[1 * 8 + j], ")
        # the first tile's first fragments, after the first barrier
        assert p.index("T.sync_threads()") < p.index("a[0 * 8 + h * 4 + v] = A_s[0, 0, ") < p.index("for ko in")
        assert spec.part.param("pipelining").endswith("fragments double-buffered in registers")
    (emulated, _) = cuda_matmul_simt.simt(matmul_f32.trace(), targets.C, t)
    # registers that live across a barrier are a row a thread; the loop's two phases, a thread at a time each
    assert "a = T.alloc_local((4096,), 'float32')" in emulated.program
    assert emulated.program.count("for tx in T.serial(256):") == 6


def test_an_async_copying_program_places_its_own_barriers_and_waits_before_them():
    """``SimtTiling.async_copy``: the next tile by cp.async (4-byte copies of A's transposed elements, 16-byte ones of
    B's groups; ``src-size`` 0 past the matrix, from a clamped address), no staging registers, the wait before the
    tile's barrier; TileLang inserts no barrier of its own (it cannot see where the copies land)."""
    t = cuda_matmul_simt.SimtTiling(16, 2, False, True)
    vector, element = cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, t)
    for spec in (vector, element):
        p = spec.program
        assert cuda.OWN_BARRIERS in p and cuda.pass_configs(p)["tl.disable_thread_storage_sync"] is True
        assert "ga = " not in p and "gb = " not in p and p.count("T.sync_threads()") == 2
        loop = p[p.index("for ko in"):p.index("nan_l[0] = 0")]
        copy = loop.index("'itc_cp_async4', T.access_ptr(A_s[(ko + 1) % 2, tx % 2 * 4 + 8 * l + v, tx // 2], 'w')")
        assert copy < loop.index("'fmaf'") < loop.index("'itc_cp_async_wait'") < loop.index("T.sync_threads()")
        assert "T.min(by * 128 + tx // 2, d0 - 1)" in loop  # a source address inside A even where nothing is read
        assert "itc_cp_async4(void* dst, const void* src, int ok)" in p and "cp.async.wait_all" in p
        assert spec.part.param("pipelining").startswith("double-buffered shared tiles, next tile by cp.async")
        source = cuda_source(p)
        assert source.count("__syncthreads()") == 2
    assert "'itc_cp_async16', T.access_ptr(B_s[(ko + 1) % 2, " in vector.program
    assert "itc_cp_async16'" not in element.program
    # the program without cp.async keeps TileLang's barrier analysis
    plain = cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA)[0].program
    assert cuda.OWN_BARRIERS not in plain and "tl.disable_thread_storage_sync" not in cuda.pass_configs(plain)
    (emulated, _) = cuda_matmul_simt.simt(matmul_f32.trace(), targets.C, t)
    assert "cp_async" not in emulated.program and cuda.OWN_BARRIERS not in emulated.program


def test_the_emulated_program_is_the_cuda_one_a_thread_at_a_time():
    vector, element = cuda_matmul_simt.simt(matmul_f32.trace(), targets.C, STAGED)
    for spec in (vector, element):
        p = spec.program
        assert p.count("for tx in T.serial(256):") == 4  # init, first tile, each tile, store: the barriers' phases
        assert "T.sync_threads()" not in p and "acc = T.alloc_local((16384,), 'float32')" in p
        assert "T.call_extern('float32', 'fmaf', a[i], b[j], acc[tx * 64 + i * 8 + j])" in p
        assert "T.vectorized" not in p
    assert vector.aligned == ((1, 4), (2, 4)) and not element.aligned


def _name(t) -> str:
    return (f"tk{t.tk}-{t.min_blocks}blocks" + ("-prefetch" if t.prefetch else "") + ("-async" if t.async_copy else "")
            + ("-unmasked" if t.unmasked else "") + f"-n{t.tn}")


@pytest.mark.parametrize("t", cuda_matmul_simt.CANDIDATES, ids=_name)
def test_the_programs_assemble_for_sm90a_without_spills(tmp_path, t):
    """The local nvcc, for each tiling tools/simt_ab.py times: no spills, registers within the occupancy the program
    asks for (``min_blocks`` blocks of 256 threads an SM), 16-byte shared loads for the fragments (prefetching: one
    more k's, the first tile's) and (K, N multiples of 4) global loads, 64 FMAs a k."""
    nvcc, ptxas = shutil.which("nvcc"), shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if nvcc is None:
        pytest.fail("nvcc is not on PATH")
    for k, spec in enumerate(cuda_matmul_simt.simt(matmul_f32.trace(), targets.CUDA, t)):
        path = tmp_path / f"simt{k}.cu"
        path.write_text(cuda_source(spec.program))
        import tilelang

        root = tilelang.__path__[0]
        r = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-ptx", "--fmad=false", "-w", f"-I{root}/src",
                            f"-I{root}/3rdparty/cutlass/include", str(path), "-o", str(path) + ".ptx"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(path) + ".ptx", "-o", str(path) + ".cubin"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert int(re.search(r"(\d+) bytes spill stores", r.stderr).group(1)) == 0, r.stderr
        assert int(re.search(r"Used (\d+) registers", r.stderr).group(1)) <= 65536 // (256 * t.min_blocks)
        ptx = (tmp_path / f"simt{k}.cu.ptx").read_text()
        # unmasked: the last tile's multiply-adds peeled after the loop (a second copy of a tile's)
        per_k = 2 + t.tn // 64  # two float4 of A's rows, two or four of B's columns
        shared = 2 * per_k * t.tk if t.unmasked else per_k * (t.tk + t.prefetch)
        fmas = 8 * t.tn // 16 * t.tk * (1 + t.unmasked)
        assert ptx.count("ld.shared.v4.f32") == shared and ptx.count("fma.rn.f32") == fmas
        groups = 2 * t.tk // 8  # a thread's float4 groups of A in the first tile and the loop's
        b_groups = groups * t.tn // 128  # and of B (a 256-column tile: twice as many)
        if t.async_copy:  # A's groups as four 4-byte copies, B's one 16-byte copy (elements: four); one wait each
            assert ptx.count("ld.global.nc.v4.f32") == 0 and ptx.count("cp.async.wait_all") == 2
            assert ptx.count("cp.async.cg.shared.global") == (b_groups if k == 0 else 0)
            assert ptx.count("cp.async.ca.shared.global") == 4 * groups + (0 if k == 0 else 4 * b_groups)
            assert ptx.count("bar.sync") == 2  # TileLang adds none (cuda.OWN_BARRIERS)
        else:
            assert ptx.count("ld.global.nc.v4.f32") == (groups + b_groups if k == 0 else 0)
        assert "mma" not in ptx and "tf32" not in ptx


@pytest.fixture
def compiled(target, monkeypatch):
    if target == "tilelang-c":
        monkeypatch.setitem(targets.TARGETS, target, EMULATED)
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def compiled(kernel, sizes):
        exe = intent.compile(kernel, target=target)
        if target in SIMT_TARGETS:  # the variant the extents select: 16-byte accesses where K and N allow them
            spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), sizes)))
            assert spec is not None and "fmaf" in spec.program, spec
            assert (VECTOR in spec.program) == (sizes[1] % 4 == 0 and sizes[2] % 4 == 0)
        return exe

    return compiled


def _serial(a, b):
    """The serial program's sum on x86 NumPy: from +0, add each rounded product in ascending k (x86 NaN rules)."""
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for kk in range(a.shape[1]):
            c = c + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    return c


def _check(c, a, b, target):
    with np.errstate(all="ignore"):
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = (a.shape[1] + 1) * U32 * (np.abs(a).astype(np.float64) @ np.abs(b)) + a.shape[1] * 2.0 ** -149
    want = _serial(a, b)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(c), nan)
    if target in SIMT_TARGETS:  # recomputed by the serial program's helpers: its payloads, bit for bit
        np.testing.assert_array_equal(c[nan].view(np.uint32), want[nan].view(np.uint32))
    ok = np.isfinite(exact) & np.isfinite(want)
    assert np.all(np.abs(c[ok] - exact[ok]) <= bound[ok]), np.max(np.abs(c[ok] - exact[ok]) / bound[ok])
    return want


# (M, K, N): 16-byte variant where K and N are multiples of 4, element variant otherwise; tails of every axis
# (a tile of K is 8), one-element and one-block extents
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 7, 5), (7, 4, 8), (1, 256, 4), (128, 16, 128), (127, 129, 128),
                                   (129, 36, 257), (257, 36, 132), (3, 128, 260), (130, 37, 129), (257, 40, 300)])
def test_f32_matmul_within_t5s_bound_at_tails(compiled, target, m, k, n):
    _check_random(compiled(matmul_f32, (m, k, n)), (m, k, n), target)


def _check_random(exe, sizes, target, rng=RNG):
    """``exe`` on standard normal A (M x K), B (K x N) into a NaN-filled C, checked by :func:`_check`."""
    m, k, n = sizes
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    exe(a, b, c)
    _check(c, a, b, target)


@pytest.mark.parametrize("n", [131, 132], ids=["elements", "16-byte"])
def test_f32_matmul_nans_infs_zeros_and_subnormals(compiled, target, n):
    m, k = 140, 24
    exe = compiled(matmul_f32, (m, k, n))
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    a[3, 5] = np.array([0x7FC0_1234], np.uint32).view(np.float32)[0]  # a NaN payload reaches row 3
    b[6, 1] = np.array([0xFF80_0055], np.uint32).view(np.float32)[0]  # a signalling NaN, sign set: column 1
    a[5, 2], b[2, 7] = 0.0, np.inf  # 0 * inf: x86's default NaN at (5, 7)
    a[9, :], b[:, 11] = 1e30, 1e30  # overflow to inf at (9, 11)
    a[12, :] *= np.float32(1e-38)  # subnormal products in row 12
    a[4, :] = -0.0  # row 4: +0 + (-0 * x) keeps +0
    a[139, :] = 2.0  # the last row, in the second block's tail
    c = np.full((m, n), np.nan, np.float32)
    exe(a, b, c)
    want = _check(c, a, b, target)
    assert np.isnan(want[3]).all() and np.isnan(want[5, 7]) and np.isinf(want[9, 11])
    zeros = c[4][~np.isnan(want[4])]
    assert np.isinf(c[9, 11]) and c[9, 11] > 0 and np.all(zeros == 0) and not np.signbit(zeros).any()


def test_wrong_dtype_and_extents_leave_the_output_unchanged(compiled):
    exe = compiled(matmul_f32, (2, 3, 4))
    c = np.full((2, 4), 5.0, np.float32)
    with pytest.raises(TypeError):
        exe(np.ones((2, 3), np.float64), np.ones((3, 4), np.float32), c)
    with pytest.raises(ValueError, match="K"):
        exe(np.ones((2, 3), np.float32), np.ones((5, 4), np.float32), c)
    assert np.all(c == 5.0)


@pytest.mark.parametrize("tiling", [t for t in cuda_matmul_simt.CANDIDATES if t != cuda_matmul_simt.SIMT], ids=_name)
@pytest.mark.parametrize("m,k,n", [(257, 36, 132), (130, 37, 129), (3, 8, 5)], ids=["16-byte", "elements", "one-tile"])
def test_the_tilings_tools_simt_ab_compares_are_right_too(monkeypatch, tiling, m, k, n):
    """Any tiling the A/B tool may pick (cuda_matmul_simt.SIMT): the emulated program within T5's bound at tails, and
    with one tile of K (prefetching: no next tile's fragments)."""
    monkeypatch.setattr(cuda_matmul_simt, "SIMT", tiling)
    monkeypatch.setattr(cuda_matmul_simt, "WIDE_BLOCKS", 0)  # a 256-column tiling at every size
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", EMULATED)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    exe = intent.compile(matmul_f32, target="tilelang-c")
    spec = exe.specialization_for(dict(zip((ev.extent for ev in exe.graph.extents), (m, k, n))))
    assert f"A_s = T.alloc_local((2, {tiling.tk}, 132), 'float32')" in spec.program
    _check_random(exe, (m, k, n), "tilelang-c")
