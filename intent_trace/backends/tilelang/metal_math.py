"""The float-only numerics of ``tilelang-metal``: Metal Shading Language helpers with the results of :mod:`.c`.

Metal has no 64-bit float, so nothing here may go through ``double`` the way the C helpers do. The rules:

- Exact operations are done in integer arithmetic, which every GPU computes the same way: rounding to a
  binary format (``itb_rne``: a 64-bit significand and an exponent to f32, f16 or bf16 bits, RNE, with
  subnormals and overflow), f16/bf16 conversions, integer -> float conversions, ``sqrt``, ``floor`` and the
  f16/bf16 fused multiply-add (one rounding of the exact ``a*b + c``). Division is the hardware's (the MSL
  specification's accuracy table calls safe-mode ``x / y`` correctly rounded: :mod:`.metal` cites it);
  ``itb_div32`` (integer long division) is kept only for the k-quant bodies (:mod:`.metal_quant`).
- ``+ - *`` and ``metal::fma`` are IEEE binary32 operations (correctly rounded; ``fma`` has one rounding), as
  long as the source is compiled without fast math: the prelude starts with ``#pragma METAL fp
  math_mode(safe)`` and ``contract(off)`` (MSL 3.2), and a Mac build must also compile with fast math off
  (``MTLCompileOptions.mathMode = MTLMathModeSafe``, the ``metal`` tool's ``-fno-fast-math``; Metal's default is
  fast math, under which the compiler may fold ``x != x`` and cancel the error terms below).
- NaNs are decided in code, not left to the GPU: a NaN operand comes back quiet with its payload (first NaN
  wins, as on x86, where generic and tilelang-c run), and an invalid operation gives x86's default NaN
  (``0xffc00000``), so results agree with tilelang-c bit for bit.
- The T4 functions Metal has are ``metal::precise::`` calls (T10; :mod:`.metal` decides their special values and
  NaNs around the call, and composes log1p and sigmoid from them: ``itb_log1p_native``, ``itb_sigmoid_native``).
  The ones Metal lacks (erf, erfc, lgamma, i0, expm1) are evaluated here in double-float arithmetic (``itb_df``: an
  unevaluated sum of two floats, about 48 bits; error-free TwoSum and TwoProd with ``fma``; Joldes, Muller,
  Popescu, ACM TOMS 44(2), 2017) with argument reductions and series of our own, rounded once to the result
  format (``itb_df_bits``): f32 within 1 ulp (T4 allows 2), f16/bf16 rounded once. The exp and log cores
  (``itb_exp_core``, ``itb_log_core``) remain only as their building blocks.

``BASE`` maps each internal helper to its definition; :func:`.metal.prelude` includes the ones a kernel's
helpers name (and, recursively, the ones those name). Constants are float bit patterns (``$NAME_i`` below is
part ``i`` of a constant split into floats, filled in from ``_CONSTANTS``).
"""
from __future__ import annotations

import re

# Constants split into three floats each (hi, mid, lo; computed with mpmath at 300 bits).
_CONSTANTS = {
    "LN2": (0x3F317218, 0xB102E308, 0xA4CA86C4), "PI": (0x40490FDB, 0xB3BBBD2E, 0xA7772CED),
    "PIO2": (0x3FC90FDB, 0xB33BBD2E, 0xA6F72CED), "TWO_OVER_SQRTPI": (0x3F906EBB, 0xB37BD649, 0xA63B9471),
    "INV_SQRTPI": (0x3F106EBB, 0xB2FBD649, 0xA5BB9471), "LOG_PI": (0x3F928682, 0x330E7A1C, 0xA63D0A82),
    "HALF_LOG_2PI": (0x3F6B3F8E, 0x32864BEB, 0x2614D253), "EULER": (0x3F13C468, 0xB1E4127A, 0x24F49A38),
}


def _fill(text: str) -> str:
    """``$DF_NAME`` -> the constant as a double-float; ``$NAME_i`` -> its part ``i`` as a float."""
    def part(m):
        return f"itb_f32(0x{_CONSTANTS[m.group(1)][int(m.group(2))]:08x}u)"

    text = re.sub(r"\$DF_([A-Z0-9_]+)", lambda m: f"itb_dd(${m.group(1)}_0, ${m.group(1)}_1)", text)
    return re.sub(r"\$([A-Z0-9_]+)_(\d)\b", part, text)


