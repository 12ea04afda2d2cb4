"""The Metal emulator on hand-written kernels: threadgroups of many threads meeting at barriers, the race detector
(both threads and the source line named), out-of-bounds accesses (reported, never performed), barrier divergence,
simdgroup functions and matrices, atomics, half/bfloat, against NumPy/ml_dtypes references."""
import re

import ml_dtypes
import numpy as np
import pytest

from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel, EmulationError
from intent_trace.backends.tilelang.metal_emulation.translate import TranslationError

RNG = np.random.default_rng(3)
HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


def line_of(source: str, marker: str) -> int:
    """The 1-based line of the Metal source that carries ``// marker``."""
    (line,) = [i + 1 for i, text in enumerate(source.split("\n")) if text.rstrip().endswith(f"// {marker}")]
    return line


def thread(t: int, g: int = 0) -> str:
    return re.escape(f"thread ({t},0,0) of threadgroup ({g},0,0)")


REDUCE = HEADER + """
kernel void reduce(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                   uint tid [[thread_position_in_threadgroup]], uint gid [[threadgroup_position_in_grid]]) {
  threadgroup float buf[64];
  buf[tid] = x[gid * 64 + tid];  // FILL
  threadgroup_barrier(mem_flags::mem_threadgroup);  // BARRIER
  for (uint s = 32; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];  // STEP
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BARRIER
  }
  if (tid == 0) out[gid] = buf[0];
}
"""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_threadgroup_reduction_with_barriers_is_right_in_any_order(seed):
    x = RNG.integers(-50, 50, 4 * 64).astype(np.float32)  # integers: exact in any order
    out = np.zeros(4, np.float32)
    EmulatedKernel(REDUCE)({"x": x, "out": out}, grid=4, threads=64, seed=seed)
    assert out.tolist() == x.reshape(4, 64).sum(axis=1).tolist()


def test_threadgroup_reduction_without_its_barriers_is_a_race_naming_both_threads_and_the_lines():
    src = "\n".join(line for line in REDUCE.split("\n") if "// BARRIER" not in line)
    out = np.zeros(1, np.float32)
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(src)({"x": np.ones(64, np.float32), "out": out}, grid=1, threads=64)
    step, fill = line_of(src, "STEP"), line_of(src, "FILL")
    # thread 0 runs first, through every step: it reads buf[32], ..., buf[1] (at STEP) before threads 32, ..., 1
    # write them (at FILL), with no barrier between
    for k in (1, 2, 4, 8, 16):
        assert re.search(rf"data race on threadgroup array buf\[{k}\]: read by {thread(0)} at line {step} and write "
                         rf"by {thread(k)} at line {fill}, with no barrier between them", str(e.value)), str(e.value)


def test_the_barrier_must_fence_the_memory_it_orders():
    """mem_none orders execution, not memory: the reduction with mem_none barriers still races."""
    src = REDUCE.replace("mem_flags::mem_threadgroup", "mem_flags::mem_none")
    with pytest.raises(EmulationError, match=r"data race on threadgroup array buf"):
        EmulatedKernel(src)({"x": np.ones(64, np.float32), "out": np.zeros(1, np.float32)}, threads=64)
    device_only = REDUCE.replace("mem_flags::mem_threadgroup", "mem_flags::mem_device")
    with pytest.raises(EmulationError, match=r"data race on threadgroup array buf"):
        EmulatedKernel(device_only)({"x": np.ones(64, np.float32), "out": np.zeros(1, np.float32)}, threads=64)
    both = REDUCE.replace("mem_flags::mem_threadgroup", "mem_flags::mem_device | mem_flags::mem_threadgroup")
    out = np.zeros(1, np.float32)
    EmulatedKernel(both)({"x": np.ones(64, np.float32), "out": out}, threads=64)
    assert out[0] == 64


