// itm_library.h (part of itm_metal.h): threads blocking at barriers and collectives, threadgroup arrays, and
// the Metal library functions: max/min, barriers, simdgroup functions, atomics, precise:: and fast:: math
// (simdgroup matrices: itm_matrix.h).
#pragma once

namespace itm {
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
  long total = r->bytes;
  for (auto& s : D->shared) total += s.second->bytes;
  if (total > THREADGROUP_BYTES && total - r->bytes <= THREADGROUP_BYTES) {
    char s[300];
    snprintf(s, sizeof s, "threadgroup memory of %ld bytes (with %s, line %d) exceeds the %ld bytes of an Apple GPU's "
             "threadgroup", total, name, line, (long)THREADGROUP_BYTES);
    report(s);
  }
  D->shared.push_back({site, r});
  return ptr<T>((T*)r->base, r, n, 0, line);
}
template <typename T> Ref<T> shared_scalar(const void* site, const char* name, int line) {
  return *shared_array<T>(site, 1, name, line);
}
#define ITM_THREADGROUP_ARRAY(T, NAME, N) \
  static const char itm_site_##NAME = 0;  \
  ::itm::ptr<T> NAME = ::itm::shared_array<T>(&itm_site_##NAME, (N), #NAME, __LINE__)
#define ITM_THREADGROUP_SCALAR(T, NAME) \
  static const char itm_site_##NAME = 0; ::itm::Ref<T> NAME = ::itm::shared_scalar<T>(&itm_site_##NAME, #NAME, __LINE__)

// OP_MATRIX + 8 * line: a SIMD-group matrix function at that source line (itm_matrix.h)
enum Op { OP_SIMD_BARRIER = 1, OP_REDUCE, OP_SCAN, OP_SHUFFLE, OP_BROADCAST, OP_VOTE, OP_MATRIX };

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
template <typename T, typename L, typename H>
static inline itm::value_t<T> clamp(const T& x, const L& lo, const H& hi) {
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
  if (itm::D->track) itm::record(p.region, p.byte(p.off), sizeof(atomic<T>), write, true, p.line);
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

// metal::precise:: and metal::fast:: math as the HOST's libm (float functions, host_math.py lists them): the
// emulator cannot reproduce Apple's library, whose precise:: functions the MSL specification only bounds (most
// within 4 ulp) and whose fast:: functions are coarser still. A result that depends on one of these is the host's
// answer, not the GPU's; the verifier classifies such cases accordingly (oracle/verification/emulation.py).
#define ITM_HOST_MATH1(NAME) \
  static inline float NAME(float x) { return ::NAME##f(x); }
#define ITM_HOST_MATH2(NAME, LIBM) \
  static inline float NAME(float x, float y) { return ::LIBM(x, y); }
#define ITM_HOST_MATH_LIBRARY                                                                         \
  ITM_HOST_MATH1(exp) ITM_HOST_MATH1(exp2) ITM_HOST_MATH1(exp10) ITM_HOST_MATH1(log) ITM_HOST_MATH1(log2)         \
  ITM_HOST_MATH1(log10) ITM_HOST_MATH1(sin) ITM_HOST_MATH1(cos) ITM_HOST_MATH1(tan) ITM_HOST_MATH1(asin)          \
  ITM_HOST_MATH1(acos) ITM_HOST_MATH1(atan) ITM_HOST_MATH1(sinh) ITM_HOST_MATH1(cosh) ITM_HOST_MATH1(tanh)        \
  ITM_HOST_MATH1(asinh) ITM_HOST_MATH1(acosh) ITM_HOST_MATH1(atanh) ITM_HOST_MATH1(sqrt)                         \
  ITM_HOST_MATH2(pow, powf) ITM_HOST_MATH2(powr, powf) ITM_HOST_MATH2(atan2, atan2f)                             \
  static inline float rsqrt(float x) { return 1.0f / ::sqrtf(x); }                                               \
  static inline float divide(float x, float y) { return x / y; }
namespace precise { ITM_HOST_MATH_LIBRARY }
namespace fast { ITM_HOST_MATH_LIBRARY }
#undef ITM_HOST_MATH_LIBRARY
#undef ITM_HOST_MATH2
#undef ITM_HOST_MATH1
}  // namespace metal