BASE: dict = {}


def _base(name: str, text: str) -> None:
    BASE[name] = _fill(text)


# --- bits, NaNs, rounding to a binary format ----------------------------------------------------------------
_base("itb_bits32", "static inline uint itb_bits32(float x) { return as_type<uint>(x); }")
_base("itb_f32", "static inline float itb_f32(uint u) { return as_type<float>(u); }")
_base("itb_quiet", "static inline float itb_quiet(float x) { return itb_f32(itb_bits32(x) | 0x400000u); }")
_base("itb_nan", "static inline float itb_nan() { return itb_f32(0xffc00000u); }  /* x86's default NaN */")
_base("itb_dnan", "static inline float itb_dnan(float r) { return r != r ? itb_nan() : r; }")
_base("itb_abs32", "static inline float itb_abs32(float x) { return itb_f32(itb_bits32(x) & 0x7fffffffu); }")
_base("itb_ftz32", "static inline float itb_ftz32(float x) { uint u = itb_bits32(x); "
                   "return (u & 0x7f800000u) == 0 ? itb_f32(u & 0x80000000u) : x; }")
_base("itb_mant", "static inline ulong itb_mant(uint u) { "  # the significand of a float's bits (value = mant 2^expo)
                  "return (u & 0x7f800000u) ? (ulong)((u & 0x7fffffu) | 0x800000u) : (ulong)(u & 0x7fffffu); }")
_base("itb_expo", "static inline int itb_expo(uint u) { int e = (int)((u >> 23) & 0xffu); return e ? e - 150 : -149; }")
_base("itb_rne", """static inline uint itb_rne(uint s, ulong m, int e, int M, int W) {
  /* the bits of (-1)^s m 2^e rounded to nearest even in the binary format with M mantissa and W exponent bits */
  uint sign = s << (M + W), inf = ((1u << W) - 1u) << M;
  if (m == 0) return sign;
  int h = 0;
  for (int b = 32; b > 0; b >>= 1)
    if ((m >> (h + b)) != 0) h += b;
  if (h == 63) { m = (m >> 1) | (m & 1); e += 1; h = 62; }
  int bias = (1 << (W - 1)) - 1, E = h + e;
  if (E > bias) return sign | inf;
  int shift = (E >= 1 - bias ? E - M : 1 - bias - M) - e;
  ulong q;
  if (shift <= 0) q = m << -shift;
  else if (shift > h + 1) return sign;
  else {
    ulong rem = m & (((ulong)1 << shift) - 1), half = (ulong)1 << (shift - 1);
    q = m >> shift;
    if (rem > half || (rem == half && (q & 1) != 0)) q += 1;
  }
  if (E >= 1 - bias) return sign | (((uint)(E + bias) << M) + (uint)(q - ((ulong)1 << M)));
  return sign | (uint)q;
}""")
_base("itb_narrow", """static inline uint itb_narrow(float x, int M, int W) {
  /* a float that is not a NaN -> the format's bits (RNE) */
  uint b = itb_bits32(x);
  if ((b & 0x7f800000u) == 0x7f800000u) return ((b >> 31) << (M + W)) | (((1u << W) - 1u) << M);
  return itb_rne(b >> 31, itb_mant(b), itb_expo(b), M, W);
}""")

