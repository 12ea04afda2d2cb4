"""The internal C helpers (``itb_*``) that tilelang-c's bodies call, shared by tilelang-cuda (as device functions):
scalar ones (bit casts, flush to zero, binary16/bfloat16 encoding and decoding, Cephes' i0) and ones that compute a
whole block (Philox4x32-10, T8; the k-quant super-blocks, quantization.md Q2). tilelang-metal has its own (metal.py,
metal_quant.py). Merged into :data:`.c.BASE`: templates whose ``$static`` (a file-scope function's qualifiers) and
``$clz`` (count leading zeros) each target spells (:class:`.c.Spelling`: C's, or CUDA's device functions).
"""
from ...oracle.cephes import I0_A, I0_B

SCALAR_BASE = {
    "itb_bits32": "$static uint32_t itb_bits32(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }",
    "itb_f32": "$static float itb_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }",
    "itb_bits64": "$static uint64_t itb_bits64(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }",
    "itb_f64": "$static double itb_f64(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }",
    "itb_ftz32": "$static float itb_ftz32(float x) { return (x != 0 && fabsf(x) < 0x1p-126f) ? "
                 "copysignf(0.0f, x) : x; }",
    "itb_ftz64": "$static double itb_ftz64(double x) { return (x != 0 && fabs(x) < 0x1p-1022) ? "
                 "copysign(0.0, x) : x; }",
    # --- f16/bf16: exact decoding, RNE encoding from double (one rounding), NaNs as NumPy/ml_dtypes convert them.
    "itb_d2n": """$static uint32_t itb_d2n(double x, int M, int W) {
  /* finite or infinite x -> the bits of the binary format with M mantissa and W exponent bits, RNE */
  uint64_t b = itb_bits64(x), ab = b & 0x7fffffffffffffffull;
  uint32_t sign = (uint32_t)(b >> 63) << (M + W), inf = ((1u << W) - 1) << M;
  int B = (1 << (W - 1)) - 1, e = (int)(ab >> 52) - 1023;
  if (ab == 0) return sign;
  if (e > B) return sign | inf;
  uint64_t m = (ab & 0xfffffffffffffull) | ((ab >> 52) ? (1ull << 52) : 0);
  int normal = e >= 1 - B, shift = normal ? 52 - M : 52 - M + (1 - B) - e;
  if (shift >= 54) return sign;
  uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  if (normal) return sign | (((uint32_t)(e + B) << M) + (uint32_t)(q - (1ull << M)));
  return sign | (uint32_t)q;
}""",
    "itb_f16_from_double": """$static uint16_t itb_f16_from_double(double x) {
  if (x != x) {
    uint64_t b = itb_bits64(x);
    uint16_t h = (uint16_t)(0x7c00u + ((b >> 42) & 0x3ffu));
    return (uint16_t)(((b >> 48) & 0x8000u) | (h == 0x7c00u ? 0x7c01u : h));
  }
  return (uint16_t)itb_d2n(x, 10, 5);
}""",
    "itb_bf16_from_double": """$static uint16_t itb_bf16_from_double(double x) {
  if (x != x) return (uint16_t)(((itb_bits64(x) >> 48) & 0x8000u) | 0x7fc0u);
  return (uint16_t)itb_d2n(x, 7, 8);
}""",
    "itb_f16_decode": """$static float itb_f16_decode(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return itb_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) { float v = (float)m * 0x1p-24f; return sign ? -v : v; }
  return itb_f32(sign | ((e + 112u) << 23) | (m << 13));
}""",
    "itb_bf16_decode": "$static float itb_bf16_decode(uint16_t h) { return itb_f32((uint32_t)h << 16); }",
    "itb_f16_encode": """$static uint16_t itb_f16_encode(float x) {
  if (x != x) {
    uint32_t b = itb_bits32(x);
    uint16_t h = (uint16_t)(0x7c00u | ((b >> 13) & 0x3ffu));
    return (uint16_t)(((b >> 16) & 0x8000u) | (h == 0x7c00u ? 0x7c01u : h));
  }
  return itb_f16_from_double((double)x);
}""",
    "itb_bf16_encode": """$static uint16_t itb_bf16_encode(float x) {
  return x != x ? (uint16_t)(itb_bits32(x) >> 16) : itb_bf16_from_double((double)x);
}""",
    "itb_df16": "$static float itb_df16(double x) { return itb_f16_decode(itb_f16_from_double(x)); }",
    "itb_dbf16": "$static float itb_dbf16(double x) { return itb_bf16_decode(itb_bf16_from_double(x)); }",
    "itb_rf16": "$static float itb_rf16(float x) { return itb_df16((double)x); }",
    "itb_rbf16": "$static float itb_rbf16(float x) { return itb_dbf16((double)x); }",
    "itb_u64_rto": """$static double itb_u64_rto(uint64_t m) {
  if (m < (1ull << 53)) return (double)m;
  int shift = 11 - $clz(m);
  return ldexp((double)((m >> shift) | ((m & ((1ull << shift) - 1)) != 0)), shift);
}""",
    "itb_i64_rto": """$static double itb_i64_rto(int64_t x) {
  return x < 0 ? -itb_u64_rto(0ull - (uint64_t)x) : itb_u64_rto((uint64_t)x);
}""",
    "itb_fma_rto": """$static double itb_fma_rto(double a, double b, double c) {
  /* a*b + c for operands of at most 26 significant bits (a*b is exact): rounded to odd */
  /* T3: a NaN operand gives the first NaN of a, b, c quieted, as x86's vfmadd (``p + c`` below may be commuted:
     g++ returned c's NaN for two NaN operands) */
  if (a != a || b != b || c != c) return itb_f64(itb_bits64(a != a ? a : b != b ? b : c) | 0x0008000000000000ull);
  double p = a * b, s = p + c;
  if (!(s - s == 0)) return s;
  double bb = s - p, err = (p - (s - bb)) + (c - bb);
  if (err == 0) return s;
  if ((s > 0) != (err > 0)) s = nextafter(s, 0.0);
  return itb_f64(itb_bits64(s) | 1u);
}""",
    "itb_rsqrt": "$static double itb_rsqrt(double x) { return 1.0 / sqrt(x); }",
    "itb_sigmoid": "$static double itb_sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : "
                   "exp(x) / (1.0 + exp(x)); }",
    # Modified Bessel I0: Cephes' Chebyshev expansions, as NumPy's i0 (generic's reference) computes them.
    "itb_chbevl": """$static double itb_chbevl(double x, const double *v, int n) {
  double b0 = v[0], b1 = 0.0, b2 = 0.0;
  for (int i = 1; i < n; ++i) { b2 = b1; b1 = b0; b0 = x * b1 - b2 + v[i]; }
  return 0.5 * (b0 - b2);
}""",
    "itb_i0": f"""$static double itb_i0(double x) {{
  static const double A[] = {{{", ".join(map(repr, I0_A))}}};
  static const double B[] = {{{", ".join(map(repr, I0_B))}}};
  if (x != x) return x;
  double ax = fabs(x);
  if (ax == INFINITY) return INFINITY;
  if (ax <= 8.0) return exp(ax) * itb_chbevl(ax / 2.0 - 2, A, {len(I0_A)});
  return exp(ax) * itb_chbevl(32.0 / ax - 2.0, B, {len(I0_B)}) / sqrt(ax);
}}""",
}