CLASH = HEADER + """
kernel void clash(device int* out [[buffer(0)]], uint tid [[thread_position_in_grid]]) {
  out[tid / 2] = (int)tid;  // WRITE
}
"""


def test_two_threads_writing_one_device_element_race_at_every_element():
    out = np.zeros(4, np.int32)
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(CLASH)({"out": out}, threads=8)
    line = line_of(CLASH, "WRITE")
    for k in range(4):  # threads 2k and 2k+1 collide at out[k]
        assert re.search(rf"data race on device buffer out\[{k}\]: write by {thread(2 * k)} at line {line} and write "
                         rf"by {thread(2 * k + 1)} at line {line}", str(e.value)), (k, str(e.value))


def test_threads_of_different_threadgroups_race_even_across_a_barrier():
    src = HEADER + """
kernel void groups(device int* out [[buffer(0)]], uint gid [[threadgroup_position_in_grid]]) {
  threadgroup_barrier(mem_flags::mem_device);
  out[0] = (int)gid;  // WRITE
  threadgroup_barrier(mem_flags::mem_device);
}
"""
    with pytest.raises(EmulationError, match=rf"out\[0\]: write by {thread(0, 0)} at line {line_of(src, 'WRITE')} and "
                                             rf"write by {thread(0, 1)}"):
        EmulatedKernel(src)({"out": np.zeros(1, np.int32)}, grid=2, threads=1)


COUNT = HEADER + """
kernel void count(device atomic_int* counts [[buffer(0)]], device const int* keys [[buffer(1)]],
                  device atomic_uint* maxes [[buffer(2)]], uint tid [[thread_position_in_grid]]) {
  int k = keys[tid];
  atomic_fetch_add_explicit(&counts[k], 1, memory_order_relaxed);
  atomic_fetch_max_explicit(&maxes[k], tid, memory_order_relaxed);
}
"""


def test_atomic_counting_is_not_a_race_and_counts_right():
    keys = RNG.integers(0, 5, 3 * 64).astype(np.int32)
    counts, maxes = np.zeros(5, np.int32), np.zeros(5, np.uint32)
    EmulatedKernel(COUNT)({"counts": counts, "keys": keys, "maxes": maxes}, grid=3, threads=64, seed=7)
    assert counts.tolist() == np.bincount(keys, minlength=5).tolist()
    assert maxes.tolist() == [int(np.flatnonzero(keys == k).max()) for k in range(5)]


def test_the_plain_read_modify_write_version_races():
    src = COUNT.replace("atomic_int", "int").replace("atomic_uint", "uint").replace(
        "atomic_fetch_add_explicit(&counts[k], 1, memory_order_relaxed);", "counts[k] += 1;  // ADD").replace(
        "  atomic_fetch_max_explicit(&maxes[k], tid, memory_order_relaxed);\n", "")
    keys = np.zeros(2, np.int32)
    with pytest.raises(EmulationError, match=rf"counts\[0\]: write by {thread(0)} at line {line_of(src, 'ADD')} and "
                                             rf"read by {thread(1)}"):
        EmulatedKernel(src)({"counts": np.zeros(1, np.int32), "keys": keys, "maxes": np.zeros(1, np.uint32)}, threads=2)


def test_compare_exchange_and_exchange():
    src = HEADER + """
kernel void claim(device atomic_int* slots [[buffer(0)]], device int* won [[buffer(1)]],
                  device atomic_int* last [[buffer(2)]], uint tid [[thread_position_in_grid]]) {
  int expected = 0;
  won[tid] = atomic_compare_exchange_weak_explicit(&slots[tid % 3], &expected, (int)tid + 1, memory_order_relaxed,
                                                   memory_order_relaxed) ? 1 : -expected;
  atomic_exchange_explicit(&last[0], (int)tid, memory_order_relaxed);
}
"""
    slots, won, last = np.zeros(3, np.int32), np.zeros(12, np.int32), np.zeros(1, np.int32)
    EmulatedKernel(src)({"slots": slots, "won": won, "last": last}, grid=3, threads=4, seed=5)
    for s in range(3):  # exactly one thread claims each slot; every other saw the winner's value
        threads = np.arange(s, 12, 3)
        winners = threads[won[threads] == 1]
        assert len(winners) == 1 and slots[s] == winners[0] + 1
        assert all(won[t] == -(winners[0] + 1) for t in threads if t != winners[0])
    assert 0 <= last[0] < 12