# --- f16/bf16: exact decoding, RNE encoding, NaNs as NumPy/ml_dtypes (and tilelang-c) convert them -----------
_base("itb_f16_decode", """static inline float itb_f16_decode(ushort h) {
  uint s = (uint)(h >> 15), e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return itb_f32((s << 31) | 0x7f800000u | (m << 13));
  if (e == 0) return itb_f32(itb_rne(s, m, -24, 23, 8));
  return itb_f32((s << 31) | ((e + 112u) << 23) | (m << 13));
}""")
_base("itb_bf16_decode", "static inline float itb_bf16_decode(ushort h) { return itb_f32((uint)h << 16); }")
_base("itb_f16_encode", """static inline ushort itb_f16_encode(float x) {
  if (x != x) {
    uint b = itb_bits32(x), h = 0x7c00u | ((b >> 13) & 0x3ffu);
    return (ushort)(((b >> 16) & 0x8000u) | (h == 0x7c00u ? 0x7c01u : h));
  }
  return (ushort)itb_narrow(x, 10, 5);
}""")
_base("itb_bf16_encode", "static inline ushort itb_bf16_encode(float x) { "
                         "return x != x ? (ushort)(itb_bits32(x) >> 16) : (ushort)itb_narrow(x, 7, 8); }")
_base("itb_rf16", "static inline float itb_rf16(float x) { "
                  "return itb_f16_decode(x != x ? itb_f16_encode(itb_quiet(x)) : (ushort)itb_narrow(x, 10, 5)); }")
_base("itb_rbf16", "static inline float itb_rbf16(float x) { return itb_bf16_decode(x != x ? "
                   "(ushort)(((itb_bits32(x) >> 16) & 0x8000u) | 0x7fc0u) : (ushort)itb_narrow(x, 7, 8)); }")

# --- IEEE binary32 operations with x86's NaN results; / and sqrt in integer arithmetic -------------------------
for _op, _sym in (("add", "+"), ("sub", "-"), ("mul", "*")):
    _base(f"itb_{_op}32", f"static inline float itb_{_op}32(float a, float b) {{ if (a != a) return itb_quiet(a); "
                          f"if (b != b) return itb_quiet(b); return itb_dnan(a {_sym} b); }}")
_base("itb_div32", """static inline float itb_div32(float a, float b) {
  if (a != a) return itb_quiet(a);
  if (b != b) return itb_quiet(b);
  uint ua = itb_bits32(a), ub = itb_bits32(b), s = (ua ^ ub) >> 31;
  bool ia = (ua & 0x7f800000u) == 0x7f800000u, ib = (ub & 0x7f800000u) == 0x7f800000u;
  bool za = (ua << 1) == 0, zb = (ub << 1) == 0;
  if ((ia && ib) || (za && zb)) return itb_nan();
  if (ia || zb) return itb_f32((s << 31) | 0x7f800000u);
  if (ib || za) return itb_f32(s << 31);
  ulong ma = itb_mant(ua), mb = itb_mant(ub);
  int xa = itb_expo(ua), xb = itb_expo(ub);
  while (ma < 0x800000u) { ma <<= 1; xa -= 1; }
  while (mb < 0x800000u) { mb <<= 1; xb -= 1; }
  ulong n = ma << 39, q = n / mb, r = n - q * mb;
  return itb_f32(itb_rne(s, (q << 1) | (r != 0 ? 1 : 0), xa - xb - 40, 23, 8));
}""")
_base("itb_sqrt32", """static inline float itb_sqrt32(float a) {
  if (a != a) return itb_quiet(a);
  uint u = itb_bits32(a);
  if ((u << 1) == 0 || u == 0x7f800000u) return a;
  if ((u >> 31) != 0) return itb_nan();
  ulong m = itb_mant(u);
  int e = itb_expo(u);
  while (m < 0x800000u) { m <<= 1; e -= 1; }
  if ((e & 1) != 0) { m <<= 1; e -= 1; }
  ulong x = m << 36, r = 0, bit = (ulong)1 << 62;
  while (bit > x) bit >>= 2;
  while (bit != 0) {
    if (x >= r + bit) { x -= r + bit; r = (r >> 1) + bit; } else r >>= 1;
    bit >>= 2;
  }
  return itb_f32(itb_rne(0, (r << 1) | (x != 0 ? 1 : 0), (e - 36) / 2 - 1, 23, 8));
}""")
_base("itb_floor32", """static inline float itb_floor32(float a) {
  if (a != a) return itb_quiet(a);
  if (!(itb_abs32(a) < 8388608.0f)) return a;
  float t = (float)(int)a;
  if (t > a) t = t - 1.0f;
  return itb_f32(itb_bits32(t) | (itb_bits32(a) & 0x80000000u));
}""")
_base("itb_fma_bits", """static inline uint itb_fma_bits(float a, float b, float c, int M, int W) {
  /* a*b + c for finite f16/bf16 values, rounded once to the format (M, W) (integer arithmetic: exact) */
  uint ua = itb_bits32(a), ub = itb_bits32(b), uc = itb_bits32(c);
  uint sp = (ua ^ ub) >> 31, sc = uc >> 31;
  ulong mp = itb_mant(ua) * itb_mant(ub), mc = itb_mant(uc);
  int ep = itb_expo(ua) + itb_expo(ub), ec = itb_expo(uc);
  if (mp == 0 && mc == 0) return (sp & sc) << (M + W);
  if (mp == 0) return itb_rne(sc, mc, ec, M, W);
  if (mc == 0) return itb_rne(sp, mp, ep, M, W);
  while (mp < ((ulong)1 << 60)) { mp <<= 1; ep -= 1; }
  while (mc < ((ulong)1 << 60)) { mc <<= 1; ec -= 1; }
  if (ec > ep || (ec == ep && mc > mp)) {  /* the larger magnitude first */
    ulong tm = mp; mp = mc; mc = tm; int te = ep; ep = ec; ec = te; uint ts = sp; sp = sc; sc = ts;
  }
  int d = ep - ec;
  ulong small = d < 62 ? mc >> d : 0;
  bool sticky = d >= 62 || (small << d) != mc;
  ulong m = sp == sc ? mp + small : mp - small - (sticky ? 1 : 0);
  if (m == 0 && !sticky) return 0;
  return itb_rne(sp, (m << 1) | (sticky ? 1 : 0), ep - 1, M, W);
}""")

