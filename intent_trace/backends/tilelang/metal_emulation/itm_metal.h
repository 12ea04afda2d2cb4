// itm_metal.h: the Metal Shading Language features intent_trace's Metal programs use, as host C++17.
//
// The driver (metal_emulation/translate.py) rewrites a Metal kernel line for line (line numbers are kept, so
// __LINE__ is the Metal source line) and includes this header instead of <metal_stdlib>. What it provides:
//
// - Metal's scalar and vector type names (uint3, ulong2, ...), half and bfloat (IEEE binary16 and bfloat16 stored
//   as their bits; arithmetic in float, rounded once to the format: exact for + - * / as float has the bits),
//   as_type, fma, the address-space keywords (device/thread/constant vanish; `device T*` and `threadgroup T*`
//   become itm::ptr<T>, checked pointers, and `threadgroup T x[N];` a per-threadgroup shared array).
// - Checked memory: every access through an itm::ptr is bounds-checked against its buffer (an out-of-bounds access
//   is reported, never performed: a read gives 0) and, when the dispatch has more than one thread, recorded in a
//   shadow of the buffer to detect data races: two accesses to one element from different threads, at least one a
//   write, not both atomic, with no barrier between them (reported with both threads and both source lines).
// - Threadgroups with real concurrency: each thread of a threadgroup is a fiber (ucontext); a fiber runs until it
//   reaches threadgroup_barrier, a simdgroup function or its end, then the next runs; barriers release when every
//   thread of the group waits at them (a thread that returned while others wait is reported: Metal requires every
//   thread to reach the barrier). Threadgroups run one after another, in an order picked by the seed.
// - Simdgroups of 32 lanes (consecutive thread indices): simd_sum/product/min/max/and/or/xor, prefix sums,
//   shuffles, broadcasts, simd_all/any, simdgroup_barrier, and simdgroup_matrix load/store/multiply(-accumulate).
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
// - Floats: host IEEE arithmetic with contraction off stands in for MTLMathModeSafe; Metal's own math library
//   (metal::precise::, metal::fast::) is not provided (intent_trace's programs never call it; a kernel that does
//   fails to compile here). Simdgroup reductions and matrix products use one fixed order (ascending lanes, k), an
//   Apple GPU may use another.
// - The race detector remembers the last write and up to two reads per element: with three or more concurrent
//   readers of one element it can miss a race against one of them. Threadgroup memory starts as all-ones bytes
//   (NaN, -1), so reading it before writing shows. Pointer casts between element types and 2-D threadgroup arrays
//   are not supported.
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

