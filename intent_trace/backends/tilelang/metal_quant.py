"""The k-quant super-blocks of ``tilelang-metal`` (``quantize_q8_k``, ``quantize_q4_k``): :mod:`.c`'s bodies in Metal.

tilelang-c's bodies are generic's float32 transcription of ggml's reference code (``quantize_row_q8_K_ref``,
``make_qkx2_quants``, ``quantize_row_q4_K_ref``), one f32 operation per step in the same order, hence the same bits
as generic. These are the same statements, in the same order, with each spelling that Metal does not promise to
compute as x86 does replaced by the :mod:`.metal_math` helper the other Metal bodies use for it:

- Every ``+ - * /`` is ``itb_add32`` / ``itb_sub32`` / ``itb_mul32`` / ``itb_div32`` (as the ``add``, ``sub``,
  ``mul``, ``div`` helpers render): the IEEE result with x86's NaNs (a NaN operand comes back quiet with its
  payload, an invalid operation gives the default NaN), division and ``sqrtf`` (``itb_sqrt32``) in integer
  arithmetic. A NaN payload reaches an output (q4_k's fields, q8_k's quant of a NaN element), so it must be x86's.
  ggml's ``nearest_int`` trick ``(f + 12582912.0f) - 12582912.0f`` is two such additions, so it rounds as in C.
- ``fabsf`` and negation are bit operations (``itb_abs32``; the sign flip of ``-mn``), as x86 computes them.
- NaN decisions are explicit code: a comparison with a NaN is false (q8_k's amax scan and q4_k's maxima skip
  NaNs, as ggml's do; a NaN element's q8_k quant reads its payload bits, as ggml's nearest_int does), ``itb_nearest_int`` sends NaN and out-of-range values to INT32_MIN as NumPy's cast does on
  x86, and the int8 conversion of q8_k wraps in code (``itb_wrap8``: INT32_MIN -> 0), not by Metal's
  implementation-defined narrowing. f16 rounding is ``itb_rf16`` (integer RNE) where C goes through ``double``.
- Pointers carry an address space in Metal, so the entry points are templates over their pointer types (as the
  atomics and Philox in :mod:`.metal`); a 32-element sub-block and its weights are copied into thread arrays
  (plain copies: no arithmetic), so ``itb_qkx2`` is an ordinary function of ``thread`` pointers. Integer types
  are Metal's (``char``, ``short``, ``int``, ``uchar``).

The host C++ tests (tests/backends/test_tilelang_metal_quant.py) compile these next to tilelang-c's bodies and
compare them with generic bit for bit.
"""
from __future__ import annotations

from .metal_math import BASE

FAMILIES = ("quantize_q8_k", "quantize_q4_k")  # the helper families metal.extern_source forwards to these bodies

