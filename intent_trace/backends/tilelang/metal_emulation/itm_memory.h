// itm_memory.h (part of itm_metal.h): Metal's scalar, vector, half and bfloat types; the checked pointers and
// the race detector's shadow memory.
#pragma once

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
constexpr long THREADGROUP_BYTES = 32768;  // threadgroup memory a kernel may use on Apple GPUs (32 KiB)
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
static inline bool check_pair(const Region* r, long k, const Access& old, const Access& now, bool quiet = false) {
  if (old.tid < 0 || ordered(old, now) || (old.atomic && now.atomic) || !(old.write || now.write)) return false;
  if (quiet) return true;
  char s[600];
  snprintf(s, sizeof s, "data race on %s %s[%ld]: %s by %s at line %d and %s by %s at line %d, with no barrier "
           "between them", space_name(r->space), r->name.c_str(), k, kind(old), who(old.group, old.tid).c_str(),
           old.line, kind(now), who(now.group, now.tid).c_str(), now.line);
  report(s);
  return true;
}
// Record one access to granule k; returns whether it raced (reported unless `quiet`: an access spanning several
// granules reports its first race only).
static inline bool record_granule(Region* r, long k, bool write, bool atomic, int line, bool quiet) {
  Shadow& sh = r->shadow[k];
  Access a;
  a.group = D->glin;
  a.tid = (int)D->cur->lin;
  a.epoch = D->epoch[r->space];
  a.sepoch = D->sepoch[r->space][a.tid / SIMD_WIDTH];
  a.line = line;
  a.atomic = atomic;
  a.write = write;
  bool raced = check_pair(r, k, sh.w, a, quiet);
  if (write) {  // a later access unordered with a read before this write is unordered with this write too
    raced = check_pair(r, k, sh.r0, a, quiet) || raced;
    raced = check_pair(r, k, sh.r1, a, quiet) || raced;
    sh.w = a;
    sh.r0 = sh.r1 = Access();
    return raced;
  }
  Access* same = sh.r0.tid == a.tid && sh.r0.group == a.group ? &sh.r0
                 : sh.r1.tid == a.tid && sh.r1.group == a.group ? &sh.r1 : nullptr;
  if (same != nullptr) *same = a;
  else if (sh.r0.tid < 0 || ordered(sh.r0, a)) sh.r0 = a;  // keep the reads a later write could race with
  else sh.r1 = a;
  return raced;
}
// An access of `size` bytes at byte `at` of the region: the shadow's granules are the region's declared elements
// (a buffer parameter's or threadgroup array's type), so an access through a pointer cast to another element type
// (TVM's merged threadgroup buffer `threadgroup uchar buf_dyn_shmem[N]` read as floats) covers every granule it
// touches.
static inline void record(Region* r, long at, long size, bool write, bool atomic, int line) {
  if (r->shadow.empty()) r->shadow.resize(r->bytes / r->elem);
  bool raced = false;
  for (long k = at / r->elem; k <= (at + size - 1) / r->elem; ++k)
    raced = record_granule(r, k, write, atomic, line, raced) || raced;
}

template <typename T> struct esize { static constexpr long value = sizeof(T); };
template <> struct esize<void> { static constexpr long value = 1; };
template <> struct esize<const void> { static constexpr long value = 1; };

template <typename T> struct Ref;
// The value type of an expression: an element reference (Ref) reads as its element.
template <typename T> struct value { using type = T; };
template <typename T> struct value<Ref<T>> { using type = std::remove_const_t<T>; };
template <typename T> using value_t = typename value<std::decay_t<T>>::type;