# --- double-float arithmetic ------------------------------------------------------------------------------------
_base("itb_df", "struct itb_df { float hi; float lo; };")
_base("itb_dd", "static inline itb_df itb_dd(float hi, float lo) { itb_df r; r.hi = hi; r.lo = lo; return r; }")
_base("itb_fast_sum", "static inline itb_df itb_fast_sum(float a, float b) { float s = a + b; "
                      "return itb_dd(s, b - (s - a)); }")
_base("itb_two_sum", "static inline itb_df itb_two_sum(float a, float b) { float s = a + b, bb = s - a; "
                     "return itb_dd(s, (a - (s - bb)) + (b - bb)); }")
_base("itb_two_prod", "static inline itb_df itb_two_prod(float a, float b) { float p = a * b; "
                      "return itb_dd(p, metal::fma(a, b, -p)); }")
_base("itb_add", """static inline itb_df itb_add(itb_df x, itb_df y) {
  itb_df s = itb_two_sum(x.hi, y.hi), t = itb_two_sum(x.lo, y.lo);
  itb_df v = itb_fast_sum(s.hi, s.lo + t.hi);
  return itb_fast_sum(v.hi, t.lo + v.lo);
}""")
_base("itb_addf", "static inline itb_df itb_addf(itb_df x, float y) { itb_df s = itb_two_sum(x.hi, y); "
                  "return itb_fast_sum(s.hi, x.lo + s.lo); }")
_base("itb_mul", """static inline itb_df itb_mul(itb_df x, itb_df y) {
  itb_df c = itb_two_prod(x.hi, y.hi);
  return itb_fast_sum(c.hi, c.lo + metal::fma(x.lo, y.hi, metal::fma(x.hi, y.lo, x.lo * y.lo)));
}""")
_base("itb_mulf", "static inline itb_df itb_mulf(itb_df x, float y) { itb_df c = itb_two_prod(x.hi, y); "
                  "return itb_fast_sum(c.hi, metal::fma(x.lo, y, c.lo)); }")