BASE["itb_nearest_int"] = """static inline int itb_nearest_int(float f) {
  /* ggml's nearest_int (RNE for |f| <= 2^22); NaN and out-of-range values give INT32_MIN, as NumPy's cast on x86 */
  float r = itb_sub32(itb_add32(f, 12582912.0f), 12582912.0f);
  return (r >= -2147483648.0f && r < 2147483648.0f) ? (int)r : (-2147483647 - 1);
}"""
BASE["itb_clamp15"] = "static inline float itb_clamp15(int v) { return (float)(v < 0 ? 0 : v > 15 ? 15 : v); }"
BASE["itb_wrap8"] = """static inline char itb_wrap8(int v) {
  /* the int8 of v's low byte (two's complement), as C's (int8_t) conversion gives it on x86 */
  int t = v & 0xff;
  return (char)(t > 127 ? t - 256 : t);
}"""
BASE["itb_quantize_q8_k"] = """template <typename PX, typename PD, typename PQ, typename PB>
static inline int itb_quantize_q8_k(PX x, PD d, PQ qs, PB bsums) {
  float amax = 0.0f, mx = 0.0f; /* ggml's scan: the first largest |x|, a NaN skipped (its comparison is false) */
  for (int i = 0; i < 256; ++i)
    if (itb_abs32(x[i]) > amax) { amax = itb_abs32(x[i]); mx = x[i]; }
  bool zero = amax == 0.0f;
  float iscale = itb_div32(-127.0f, zero ? 1.0f : mx);
  for (int t = 0; t < 16; ++t) {
    int s = 0;
    for (int l = 0; l < 16; ++l) {
      float xi = x[16 * t + l]; /* a NaN: ggml's bit-reading nearest_int of xi quieted, its low 22 payload bits */
      int q = xi != xi ? (int)(itb_bits32(xi) & 0x3FFFFFu) : itb_nearest_int(itb_mul32(iscale, xi));
      char v = zero ? (char)0 : itb_wrap8(q < 127 ? q : 127);
      qs[16 * t + l] = v;
      s += v;
    }
    bsums[t] = (short)s;
  }
  *d = zero ? 0.0f : itb_div32(1.0f, iscale);
  return 0;
}"""
BASE["itb_qkx2"] = """static inline void itb_qkx2(thread const float* x, thread const float* w, thread float* scale_out,
                            thread float* min_out) {
  /* ggml make_qkx2_quants(32, nmax 15, rmin -1, rdelta 0.1, nstep 20, use_mad false) as generic computes it */
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = itb_mul32(sum_w, x[0]);
  for (int i = 1; i < 32; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
    sum_w = itb_add32(sum_w, w[i]);
    sum_x = itb_add32(sum_x, itb_mul32(w[i], x[i]));
  }
  mn = mn > 0.0f ? 0.0f : mn;
  bool flat = mx == mn;
  float iscale = itb_div32(15.0f, flat ? 1.0f : itb_sub32(mx, mn)), scale = itb_div32(1.0f, iscale), best = 0.0f;
  float laux[32];
  for (int i = 0; i < 32; ++i) {
    float l = itb_clamp15(itb_nearest_int(itb_mul32(iscale, itb_sub32(x[i], mn))));
    float diff = itb_sub32(itb_add32(itb_mul32(scale, l), mn), x[i]);
    diff = itb_mul32(diff, diff);
    best = itb_add32(best, itb_mul32(w[i], diff));
  }
  for (int step = 0; step <= 20; ++step) {
    iscale = itb_div32(itb_add32(itb_add32(-1.0f, itb_mul32(0.1f, (float)step)), 15.0f),
                       flat ? 1.0f : itb_sub32(mx, mn));
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < 32; ++i) {
      laux[i] = itb_clamp15(itb_nearest_int(itb_mul32(iscale, itb_sub32(x[i], mn))));
      float wl = itb_mul32(w[i], laux[i]);
      sum_l = itb_add32(sum_l, wl);
      sum_l2 = itb_add32(sum_l2, itb_mul32(wl, laux[i]));
      sum_xl = itb_add32(sum_xl, itb_mul32(wl, x[i]));
    }
    float D = itb_sub32(itb_mul32(sum_w, sum_l2), itb_mul32(sum_l, sum_l));
    float this_scale = itb_div32(itb_sub32(itb_mul32(sum_w, sum_xl), itb_mul32(sum_x, sum_l)), D);
    float this_min = itb_div32(itb_sub32(itb_mul32(sum_l2, sum_x), itb_mul32(sum_l, sum_xl)), D);
    if (this_min > 0.0f) { this_min = 0.0f; this_scale = itb_div32(sum_xl, sum_l2); }
    float mad = 0.0f;
    for (int i = 0; i < 32; ++i) {
      float diff = itb_sub32(itb_add32(itb_mul32(this_scale, laux[i]), this_min), x[i]);
      diff = itb_mul32(diff, diff);
      mad = itb_add32(mad, itb_mul32(w[i], diff));
    }
    if (D > 0.0f && mad < best && !flat) { best = mad; scale = this_scale; mn = this_min; }
  }
  *scale_out = flat ? 0.0f : scale;
  *min_out = itb_f32(itb_bits32(mn) ^ 0x80000000u);
}"""
BASE["itb_quantize_q4_k"] = """template <typename PX, typename PD, typename PM, typename PS, typename PN, typename PQ>
static inline int itb_quantize_q4_k(PX x, PD d, PM dmin, PS scales, PN mins, PQ q) {
  /* d and dmin are f16 values held in floats */
  float sc[8], mi[8], xs[32], w[32];
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) xs[i] = x[32 * j + i];
    float sum_x2 = 0.0f;
    for (int i = 0; i < 32; ++i) sum_x2 = itb_add32(sum_x2, itb_mul32(xs[i], xs[i]));
    float av = itb_sqrt32(itb_div32(sum_x2, 32.0f));
    for (int i = 0; i < 32; ++i) w[i] = itb_add32(av, itb_abs32(xs[i]));
    itb_qkx2(xs, w, &sc[j], &mi[j]);
  }
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    max_scale = sc[j] > max_scale ? sc[j] : max_scale;
    max_min = mi[j] > max_min ? mi[j] : max_min;
  }
  float inv_scale = max_scale > 0.0f ? itb_div32(63.0f, max_scale) : 0.0f;
  float inv_min = max_min > 0.0f ? itb_div32(63.0f, max_min) : 0.0f;
  float dh = itb_rf16(itb_div32(max_scale, 63.0f)), dmh = itb_rf16(itb_div32(max_min, 63.0f));
  *d = dh;
  *dmin = dmh;
  for (int j = 0; j < 8; ++j) {
    int ls = itb_nearest_int(itb_mul32(inv_scale, sc[j])), lm = itb_nearest_int(itb_mul32(inv_min, mi[j]));
    uchar sj = (uchar)((ls < 63 ? ls : 63) & 63), mj = (uchar)((lm < 63 ? lm : 63) & 63);
    scales[j] = sj;
    mins[j] = mj;
    float dd = itb_mul32(dh, (float)sj), dm = itb_mul32(dmh, (float)mj);
    for (int i = 0; i < 32; ++i) {
      int l = itb_nearest_int(itb_div32(itb_add32(x[32 * j + i], dm), dd != 0.0f ? dd : 1.0f));
      q[32 * j + i] = dd != 0.0f ? (uchar)(l < 0 ? 0 : l > 15 ? 15 : l) : (uchar)0;
    }
  }
  return 0;
}"""