SHIFT = HEADER + """
kernel void shift(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                  uint tid [[thread_position_in_grid]]) {
  y[tid + 1] = x[(int)tid - 1];  // SHIFT
}
"""


def test_out_of_bounds_accesses_are_reported_and_never_performed():
    x = np.arange(8, dtype=np.float32)
    memory = np.full(10, -1.0, np.float32)  # y is memory[1:9]: the elements on both sides must stay -1
    y = memory[1:9]
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(SHIFT)({"x": x, "y": y}, threads=8)
    line = line_of(SHIFT, "SHIFT")
    text = str(e.value)
    assert re.search(rf"out-of-bounds read of device buffer x: element -1 of 8, by {thread(0)} at line {line} "
                     r"\(not performed\)", text), text
    assert re.search(rf"out-of-bounds write of device buffer y: element 8 of 8, by {thread(7)} at line {line}", text)
    assert memory[0] == -1 and memory[9] == -1
    assert y.tolist() == [-1, 0, *range(0, 6)]  # the in-bounds writes happened (a read out of bounds gives 0)


def test_a_thread_that_returns_before_a_barrier_is_reported():
    src = HEADER + """
kernel void early(device float* y [[buffer(0)]], uint tid [[thread_position_in_threadgroup]]) {
  if (tid == 3) return;
  threadgroup_barrier(mem_flags::mem_device);  // BARRIER
  y[tid] = 1.0f;
}
"""
    with pytest.raises(EmulationError, match=rf"threadgroup_barrier at line {line_of(src, 'BARRIER')} is not reached "
                                             rf"by every thread: {thread(3)} returned while {thread(0)} waits there"):
        EmulatedKernel(src)({"y": np.zeros(4, np.float32)}, threads=4)


SIMD = HEADER + """
kernel void simd(device const int* x [[buffer(0)]], device int* sums [[buffer(1)]], device int* down [[buffer(2)]],
                 device int* prefix [[buffer(3)]], device int* maxes [[buffer(4)]], device int* first [[buffer(5)]],
                 uint tid [[thread_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                 uint sg [[simdgroup_index_in_threadgroup]]) {
  int v = x[tid];
  int s = simd_sum(v);
  if (lane == 0) sums[sg] = s;
  down[tid] = simd_shuffle_down(v, 1);
  prefix[tid] = simd_prefix_exclusive_sum(v);
  maxes[tid] = simd_max(x[tid]);
  first[tid] = lane >= 4 ? simd_broadcast_first(v) : -1;
}
"""


@pytest.mark.parametrize("n", [64, 40])  # two full simdgroups; a full one and one of 8 lanes
def test_simdgroup_functions(n):
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    sums, down, prefix, maxes, first = (np.zeros(k, np.int32) for k in (2, n, n, n, n))
    EmulatedKernel(SIMD)({"x": x, "sums": sums, "down": down, "prefix": prefix, "maxes": maxes, "first": first},
                         threads=n, seed=3)
    groups = [x[i:i + 32] for i in range(0, n, 32)]
    assert sums.tolist() == [int(g.sum()) for g in groups]
    want_down = np.concatenate([np.append(g[1:], g[-1]) for g in groups])  # the last lane keeps its own value
    assert down.tolist() == want_down.tolist()
    assert prefix.tolist() == np.concatenate([np.cumsum(g) - g for g in groups]).tolist()
    assert maxes.tolist() == np.concatenate([np.full(len(g), g.max()) for g in groups]).tolist()
    # simd_broadcast_first inside `lane >= 4`: the active lanes are 4.., the first of them is lane 4
    want_first = np.concatenate([np.where(np.arange(len(g)) >= 4, g[4] if len(g) > 4 else 0, -1) for g in groups])
    assert first.tolist() == want_first.tolist()


