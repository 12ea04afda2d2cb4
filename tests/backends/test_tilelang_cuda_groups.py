"""Rank-1 flat nests in 16-byte groups on CUDA (:mod:`intent_trace.backends.tilelang.cuda_groups`, issue 17: GELU
and pointwise chains): which nests are grouped, the program's shape (float4 loads and stores where every view
starts on a 16-byte boundary and the group is whole, element accesses at the clamped index otherwise), and the
values on tilelang-c running CUDA's mapping emulated: whole groups, tails no group of 4 divides, starts off a
16-byte boundary (``launch`` on slices), against NumPy (the element code's ops are exact here: no tolerance).
"""
import pathlib

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
torch = pytest.importorskip("torch")

from backends.cuda_ptx import assemble  # noqa: E402
from backends.tilelang_support import chain4 as chain, cuda_source  # noqa: E402
from intent_trace.backends.tilelang import cuda_kernels, metal_grid, targets  # noqa: E402
from intent_trace.backends.tilelang import target as tl_target  # noqa: E402
from intent_trace.backends.tilelang.target import generate  # noqa: E402

RNG = np.random.default_rng(41)
EMULATED = attrs.evolve(targets.C, flat_nest=lambda g: cuda_kernels.flat_nest(g, emulated=True),
                        host_workspaces=True)
#: below, at and past a group, a thread's step, a block (1024 elements) and tails of 1, 2 and 3
SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1025, 4096 + 6, 3 * 1024 + 1)


@intent.kernel
def affine_i32(x: I.In[I.i32, ("N",)], y: I.In[I.i32, ("N",)], out: I.Out[I.i32, ("N",)]):
    out[:] = x[:] * 3 + y[:]  # wraps around as NumPy's int32 does


@intent.kernel
def widen(x: I.In[I.f32, ("N",)], out: I.Out[I.f64, ("N",)]):
    out[:] = I.cast(x[:], I.f64) * 2.0


@intent.kernel
def fill(out: I.Out[I.f32, ("N",)]):
    out[:] = I.full((out.shape[0],), 1.5, I.f32)


@intent.kernel
def scale2d(x: I.In[I.f32, ("M", "N")], out: I.Out[I.f32, ("M", "N")]):
    out[:, :] = x[:, :] * 2.0


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", EMULATED)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})

    def built(kernel):
        return tl_target.build(kernel.trace(), target="tilelang-c")

    return built


def test_rank_1_nests_of_4_byte_views_are_grouped_others_are_not():
    nest = cuda_kernels.flat_nest(chain.trace())
    assert nest.group == cuda_kernels.GROUP == 4 and nest.width == cuda_kernels.THREADS_PER_BLOCK * 8
    assert cuda_kernels.flat_nest(affine_i32.trace()).group == 4
    assert cuda_kernels.flat_nest(widen.trace()).group == 1  # an 8-byte view: element accesses
    assert cuda_kernels.flat_nest(scale2d.trace()).group == 1  # rank 2: spread row by row
    assert cuda_kernels.flat_nest(chain.trace(), grouped=False).group == 1
    assert metal_grid.flat_nest(chain.trace()).group == 1  # Metal: a tail's repeated store would be a data race


def test_the_cuda_program_moves_whole_aligned_groups_in_16_bytes(tmp_path):
    program = generate(chain.trace(), "tilelang-cuda")
    assert program.count("T.vectorized(4)") == 3  # two loads, one store
    assert "& T.uint64(15)) == T.uint64(0)" in program  # every view's start on a 16-byte boundary
    source = cuda_source(program)
    assert source.count("*(float4*)(p") == 3  # p0, p1 loaded and p2 stored 16 bytes at a time
    built = assemble(source, pathlib.Path(tmp_path))
    if built is not None:  # this machine's nvcc: 16-byte global loads and stores, loads through the read-only path
        (ptx,) = built.ptx.values()
        assert "ld.global.nc.v4.f32" in ptx and "st.global.v4.f32" in ptx


def test_a_nest_with_no_grouped_read_keeps_its_element_stores():
    program = generate(fill.trace(), "tilelang-cuda")
    assert "T.vectorized" not in program and "T.min(" in program  # the clamped element store, still right