_base("itb_divf", """static inline itb_df itb_divf(itb_df x, float y) {
  float th = x.hi / y;
  itb_df p = itb_two_prod(th, y);
  return itb_fast_sum(th, (((x.hi - p.hi) - p.lo) + x.lo) / y);
}""")
_base("itb_div", """static inline itb_df itb_div(itb_df x, itb_df y) {
  float th = x.hi / y.hi;
  itb_df r = itb_mulf(y, th);
  return itb_fast_sum(th, ((x.hi - r.hi) + (x.lo - r.lo)) / y.hi);
}""")
_base("itb_neg", "static inline itb_df itb_neg(itb_df x) { return itb_dd(-x.hi, -x.lo); }")
_base("itb_pow2", "static inline float itb_pow2(int k) { return itb_f32((uint)(k + 127) << 23); }  /* |k| < 127 */")
_base("itb_scale", "static inline itb_df itb_scale(itb_df x, int k) { float p = itb_pow2(k); "
                   "return itb_dd(x.hi * p, x.lo * p); }")
_base("itb_df_bits", """static inline uint itb_df_bits(itb_df y, int k, int M, int W) {
  /* (y.hi + y.lo) 2^k rounded once to the format with M mantissa and W exponent bits */
  uint hb = itb_bits32(y.hi), lb = itb_bits32(y.lo), s = hb >> 31, inf = ((1u << W) - 1u) << M;
  if (y.hi != y.hi) return (s << (M + W)) | inf | (1u << (M - 1));
  if ((hb & 0x7f800000u) == 0x7f800000u) return (s << (M + W)) | inf;
  if ((hb << 1) == 0) return s << (M + W);
  ulong mh = itb_mant(hb), ml = itb_mant(lb), L = 0, m = mh << 32;
  int sh = itb_expo(lb) - itb_expo(hb) + 32;
  bool sticky = false;
  if (ml != 0) {
    if (sh >= 0) L = ml << sh;
    else if (sh > -40) { L = ml >> -sh; sticky = (L << -sh) != ml; }
    else sticky = true;
  }
  if ((lb >> 31) == s) m += L;
  else m -= L + (sticky ? 1 : 0);
  return itb_rne(s, (m << 1) | (sticky ? 1 : 0), itb_expo(hb) - 33 + k, M, W);
}""")
_base("itb_abs_df", "static inline itb_df itb_abs_df(itb_df x) { return x.hi < 0 ? itb_neg(x) : x; }")
_base("itb_inf_df", "static inline itb_df itb_inf_df() { return itb_dd(itb_f32(0x7f800000u), 0.0f); }")
_base("itb_nan_df", "static inline itb_df itb_nan_df() { return itb_dd(itb_nan(), 0.0f); }")

# --- exp, log cores (erf, erfc, lgamma) ------------------------------------------------------------------------------------------------
_base("itb_expm1_core", """static inline itb_df itb_expm1_core(itb_df x, thread int& k) {
  /* x = k ln2 + r (|x| < 160, |r| <= ln2/2): returns e^r - 1 by its Taylor series, so that e^x = 2^k (1 + it) */
  float kf = itb_floor32(x.hi * 1.44269502f + 0.5f);
  k = (int)kf;
  itb_df r = itb_add(itb_add(x, itb_two_prod(-kf, $LN2_0)), itb_two_prod(-kf, $LN2_1));
  r = itb_addf(r, -kf * $LN2_2);
  itb_df t = r, s = r;
  for (int n = 2; n < 18 && itb_abs32(t.hi) > itb_abs32(s.hi) * 1e-17f; ++n) {
    t = itb_divf(itb_mul(t, r), (float)n);
    s = itb_add(s, t);
  }
  return s;
}""")
_base("itb_exp_core", "static inline itb_df itb_exp_core(itb_df x, thread int& k) { "
                      "return itb_addf(itb_expm1_core(x, k), 1.0f); }")