MATMUL = HEADER + """
kernel void mm(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]], device float* c [[buffer(2)]],
               uint sg [[simdgroup_index_in_threadgroup]]) {
  simdgroup_float8x8 ma, mb;
  simdgroup_float8x8 mc = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
  simdgroup_load(ma, a, 16, ulong2(8 * sg, 0));
  simdgroup_load(mb, b, 8, ulong2(0, 0), true);
  simdgroup_multiply_accumulate(mc, ma, mb, mc);
  simdgroup_store(mc, c, 8, ulong2(0, 8 * sg));  // STORE
}
"""


def test_simdgroup_matrix_multiply_accumulate():
    a = RNG.integers(-4, 4, (8, 16)).astype(np.float32)  # simdgroup s takes columns 8s..8s+8 of a
    b = RNG.integers(-4, 4, (8, 8)).astype(np.float32)  # loaded transposed
    c = np.zeros((16, 8), np.float32)
    EmulatedKernel(MATMUL)({"a": a, "b": b, "c": c}, threads=64)
    for s in range(2):
        assert c[8 * s:8 * s + 8].tolist() == (a[:, 8 * s:8 * s + 8] @ b.T + 1).tolist()


def test_two_simdgroups_storing_one_tile_race():
    src = MATMUL.replace("ulong2(0, 8 * sg));", "ulong2(0, 0));")
    with pytest.raises(EmulationError, match=rf"data race on device buffer c\[\d+\]: write by thread \(\d+,0,0\) of "
                                             rf"threadgroup \(0,0,0\) at line {line_of(src, 'STORE')} and write by"):
        EmulatedKernel(src)({"a": np.ones((8, 16), np.float32), "b": np.ones((8, 8), np.float32),
                             "c": np.zeros((16, 8), np.float32)}, threads=64)


NARROW = HEADER + """
kernel void narrow(device const float* x [[buffer(0)]], device ushort* h [[buffer(1)]], device ushort* b [[buffer(2)]],
                   device float* hf [[buffer(3)]], device float* bf [[buffer(4)]], constant uint& n [[buffer(5)]],
                   uint tid [[thread_position_in_grid]]) {
  for (uint i = 0; i < n; ++i) {
    half v = half(x[i]);
    bfloat w = bfloat(x[i]);
    h[i] = as_type<ushort>(v);
    b[i] = as_type<ushort>(w);
    hf[i] = float(as_type<half>((ushort)i));
    bf[i] = float(as_type<bfloat>((ushort)i));
  }
}
"""


def test_half_and_bfloat_round_to_nearest_even_and_decode_every_code():
    n = 1 << 16
    bits = RNG.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00001, 0x7f800001, 0x477ff000, 0x477fefff,
                         0x33000000, 0x33000001, 0x387fe000, 0x38800000, 0x3f808000, 0x3f818000, 0x1], np.uint32)
    bits[:len(specials)] = specials
    near = (np.arange(n - len(specials) - 1000, dtype=np.int64) % 65536).astype(np.uint32)  # every half code, widened
    bits[len(specials) + 1000:] = np.frombuffer(near.astype(np.uint16).tobytes(), np.float16).astype(np.float32).view(
        np.uint32) + (near & 0x3)  # ... and nudged: ties and near-ties of every exponent
    x = bits.view(np.float32)
    h, b = np.zeros(n, np.uint16), np.zeros(n, np.uint16)
    hf, bf = np.zeros(n, np.float32), np.zeros(n, np.float32)
    EmulatedKernel(NARROW)({"x": x, "h": h, "b": b, "hf": hf, "bf": bf, "n": np.array([n], np.uint32)})
    codes = np.arange(n, dtype=np.uint32).astype(np.uint16)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):  # NumPy warns when it rounds to infinity
        assert (h[~nan] == x[~nan].astype(np.float16).view(np.uint16)).all()
    assert (b[~nan] == x[~nan].astype(ml_dtypes.bfloat16).view(np.uint16)).all()
    assert np.isnan(h[nan].view(np.float16)).all() and np.isnan(b[nan].view(ml_dtypes.bfloat16)).all()
    assert (hf.view(np.uint32) == codes.view(np.float16).astype(np.float32).view(np.uint32)).all()
    assert (bf.view(np.uint32) == codes.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)).all()


