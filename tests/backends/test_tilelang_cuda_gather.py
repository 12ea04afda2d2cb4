"""Row gathers on tilelang-cuda (cuda_gather: a grid over the output rows, each block one chunk of one row, the
row's index read and checked once, the row copied as bits with every load issued before the first store).

On the H100/H200 (the lead's runs):

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda PYTHONPATH=$PWD .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_gather.py

The program text and what the local nvcc makes of it for sm_90a (no spills; every row load before the first row
store); the numbers on every executable target through the ``target`` fixture against NumPy's fancy indexing, bit
for bit: every dtype a row gather takes (f16, bf16, f32, i32, u8, with NaN and signed-zero bit patterns), row
lengths no chunk divides (1, 9, 1023, 1024, 1025, 2100) and rows of several chunks, rank-3 outputs (a batch of
token sequences), empty rows and empty index tensors, bad ids (the first, a middle and the last row, negative, far
out, several at once: the serial program's IndexError naming the axis, the id and the extent, the caller's output
unchanged).
"""
import attrs
import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.cuda_ptx import assemble
from backends.indexed_support import EMULATED, UNCHECKED, body, make_compiled
from backends.tilelang_support import cuda_source
from example_modules import benchmark_module
from intent_trace.backends.tilelang import cuda_gather, targets
from intent_trace.backends.tilelang.program import lower, schedule_of
from intent_trace.backends.tilelang.target import generate

zoo = benchmark_module("zoo_kernels")
RNG = np.random.default_rng(1717)
LENGTHS = (1, 9, 1023, 1024, 1025, 2100)  # 1024 elements a block's chunk: a tail in one chunk, two and three chunks


def _embedding(dtype, index=I.i64):
    @intent.kernel
    def lookup(table: I.In[dtype, ("V", "D")], ids: I.In[index, ("T",)], out: I.Out[dtype, ("T", "D")]):
        token = I.reshape(ids[:], (ids.shape[0], 1))
        feature = I.reshape(I.indices(I.domain(0, table.shape[1])), (1, table.shape[1]))
        out[:, :] = I.gather(table[:, :], (token, feature))

    return lookup


_DTYPES = {"f16": (I.f16, np.float16), "bf16": (I.bf16, ml_dtypes.bfloat16), "f32": (I.f32, np.float32),
           "i32": (I.i32, np.int32), "u8": (I.u8, np.uint8)}
_KERNELS = {name: _embedding(d) for name, (d, _) in _DTYPES.items()}
_I32_IDS = _embedding(I.f16, I.i32)


@intent.kernel
def batched_lookup(table: I.In[I.bf16, ("V", "D")], ids: I.In[I.i32, ("B", "T")], out: I.Out[I.bf16, ("B", "T", "D")]):
    token = I.reshape(ids[:, :], (ids.shape[0], ids.shape[1], 1))
    feature = I.reshape(I.indices(I.domain(0, table.shape[1])), (1, 1, table.shape[1]))
    out[:, :, :] = I.gather(table[:, :], (token, feature))


@pytest.fixture
def compiled(target, monkeypatch):
    return make_compiled(target, monkeypatch, "gather_rows")


def _table(dtype, shape):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    bits = RNG.integers(0, 2 ** (8 * np.dtype(dtype).itemsize), shape, dtype=np.uint64)
    table = bits.astype({2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]).view(dtype)
    return table  # every bit pattern: NaN payloads, infinities, signed zeros, subnormals (a copy moves bits)


def _bits(x):
    return x.view(f"u{x.dtype.itemsize}")


def _raises_unchanged(call, args, out, pattern):
    before = out.copy()
    with pytest.raises(IndexError, match=pattern):
        call(*args, out)
    np.testing.assert_array_equal(_bits(out), _bits(before))


# --- the program ---------------------------------------------------------------------------------------------

def test_the_cuda_program_reads_and_checks_each_row_s_id_once_and_copies_bits():
    text = body(generate(zoo.embedding_f16.trace(), "tilelang-cuda"))
    assert text.count("p1[") == 1  # the row's id, once a block (the flat nest read it once an element)
    assert text.count("itc_claim") == 1 and "itc_return" not in text  # a bad row is claimed; nothing leaves
    assert "it_decode_f16" not in text and "it_encode_f16" not in text  # the row moves as its bits
    # CUDA's default (cuda_indexed.VECTOR_GATHER): 4 16-byte units a thread where the rows are aligned whole units,
    # else the same chunk copied by elements, 4 a thread, every load before the stores
    assert text.count("itc_aligned16") == 1 and text.count("'itc_copy_units_4x128'") == 1
    assert text.count("in T.unroll(4):") == 2 and "T.alloc_local((4,), 'uint16')" in text


def test_the_element_copy_unrolls_a_thread_s_eight_elements():
    spec = attrs.evolve(targets.CUDA, indexed_grid=cuda_gather.gather_plan)
    text = body(lower(zoo.embedding_f16.trace(), spec).text)
    assert text.count("in T.unroll(8):") == 2 and "T.alloc_local((8,), 'uint16')" in text
    assert "T.vectorized" not in text and "itc_copy_units" not in text


