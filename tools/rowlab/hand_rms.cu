// The row-kernel lab's hand-written RMSNorm f16 (tools/rowlab/make.py): a warp per row, N == 1024 only, on the
// generated program's helper bodies (prepended by make.py). A measurement, not a program the project emits.
#ifndef VEC
#define VEC 8
#endif
#if FAST
#define MUL(a,b) ((a)*(b))
#define ADD(a,b) ((a)+(b))
#define DEC(a) __half2float(__ushort_as_half(a))
#define ENC(a) __half_as_ushort(__float2half_rn(a))
#define C32(a) (a)
#else
#define MUL it_mul_f32
#define ADD it_add_f32
#define DEC(a) it_cast_f16_f32(it_decode_f16(a))
#define ENC(a) it_encode_f16(it_cast_f32_f16(a))
#define C32(a) (a)
#endif
extern "C" __global__ void __launch_bounds__(256, 4) kernel_kernel(const ushort* __restrict__ p0, const ushort* __restrict__ p1, ushort* __restrict__ p2, int64_t d0, int64_t d1) {
  int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= d0) return;
  float v[32];
#if VEC == 8
  const uint4* src = (const uint4*)(p0 + row * d1);
  #pragma unroll
  for (int j = 0; j < 4; ++j) { uint4 t = __ldcs(src + j * 32 + lane); unsigned w4[4] = {t.x, t.y, t.z, t.w};
    #pragma unroll
    for (int q = 0; q < 4; ++q) { v[8*j+2*q] = DEC((ushort)(w4[q] & 0xffff)); v[8*j+2*q+1] = DEC((ushort)(w4[q] >> 16)); } }
#else
  const ushort* src = p0 + row * d1;
  #pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = DEC(src[j * 32 + lane]);
#endif
  float s4[4] = {0, 0, 0, 0};
  #pragma unroll
  for (int j = 0; j < 32; ++j) s4[j & 3] = ADD(s4[j & 3], MUL(v[j], v[j]));
  float s = ADD(ADD(s4[0], s4[1]), ADD(s4[2], s4[3]));
  #pragma unroll
  for (int o = 16; o; o >>= 1) s = ADD(s, __shfl_xor_sync(0xffffffffu, s, o, 32));
  float r = it_rsqrt_f32(ADD(it_div_f32(s, (float)d1), 1e-6f));
#if VEC == 8
  const uint4* wv = (const uint4*)p1; uint4* dst = (uint4*)(p2 + row * d1);
  #pragma unroll
  for (int j = 0; j < 4; ++j) { uint4 t = __ldg(wv + j * 32 + lane); unsigned w4[4] = {t.x, t.y, t.z, t.w}; unsigned o4[4];
    #pragma unroll
    for (int q = 0; q < 4; ++q) { float w0 = DEC((ushort)(w4[q] & 0xffff)), w1 = DEC((ushort)(w4[q] >> 16));
      unsigned lo = ENC(MUL(MUL(v[8*j+2*q], r), w0)), hi = ENC(MUL(MUL(v[8*j+2*q+1], r), w1)); o4[q] = lo | (hi << 16); }
    __stcs(dst + j * 32 + lane, make_uint4(o4[0], o4[1], o4[2], o4[3])); }
#else
  ushort* dst = p2 + row * d1;
  #pragma unroll
  for (int j = 0; j < 32; ++j) dst[j * 32 + lane] = ENC(MUL(MUL(v[j], r), DEC(p1[j * 32 + lane])));
#endif
}