def test_the_emulator_says_what_it_cannot_read():
    with pytest.raises(TranslationError, match="expected one Metal kernel"):
        EmulatedKernel(HEADER + "static int f() { return 0; }\n")
    with pytest.raises(TranslationError, match="unsupported attribute 'stage_in'"):
        EmulatedKernel(HEADER + "kernel void k(float4 v [[stage_in]]) {}\n")
    k = EmulatedKernel(CLASH)
    with pytest.raises(ValueError, match="no memory for buffer"):
        k({}, threads=2)
    with pytest.raises(ValueError, match="grid or threadgroup size"):
        k({"out": np.zeros(2, np.int32)}, threads=0)


def test_a_threadgroup_larger_than_the_kernel_or_the_gpu_allows_is_refused():
    with pytest.raises(ValueError, match="1025 threads exceeds the 1024"):
        EmulatedKernel(CLASH)({"out": np.zeros(1024, np.int32)}, threads=(1025, 1, 1))
    capped = CLASH.replace("kernel void clash", "[[kernel, max_total_threads_per_threadgroup(4)]] void clash")
    with pytest.raises(ValueError, match="8 threads exceeds the 4"):
        EmulatedKernel(capped)({"out": np.zeros(8, np.int32)}, threads=(2, 4))


def test_threadgroup_atomics_count_per_group():
    src = HEADER + """
kernel void hits(device const int* keys [[buffer(0)]], device int* out [[buffer(1)]],
                 uint tid [[thread_index_in_threadgroup]], uint gid [[threadgroup_position_in_grid]]) {
  threadgroup atomic_int count;
  if (tid == 0) atomic_store_explicit(&count, 0, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (keys[gid * 32 + tid] > 0) atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) out[gid] = atomic_load_explicit(&count, memory_order_relaxed);
}
"""
    keys = RNG.integers(-3, 3, 4 * 32).astype(np.int32)
    out = np.zeros(4, np.int32)
    EmulatedKernel(src)({"keys": keys, "out": out}, grid=4, threads=32, seed=11)
    assert out.tolist() == (keys.reshape(4, 32) > 0).sum(axis=1).tolist()
    plain = src.replace("threadgroup atomic_int count;", "threadgroup int count;").replace(
        "atomic_store_explicit(&count, 0, memory_order_relaxed)", "count = 0").replace(
        "atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);", "count += 1;  // ADD").replace(
        "atomic_load_explicit(&count, memory_order_relaxed)", "count")
    add = line_of(plain, "ADD")
    with pytest.raises(EmulationError, match=rf"data race on threadgroup array count\[0\]: write by {thread(0)} at "
                                             rf"line {add} and read by {thread(1)} at line {add}"):
        EmulatedKernel(plain)({"keys": np.ones(32, np.int32), "out": np.zeros(1, np.int32)}, threads=32)


