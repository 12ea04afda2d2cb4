// itm_matrix.h (part of itm_metal.h): SIMD-group matrices, simdgroup_matrix<T, 8, 8> of float, half and bfloat, and
// the functions TileLang's Metal T.gemm writes: make_filled_simdgroup_matrix, simdgroup_load, simdgroup_store,
// simdgroup_multiply_accumulate (and simdgroup_multiply).
//
// What Apple specifies (Metal Shading Language specification, SIMD-group matrix data types and functions): the
// operations on a SIMD-group matrix are executed cooperatively by the threads of the SIMD-group, so every one of
// them must be called in uniform control flow, by every thread of the simdgroup with the same arguments. Apple does
// not document which lane holds which element (MLX relies on an unpublished layout through thread_elements()). So
// these are emulated as COLLECTIVES over the whole value, not as each lane's share:
//
// - Every lane holds the whole 8 x 8 matrix. Each load, store and multiply-accumulate is a collective: the lanes of
//   the simdgroup meet there (as at simd_sum), and the emulator reports a lane that does not arrive with the others
//   (divergent control flow, a lane that returned) and lanes that arrive with different arguments (pointer, stride,
//   origin, transpose, source line) or different operand matrices (a matrix filled with a lane-dependent value,
//   loaded from lane-dependent memory). Neither is defined on Metal.
// - Memory: element e (row-major) of a load or store is accessed by lane (e / 2) % 32 of the simdgroup (two a lane,
//   a fixed choice standing in for Apple's undocumented one; the first lane takes those of lanes a partial
//   simdgroup lacks): that lane's access is bounds-checked (out-of-bounds is reported, never performed; a load reads
//   0) and recorded by the race detector, so two simdgroups storing one element, or a simdgroup loading an element
//   another thread writes without a barrier between, are reported with both threads and lines. The other lanes read
//   the element unrecorded (every lane needs the whole matrix here); only the owner stores it.
// - Numerics: Apple does not document how the multiply-accumulate rounds. Here d[i][j] starts from c[i][j] in float
//   and adds a[i][k] * b[k][j] for k ascending, each with one fused multiply-add in float (half and bfloat operands
//   convert to float exactly), and is rounded once to d's element type. T10 allows FMA inside contractions, and any
//   order: an Apple GPU may order, fuse or round differently within T5's bound, may treat subnormal products or
//   signed zeros otherwise, and gives its own NaN payloads, none of which the emulator can show (intent_trace's
//   programs recompute a NaN result with the serial program's code: metal_matmul.py).
#pragma once

namespace itm {
struct MatrixKey {  // what the lanes of one simdgroup deposit at a matrix function (16 bytes: Simd's slot)
  uint64_t args = 0, data = 0;
};
static inline uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
template <typename V> static inline uint64_t fnv(uint64_t h, const V& v) { return fnv(h, &v, sizeof v); }
template <typename T> static inline uint64_t pointer_key(uint64_t h, const ptr<T>& p) {
  h = fnv(h, (uintptr_t)p.region);
  h = fnv(h, p.off);
  return fnv(h, p.shift);
}
// The lanes of a simdgroup the dispatch has (a partial last simdgroup has fewer than 32).
static inline uint simd_lanes(uint lin) {
  uint lo = lin - lin % SIMD_WIDTH;
  return D->n - lo < (uint)SIMD_WIDTH ? D->n - lo : (uint)SIMD_WIDTH;
}
// Meet the simdgroup's other lanes at the matrix function `what` (source line `line`); report a lane missing or
// arriving with other arguments or matrices. Each source line is a collective of its own (lanes at two matrix
// functions on different lines are divergent, not one call with different arguments).
static inline void matrix_collective(const char* what, int line, uint64_t args, uint64_t data) {
  MatrixKey key;
  key.args = fnv(fnv(args, line), what, strlen(what));
  key.data = data;
  collective(OP_MATRIX + 8 * line, key, [&](const MatrixKey* v, uint mask, int lane) {
    uint lanes = simd_lanes(D->cur->lin), full = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
    const uint3& g = D->gpos;
    char s[400];
    if (mask != full) {
      snprintf(s, sizeof s, "%s at line %d is not reached by every lane of simdgroup %u of threadgroup (%u,%u,%u) "
               "together (lanes 0x%08x of 0x%08x): SIMD-group matrix functions need uniform control flow", what, line,
               D->cur->lin / SIMD_WIDTH, g.x, g.y, g.z, mask, full);
      report(s);
      return v[lane];
    }
    for (uint l = 0; l < lanes; ++l)
      if (v[l].args != v[lane].args || v[l].data != v[lane].data) {
        snprintf(s, sizeof s, "%s at line %d: the lanes of simdgroup %u of threadgroup (%u,%u,%u) pass different %s "
                 "(a SIMD-group matrix and its functions' arguments are one value of the whole simdgroup)", what, line,
                 D->cur->lin / SIMD_WIDTH, g.x, g.y, g.z, v[l].args != v[lane].args ? "arguments" : "matrices");
        report(s);
        break;
      }
    return v[lane];
  });
}
// Whether this lane accesses element e of a matrix load or store (see the header comment).
static inline bool owns(int e) {
  uint lin = D->cur->lin, lane = lin % SIMD_WIDTH, owner = (uint)(e / 2) % SIMD_WIDTH;
  return owner == lane || (lane == 0 && owner >= simd_lanes(lin));
}
}  // namespace itm

