// Hardware probe behind jittile/interpreter/tma.py: non-tensor cp.reduce.async.bulk float semantics on the H200 (run by run.sh).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#define RED(name, text)                                                                  \
  __global__ void name(uint32_t* g, const uint32_t* src) {                               \
    __shared__ alignas(128) uint32_t s[32];                                              \
    s[threadIdx.x] = src[threadIdx.x];                                                   \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                        \
    __syncthreads();                                                                     \
    uint32_t sa = (uint32_t)__cvta_generic_to_shared(s);                                 \
    if (threadIdx.x == 0) {                                                              \
      asm volatile(text " [%0], [%1], 128;" :: "l"(g), "r"(sa) : "memory");             \
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");                         \
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");                         \
    }                                                                                    \
  }
RED(add_f32, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32")
RED(add_f64, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f64")
RED(add_f16, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16")
RED(min_f16, "cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f16")
typedef void (*K)(uint32_t*, const uint32_t*);
static void run(K k, const uint32_t* b, const uint32_t* s, int n, const char* what) {
  static uint32_t h[32]; uint32_t *g, *sd;
  cudaMalloc((void**)&g, 128); cudaMalloc((void**)&sd, 128);
  memset(h, 0, 128); memcpy(h, b, 4 * n); cudaMemcpy(g, h, 128, cudaMemcpyHostToDevice);
  memset(h, 0, 128); memcpy(h, s, 4 * n); cudaMemcpy(sd, h, 128, cudaMemcpyHostToDevice);
  k<<<1, 32>>>(g, sd);
  cudaError_t e = cudaDeviceSynchronize();
  cudaMemcpy(h, g, 128, cudaMemcpyDeviceToHost);
  printf("%s (%s):", what, cudaGetErrorString(e));
  for (int i = 0; i < n; i++) printf(" %08x", h[i]);
  printf("\n");
}
int main() {
  uint32_t b[8] = {0x00000001, 0x00400000, 0x3F800000, 0x80000000, 0x7FC00001, 0x7F800000, 0x00800000, 0x80000000};
  uint32_t s[8] = {0x00000001, 0x00400000, 0x00000001, 0x00000000, 0x3F800000, 0xFF800000, 0x80400000, 0x80000000};
  run(add_f32, b, s, 8, "bulk add.f32");
  // f64 pairs (low word first): 1+1 denormal, NaN+1, inf+-inf, -0+-0
  uint32_t c[8] = {1, 0, 1, 0x7FF80000, 0, 0x7FF00000, 0, 0x80000000};
  uint32_t t[8] = {1, 0, 0, 0x3FF00000, 0, 0xFFF00000, 0, 0x80000000};
  run(add_f64, c, t, 8, "bulk add.f64");
  uint32_t e[4] = {0x7BFF0001, 0x3C007E01, 0x00008000, 0x7E013C00};
  uint32_t f[4] = {0x7BFF0001, 0x3C003C00, 0x80000000, 0x7E017E02};
  run(add_f16, e, f, 4, "bulk add.noftz.f16");
  run(min_f16, e, f, 4, "bulk min.f16");
  return 0;
}