def test_threadgroup_out_of_bounds_is_reported_and_not_performed():
    src = HEADER + """
kernel void tg(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float buf[8];
  buf[tid] = (float)tid;  // WRITE
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = buf[tid];  // READ
}
"""
    out = np.full(10, -1.0, np.float32)
    with pytest.raises(EmulationError) as e:
        EmulatedKernel(src)({"out": out}, threads=10)
    for t in (8, 9):
        assert re.search(rf"out-of-bounds write of threadgroup array buf: element {t} of 8, by {thread(t)} at line "
                         rf"{line_of(src, 'WRITE')} \(not performed\)", str(e.value)), str(e.value)
        assert re.search(rf"out-of-bounds read of threadgroup array buf: element {t} of 8, by {thread(t)} at line "
                         rf"{line_of(src, 'READ')}", str(e.value))
    assert out.tolist() == [*range(8), 0, 0]


def test_a_one_line_kernel_names_its_line():
    src = HEADER + "kernel void one(device int* o [[buffer(0)]], uint t [[thread_position_in_grid]]) { o[0] = t; }\n"
    with pytest.raises(EmulationError, match=rf"o\[0\]: write by {thread(0)} at line 3 and write by {thread(1)} at "
                                             "line 3"):
        EmulatedKernel(src)({"o": np.zeros(1, np.int32)}, threads=2)


def test_standard_library_scalars_and_same_size_pointer_casts():
    src = HEADER + """
kernel void lib(device const float* x [[buffer(0)]], device const float* y [[buffer(1)]],
                device float* out [[buffer(2)]], device uchar* flags [[buffer(3)]], device long* ints [[buffer(4)]],
                uint t [[thread_position_in_grid]]) {
  out[4 * t] = max(x[t], y[t]);
  out[4 * t + 1] = min(x[t], y[t]);
  out[4 * t + 2] = clamp(x[t], -1.0f, 1.0f);
  out[4 * t + 3] = select(x[t], y[t], x[t] < y[t]);
  device bool* b = (device bool*)(&(flags[0]));
  ((device char*)b)[t] = (char)(x[t] > 0.0f);
  ints[2 * t] = max((long)0, (long)t - 2);
  ints[2 * t + 1] = min((int)t, 2);
}
"""
    x = np.array([1.5, np.nan, -3.0, 0.25, 2.0], np.float32)
    y = np.array([np.nan, 2.0, -4.0, 0.5, np.nan], np.float32)
    out, flags, ints = np.zeros(20, np.float32), np.zeros(5, np.uint8), np.zeros(10, np.int64)
    EmulatedKernel(src)({"x": x, "y": y, "out": out, "flags": flags, "ints": ints}, threads=5)
    out = out.reshape(5, 4)
    assert out[:, 0].tolist() == np.fmax(x, y).tolist() and out[:, 1].tolist() == np.fmin(x, y).tolist()
    np.testing.assert_array_equal(out[:, 2], np.fmin(np.fmax(x, -1), 1))  # Metal: clamp = fmin(fmax(x, lo), hi)
    np.testing.assert_array_equal(out[:, 3], np.where(x < y, y, x))
    assert flags.tolist() == [1, 0, 0, 1, 1]
    assert ints.tolist() == [v for t in range(5) for v in (max(0, t - 2), min(t, 2))]


MERGED = HEADER + """
kernel void merged(device const float* x [[buffer(0)]], device float* sums [[buffer(1)]],
                   device int* counts [[buffer(2)]], uint t [[thread_position_in_threadgroup]],
                   uint g [[threadgroup_position_in_grid]]) {
  threadgroup uchar buf[64];
  threadgroup float* part = (threadgroup float*)((threadgroup void*)((threadgroup char*)buf + 0));
  threadgroup uint* bins = (threadgroup uint*)((threadgroup void*)((threadgroup char*)buf + 32));
  if (t >= 8) bins[t - 8] = 0u;  // ZERO
  if (t < 8) part[t] = 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);  // BARRIER
  if (t < 8) part[t] = x[g * 8 + t];
  threadgroup atomic_uint* bin = reinterpret_cast<threadgroup atomic_uint *>((&(bins[t % 8])));
  atomic_fetch_add_explicit(bin, 1u, memory_order_relaxed);  // ATOMIC
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (t == 0) {
    float s = 0.0f;
    for (int k = 0; k < 8; ++k) s += part[k];
    sums[g] = s;
  }
  if (t < 8) atomic_fetch_add_explicit(reinterpret_cast<device atomic_int *>((&(counts[t]))), (int)bins[t],
                                       memory_order_relaxed);
}
"""