BLOCK_BASE: dict = {}

BLOCK_BASE["itb_philox_word"] = """$static uint32_t itb_philox_word(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                      uint32_t k0, uint32_t k1, int w) {
  /* Philox4x32-10 (Random123, T8): the key is bumped before rounds 2..10; returns output word w */
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
  }
  return w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
}"""
BLOCK_BASE["itb_philox4x32_10"] = """$static int32_t itb_philox4x32_10(int64_t* w) {
  /* w[0..3] counter words, w[4..5] key words -> w[0..3] the block's output words (the known-answer test seam) */
  uint32_t c[4];
  for (int i = 0; i < 4; ++i)
    c[i] = itb_philox_word((uint32_t)w[0], (uint32_t)w[1], (uint32_t)w[2], (uint32_t)w[3], (uint32_t)w[4],
                           (uint32_t)w[5], i);
  for (int i = 0; i < 4; ++i) w[i] = c[i];
  return 0;
}"""

# k-quant super-blocks (quantization.md Q2): generic's NumPy float32 transcription of ggml's reference code, one f32
# operation per step in the same order (built with -ffp-contract=off, so nothing is fused), hence bit-identical.
BLOCK_BASE["itb_nearest_int"] = """$static int32_t itb_nearest_int(float f) {
  /* ggml's nearest_int (RNE for |f| <= 2^22); NaN and out-of-range values give INT32_MIN, as NumPy's cast on x86 */
  float r = (f + 12582912.0f) - 12582912.0f;
  return (r >= -2147483648.0f && r < 2147483648.0f) ? (int32_t)r : INT32_MIN;
}"""
BLOCK_BASE["itb_clamp15"] = """$static float itb_clamp15(int32_t v) { return (float)(v < 0 ? 0 : v > 15 ? 15 : v); }"""
BLOCK_BASE["itb_quantize_q8_k"] = """$static int32_t itb_quantize_q8_k(float* x, float* d, int8_t* qs, int16_t* bsums) {
  float amax = 0.0f, mx = 0.0f; /* ggml's scan: the first largest |x|, a NaN skipped (its comparison is false) */
  for (int i = 0; i < 256; ++i)
    if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); mx = x[i]; }
  int zero = amax == 0.0f;
  float iscale = -127.0f / (zero ? 1.0f : mx);
  for (int t = 0; t < 16; ++t) {
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) {
      float xi = x[16 * t + l]; /* a NaN: ggml's bit-reading nearest_int of xi quieted, its low 22 payload bits */
      int32_t q = xi != xi ? (int32_t)(itb_bits32(xi) & 0x3FFFFFu) : itb_nearest_int(iscale * xi);
      int8_t v = zero ? (int8_t)0 : (int8_t)(q < 127 ? q : 127);
      qs[16 * t + l] = v;
      s += v;
    }
    bsums[t] = (int16_t)s;
  }
  *d = zero ? 0.0f : 1.0f / iscale;
  return 0;
}"""
BLOCK_BASE["itb_qkx2"] = """$static void itb_qkx2(const float* x, const float* w, float* scale_out, float* min_out) {
  /* ggml make_qkx2_quants(32, nmax 15, rmin -1, rdelta 0.1, nstep 20, use_mad false) as generic computes it */
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < 32; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
    sum_w = sum_w + w[i];
    sum_x = sum_x + w[i] * x[i];
  }
  mn = mn > 0.0f ? 0.0f : mn;
  int flat = mx == mn;
  float iscale = 15.0f / (flat ? 1.0f : mx - mn), scale = 1.0f / iscale, best = 0.0f, laux[32];
  for (int i = 0; i < 32; ++i) {
    float l = itb_clamp15(itb_nearest_int(iscale * (x[i] - mn)));
    float diff = (scale * l + mn) - x[i];
    diff = diff * diff;
    best = best + w[i] * diff;
  }
  for (int step = 0; step <= 20; ++step) {
    iscale = (-1.0f + 0.1f * (float)step + 15.0f) / (flat ? 1.0f : mx - mn);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < 32; ++i) {
      laux[i] = itb_clamp15(itb_nearest_int(iscale * (x[i] - mn)));
      float wl = w[i] * laux[i];
      sum_l = sum_l + wl;
      sum_l2 = sum_l2 + wl * laux[i];
      sum_xl = sum_xl + wl * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0.0f) { this_min = 0.0f; this_scale = sum_xl / sum_l2; }
    float mad = 0.0f;
    for (int i = 0; i < 32; ++i) {
      float diff = (this_scale * laux[i] + this_min) - x[i];
      diff = diff * diff;
      mad = mad + w[i] * diff;
    }
    if (D > 0.0f && mad < best && !flat) { best = mad; scale = this_scale; mn = this_min; }
  }
  *scale_out = flat ? 0.0f : scale;
  *min_out = -mn;
}"""
BLOCK_BASE["itb_quantize_q4_k"] = """$static int32_t itb_quantize_q4_k(float* x, float* d, float* dmin, uint8_t* scales,
                                        uint8_t* mins, uint8_t* q) {
  /* d and dmin are f16 values held in floats */
  float sc[8], mi[8], w[32];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int i = 0; i < 32; ++i) sum_x2 = sum_x2 + xs[i] * xs[i];
    float av = sqrtf(sum_x2 / 32.0f);
    for (int i = 0; i < 32; ++i) w[i] = av + fabsf(xs[i]);
    itb_qkx2(xs, w, &sc[j], &mi[j]);
  }
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    max_scale = sc[j] > max_scale ? sc[j] : max_scale;
    max_min = mi[j] > max_min ? mi[j] : max_min;
  }
  float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  float dh = itb_f16_decode(itb_f16_from_double((double)(max_scale / 63.0f)));
  float dmh = itb_f16_decode(itb_f16_from_double((double)(max_min / 63.0f)));
  *d = dh;
  *dmin = dmh;
  for (int j = 0; j < 8; ++j) {
    int32_t ls = itb_nearest_int(inv_scale * sc[j]), lm = itb_nearest_int(inv_min * mi[j]);
    scales[j] = (uint8_t)((ls < 63 ? ls : 63) & 63);
    mins[j] = (uint8_t)((lm < 63 ? lm : 63) & 63);
    float dd = dh * (float)scales[j], dm = dmh * (float)mins[j];
    for (int i = 0; i < 32; ++i) {
      int32_t l = itb_nearest_int((x[32 * j + i] + dm) / (dd != 0.0f ? dd : 1.0f));
      q[32 * j + i] = dd != 0.0f ? (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l) : (uint8_t)0;
    }
  }
  return 0;
}"""