namespace metal {
template <typename T, int N> struct vec;
template <typename T> struct vec<T, 2> {
  T x, y;
  vec() : x(), y() {}
  vec(T a) : x(a), y(a) {}
  vec(T a, T b) : x(a), y(b) {}
};
template <typename T> struct vec<T, 3> {
  T x, y, z;
  vec() : x(), y(), z() {}
  vec(T a) : x(a), y(a), z(a) {}
  vec(T a, T b, T c) : x(a), y(b), z(c) {}
};
template <typename T> struct vec<T, 4> {
  T x, y, z, w;
  vec() : x(), y(), z(), w() {}
  vec(T a) : x(a), y(a), z(a), w(a) {}
  vec(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {}
};
#define ITM_VECTORS(T) typedef vec<T, 2> T##2; typedef vec<T, 3> T##3; typedef vec<T, 4> T##4;
ITM_VECTORS(uint) ITM_VECTORS(int) ITM_VECTORS(ushort) ITM_VECTORS(short) ITM_VECTORS(ulong) ITM_VECTORS(long)
ITM_VECTORS(float) ITM_VECTORS(uchar) ITM_VECTORS(char)
#undef ITM_VECTORS

template <typename T, typename U> static inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs equal sizes");
  T t;
  memcpy(&t, &u, sizeof t);
  return t;
}
static inline float fma(float a, float b, float c) { return fmaf(a, b, c); }

// half and bfloat: the bits of the format; conversions round to nearest even (a NaN stays a quiet NaN).
static inline ushort itm_f32_to_f16(float f) {
  uint x = as_type<uint>(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (ushort)(sign | 0x7c00u);  // 65520 and above round to infinity
  if (ax < 0x38800000u) return (ushort)(sign | (uint)nearbyintf(as_type<float>(ax) * 16777216.0f));  // subnormal
  uint r = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu), rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (ushort)(sign | r);
}
static inline float itm_f16_to_f32(ushort h) {
  uint sign = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return as_type<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return as_type<float>(sign | ((e + 112u) << 23) | (m << 13));
}
static inline ushort itm_f32_to_bf16(float f) {
  uint x = as_type<uint>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static inline float itm_bf16_to_f32(ushort b) { return as_type<float>((uint)b << 16); }

#define ITM_NARROW(NAME, TO, FROM)                                                                         \
  struct NAME {                                                                                            \
    ushort bits;                                                                                           \
    NAME() : bits(0) {}                                                                                    \
    NAME(float f) : bits(TO(f)) {}                                                                         \
    NAME(double f) : bits(TO((float)f)) {}                                                                 \
    NAME(int i) : bits(TO((float)i)) {}                                                                    \
    operator float() const { return FROM(bits); }                                                          \
    NAME operator-() const { NAME r; r.bits = bits ^ 0x8000u; return r; }                                  \
  };                                                                                                       \
  static inline NAME operator+(NAME a, NAME b) { return NAME((float)a + (float)b); }                       \
  static inline NAME operator-(NAME a, NAME b) { return NAME((float)a - (float)b); }                       \
  static inline NAME operator*(NAME a, NAME b) { return NAME((float)a * (float)b); }                       \
  static inline NAME operator/(NAME a, NAME b) { return NAME((float)a / (float)b); }                       \
  static inline NAME& operator+=(NAME& a, NAME b) { return a = a + b; }                                    \
  static inline NAME& operator*=(NAME& a, NAME b) { return a = a * b; }
ITM_NARROW(half, itm_f32_to_f16, itm_f16_to_f32)
ITM_NARROW(bfloat, itm_f32_to_bf16, itm_bf16_to_f32)
#undef ITM_NARROW
}  // namespace metal

namespace itm {
using metal::uint3;

enum Space { DEVICE = 0, THREADGROUP = 1 };
enum State { RUNNING, DONE, AT_BARRIER, AT_SIMD };
constexpr int SIMD_WIDTH = 32;
constexpr int MAX_REPORTS = 16;
constexpr size_t GUARD = 1 << 16;  // bytes of inaccessible memory below each fiber's stack

struct Access {  // one remembered access to an element
  int group = -1, tid = -1, epoch = 0, sepoch = 0, line = 0;
  bool atomic = false, write = false;
};
struct Shadow {
  Access w, r0, r1;
};
struct Region {  // a device buffer or a threadgroup array
  char* base = nullptr;
  long bytes = 0;
  long elem = 1;
  std::string name;
  int space = DEVICE;
  std::vector<Shadow> shadow;
};
struct Thread {
  ucontext_t ctx;
  char* stack = nullptr;
  int state = RUNNING, op = 0, line = 0, flags = 0, release_gen = 0;
  uint lin = 0;
  uint3 pos;
};
struct Simd {
  alignas(16) unsigned char in[SIMD_WIDTH][16];
  alignas(16) unsigned char out[2][SIMD_WIDTH][16];
  uint mask[2] = {0, 0};
  int gen = 0;
};
struct Dispatch {
  uint3 grid, threads;
  uint n = 1;
  size_t stack_size = 0;
  std::vector<Thread> th;
  std::vector<Simd> simd;
  std::vector<Region> buffers;
  std::vector<std::pair<const void*, Region*>> shared;  // this threadgroup's arrays, by declaration site
  uint3 gpos;
  int glin = 0, epoch[2] = {0, 0};
  std::vector<int> sepoch[2];  // per simdgroup: simdgroup_barrier generations
  Thread* cur = nullptr;
  ucontext_t sched;
  bool track = false, abort_group = false;
  void (*body)() = nullptr;
  std::vector<std::string> reports;
  long nreports = 0;
};
static thread_local Dispatch* D = nullptr;

static inline std::string who(int group, int tid) {
  const uint3& g = D->grid;
  const uint3& t = D->threads;
  char s[160];
  snprintf(s, sizeof s, "thread (%u,%u,%u) of threadgroup (%u,%u,%u)", tid % t.x, tid / t.x % t.y, tid / (t.x * t.y),
           group % g.x, group / g.x % g.y, group / (g.x * g.y));
  return s;
}
static inline void report(const std::string& s) {
  ++D->nreports;
  for (const std::string& r : D->reports)
    if (r == s) return;
  if ((int)D->reports.size() < MAX_REPORTS) D->reports.push_back(s);
}
static inline const char* space_name(int space) { return space == DEVICE ? "device buffer" : "threadgroup array"; }
static inline const char* kind(const Access& a) {
  return a.atomic ? (a.write ? "atomic write" : "atomic read") : (a.write ? "write" : "read");
}

static inline void out_of_bounds(const Region* r, long k, long count, bool write, int line) {
  char s[400];
  snprintf(s, sizeof s, "out-of-bounds %s of %s %s: element %ld of %ld, by %s at line %d (not performed)",
           write ? "write" : "read", space_name(r->space), r->name.c_str(), k, count,
           who(D->glin, D->cur->lin).c_str(), line);
  report(s);
}

// Two accesses are ordered when one thread made both, or one threadgroup made them across a barrier that fences
// the element's address space (a threadgroup_barrier, or a simdgroup_barrier between lanes of one simdgroup).
static inline bool ordered(const Access& a, const Access& b) {
  if (a.group != b.group) return false;
  if (a.tid == b.tid || a.epoch != b.epoch) return true;
  return a.tid / SIMD_WIDTH == b.tid / SIMD_WIDTH && a.sepoch != b.sepoch;
}
static inline void check_pair(const Region* r, long k, const Access& old, const Access& now) {
  if (old.tid < 0 || ordered(old, now) || (old.atomic && now.atomic) || !(old.write || now.write)) return;
  char s[600];
  snprintf(s, sizeof s, "data race on %s %s[%ld]: %s by %s at line %d and %s by %s at line %d, with no barrier "
           "between them", space_name(r->space), r->name.c_str(), k, kind(old), who(old.group, old.tid).c_str(),
           old.line, kind(now), who(now.group, now.tid).c_str(), now.line);
  report(s);
}
static inline void record(Region* r, long k, bool write, bool atomic, int line) {
  if (r->shadow.empty()) r->shadow.resize(r->bytes / r->elem);
  Shadow& sh = r->shadow[k];
  Access a;
  a.group = D->glin;
  a.tid = (int)D->cur->lin;
  a.epoch = D->epoch[r->space];
  a.sepoch = D->sepoch[r->space][a.tid / SIMD_WIDTH];
  a.line = line;
  a.atomic = atomic;
  a.write = write;
  check_pair(r, k, sh.w, a);
  if (write) {  // a later access unordered with a read before this write is unordered with this write too
    check_pair(r, k, sh.r0, a);
    check_pair(r, k, sh.r1, a);
    sh.w = a;
    sh.r0 = sh.r1 = Access();
    return;
  }
  Access* same = sh.r0.tid == a.tid && sh.r0.group == a.group ? &sh.r0
                 : sh.r1.tid == a.tid && sh.r1.group == a.group ? &sh.r1 : nullptr;
  if (same != nullptr) *same = a;
  else if (sh.r0.tid < 0 || ordered(sh.r0, a)) sh.r0 = a;  // keep the reads a later write could race with
  else sh.r1 = a;
}

template <typename T> struct Ref;

// A pointer into a device buffer or threadgroup array: every access is bounds-checked and recorded.
template <typename T> struct ptr {
  T* base = nullptr;
  Region* region = nullptr;
  long count = 0, off = 0;
  int line = 0;
  ptr() = default;
  ptr(T* b, Region* r, long n, long o, int l) : base(b), region(r), count(n), off(o), line(l) {}
  template <typename U, typename = std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value>>
  ptr(const ptr<U>& p) : base(p.base), region(p.region), count(p.count), off(p.off), line(p.line) {}
  // a cast between element types of one size (TVM's `(device char*)bool_buffer`): the same elements
  template <typename U, typename = std::enable_if_t<sizeof(U) == sizeof(T) && !std::is_same<const U, T>::value>,
            typename = void>
  explicit ptr(const ptr<U>& p) : base((T*)p.base), region(p.region), count(p.count), off(p.off), line(p.line) {}
  ptr at_line(int l) const { return ptr(base, region, count, off, l); }
  template <typename I> static long index(I i) {
    static_assert(std::is_integral<I>::value, "a Metal pointer is indexed by an integer");
    if (std::is_unsigned<I>::value && (unsigned long long)i > (unsigned long long)LONG_MAX) return LONG_MAX;
    return (long)i;
  }
  template <typename I> Ref<T> operator[](I i) const { return Ref<T>(*this, off + index(i)); }
  Ref<T> operator*() const { return Ref<T>(*this, off); }
  template <typename I> ptr operator+(I k) const { return ptr(base, region, count, off + index(k), line); }
  template <typename I> ptr operator-(I k) const { return ptr(base, region, count, off - index(k), line); }
  template <typename I> ptr& operator+=(I k) { off += index(k); return *this; }
  template <typename I> ptr& operator-=(I k) { off -= index(k); return *this; }
  ptr& operator++() { ++off; return *this; }
  ptr& operator--() { --off; return *this; }
  long operator-(const ptr& o) const { return off - o.off; }
  bool in_bounds(long k) const { return k >= 0 && k < count; }
};

template <typename T> struct Ref {
  using V = std::remove_const_t<T>;
  ptr<T> p;
  long k;
  Ref(const ptr<T>& p_, long k_) : p(p_), k(k_) {}
  Ref(const Ref&) = default;
  V load() const {
    if (!p.in_bounds(k)) {
      out_of_bounds(p.region, k, p.count, false, p.line);
      return V();
    }
    if (D->track) record(p.region, k, false, false, p.line);
    return p.base[k];
  }
  void store(const V& v) const {
    static_assert(!std::is_const<T>::value, "a store through a const pointer");
    if (!p.in_bounds(k)) {
      out_of_bounds(p.region, k, p.count, true, p.line);
      return;
    }
    if (D->track) record(p.region, k, true, false, p.line);
    const_cast<V*>(p.base)[k] = v;
  }
  operator V() const { return load(); }
  template <typename U> const Ref& operator=(const U& v) const { store((V)v); return *this; }
  const Ref& operator=(const Ref& o) const { store(o.load()); return *this; }
#define ITM_COMPOUND(OP) \
  template <typename U> const Ref& operator OP##=(const U& v) const { store((V)(load() OP v)); return *this; }
  ITM_COMPOUND(+) ITM_COMPOUND(-) ITM_COMPOUND(*) ITM_COMPOUND(/) ITM_COMPOUND(%) ITM_COMPOUND(&) ITM_COMPOUND(|)
  ITM_COMPOUND(^) ITM_COMPOUND(<<) ITM_COMPOUND(>>)
#undef ITM_COMPOUND
  V operator++(int) const { V v = load(); store((V)(v + 1)); return v; }
  V operator--(int) const { V v = load(); store((V)(v - 1)); return v; }
  const Ref& operator++() const { store((V)(load() + 1)); return *this; }
  const Ref& operator--() const { store((V)(load() - 1)); return *this; }
  ptr<T> operator&() const { return ptr<T>(p.base, p.region, p.count, k, p.line); }
  Ref at_line(int l) const { return Ref(p.at_line(l), k); }
};

template <typename T> struct value { using type = T; };
template <typename T> struct value<Ref<T>> { using type = std::remove_const_t<T>; };
template <typename T> using value_t = typename value<std::decay_t<T>>::type;

// --- threads, barriers and collectives -------------------------------------------------------------------------

static inline void block(int state, int op, int flags, int line) {
  Thread* t = D->cur;
  t->state = state;
  t->op = op;
  t->flags = flags;
  t->line = line;
  swapcontext(&t->ctx, &D->sched);
}

// The threadgroup's array declared at `site` (every thread of the group gets the same one).
template <typename T> ptr<T> shared_array(const void* site, long n, const char* name, int line) {
  for (auto& s : D->shared)
    if (s.first == site) return ptr<T>((T*)s.second->base, s.second, n, 0, line);
  Region* r = new Region();
  r->bytes = n * (long)sizeof(T);
  r->elem = sizeof(T);
  r->name = name;
  r->space = THREADGROUP;
  r->base = new char[r->bytes > 0 ? r->bytes : 1];
  memset(r->base, 0xff, r->bytes);  // uninitialised threadgroup memory reads as all-ones bits
  D->shared.push_back({site, r});
  return ptr<T>((T*)r->base, r, n, 0, line);
}
template <typename T> Ref<T> shared_scalar(const void* site, const char* name, int line) {
  return *shared_array<T>(site, 1, name, line);
}
#define ITM_THREADGROUP_ARRAY(T, NAME, N) \
  static const char itm_site_##NAME = 0; ::itm::ptr<T> NAME = ::itm::shared_array<T>(&itm_site_##NAME, (N), #NAME, __LINE__)
#define ITM_THREADGROUP_SCALAR(T, NAME) \
  static const char itm_site_##NAME = 0; ::itm::Ref<T> NAME = ::itm::shared_scalar<T>(&itm_site_##NAME, #NAME, __LINE__)

enum Op { OP_SIMD_BARRIER = 1, OP_REDUCE, OP_SCAN, OP_SHUFFLE, OP_BROADCAST, OP_VOTE };

// Every lane of the simdgroup that reaches a collective deposits its value; the scheduler releases the lanes at the
// same collective once every other lane of the simdgroup is blocked or done; each then computes its own result
// from the deposited values of the active lanes (`mask`).
template <typename V, typename F> V collective(int op, const V& v, F f) {
  static_assert(sizeof(V) <= 16 && std::is_trivially_copyable<V>::value, "a simdgroup value of at most 16 bytes");
  Thread* t = D->cur;
  Simd& s = D->simd[t->lin / SIMD_WIDTH];
  int lane = t->lin % SIMD_WIDTH;
  memcpy(s.in[lane], &v, sizeof(V));
  block(AT_SIMD, op, 0, 0);
  int g = D->cur->release_gen & 1;
  V vals[SIMD_WIDTH];
  for (int l = 0; l < SIMD_WIDTH; ++l) memcpy(&vals[l], s.out[g][l], sizeof(V));
  return f(vals, s.mask[g], lane);
}
static inline bool active(uint mask, int lane) { return lane >= 0 && lane < SIMD_WIDTH && ((mask >> lane) & 1u); }
}  // namespace itm

namespace metal {
// The scalar functions of the Metal standard library TVM's code generator emits (max/min of extents and indices).
// Float max/min return the other operand when one is a NaN, as Metal's (and C's fmax/fmin) do.
template <typename A, typename B> using itm_common = std::common_type_t<itm::value_t<A>, itm::value_t<B>>;
template <typename A, typename B> static inline itm_common<A, B> max(const A& a, const B& b) {
  using C = itm_common<A, B>;
  C x = (C)(itm::value_t<A>)a, y = (C)(itm::value_t<B>)b;
  if constexpr (std::is_floating_point<C>::value) return (C)fmax(x, y);
  else return x > y ? x : y;
}
template <typename A, typename B> static inline itm_common<A, B> min(const A& a, const B& b) {
  using C = itm_common<A, B>;
  C x = (C)(itm::value_t<A>)a, y = (C)(itm::value_t<B>)b;
  if constexpr (std::is_floating_point<C>::value) return (C)fmin(x, y);
  else return x < y ? x : y;
}
template <typename T, typename L, typename H> static inline itm::value_t<T> clamp(const T& x, const L& lo, const H& hi) {
  using V = itm::value_t<T>;
  return (V)min(max((V)x, (V)(itm::value_t<L>)lo), (V)(itm::value_t<H>)hi);
}
template <typename T, typename C> static inline itm::value_t<T> select(const T& a, const T& b, const C& c) {
  return (bool)(itm::value_t<C>)c ? (itm::value_t<T>)b : (itm::value_t<T>)a;
}

enum class mem_flags : int { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
static inline mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((int)a | (int)b); }
static inline void itm_threadgroup_barrier(mem_flags f, int line) { itm::block(itm::AT_BARRIER, 0, (int)f, line); }
static inline void itm_simdgroup_barrier(mem_flags f, int line) {
  itm::block(itm::AT_SIMD, itm::OP_SIMD_BARRIER, (int)f, line);
}
#define threadgroup_barrier(f) itm_threadgroup_barrier((f), __LINE__)
#define simdgroup_barrier(f) itm_simdgroup_barrier((f), __LINE__)

#define ITM_REDUCTION(NAME, STEP)                                                                     \
  template <typename T> itm::value_t<T> NAME(const T& x) {                                                  \
    using V = itm::value_t<T>;                                                                              \
    return itm::collective(itm::OP_REDUCE, (V)x, [](const V* v, uint m, int) {                              \
      V r = V();                                                                                            \
      bool first = true;                                                                                    \
      for (int l = 0; l < itm::SIMD_WIDTH; ++l)                                                             \
        if (itm::active(m, l)) {                                                                            \
          V a = r, b = v[l];                                                                                \
          r = first ? b : (STEP);                                                                           \
          first = false;                                                                                    \
        }                                                                                                   \
      return r;                                                                                             \
    });                                                                                                     \
  }
ITM_REDUCTION(simd_sum, a + b)
ITM_REDUCTION(simd_product, a * b)
ITM_REDUCTION(simd_max, (b > a ? b : a))
ITM_REDUCTION(simd_min, (b < a ? b : a))
ITM_REDUCTION(simd_and, a & b)
ITM_REDUCTION(simd_or, a | b)
ITM_REDUCTION(simd_xor, a ^ b)
#undef ITM_REDUCTION


template <typename T> itm::value_t<T> simd_prefix_inclusive_sum(const T& x) {
  using V = itm::value_t<T>;
  return itm::collective(itm::OP_SCAN, (V)x, [](const V* v, uint m, int lane) {
    V r = v[lane];
    bool first = true;
    for (int l = 0; l <= lane; ++l)
      if (itm::active(m, l)) { r = first ? v[l] : V(r + v[l]); first = false; }
    return r;
  });
}
template <typename T> itm::value_t<T> simd_prefix_exclusive_sum(const T& x) {
  using V = itm::value_t<T>;
  return itm::collective(itm::OP_SCAN, (V)x, [](const V* v, uint m, int lane) {
    V r = V(0);
    bool first = true;
    for (int l = 0; l < lane; ++l)
      if (itm::active(m, l)) { r = first ? v[l] : V(r + v[l]); first = false; }
    return r;
  });
}

// Reading an inactive or out-of-range lane is undefined in Metal; here the lane keeps its own value.
template <typename T, typename F> itm::value_t<T> itm_shuffle(const T& x, F source) {
  using V = itm::value_t<T>;
  return itm::collective(itm::OP_SHUFFLE, (V)x, [&](const V* v, uint m, int lane) {
    long src = source(lane);
    return itm::active(m, (int)(src >= 0 && src < itm::SIMD_WIDTH ? src : -1)) ? v[src] : v[lane];
  });
}
template <typename T> itm::value_t<T> simd_shuffle(const T& x, ushort l) {
  return itm_shuffle(x, [=](int) { return (long)l; });
}
template <typename T> itm::value_t<T> simd_shuffle_down(const T& x, ushort d) {
  return itm_shuffle(x, [=](int lane) { return (long)lane + d; });
}
template <typename T> itm::value_t<T> simd_shuffle_up(const T& x, ushort d) {
  return itm_shuffle(x, [=](int lane) { return (long)lane - d; });
}
template <typename T> itm::value_t<T> simd_shuffle_xor(const T& x, ushort mask) {
  return itm_shuffle(x, [=](int lane) { return (long)(lane ^ mask); });
}
template <typename T> itm::value_t<T> simd_broadcast(const T& x, ushort l) {
  return itm_shuffle(x, [=](int) { return (long)l; });
}
template <typename T> itm::value_t<T> simd_broadcast_first(const T& x) {
  using V = itm::value_t<T>;
  return itm::collective(itm::OP_BROADCAST, (V)x, [](const V* v, uint m, int lane) {
    for (int l = 0; l < itm::SIMD_WIDTH; ++l)
      if (itm::active(m, l)) return v[l];
    return v[lane];
  });
}
static inline bool simd_all(bool x) {
  return itm::collective(itm::OP_VOTE, x, [](const bool* v, uint m, int) {
    for (int l = 0; l < itm::SIMD_WIDTH; ++l)
      if (itm::active(m, l) && !v[l]) return false;
    return true;
  });
}
static inline bool simd_any(bool x) {
  return itm::collective(itm::OP_VOTE, x, [](const bool* v, uint m, int) {
    for (int l = 0; l < itm::SIMD_WIDTH; ++l)
      if (itm::active(m, l) && v[l]) return true;
    return false;
  });
}

// --- atomics ----------------------------------------------------------------------------------------------------
enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel,
                    memory_order_seq_cst };
template <typename T> struct atomic {
  T v;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;
typedef atomic<ulong> atomic_ulong;

template <typename T, typename F> T itm_atomic(itm::ptr<atomic<T>> p, bool write, F f) {
  if (!p.in_bounds(p.off)) {
    itm::out_of_bounds(p.region, p.off, p.count, write, p.line);
    return T();
  }
  if (itm::D->track) itm::record(p.region, p.off, write, true, p.line);
  T old = p.base[p.off].v;
  if (write) p.base[p.off].v = f(old);
  return old;
}
#define ITM_FETCH(NAME, EXPR)                                                                                 \
  template <typename T, typename U> T atomic_fetch_##NAME##_explicit(itm::ptr<atomic<T>> p, U a, memory_order) { \
    T b = (T)a;                                                                                               \
    return itm_atomic(p, true, [&](T old) { return (T)(EXPR); });                                             \
  }
ITM_FETCH(add, old + b)
ITM_FETCH(sub, old - b)
ITM_FETCH(max, b > old ? b : old)
ITM_FETCH(min, b < old ? b : old)
ITM_FETCH(and, old & b)
ITM_FETCH(or, old | b)
ITM_FETCH(xor, old ^ b)
#undef ITM_FETCH
template <typename T, typename U> T atomic_exchange_explicit(itm::ptr<atomic<T>> p, U a, memory_order) {
  return itm_atomic(p, true, [&](T) { return (T)a; });
}
template <typename T> T atomic_load_explicit(itm::ptr<atomic<T>> p, memory_order) {
  return itm_atomic(p, false, [](T old) { return old; });
}
template <typename T, typename U> void atomic_store_explicit(itm::ptr<atomic<T>> p, U a, memory_order) {
  itm_atomic(p, true, [&](T) { return (T)a; });
}
template <typename T, typename U>
bool atomic_compare_exchange_weak_explicit(itm::ptr<atomic<T>> p, T* expected, U desired, memory_order, memory_order) {
  bool ok = false;
  T seen = itm_atomic(p, true, [&](T old) {
    ok = old == *expected;
    return ok ? (T)desired : old;
  });
  if (!ok) *expected = seen;
  return ok;
}

// --- simdgroup matrices: every lane holds the whole matrix; a store is shared out over the lanes ---------------
template <typename T, int R, int C> struct simdgroup_matrix {
  T e[R * C];
  simdgroup_matrix() : e() {}
  explicit simdgroup_matrix(T diagonal) : e() {
    for (int i = 0; i < R && i < C; ++i) e[i * C + i] = diagonal;
  }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
template <typename T, int R, int C> simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, R, C> m;
  for (int i = 0; i < R * C; ++i) m.e[i] = v;
  return m;
}
template <typename T, int R, int C, typename P>
void simdgroup_load(simdgroup_matrix<T, R, C>& d, P src, ulong per_row = C, ulong2 origin = ulong2(0, 0),
                    bool transpose = false) {
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      d.e[r * C + c] = transpose ? (T)src[(origin.y + c) * per_row + origin.x + r]
                                 : (T)src[(origin.y + r) * per_row + origin.x + c];
}
template <typename T, int R, int C, typename P>
void simdgroup_store(const simdgroup_matrix<T, R, C>& m, P dst, ulong per_row = C, ulong2 origin = ulong2(0, 0),
                     bool transpose = false) {
  // lane l stores elements 2l and 2l+1 (row-major); the simdgroup's first lane also stores those of absent lanes
  uint lin = itm::D->cur->lin, lane = lin % itm::SIMD_WIDTH;
  uint lanes = itm::D->n - (lin - lane) < (uint)itm::SIMD_WIDTH ? itm::D->n - (lin - lane) : itm::SIMD_WIDTH;
  for (int e = 0; e < R * C; ++e) {
    uint owner = (uint)(e / 2) % itm::SIMD_WIDTH;
    if (owner != lane && !(lane == 0 && owner >= lanes)) continue;
    int r = e / C, c = e % C;
    if (transpose) dst[(origin.y + c) * per_row + origin.x + r] = m.e[e];
    else dst[(origin.y + r) * per_row + origin.x + c] = m.e[e];
  }
}
template <typename T, int R, int K, int C>
void simdgroup_multiply_accumulate(thread simdgroup_matrix<T, R, C>& d, const simdgroup_matrix<T, R, K>& a,
                                   const simdgroup_matrix<T, K, C>& b, const simdgroup_matrix<T, R, C>& c) {
  simdgroup_matrix<T, R, C> out;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float acc = (float)c.e[i * C + j];  // c, then the products in k order, in float
      for (int k = 0; k < K; ++k) acc = acc + (float)a.e[i * K + k] * (float)b.e[k * C + j];
      out.e[i * C + j] = (T)acc;
    }
  d = out;
}
template <typename T, int R, int K, int C>
void simdgroup_multiply(thread simdgroup_matrix<T, R, C>& d, const simdgroup_matrix<T, R, K>& a,
                        const simdgroup_matrix<T, K, C>& b) {
  simdgroup_multiply_accumulate(d, a, b, simdgroup_matrix<T, R, C>());
}
}  // namespace metal

