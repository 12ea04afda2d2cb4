// itm_metal.h: the Metal Shading Language features intent_trace's Metal programs use, as host C++17 (this file, and
// itm_memory.h, itm_library.h, itm_matrix.h, itm_dispatch.h, which it includes in that order).
//
// The driver (metal_emulation/translate.py) rewrites a Metal kernel line for line (line numbers are kept, so
// __LINE__ is the Metal source line) and includes this header instead of <metal_stdlib>. What it provides:
//
// - Metal's scalar and vector type names (uint3, ulong2, ...), half and bfloat (IEEE binary16 and bfloat16 stored
//   as their bits; arithmetic in float, rounded once to the format: exact for + - * / as float has the bits),
//   as_type, fma, the address-space keywords (device/thread/constant vanish; `device T*` and `threadgroup T*`
//   become itm::ptr<T>, checked pointers, and `threadgroup T x[N];` a per-threadgroup shared array).
// - Threadgroup memory beyond an Apple GPU's 32 KiB is reported.
// - Checked memory: every access through an itm::ptr is bounds-checked against its buffer (an out-of-bounds access
//   is reported, never performed: a read gives 0) and, when the dispatch has more than one thread, recorded in a
//   shadow of the buffer to detect data races: two accesses to one element from different threads, at least one a
//   write, not both atomic, with no barrier between them (reported with both threads and both source lines).
// - Threadgroups with real concurrency: each thread of a threadgroup is a fiber (ucontext); a fiber runs until it
//   reaches threadgroup_barrier, a simdgroup function or its end, then the next runs; barriers release when every
//   thread of the group waits at them (a thread that returned while others wait is reported: Metal requires every
//   thread to reach the barrier). Threadgroups run one after another, in an order picked by the seed.
// - Simdgroups of 32 lanes (consecutive thread indices): simd_sum/product/min/max/and/or/xor, prefix sums,
//   shuffles, broadcasts, simd_all/any, simdgroup_barrier, and simdgroup_matrix load/store/multiply(-accumulate)
//   (itm_matrix.h: collectives over the whole matrix, uniform control flow and operands checked, Apple's rounding
//   of the multiply-accumulate not reproduced).
//   A simdgroup function runs over the lanes that reach it while the others are blocked or done (SIMT's active
//   lanes); lanes reduce in ascending lane order.
// - Atomics (atomic_int/uint/float, the *_explicit functions) with every memory order accepted.
//
// Where this cannot match a Metal guarantee (said plainly):
// - Simdgroup width is fixed at 32 and lanes run one after another, not in lockstep: code that relies on implicit
//   lockstep between lanes without a simdgroup function or barrier is reported as racy here (Metal does not
//   promise lockstep either).
// - Memory orders: every atomic is performed at once and sequentially consistent here, and atomics never order the
//   non-atomic accesses around them in the race detector: message passing through release/acquire atomics is
//   reported as a race. compare_exchange_weak never fails spuriously.
// - Floats: host IEEE arithmetic with contraction off stands in for MTLMathModeSafe. Metal's own math library
//   (metal::precise::, metal::fast::: exp, log, sin, pow, rsqrt, ...) is the host's libm (itm_library.h): its
//   results are the host's, not an Apple GPU's, and the verifier does not count them as evidence about the GPU.
//   Simdgroup reductions and matrix products use one fixed order (ascending lanes, k), an Apple GPU may use another;
//   a matrix product fuses each product into a float accumulator (itm_matrix.h), Apple does not say how it rounds.
// - Threadgroups run one after another (their order seeded): a program that waits on another threadgroup's progress
//   (a spin on its atomic) never finishes here, and no statement is made about an Apple GPU's forward progress.
// - The race detector remembers the last write and up to two reads per element: with three or more concurrent
//   readers of one element it can miss a race against one of them, and a thread's atomic write after its own plain
//   write hides the plain one from later accesses. Threadgroup memory starts as all-ones bytes
//   (NaN, -1), so reading it before writing shows. A pointer cast to another element type (TVM's merged threadgroup
//   buffer, an atomic view of an element) keeps its region: bounds are the region's, races are recorded per element
//   of the region's declared type that the access touches. 2-D threadgroup arrays are not supported.
#pragma once
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <string>
#include <type_traits>
#include <vector>

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

#define device
#define thread
#define constant const

#include "itm_memory.h"
#include "itm_library.h"
#include "itm_matrix.h"
#include "itm_dispatch.h"