_base("itb_log_core", """static inline itb_df itb_log_core(itb_df x) {
  /* log x for finite x > 0: x = 2^j m (m in [sqrt(1/2), sqrt(2))), log m = 2 atanh(f / (2 + f)) with f = m - 1 */
  int j = 0;
  if (x.hi < 1.17549435e-38f) { x = itb_scale(x, 64); j = -64; }
  uint b = itb_bits32(x.hi);
  int e = (int)(b >> 23) - 127 + ((b & 0x7fffffu) > 0x3504f3u ? 1 : 0);
  float mh = itb_f32(b - ((uint)e << 23)), ml = x.lo * itb_pow2(-(e / 2)) * itb_pow2(e / 2 - e);
  j += e;
  itb_df f = itb_two_sum(mh - 1.0f, ml);
  itb_df s = itb_div(f, itb_addf(f, 2.0f)), z = itb_mul(s, s), t = s, sum = s;
  for (int n = 1; n < 16 && itb_abs32(t.hi) > itb_abs32(sum.hi) * 1e-17f; ++n) {
    t = itb_mul(t, z);
    sum = itb_add(sum, itb_divf(t, (float)(2 * n + 1)));
  }
  float jf = (float)j;
  itb_df r = itb_addf(itb_add(itb_two_prod(jf, $LN2_0), itb_two_prod(jf, $LN2_1)), jf * $LN2_2);
  return itb_add(r, itb_mulf(sum, 2.0f));
}""")
_base("itb_expm1_df", """static inline itb_df itb_expm1_df(float a, thread int& k) {
  /* e^a - 1 = 2^k (s + 1 - 2^-k) for a = k ln2 + r, s = e^r - 1: no cancellation near 0, where k = 0 */
  if (!(a <= 89.0f)) return itb_inf_df();
  if (a < -40.0f) return itb_dd(-1.0f, 0.0f);  /* e^a < 2^-57: -1 in every format */
  if (itb_abs32(a) < 9.31322575e-10f) return itb_dd(a, 0.5f * a * a);  /* keeps -0 */
  itb_df s = itb_expm1_core(itb_dd(a, 0.0f), k);
  if (k == 0) return s;
  if (k > 60) return itb_addf(s, 1.0f);
  return itb_add(s, itb_two_sum(1.0f, -itb_pow2(-k)));
}""")

# --- sin (lgamma's reflection) ---------------------------------------------------------------------------------------------------
_base("itb_sin_poly", """static inline itb_df itb_sin_poly(itb_df r) {
  /* sin r for |r| <= pi/2 (Taylor) */
  itb_df z = itb_neg(itb_mul(r, r)), t = r, s = r;
  for (int n = 1; n < 18 && itb_abs32(t.hi) > itb_abs32(s.hi) * 1e-17f; ++n) {
    t = itb_divf(itb_mul(t, z), (float)(2 * n * (2 * n + 1)));
    s = itb_add(s, t);
  }
  return s;
}""")

# --- erf, erfc -------------------------------------------------------------------------------------
_base("itb_erf_df", """static inline itb_df itb_erf_df(float a, thread int& k) {
  /* erf x = 2/sqrt(pi) e^-x^2 sum 2^n x^(2n+1) / (2n+1)!! (positive terms) for x < 4 */
  float x = itb_abs32(a);
  itb_df v;
  if (!(x < 4.0f)) v = itb_dd(1.0f, 0.0f);
  else if (x < 9.53674316e-07f) { v = itb_mulf($DF_TWO_OVER_SQRTPI, x * 1073741824.0f); k = -30; }
  else {
    itb_df z = itb_two_prod(x, x), z2 = itb_mulf(z, 2.0f), t = itb_dd(x, 0.0f), s = t;
    for (int n = 1; n < 200 && t.hi > s.hi * 1e-17f; ++n) {
      t = itb_divf(itb_mul(t, z2), (float)(2 * n + 1));
      s = itb_add(s, t);
    }
    v = itb_mul(itb_mul(s, itb_exp_core(itb_neg(z), k)), $DF_TWO_OVER_SQRTPI);
  }
  return itb_bits32(a) >> 31 ? itb_neg(v) : v;
}""")
_base("itb_erfc_df", """static inline itb_df itb_erfc_df(float a, thread int& k) {
  if (a <= -4.0f) return itb_dd(2.0f, 0.0f);
  if (a < 2.0f) {  /* 1 - erf a: erfc(2) = 0.0047, so at most 8 bits cancel */
    int ke = 0;
    itb_df e = itb_erf_df(a, ke);
    return itb_add(itb_dd(1.0f, 0.0f), itb_neg(itb_scale(e, ke)));
  }
  if (!(a < 10.5f)) return itb_dd(0.0f, 0.0f);
  /* the continued fraction erfc a = e^-a^2 / (sqrt(pi) (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...))))) */
  itb_df f = itb_dd(a, 0.0f);
  for (int n = 64; n > 0; --n) f = itb_addf(itb_div(itb_dd(0.5f * (float)n, 0.0f), f), a);
  itb_df e = itb_exp_core(itb_neg(itb_two_prod(a, a)), k);
  return itb_div(itb_mul(e, $DF_INV_SQRTPI), f);
}""")