// A pointer into a device buffer or threadgroup array: every access is bounds-checked and recorded. `base` is the
// region's first byte (plus `shift`, a cast's misalignment) as a T*, `off` the element it points at, `count` the
// region's elements of T: a cast to another element type (`(threadgroup float*)((threadgroup char*)buf + 32)`) keeps
// the region and its bounds, so every access through it is checked against the whole region.
template <typename T> struct ptr {
  T* base = nullptr;
  Region* region = nullptr;
  long count = 0, off = 0, shift = 0;
  int line = 0;
  ptr() = default;
  ptr(T* b, Region* r, long n, long o, int l, long s = 0) : base(b), region(r), count(n), off(o), shift(s), line(l) {}
  template <typename U, typename = std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value>>
  ptr(const ptr<U>& p) : base(p.base), region(p.region), count(p.count), off(p.off), shift(p.shift), line(p.line) {}
  // a cast between element types (TVM's `(device char*)bool_buffer`, its merged threadgroup buffer, an atomic view
  // of an element): the same region, the same byte
  template <typename U, typename = std::enable_if_t<!std::is_same<const U, T>::value && !std::is_same<U, T>::value>,
            typename = void>
  explicit ptr(const ptr<U>& p) : region(p.region), line(p.line) {
    long byte = p.shift + p.off * esize<U>::value, size = esize<T>::value;
    shift = ((byte % size) + size) % size;
    off = (byte - shift) / size;
    long bytes = region != nullptr ? region->bytes : 0;
    count = bytes > shift ? (bytes - shift) / size : 0;
    base = region != nullptr ? (T*)((char*)region->base + shift) : nullptr;
  }
  ptr at_line(int l) const { return ptr(base, region, count, off, l, shift); }
  template <typename I> static long index(const I& at) {  // an integer, or an element read as one (`x[idx[i]]`)
    using V = value_t<I>;
    static_assert(std::is_integral<V>::value, "a Metal pointer is indexed by an integer");
    V i = (V)at;
    if (std::is_unsigned<V>::value && (unsigned long long)i > (unsigned long long)LONG_MAX) return LONG_MAX;
    return (long)i;
  }
  template <typename I> Ref<T> operator[](I i) const { return Ref<T>(*this, off + index(i)); }
  Ref<T> operator*() const { return Ref<T>(*this, off); }
  template <typename I> ptr operator+(I k) const { return ptr(base, region, count, off + index(k), line, shift); }
  template <typename I> ptr operator-(I k) const { return ptr(base, region, count, off - index(k), line, shift); }
  template <typename I> ptr& operator+=(I k) { off += index(k); return *this; }
  template <typename I> ptr& operator-=(I k) { off -= index(k); return *this; }
  ptr& operator++() { ++off; return *this; }
  ptr& operator--() { --off; return *this; }
  long operator-(const ptr& o) const { return off - o.off; }
  bool in_bounds(long k) const { return k >= 0 && k < count; }
  long byte(long k) const { return shift + k * esize<T>::value; }  // element k's first byte in the region
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
    if (D->track) record(p.region, p.byte(k), esize<T>::value, false, false, p.line);
    return p.base[k];
  }
  void store(const V& v) const {
    static_assert(!std::is_const<T>::value, "a store through a const pointer");
    if (!p.in_bounds(k)) {
      out_of_bounds(p.region, k, p.count, true, p.line);
      return;
    }
    if (D->track) record(p.region, p.byte(k), esize<T>::value, true, false, p.line);
    const_cast<V*>(p.base)[k] = v;
  }
  operator V() const { return load(); }
  // an explicit conversion of a half or bfloat element to a number (`(float)A[i]`: one step, as Metal's cast)
  template <typename U, typename = std::enable_if_t<std::is_arithmetic<U>::value && !std::is_arithmetic<V>::value>>
  explicit operator U() const { return (U)load(); }
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
  ptr<T> operator&() const { return ptr<T>(p.base, p.region, p.count, k, p.line, p.shift); }
  Ref at_line(int l) const { return Ref(p.at_line(l), k); }
};

}  // namespace itm

namespace metal {
// as_type of an element read through a checked pointer (`as_type<half>(A[i])` of a ushort buffer): of its value
template <typename T, typename U> static inline T as_type(const itm::Ref<U>& r) { return as_type<T>(r.load()); }
}  // namespace metal
