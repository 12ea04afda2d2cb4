// The row-kernel lab's hand-written softmax (tools/rowlab/make.py): a warp per row, N == 1024 only, on the
// generated program's helper bodies (prepended by make.py). A measurement, not a program the project emits.
#ifndef VEC
#define VEC 4
#endif
#if FAST
#define MAX(a,b) fmaxf(a,b)
#define SUB(a,b) ((a)-(b))
#define ADD(a,b) ((a)+(b))
#define EXP(a) expf(a)
#define DIV(a,b) ((a)/(b))
#else
#define MAX it_max_f32
#define SUB it_sub_f32
#define ADD it_add_f32
#define EXP it_exp_f32
#define DIV it_div_f32
#endif
#if MARK
#undef DIV
#define DIV(a, s) mk_div(a, s, rs)
#endif
static __device__ __forceinline__ float mk_div(float a, float s, float r) { float q = a * r; float e = fmaf(-q, s, a); return fmaf(e, r, q); }
// a warp per row, N == 1024: lane l holds 32 elements; VEC 4: float4 at (j*32 + l)*4; VEC 1: j*32 + l
extern "C" __global__ void __launch_bounds__(256, 4) kernel_kernel(const float* __restrict__ p0, float* __restrict__ p1, int64_t d0, int64_t d1) {
  int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= d0) return;
  float v[32];
#if VEC == 4
  const float4* src = (const float4*)(p0 + row * d1);
  #pragma unroll
  for (int j = 0; j < 8; ++j) { float4 t = __ldcs(src + j * 32 + lane); v[4*j] = t.x; v[4*j+1] = t.y; v[4*j+2] = t.z; v[4*j+3] = t.w; }
#else
  const float* src = p0 + row * d1;
  #pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = src[j * 32 + lane];
#endif
  float a[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  #pragma unroll
  for (int j = 0; j < 32; ++j) a[j & 3] = MAX(a[j & 3], v[j]);
  float m = MAX(MAX(a[0], a[1]), MAX(a[2], a[3]));
  #pragma unroll
  for (int o = 16; o; o >>= 1) m = MAX(m, __shfl_xor_sync(0xffffffffu, m, o, 32));
  float s4[4] = {0, 0, 0, 0};
  #pragma unroll
  for (int j = 0; j < 32; ++j) { v[j] = EXP(SUB(v[j], m)); s4[j & 3] = ADD(s4[j & 3], v[j]); }
  float s = ADD(ADD(s4[0], s4[1]), ADD(s4[2], s4[3]));
  #pragma unroll
  for (int o = 16; o; o >>= 1) s = ADD(s, __shfl_xor_sync(0xffffffffu, s, o, 32));
  float rs = 1.0f / s;
#if VEC == 4
  float4* dst = (float4*)(p1 + row * d1);
  #pragma unroll
  for (int j = 0; j < 8; ++j) { float4 t; t.x = DIV(v[4*j], s); t.y = DIV(v[4*j+1], s); t.z = DIV(v[4*j+2], s); t.w = DIV(v[4*j+3], s); __stcs(dst + j * 32 + lane, t); }
#else
  float* dst = p1 + row * d1;
  #pragma unroll
  for (int j = 0; j < 32; ++j) dst[j * 32 + lane] = DIV(v[j], s);
#endif
}