# --- lgamma, i0 ---------------------------------------------------------------------------------------------
_base("itb_stirling", """static inline itb_df itb_stirling(itb_df z) {
  /* lgamma z for z >= 8: (z - 1/2) log z - z + log(2 pi) / 2 + sum B2j / (2j (2j - 1) z^(2j - 1)) */
  const float num[8] = {1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -691.0f, 1.0f, -3617.0f};
  const float den[8] = {12.0f, 360.0f, 1260.0f, 1680.0f, 1188.0f, 360360.0f, 156.0f, 122400.0f};
  itb_df lz = itb_log_core(z);
  itb_df r = z.hi > 1e30f ? itb_add(itb_mul(z, itb_addf(lz, -1.0f)), itb_neg(itb_mulf(lz, 0.5f)))
                          : itb_add(itb_mul(itb_addf(z, -0.5f), lz), itb_neg(z));
  r = itb_add(r, $DF_HALF_LOG_2PI);
  itb_df w = itb_div(itb_dd(1.0f, 0.0f), z), w2 = itb_mul(w, w), c = w;
  for (int j = 0; j < 8; ++j) {
    r = itb_add(r, itb_divf(itb_mulf(c, num[j]), den[j]));
    c = itb_mul(c, w2);
  }
  return r;
}""")
_base("itb_lgamma_pos", """static inline itb_df itb_lgamma_pos(float x) {
  /* lgamma x for x >= 2^-20: Stirling at z = x + n >= 8, less log(x (x + 1) ... (x + n - 1)) */
  if (x >= 8.0f) return itb_stirling(itb_dd(x, 0.0f));
  itb_df p = itb_dd(x, 0.0f), z = itb_two_sum(x, 1.0f);
  while (z.hi < 8.0f) { p = itb_mul(p, z); z = itb_addf(z, 1.0f); }
  return itb_add(itb_stirling(z), itb_neg(itb_log_core(p)));
}""")
# (-1)^k zeta(k) / k for k = 2..22 as double-floats (hi, lo): lgamma(1 + e) = -gamma e + sum of these times e^k.
_LGAMMA1 = (0x3F528D33, 0x3194C1F5, 0xBECD26AB, 0x3182A9A5, 0x3E8A8991, 0x322C7D85, 0xBE545CE1, 0x318559EB, 0x3E2DA066,
            0xB1EFF3D0, 0xBE1381D1, 0x308C5714, 0x3E00859B, 0x31AF8639, 0xBDE40338, 0xB0DAAFB7, 0x3DCD00F2, 0xB0F4540E,
            0xBDBA461A, 0x316EB393, 0x3DAAB56B, 0x30490EF1, 0xBD9D8ECC, 0x31603A68, 0x3D924B70, 0xB0F9BE74, 0xBD88899A,
            0xB0EDCFFC, 0x3D800080, 0x30C99BD6, 0xBD70F16A, 0x30EE1754, 0x3D638E72, 0xB03BE97D, 0xBD579451, 0x30152EEC,
            0x3D4CCCDA, 0xB0CAD2A4, 0xBD430C37, 0x30110808, 0x3D3A2E8F, 0xB0E88720)
