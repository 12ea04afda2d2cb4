"""The Metal emulator's SIMD-group matrices (itm_matrix.h) on hand-written kernels, as TileLang's Metal ``T.gemm``
writes them: half and bfloat operands into float accumulators, loads and stores through threadgroup memory, against
NumPy references and hand-computed values; and what the emulator reports of a program that uses them wrongly
(divergent control flow, lane-dependent arguments, accesses past a buffer's end, a missing barrier).

The emulator treats each matrix function as a collective of the whole simdgroup (Apple does not document which lane
holds which element): these tests check that contract, not a per-lane layout.
"""
import re

import ml_dtypes
import numpy as np
import pytest

from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel, EmulationError

RNG = np.random.default_rng(18)
HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


def line_of(source: str, marker: str) -> int:
    (line,) = [i + 1 for i, text in enumerate(source.split("\n")) if text.rstrip().endswith(f"// {marker}")]
    return line


#: T.gemm's shape: operand tiles in threadgroup memory, mixed-type multiply-accumulate into a float matrix, stored
#: into a threadgroup tile that the threads then copy out element by element. Simdgroup s computes rows 8s..8s+8.
MIXED = HEADER + """
kernel void mm(device const ushort* a [[buffer(0)]], device const ushort* b [[buffer(1)]], device float* c [[buffer(2)]],
               uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup OPERAND a_s[16 * 16];
  threadgroup OPERAND b_s[16 * 8];
  threadgroup float c_s[16 * 8];
  for (uint i = tid; i < 16 * 16; i += 64) a_s[i] = as_type<OPERAND>(a[i]);
  for (uint i = tid; i < 16 * 8; i += 64) b_s[i] = as_type<OPERAND>(b[i]);
  threadgroup_barrier(mem_flags::mem_threadgroup);  // LOADED
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (int k = 0; k < 2; ++k) {
    MATRIX ma, mb;
    simdgroup_load(ma, &a_s[sg * 8 * 16 + k * 8], 16, 0, (bool)0);
    simdgroup_load(mb, &b_s[k * 8 * 8], 8, 0, (bool)0);
    simdgroup_multiply_accumulate(acc, ma, mb, acc);
  }
  simdgroup_store(acc, &c_s[sg * 8 * 8], 8, 0, (bool)0);  // STORE
  threadgroup_barrier(mem_flags::mem_threadgroup);  // STORED
  for (uint i = tid; i < 16 * 8; i += 64) c[i] = c_s[i];  // COPY
}
"""
NARROW = {"half": (np.float16, "simdgroup_half8x8"), "bfloat": (ml_dtypes.bfloat16, "simdgroup_bfloat8x8")}


def _mixed(operand: str, source: str = MIXED) -> str:
    return source.replace("OPERAND", operand).replace("MATRIX", NARROW[operand][1])


def _operands(operand: str):
    dtype = NARROW[operand][0]
    a = RNG.integers(-8, 8, (16, 16)).astype(dtype)  # integers: every product and sum exact in float
    b = RNG.integers(-8, 8, (16, 8)).astype(dtype)
    return a, b


@pytest.mark.parametrize("operand", sorted(NARROW))
@pytest.mark.parametrize("seed", [0, 5])
def test_half_and_bfloat_operands_into_a_float_accumulator(operand, seed):
    a, b = _operands(operand)
    c = np.full((16, 8), np.nan, np.float32)
    EmulatedKernel(_mixed(operand))({"a": a.view(np.uint16), "b": b.view(np.uint16), "c": c}, threads=64, seed=seed)
    assert c.tolist() == (a.astype(np.float64) @ b.astype(np.float64)).tolist()


def test_the_multiply_accumulate_fuses_each_product_into_the_float_accumulator():
    """The stated rounding (itm_matrix.h): c + a*b with one rounding. (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie in
    float; minus 1 fused it is 2^-11 + 2^-24 exactly, rounded first it would be 2^-11."""
    src = HEADER + """
kernel void fma(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
  simdgroup_float8x8 m, acc = make_filled_simdgroup_matrix<float, 8, 8>(-1.0f);
  simdgroup_load(m, a, 8, 0, (bool)0);
  simdgroup_multiply_accumulate(acc, m, m, acc);
  simdgroup_store(acc, d, 8, 0, (bool)0);
}
"""
    a = np.zeros((8, 8), np.float32)
    a[0, 0] = 1 + 2.0 ** -12
    d = np.zeros((8, 8), np.float32)
    EmulatedKernel(src)({"a": a, "d": d}, threads=32)
    assert d[0, 0] == 2.0 ** -11 + 2.0 ** -24
    assert (d.ravel()[1:] == -1).all()