def test_the_schedule_says_gather_rows():
    part = schedule_of(zoo.embedding_f16.trace(), targets.CUDA).general
    assert part.mapping == "gather_rows" and part.param("copy").startswith("16-byte units")
    assert part.param("per_thread") == 4 and part.param("chunk") == 4096
    assert schedule_of(batched_lookup.trace(), targets.CUDA).general.mapping == "gather_rows"


def test_the_emulated_program_loops_over_a_block_s_threads():
    text = body(lower(zoo.embedding_f16.trace(), EMULATED).text)
    assert "T.get_thread_binding" not in text and text.count("in T.serial(128):") == 1


@pytest.mark.parametrize("vector", [False, True], ids=["elements", "units"])
def test_sm90_issues_every_row_load_before_the_first_row_store_without_spills(tmp_path, vector):
    spec = attrs.evolve(targets.CUDA, indexed_grid=lambda g: cuda_gather.gather_plan(g, vector=vector))
    got = assemble(cuda_source(lower(zoo.embedding_f16.trace(), spec).text), tmp_path)
    if got is None:
        pytest.fail("no nvcc on this machine: the sm_90a lowering is not checked")
    (ptx,) = got.ptx.values()
    # 70 registers (elements) and 70 (units) with CUDA 13.0's ptxas; the flat nest it replaces had 32
    assert got.spills == {"kernel_kernel": (0, 0)} and got.registers["kernel_kernel"] <= 80, got.registers
    lines = ptx.splitlines()
    width = "v4.u32" if vector else "u16"
    loads = [k for k, s in enumerate(lines) if f"ld.global.nc.{width}" in s]
    stores = [k for k, s in enumerate(lines) if f"st.global.{width}" in s]
    assert len(loads) == 8 and len(stores) == 8 and max(loads) < min(stores), (loads, stores)


# --- the numbers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", LENGTHS)
@pytest.mark.parametrize("name", sorted(_DTYPES))
def test_rows_are_copied_bit_for_bit(compiled, name, d):
    np_dtype = _DTYPES[name][1]
    table = _table(np_dtype, (40, d))
    ids = RNG.integers(0, 40, 13).astype(np.int64)
    ids[[0, 12]] = (39, 0)  # the last and first rows of the table
    out = np.zeros((13, d), np_dtype)
    compiled(_KERNELS[name])(table, ids, out)
    np.testing.assert_array_equal(_bits(out), _bits(table[ids]))


def test_rank3_lookup_and_i32_ids(compiled):
    table = _table(ml_dtypes.bfloat16, (30, 1030))
    ids = RNG.integers(0, 30, (3, 5)).astype(np.int32)
    out = np.zeros((3, 5, 1030), ml_dtypes.bfloat16)
    compiled(batched_lookup)(table, ids, out)
    np.testing.assert_array_equal(_bits(out), _bits(table[ids]))
    f16 = _table(np.float16, (7, 9))
    ids = np.array([6, 0, 3, 3], np.int32)
    out = np.zeros((4, 9), np.float16)
    compiled(_I32_IDS)(f16, ids, out)
    np.testing.assert_array_equal(_bits(out), _bits(f16[ids]))


def test_empty_rows_and_no_ids(compiled):
    exe = compiled(zoo.embedding_f16)
    out = np.zeros((3, 0), np.float16)
    exe(np.zeros((5, 0), np.float16), np.array([1, 9, -2]), out)  # no element: nothing is read or checked
    out = np.zeros((0, 16), np.float16)
    exe(_table(np.float16, (5, 16)), np.zeros(0, np.int64), out)
    assert out.shape == (0, 16)


@pytest.mark.parametrize("d", [9, 1030])
def test_a_bad_id_anywhere_raises_the_serial_error_and_writes_nothing(compiled, d):
    exe = compiled(zoo.embedding_f16)
    table = _table(np.float16, (50, d))
    for position, bad in [(0, 50), (6, -1), (12, 50), (12, 2 ** 40), (3, -(2 ** 62))]:
        ids = RNG.integers(0, 50, 13).astype(np.int64)
        ids[position] = bad
        _raises_unchanged(exe, (table, ids), np.full((13, d), 3.0, np.float16),
                          rf"I.gather source: coordinate {bad} on axis 0 is outside its extent 50")
    ids = RNG.integers(0, 50, 13).astype(np.int64)
    ids[[1, 11]] = (77, -5)  # two bad ids: the one whose block claims the record first (as in the flat nest)
    _raises_unchanged(exe, (table, ids), np.full((13, d), 3.0, np.float16),
                      r"coordinate (77|-5) on axis 0 is outside its extent 50")
    ids[[1, 11]] = (49, 0)
    out = np.zeros((13, d), np.float16)
    exe(table, ids, out)  # the same executable, good ids: the rows, bit for bit
    np.testing.assert_array_equal(_bits(out), _bits(table[ids]))