_base("itb_lgamma1_c", "constant uint itb_lgamma1_c[42] = {" + ", ".join(f"0x{w:08x}u" for w in _LGAMMA1) + "};")
_base("itb_lgamma1p", """static inline itb_df itb_lgamma1p(float e) {
  /* lgamma(1 + e) for |e| <= 0.2 by its Taylor series (no cancellation near the zero at 1) */
  itb_df p = itb_dd(itb_f32(itb_lgamma1_c[40]), itb_f32(itb_lgamma1_c[41]));
  for (int j = 19; j >= 0; --j)
    p = itb_add(itb_mulf(p, e), itb_dd(itb_f32(itb_lgamma1_c[2 * j]), itb_f32(itb_lgamma1_c[2 * j + 1])));
  return itb_mulf(itb_add(itb_mulf(p, e), itb_neg($DF_EULER)), e);
}""")
_base("itb_lgamma_df", """static inline itb_df itb_lgamma_df(float a, thread int& k) {
  float x = itb_abs32(a);
  if (!(x < itb_f32(0x7f800000u)) || (a <= 0 && itb_floor32(a) == a)) return itb_inf_df();
  if (x < 9.53674316e-07f)  /* -log|a| - gamma a */
    return itb_neg(itb_add(itb_log_core(itb_dd(x, 0.0f)), itb_mulf($DF_EULER, a)));
  if (a >= 0.8f && a <= 1.2f) return itb_lgamma1p(a - 1.0f);
  if (a >= 1.8f && a <= 2.2f)  /* lgamma(2 + e) = log(1 + e) + lgamma(1 + e) */
    return itb_add(itb_log_core(itb_two_sum(1.0f, a - 2.0f)), itb_lgamma1p(a - 2.0f));
  if (a > 0) return a >= itb_f32(0x7c44af8eu) ? itb_inf_df() : itb_lgamma_pos(a);
  /* a < 0, not an integer: lgamma a = log pi - log|sin(pi a)| - log|a| - lgamma(-a) */
  float f = a - itb_floor32(a + 0.5f);
  itb_df sp = itb_abs_df(itb_sin_poly(itb_mulf($DF_PI, f)));
  itb_df r = itb_add($DF_LOG_PI, itb_neg(itb_log_core(sp)));
  r = itb_add(r, itb_neg(itb_log_core(itb_dd(x, 0.0f))));
  return itb_add(r, itb_neg(itb_lgamma_pos(x)));
}""")
_base("itb_i0_df", """static inline itb_df itb_i0_df(float a, thread int& k) {
  /* I0 x = sum ((x/2)^2)^n / (n!)^2 (positive terms) */
  float x = itb_abs32(a);
  if (!(x < itb_f32(0x42b7cd32u))) return itb_inf_df();
  itb_df q = itb_mulf(itb_two_prod(x, x), 0.25f), t = itb_dd(1.0f, 0.0f), s = t;
  for (int n = 1; n < 300 && t.hi > s.hi * 1e-17f; ++n) {
    t = itb_mul(t, itb_divf(q, (float)(n * n)));
    s = itb_add(s, t);
  }
  return s;
}""")
_base("itb_sqrt_df", "static inline itb_df itb_sqrt_df(float a, thread int& k) { return itb_dd(itb_sqrt32(a), 0.0f); }")
_base("itb_floor_df", "static inline itb_df itb_floor_df(float a, thread int& k) { "
                      "return itb_dd(itb_floor32(a), 0.0f); }")

# --- compositions of Metal's precise:: functions (metal.py's _NATIVE) ------------------------------------------
_base("itb_log1p_native", """static inline float itb_log1p_native(float a) {
  /* log(1 + a) for finite a > -1, a != 0: Goldberg's log(u) * (a / (u - 1)) with u = 1 + a rounded, whose
     rounding error cancels in the quotient (What Every Computer Scientist..., Theorem 4); a when 1 + a rounds to 1 */
  float u = 1.0f + a;
  if (u == 1.0f) return a;
  return metal::precise::log(u) * (a / (u - 1.0f));
}""")
_base("itb_sigmoid_native", """static inline float itb_sigmoid_native(float a) {
  /* 1 / (1 + e^-a) from e = e^-|a| in (0, 1], which never overflows: 1 / (1 + e) for a >= 0, e / (1 + e) below */
  float e = metal::precise::exp(-itb_abs32(a));
  return a >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}""")