namespace itm {
// --- the dispatch -----------------------------------------------------------------------------------------------
static void trampoline() {
  D->body();
  D->cur->state = DONE;  // uc_link returns to the scheduler
}

static inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline std::vector<uint> order(uint n, uint64_t& seed) {
  std::vector<uint> v(n);
  for (uint i = 0; i < n; ++i) v[i] = i;
  if (seed != 0)
    for (uint i = n; i > 1; --i) std::swap(v[i - 1], v[splitmix(seed) % i]);
  return v;
}

// Release the lanes of one simdgroup waiting at one collective, once no lane of it can still arrive.
static bool release_collective() {
  for (size_t sg = 0; sg < D->simd.size(); ++sg) {
    uint lo = (uint)sg * SIMD_WIDTH, hi = lo + SIMD_WIDTH < D->n ? lo + SIMD_WIDTH : D->n;
    int op = 0;
    for (uint i = lo; i < hi && op == 0; ++i)
      if (D->th[i].state == AT_SIMD) op = D->th[i].op;
    if (op == 0) continue;
    Simd& s = D->simd[sg];
    int g = s.gen & 1, flags = -1;
    s.mask[g] = 0;
    for (uint i = lo; i < hi; ++i) {
      Thread& t = D->th[i];
      if (t.state != AT_SIMD || t.op != op) continue;
      s.mask[g] |= 1u << (i - lo);
      memcpy(s.out[g][i - lo], s.in[i - lo], 16);
      t.state = RUNNING;
      t.release_gen = s.gen;
      flags &= t.flags;
    }
    if (op == OP_SIMD_BARRIER) {
      if (flags & (int)metal::mem_flags::mem_device) ++D->sepoch[DEVICE][sg];
      if (flags & (int)metal::mem_flags::mem_threadgroup) ++D->sepoch[THREADGROUP][sg];
    }
    ++s.gen;
    return true;
  }
  return false;
}

// Release the threadgroup barrier once every thread waits at it; anything else is a divergence Metal forbids.
static bool release_barrier() {
  int flags = -1, line = -1, done = -1, other = -1;
  for (uint i = 0; i < D->n; ++i) {
    Thread& t = D->th[i];
    if (t.state == DONE) done = done < 0 ? (int)i : done;
    else if (line < 0) line = t.line, flags &= t.flags;
    else if (t.line != line) other = (int)i;
    else flags &= t.flags;
  }
  if (line < 0) return false;
  char s[400];
  if (done >= 0 || other >= 0) {
    int waiting = -1;
    for (uint i = 0; i < D->n && waiting < 0; ++i)
      if (D->th[i].state == AT_BARRIER) waiting = (int)i;
    if (done >= 0)
      snprintf(s, sizeof s, "threadgroup_barrier at line %d is not reached by every thread: %s returned while %s "
               "waits there", D->th[waiting].line, who(D->glin, done).c_str(), who(D->glin, waiting).c_str());
    else
      snprintf(s, sizeof s, "threads of one threadgroup wait at different barriers: %s at line %d, %s at line %d",
               who(D->glin, waiting).c_str(), D->th[waiting].line, who(D->glin, other).c_str(), D->th[other].line);
    report(s);
    D->abort_group = true;
    return false;
  }
  if (flags & (int)metal::mem_flags::mem_device) ++D->epoch[DEVICE];
  if (flags & (int)metal::mem_flags::mem_threadgroup) ++D->epoch[THREADGROUP];
  for (uint i = 0; i < D->n; ++i) D->th[i].state = RUNNING;
  return true;
}

static void run_group(const std::vector<uint>& thread_order) {
  for (uint i = 0; i < D->n; ++i) {
    Thread& t = D->th[i];
    t.state = RUNNING;
    t.release_gen = 0;
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack;
    t.ctx.uc_stack.ss_size = D->stack_size;
    t.ctx.uc_link = &D->sched;
    makecontext(&t.ctx, trampoline, 0);
  }
  for (;;) {
    for (uint i : thread_order) {
      Thread& t = D->th[i];
      if (t.state != RUNNING) continue;
      D->cur = &t;
      swapcontext(&D->sched, &t.ctx);
    }
    bool all_done = true;
    for (uint i = 0; i < D->n; ++i) all_done = all_done && D->th[i].state == DONE;
    if (all_done || D->abort_group) return;
    if (!release_collective() && !release_barrier()) return;
  }
}

// Run the kernel body once per thread of every threadgroup; the reports say what went wrong (none: success).
static long dispatch(void (*body)(), Dispatch& d, uint3 grid, uint3 threads, std::vector<Region>&& buffers,
                     uint64_t seed) {
  D = &d;
  d.grid = grid;
  d.threads = threads;
  d.n = threads.x * threads.y * threads.z;
  d.body = body;
  d.buffers = std::move(buffers);
  uint groups = grid.x * grid.y * grid.z;
  d.track = (uint64_t)groups * d.n > 1;  // one thread alone cannot race
  d.stack_size = d.n <= 32 ? (8u << 20) : (1u << 20);
  d.th.resize(d.n);
  d.simd.resize((d.n + SIMD_WIDTH - 1) / SIMD_WIDTH);
  for (uint i = 0; i < d.n; ++i) {
    Thread& t = d.th[i];
    t.lin = i;
    t.pos = uint3(i % threads.x, i / threads.x % threads.y, i / (threads.x * threads.y));
    // a fiber's stack, with an inaccessible page below it: an overflow faults instead of writing past it
    void* m = mmap(nullptr, d.stack_size + GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED || mprotect(m, GUARD, PROT_NONE) != 0) {
      report("the emulator could not map a thread's stack");
      if (m != MAP_FAILED) munmap(m, d.stack_size + GUARD);
      for (uint j = 0; j < i; ++j) munmap(d.th[j].stack - GUARD, d.stack_size + GUARD);
      D = nullptr;
      return d.nreports;
    }
    t.stack = (char*)m + GUARD;
  }
  std::vector<uint> thread_order = order(d.n, seed);
  for (uint g : order(groups, seed)) {
    d.glin = (int)g;
    d.gpos = uint3(g % grid.x, g / grid.x % grid.y, g / (grid.x * grid.y));
    d.epoch[0] = d.epoch[1] = 0;
    for (int s = 0; s < 2; ++s) d.sepoch[s].assign(d.simd.size(), 0);
    d.abort_group = false;
    run_group(thread_order);
    for (auto& s : d.shared) {
      delete[] s.second->base;
      delete s.second;
    }
    d.shared.clear();
    if (d.nreports >= MAX_REPORTS) break;
  }
  for (Thread& t : d.th) munmap(t.stack - GUARD, d.stack_size + GUARD);
  D = nullptr;
  return d.nreports;
}

// The builtin position values, converted to the type the kernel declares them with.
template <typename T> struct builtin {
  static T from(uint3 v) { return (T)v.x; }
};
template <typename U> struct builtin<metal::vec<U, 3>> {
  static metal::vec<U, 3> from(uint3 v) { return metal::vec<U, 3>((U)v.x, (U)v.y, (U)v.z); }
};
template <typename U> struct builtin<metal::vec<U, 2>> {
  static metal::vec<U, 2> from(uint3 v) { return metal::vec<U, 2>((U)v.x, (U)v.y); }
};
static inline uint3 position(const char* what) {
  const Thread& t = *D->cur;
  uint3 g = D->gpos, tg = D->threads, n = D->grid;
  if (!strcmp(what, "thread_position_in_threadgroup")) return t.pos;
  if (!strcmp(what, "threadgroup_position_in_grid")) return g;
  if (!strcmp(what, "threadgroups_per_grid")) return n;
  if (!strcmp(what, "threads_per_threadgroup")) return tg;
  if (!strcmp(what, "thread_position_in_grid"))
    return uint3(g.x * tg.x + t.pos.x, g.y * tg.y + t.pos.y, g.z * tg.z + t.pos.z);
  if (!strcmp(what, "threads_per_grid")) return uint3(n.x * tg.x, n.y * tg.y, n.z * tg.z);
  if (!strcmp(what, "thread_index_in_threadgroup")) return uint3(t.lin, 0, 0);
  if (!strcmp(what, "simdgroup_index_in_threadgroup")) return uint3(t.lin / SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "thread_index_in_simdgroup")) return uint3(t.lin % SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "threads_per_simdgroup")) return uint3(SIMD_WIDTH, 0, 0);
  if (!strcmp(what, "simdgroups_per_threadgroup")) return uint3((D->n + SIMD_WIDTH - 1) / SIMD_WIDTH, 0, 0);
  return uint3(0, 0, 0);
}
template <typename T> ptr<T> buffer(int k) {
  Region& r = D->buffers[k];
  r.elem = sizeof(T);
  return ptr<T>((T*)r.base, &r, r.bytes / (long)sizeof(T), 0, 0);
}

// The report text, the reports separated by newlines (the Python driver reads it after a dispatch).
static inline long copy_reports(const Dispatch& d, char* out, long size) {
  std::string all;
  for (const std::string& r : d.reports) all += r + "\n";
  if (d.nreports > (long)d.reports.size())
    all += "... and " + std::to_string(d.nreports - (long)d.reports.size()) + " more\n";
  long n = (long)all.size() < size - 1 ? (long)all.size() : size - 1;
  memcpy(out, all.data(), n);
  out[n] = 0;
  return n;
}
}  // namespace itm