def _chain_want(x, y):
    return np.maximum(x * np.float32(1.5) + y, x) - np.float32(0.25)


@pytest.mark.parametrize("n", SIZES)
def test_grouped_chain_matches_numpy_on_every_size(emulated, n):
    exe = emulated(chain)
    assert "T.vectorized(4)" in exe.program
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    exe(x, y, out)
    np.testing.assert_array_equal(out, _chain_want(x, y))


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
def test_launch_on_views_off_a_16_byte_boundary_takes_element_accesses(emulated, offset):
    """``launch`` passes the caller's tensors as they are: slices starting 4, 8 or 12 bytes into an allocation run
    the element accesses (the kernel reads each start's low bits), 0 or 16 bytes the 16-byte ones; the output too
    may be the misaligned one. Every element right, none outside the slice touched."""
    exe = emulated(chain)
    n = 2 * 1024 + 5
    x = torch.from_numpy(RNG.standard_normal(n + 8).astype(np.float32))
    y = torch.from_numpy(RNG.standard_normal(n + 8).astype(np.float32))
    out = torch.full((n + 8,), float("nan"))
    xs, ys = x[offset:offset + n], y[4:4 + n]
    exe.launch(xs, ys, out[offset:offset + n])
    np.testing.assert_array_equal(out[offset:offset + n].numpy(), _chain_want(xs.numpy(), ys.numpy()))
    assert torch.isnan(out[:offset]).all() and torch.isnan(out[offset + n:]).all()


@pytest.mark.parametrize("n", (3, 1024, 1029))
def test_grouped_integer_nest_wraps_as_numpy(emulated, n):
    exe = emulated(affine_i32)
    info = np.iinfo(np.int32)
    x = RNG.integers(info.min, info.max, n, dtype=np.int32)
    y = RNG.integers(info.min, info.max, n, dtype=np.int32)
    out = np.zeros(n, np.int32)
    exe(x, y, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, x * np.int32(3) + y)


def test_grouped_nest_keeps_nan_payloads_and_signed_zeros(emulated):
    """T3: a NaN operand's payload (quietened) comes through the element code in a register as it does from memory;
    -0 and infinities are the IEEE results."""
    exe = emulated(chain)
    bits = np.array([0x7FC00001, 0xFFC01234, 0x7F800001, 0x80000000, 0x7F800000, 0xFF800000, 0, 0x3F800000],
                    np.uint32)
    x = bits.view(np.float32).copy()
    y = np.zeros(8, np.float32)
    out = np.zeros(8, np.float32)
    exe(x, y, out)
    want = np.array([0x7FC00001, 0xFFC01234, 0x7FC00001], np.uint32)
    np.testing.assert_array_equal(out[:3].view(np.uint32), want)  # max/mul/add/sub keep the first NaN operand's
    np.testing.assert_array_equal(out[3:], _chain_want(x[3:], y[3:]))


def test_the_schedule_counts_a_thread_s_elements_not_its_groups():
    schedule = str(tl_target.build(chain.trace(), target="tilelang-cuda").schedule)
    assert "flat_nest (elements=N, threads=128, per_thread=8)" in schedule, schedule


def test_only_plain_reads_and_one_store_are_placed_in_registers():
    """The text the element code is placed by: reads at ``f`` and one store at ``f``; an element's address handed
    to a helper (which may read past it), or a second store, keep the element accesses."""
    from intent_trace.backends.tilelang import cuda_groups

    views = {"p0": "float32", "p1": "float32", "p2": "float32"}
    plain = ["t4 = p0[f3]", "t5 = T.call_extern('float32', 'it_add_f32', t4, p1[f3])", "p2[f3] = t5"]
    assert cuda_groups._accesses(plain, "f3", views) == (["p0", "p1"], "p2")
    address = [plain[0], "t5 = T.call_extern('float32', 'h', T.access_ptr(p1[f3], 'r'))", plain[2]]
    assert cuda_groups._accesses(address, "f3", views)[1] is None
    assert cuda_groups._accesses([*plain, "p1[f3] = t4"], "f3", views)[1] is None
    assert cuda_groups._accesses(["t4 = p0[j9]", "p2[f3] = t4"], "f3", views) == ([], "p2")  # no read at f