def test_a_partial_simdgroup_loads_and_stores_the_whole_matrix():
    """40 threads: the second simdgroup has 8 lanes; its first lane takes the elements of the lanes it lacks."""
    a, b = _operands("half")
    c = np.full((16, 8), np.nan, np.float32)
    EmulatedKernel(_mixed("half").replace("i += 64", "i += 40"))(
        {"a": a.view(np.uint16), "b": b.view(np.uint16), "c": c}, threads=40)
    assert c.tolist() == (a.astype(np.float64) @ b.astype(np.float64)).tolist()


def test_a_matrix_function_in_divergent_control_flow_is_reported():
    src = HEADER + """
kernel void half_lanes(device const float* a [[buffer(0)]], device float* d [[buffer(1)]],
                       uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  if (lane < 16) simdgroup_load(m, a, 8, 0, (bool)0);  // LOAD
  simdgroup_store(m, d, 8, 0, (bool)0);
}
"""
    with pytest.raises(EmulationError, match=rf"simdgroup_load at line {line_of(src, 'LOAD')} is not reached by every "
                                             r"lane of simdgroup 0 of threadgroup \(0,0,0\) together \(lanes "
                                             r"0x0000ffff of 0xffffffff\): SIMD-group matrix functions need uniform "
                                             r"control flow"):
        EmulatedKernel(src)({"a": np.ones((8, 8), np.float32), "d": np.zeros((8, 8), np.float32)}, threads=32)


@pytest.mark.parametrize("change, what", [
    ("simdgroup_load(m, a, 8, ulong2(lane % 2, 0), (bool)0);", "arguments"),  # a lane-dependent origin
    ("m = make_filled_simdgroup_matrix<float, 8, 8>(float(lane));", "matrices"),  # a lane-dependent value
])
def test_lanes_passing_different_arguments_or_matrices_are_reported(change, what):
    src = HEADER + """
kernel void lanes(device const float* a [[buffer(0)]], device float* d [[buffer(1)]],
                  uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  CHANGE
  simdgroup_store(m, d, 8, 0, (bool)0);  // STORE
}
""".replace("CHANGE", change)
    function, line = ("simdgroup_load", line_of(src, "STORE") - 1) if what == "arguments" else \
        ("simdgroup_store", line_of(src, "STORE"))
    with pytest.raises(EmulationError, match=rf"{function} at line {line}: the lanes of simdgroup 0 of threadgroup "
                                             rf"\(0,0,0\) pass different {what}"):
        EmulatedKernel(src)({"a": np.ones((8, 9), np.float32), "d": np.zeros((8, 8), np.float32)}, threads=32)


def test_a_matrix_load_and_store_past_the_end_are_reported_and_not_performed():
    src = HEADER + """
kernel void past(device const float* a [[buffer(0)]], device float* d [[buffer(1)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, a, 8, ulong2(0, 1), (bool)0);  // LOAD
  simdgroup_store(m, d, 8, ulong2(0, 1), (bool)0);  // STORE
}
"""
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    memory = np.full(72, -1.0, np.float32)
    d = memory[:64]  # the row past d's end must stay -1
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(src)({"a": a, "d": d}, threads=32)
    text = str(e.value)
    assert re.search(rf"out-of-bounds read of device buffer a: element 64 of 64, by thread \(\d+,0,0\) of threadgroup "
                     rf"\(0,0,0\) at line {line_of(src, 'LOAD')} \(not performed\)", text), text
    assert re.search(rf"out-of-bounds write of device buffer d: element 64 of 64, by thread \(\d+,0,0\) of "
                     rf"threadgroup \(0,0,0\) at line {line_of(src, 'STORE')} \(not performed\)", text), text
    assert (memory[64:] == -1).all()


def test_reading_a_stored_matrix_without_a_barrier_is_a_race():
    """The barrier TileLang's ThreadSync leaves out after a simdgroup_store into threadgroup memory
    (metal_matmul.py): without it, a thread copies out an element another simdgroup's lane stored."""
    src = _mixed("half").replace("threadgroup_barrier(mem_flags::mem_threadgroup);  // STORED", "")
    a, b = _operands("half")
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(src)({"a": a.view(np.uint16), "b": b.view(np.uint16), "c": np.zeros((16, 8), np.float32)},
                            threads=64)
    race = re.search(r"data race on threadgroup array c_s\[\d+\]: (read|write) by thread \((\d+),0,0\) of threadgroup "
                     r"\(0,0,0\) at line (\d+) and (read|write) by thread \((\d+),0,0\) of threadgroup \(0,0,0\) at "
                     r"line (\d+), with no barrier between them", str(e.value))
    assert race is not None, str(e.value)
    assert {int(race[3]), int(race[6])} == {line_of(src, "STORE"), line_of(src, "COPY")}