def test_a_merged_threadgroup_buffer_cast_to_other_element_types_and_atomics_through_casts():
    """TVM merges a kernel's threadgroup arrays into one byte buffer and casts views of it (``(threadgroup float*)
    ((threadgroup char*)buf + 32)``); atomics take an element's address through ``reinterpret_cast``. The casts keep
    the region, so the views are checked against it and raced on byte by byte."""
    x = RNG.integers(-9, 9, 3 * 8).astype(np.float32)
    sums, counts = np.zeros(3, np.float32), np.zeros(8, np.int32)
    EmulatedKernel(MERGED)({"x": x, "sums": sums, "counts": counts}, grid=3, threads=16, seed=5)
    assert sums.tolist() == x.reshape(3, 8).sum(axis=1).tolist()  # small integers: exact
    assert counts.tolist() == [6] * 8  # 16 threads a group, two per bin, three groups
    src = MERGED.replace("  threadgroup_barrier(mem_flags::mem_threadgroup);  // BARRIER\n", "")
    race = (rf"data race on threadgroup array buf\[32\]: atomic write by {thread(0)} at line {line_of(src, 'ATOMIC')} "
            rf"and write by {thread(8)} at line {line_of(src, 'ZERO')}")
    with pytest.raises(EmulationError, match=race):
        EmulatedKernel(src)({"x": x, "sums": sums, "counts": counts}, grid=1, threads=16)
    bad = MERGED.replace("(threadgroup char*)buf + 32)", "(threadgroup char*)buf + 40)")  # bins[6], [7] past the end
    with pytest.raises(EmulationError, match=r"out-of-bounds write of threadgroup array buf: element 16 of 16"):
        EmulatedKernel(bad)({"x": x, "sums": sums, "counts": counts}, grid=1, threads=16)


def test_threadgroup_memory_beyond_32_kib_is_reported():
    src = HEADER + """
kernel void big(device float* out [[buffer(0)]], uint t [[thread_position_in_threadgroup]]) {
  threadgroup float a[4096];
  threadgroup float b[COUNT];  // SECOND
  a[t] = 1.0f;
  b[t] = 2.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[t] = a[t] + b[t];
}
"""
    out = np.zeros(2, np.float32)
    EmulatedKernel(src.replace("COUNT", "4096"))({"out": out}, threads=2)  # 32 KiB: the limit, allowed
    assert out.tolist() == [3.0, 3.0]
    bad = src.replace("COUNT", "4097")
    with pytest.raises(EmulationError, match=rf"threadgroup memory of 32772 bytes \(with b, line "
                                             rf"{line_of(bad, 'SECOND')}\) exceeds the 32768 bytes"):
        EmulatedKernel(bad)({"out": out}, threads=2)


def test_a_thread_that_overflows_its_stack_faults_instead_of_writing_past_it():
    """Each fiber's stack has an inaccessible page below it and frames are probed page by page
    (-fstack-clash-protection): a kernel whose thread needs more than its stack dies of SIGSEGV, and nothing
    below the stack is written."""
    import signal
    import subprocess
    import sys

    code = f"""
import numpy as np
from intent_trace.backends.tilelang.metal_emulation.kernel import EmulatedKernel
src = {HEADER!r} + '''
kernel void deep(device int* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {{
  volatile char big[(8 << 20) + (16 << 10)];
  big[t] = 1;
  big[(8 << 20) + (16 << 10) - 1] = 2;
  out[t] = big[t];
}}
'''
EmulatedKernel(src)({{"out": np.zeros(2, np.int32)}}, threads=2)
print("returned")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stdout, done.stderr[-2000:])