namespace metal {
template <typename T, int R, int C> struct simdgroup_matrix {
  static_assert(R == 8 && C == 8, "Metal's SIMD-group matrices are 8 x 8");
  T e[R * C];
  simdgroup_matrix() : e() {}
  explicit simdgroup_matrix(T diagonal) : e() {
    for (int i = 0; i < R && i < C; ++i) e[i * C + i] = diagonal;
  }
  uint64_t key() const { return itm::fnv(0xcbf29ce484222325ull, e, sizeof e); }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
// A value constructor (no memory, no meeting): a lane-dependent value shows at the next function that uses it.
template <typename T, int R, int C> simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, R, C> m;
  for (int i = 0; i < R * C; ++i) m.e[i] = v;
  return m;
}
template <typename T, int R, int C, typename E>
void itm_simdgroup_load(int line, simdgroup_matrix<T, R, C>& d, itm::ptr<E> src, ulong per_row = C,
                        ulong2 origin = ulong2(0, 0), bool transpose = false) {
  uint64_t args = itm::fnv(itm::fnv(itm::fnv(itm::pointer_key(0xcbf29ce484222325ull, src), per_row), origin.x),
                           origin.y);
  itm::matrix_collective("simdgroup_load", line, itm::fnv(args, transpose), 0);
  itm::ptr<E> at = src.at_line(line);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      long k = at.off + (long)(transpose ? (origin.y + c) * per_row + origin.x + r
                                         : (origin.y + r) * per_row + origin.x + c);
      if (itm::owns(r * C + c)) d.e[r * C + c] = (T)itm::Ref<E>(at, k).load();
      else d.e[r * C + c] = (T)(at.in_bounds(k) ? at.base[k] : std::remove_const_t<E>());
    }
}
template <typename T, int R, int C, typename E>
void itm_simdgroup_store(int line, const simdgroup_matrix<T, R, C>& m, itm::ptr<E> dst, ulong per_row = C,
                         ulong2 origin = ulong2(0, 0), bool transpose = false) {
  uint64_t args = itm::fnv(itm::fnv(itm::fnv(itm::pointer_key(0xcbf29ce484222325ull, dst), per_row), origin.x),
                           origin.y);
  itm::matrix_collective("simdgroup_store", line, itm::fnv(args, transpose), m.key());
  itm::ptr<E> at = dst.at_line(line);
  for (int e = 0; e < R * C; ++e) {
    if (!itm::owns(e)) continue;
    int r = e / C, c = e % C;
    at[transpose ? (origin.y + c) * per_row + origin.x + r : (origin.y + r) * per_row + origin.x + c] = m.e[e];
  }
}
template <typename TD, typename TA, typename TB, typename TC, int R, int K, int C>
void itm_simdgroup_multiply_accumulate(int line, simdgroup_matrix<TD, R, C>& d, const simdgroup_matrix<TA, R, K>& a,
                                       const simdgroup_matrix<TB, K, C>& b, const simdgroup_matrix<TC, R, C>& c) {
  uint64_t data = itm::fnv(itm::fnv(itm::fnv(0, a.key()), b.key()), c.key());
  itm::matrix_collective("simdgroup_multiply_accumulate", line, 0, data);
  simdgroup_matrix<TD, R, C> out;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float acc = (float)c.e[i * C + j];  // c, then one fused multiply-add a product, k ascending, in float
      for (int k = 0; k < K; ++k) acc = fmaf((float)a.e[i * K + k], (float)b.e[k * C + j], acc);
      out.e[i * C + j] = (TD)acc;
    }
  d = out;
}
template <typename TD, typename TA, typename TB, int R, int K, int C>
void itm_simdgroup_multiply(int line, simdgroup_matrix<TD, R, C>& d, const simdgroup_matrix<TA, R, K>& a,
                            const simdgroup_matrix<TB, K, C>& b) {
  itm_simdgroup_multiply_accumulate(line, d, a, b, simdgroup_matrix<TD, R, C>());
}
// The source line travels with each call (reports name it), as threadgroup_barrier's does.
#define simdgroup_load(...) itm_simdgroup_load(__LINE__, __VA_ARGS__)
#define simdgroup_store(...) itm_simdgroup_store(__LINE__, __VA_ARGS__)
#define simdgroup_multiply_accumulate(...) itm_simdgroup_multiply_accumulate(__LINE__, __VA_ARGS__)
#define simdgroup_multiply(...) itm_simdgroup_multiply(__LINE__, __VA_ARGS__)
}  // namespace metal