def test_a_lookup_in_an_empty_table_raises_and_reads_nothing(compiled):
    _raises_unchanged(compiled(zoo.embedding_f16), (np.zeros((0, 1030), np.float16), np.zeros(3, np.int64)),
                      np.full((3, 1030), 3.0, np.float16), r"coordinate 0 on axis 0 is outside its extent 0")


@pytest.mark.parametrize("target", UNCHECKED)
def test_without_checks_a_bad_row_is_not_copied(target, monkeypatch):
    exe = make_compiled(target, monkeypatch, "gather_rows")(zoo.embedding_f16, checks=False)
    table = _table(np.float16, (8, 20))
    ids = np.array([1, 8, 2, -1], np.int64)
    out = np.full((4, 20), 5.0, np.float16)
    exe(table, ids, out)
    np.testing.assert_array_equal(_bits(out[[0, 2]]), _bits(table[[1, 2]]))  # the good rows; the bad ones: T10


_VARIANTS = {"guarded": dict(clamp=False), "units": dict(vector=True), "units4": dict(vector=True, per_thread=4),
             "rows16": dict(per_thread=16)}


@pytest.mark.parametrize("d", [9, 1000, 4104, 8200])  # units: 8 elements; a chunk of 8192 (units) or 4096 (units4)
@pytest.mark.parametrize("variant", sorted(_VARIANTS))
def test_the_ab_variants_copy_the_same_bits(target, monkeypatch, variant, d):
    # tools/indexed_ab.py's variants of the mapping (on tilelang-c emulated the 16-byte copy is CUDA's alone: there
    # the units' chunk is copied by the element loop CUDA falls back to for rows that are not whole units)
    import functools

    from intent_trace.backends.tilelang import target as tl_target

    options = _VARIANTS[variant]
    if target == "tilelang-cuda":
        monkeypatch.setitem(targets.TARGETS, target, attrs.evolve(
            targets.CUDA, indexed_grid=functools.partial(cuda_gather.gather_plan, **options)))
        monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    spec = attrs.evolve(EMULATED, indexed_grid=functools.partial(cuda_gather.gather_plan, emulated=True, **options))
    exe = make_compiled(target, monkeypatch, "gather_rows", spec)(zoo.embedding_f16)
    table = _table(np.float16, (20, d))
    ids = RNG.integers(0, 20, 7).astype(np.int64)
    out = np.zeros((7, d), np.float16)
    exe(table, ids, out)
    np.testing.assert_array_equal(_bits(out), _bits(table[ids]))
    ids[4] = 20
    _raises_unchanged(exe, (table, ids), np.full((7, d), 3.0, np.float16), r"coordinate 20 on axis 0")


@intent.kernel
def shifted_lookup(table: I.In[I.f32, ("V", "D")], ids: I.In[I.i32, ("T",)], out: I.Out[I.f32, ("T", "D")]):
    token = I.reshape(ids[:] * 2 + 1, (ids.shape[0], 1))  # a computed id: the element code, once a row
    feature = I.reshape(I.indices(I.domain(0, table.shape[1])), (1, table.shape[1]))
    out[:, :] = I.gather(table[:, :], (token, feature))


@intent.kernel
def two_index_lookup(table: I.In[I.u8, ("B", "V", "D")], b: I.In[I.i64, ("T",)], ids: I.In[I.i64, ("T",)],
                     out: I.Out[I.u8, ("T", "D")]):
    first = I.reshape(b[:], (b.shape[0], 1))
    token = I.reshape(ids[:], (ids.shape[0], 1))
    feature = I.reshape(I.indices(I.domain(0, table.shape[2])), (1, table.shape[2]))
    out[:, :] = I.gather(table[:, :, :], (first, token, feature))


def test_a_computed_id_is_the_row_s_element_code(compiled):
    table = _table(np.float32, (21, 1100))
    ids = np.array([0, 9, 3, 7], np.int32)
    out = np.zeros((4, 1100), np.float32)
    compiled(shifted_lookup)(table, ids, out)
    np.testing.assert_array_equal(_bits(out), _bits(table[ids * 2 + 1]))
    ids[2] = 11  # 2 * 11 + 1 = 23: outside 21
    _raises_unchanged(compiled(shifted_lookup), (table, ids), np.full((4, 1100), 3.0, np.float32),
                      r"coordinate 23 on axis 0 is outside its extent 21")


def test_two_leading_indices_each_checked_on_its_axis(compiled):
    table = _table(np.uint8, (3, 5, 1030))
    b, ids = np.array([2, 0, 1, 2], np.int64), np.array([4, 0, 3, 1], np.int64)
    out = np.zeros((4, 1030), np.uint8)
    exe = compiled(two_index_lookup)
    exe(table, b, ids, out)
    np.testing.assert_array_equal(out, table[b, ids])
    for axis, bad in ((0, 3), (1, -1)):
        bb, ii = b.copy(), ids.copy()
        (bb, ii)[axis][3] = bad
        _raises_unchanged(exe, (table, bb, ii), np.full((4, 1030), 9, np.uint8),
                          rf"coordinate {bad} on axis {axis} is outside its extent {(3, 5)[axis]}")
