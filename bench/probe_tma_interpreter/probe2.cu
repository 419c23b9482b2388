// Hardware probe behind jittile/interpreter/tma.py: what the H200 TMA unit does (run by run.sh).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cstdlib>

__device__ void wait(uint32_t ba) {
  asm volatile("{ .reg .pred p; W%=: mbarrier.try_wait.parity.shared.b64 p, [%0], 0; @!p bra W%=; }" :: "r"(ba) : "memory");
}
__global__ void load(const __grid_constant__ CUtensorMap m, uint32_t* out, int c0, int c1, int bytes) {
  __shared__ alignas(1024) uint32_t s[1024];
  __shared__ alignas(8) uint64_t bar;
  for (int i = threadIdx.x; i < 1024; i += 32) s[i] = 0xEEEEEEEEu;
  __syncthreads();
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(s), ba = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(ba));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(ba), "r"(bytes));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(sa), "l"(&m), "r"(c0), "r"(c1), "r"(ba) : "memory");
    wait(ba);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 1024; i += 32) out[i] = s[i];
}
#define TO_GLOBAL(name, text)                                                                      \
  __global__ void name(const __grid_constant__ CUtensorMap m, const uint32_t* src, int c0, int c1, int off) { \
    __shared__ alignas(1024) uint32_t s[1024];                                                     \
    for (int i = threadIdx.x; i < 1024; i += 32) s[i] = src[i];                                    \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                  \
    __syncthreads();                                                                               \
    uint32_t sa = (uint32_t)__cvta_generic_to_shared(s) + off;                                     \
    if (threadIdx.x == 0) {                                                                        \
      asm volatile(text " [%0, {%1, %2}], [%3];" :: "l"(&m), "r"(c0), "r"(c1), "r"(sa) : "memory"); \
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");                                   \
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");                                   \
    }                                                                                              \
  }
TO_GLOBAL(store, "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group")
TO_GLOBAL(red_add, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group")
TO_GLOBAL(red_min, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.min.tile.bulk_group")
TO_GLOBAL(red_max, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group")

// A 2-D map over `rows` rows of 64 bytes (inner = 64 / esz elements); box = whole 16 rows.
static CUtensorMap enc(CUtensorMapDataType ty, void* d, int esz, int nan) {
  CUtensorMap m;
  cuuint64_t dim[2] = {(cuuint64_t)(64 / esz), 16}, st[1] = {64};
  cuuint32_t box[2] = {(cuuint32_t)(64 / esz), 16}, es[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, ty, 2, d, dim, st, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r) printf("encode failed %d\n", (int)r);
  return m;
}
static uint32_t g[256], h[1024], src[1024];
static void* d; static uint32_t *o, *sd;
static void put() { cudaMemcpy(d, g, 1024, cudaMemcpyHostToDevice); }
static void get() { cudaMemcpy(g, d, 1024, cudaMemcpyDeviceToHost); }
static void dump(const char* what, int n) {
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s (%s):", what, cudaGetErrorString(e));
  for (int i = 0; i < n; i++) printf(" %08x", g[i]);
  printf("\n");
}
typedef void (*K)(CUtensorMap, const uint32_t*, int, int, int);
static void to_global(K k, CUtensorMapDataType ty, int esz, const uint32_t* before, const uint32_t* s, int n, const char* what) {
  memset(g, 0, sizeof g); memcpy(g, before, 4 * n); put();
  memset(src, 0, sizeof src); memcpy(src, s, 4 * n); cudaMemcpy(sd, src, 4096, cudaMemcpyHostToDevice);
  k<<<1, 32>>>(enc(ty, d, esz, 0), sd, 0, 0, 0);
  get(); dump(what, n);
}
int main(int argc, char** argv) {
  int mode = atoi(argv[1]);
  cudaMalloc(&d, 1024); cudaMalloc((void**)&o, 4096); cudaMalloc((void**)&sd, 4096);
  if (mode == 0) {  // OOB NaN per type; tf32 rounding of negative NaN / ties
    CUtensorMapDataType tys[4] = {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT64};
    int esz[4] = {2, 2, 4, 8};
    for (int i = 0; i < 256; i++) g[i] = 0x3C003C00u;
    g[0] = 0xFFC00001u; g[1] = 0xFF800001u; g[2] = 0x80001000u; g[3] = 0x80003000u; g[4] = 0xFF7FF000u;
    put();
    for (int t = 0; t < 4; t++) {
      load<<<1, 32>>>(enc(tys[t], d, esz[t], 1), o, 64 / esz[t] / 2, 8, 1024);
      cudaError_t e = cudaDeviceSynchronize();
      cudaMemcpy(h, o, 4096, cudaMemcpyDeviceToHost);
      printf("load type %d (%s): row0 %08x %08x %08x %08x %08x %08x %08x %08x | last %08x\n", t, cudaGetErrorString(e),
             h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[255]);
    }
    load<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, d, 4, 0), o, 0, 0, 1024);
    cudaDeviceSynchronize(); cudaMemcpy(h, o, 4096, cudaMemcpyDeviceToHost);
    printf("tf32 in-bounds: %08x %08x %08x %08x %08x\n", h[0], h[1], h[2], h[3], h[4]);
  }
  if (mode == 1) {  // stores: partial OOB at the end, then negative coordinates
    for (int i = 0; i < 1024; i++) src[i] = 0x1000 + i;
    cudaMemcpy(sd, src, 4096, cudaMemcpyHostToDevice);
    for (int i = 0; i < 256; i++) g[i] = 0xEEEEEEEEu;
    put(); store<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, d, 4, 0), sd, 8, 8, 0); get();
    dump("store (8,8) rows 8..9", 0); for (int r = 7; r < 10; r++) { for (int c = 0; c < 16; c++) printf(" %08x", g[r * 16 + c]); printf("\n"); }
    for (int i = 0; i < 256; i++) g[i] = 0xEEEEEEEEu;
    put(); store<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, d, 4, 0), sd, -8, -8, 0); get();
    dump("store (-8,-8) rows 0..1", 0); for (int r = 0; r < 2; r++) { for (int c = 0; c < 16; c++) printf(" %08x", g[r * 16 + c]); printf("\n"); }
  }
  if (mode == 2) {  // f32 add: subnormals, NaN, signed zero
    uint32_t b[8] = {0x00000001, 0x00400000, 0x3F800000, 0x80000000, 0x7FC00001, 0x7F800000, 0x00800000, 0x80000000};
    uint32_t s[8] = {0x00000001, 0x00400000, 0x00000001, 0x00000000, 0x3F800000, 0xFF800000, 0x80400000, 0x80000000};
    to_global(red_add, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, b, s, 8, "add.f32");
  }
  if (mode == 3) {  // f16 / bf16 add, min, max (pairs packed in 32-bit words, low half first)
    uint32_t b[6] = {0x7BFF0001, 0x3C007E01, 0x00008000, 0x7E013C00, 0x3C01FC00, 0x80010001};
    uint32_t s[6] = {0x7BFF0001, 0x3C003C00, 0x80000000, 0x7E017E02, 0x3C007C00, 0x00010001};
    to_global(red_add, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, b, s, 6, "add.f16");
    to_global(red_min, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, b, s, 6, "min.f16");
    to_global(red_max, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, b, s, 6, "max.f16");
    uint32_t c[6] = {0x7F7F0001, 0x3F807FC1, 0x00008000, 0x7FC13F80, 0x3F81FF80, 0x80010001};
    uint32_t t[6] = {0x7F7F0001, 0x3F803F80, 0x80000000, 0x7FC17FC2, 0x3F807F80, 0x00010001};
    to_global(red_add, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, c, t, 6, "add.bf16");
    to_global(red_min, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, c, t, 6, "min.bf16");
    to_global(red_max, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, c, t, 6, "max.bf16");
  }
  if (mode == 4) {  // store from a 64-byte-aligned shared address
    for (int i = 0; i < 256; i++) g[i] = 0xEEEEEEEEu;
    put(); store<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, d, 4, 0), sd, 0, 0, 64); get();
    dump("store from smem+64", 4);
  }
  if (mode == 5) {  // tf32 store: does the descriptor round on the way out?
    uint32_t b[4] = {0, 0, 0, 0};
    uint32_t t[4] = {0x3F801000, 0x3F803000, 0x7FC00001, 0x3F800FFF};
    to_global(store, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, 4, b, t, 4, "store.tf32");
  }
  if (mode == 6) {  // reduce with negative coordinates
    for (int i = 0; i < 256; i++) g[i] = 0;
    put(); red_add<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_UINT32, d, 4, 0), sd, -8, 0, 0); get();
    dump("red add u32 at (-8,0)", 4);
  }
  if (mode == 7) {  // reduce partly out of bounds at the end
    for (int i = 0; i < 1024; i++) src[i] = 1;
    cudaMemcpy(sd, src, 4096, cudaMemcpyHostToDevice);
    for (int i = 0; i < 256; i++) g[i] = 100;
    put(); red_add<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_UINT32, d, 4, 0), sd, 8, 8, 0); get();
    dump("red add u32 at (8,8) row 7", 0); for (int c = 0; c < 16; c++) printf(" %d", g[7 * 16 + c]); printf("\n row 8"); for (int c = 0; c < 16; c++) printf(" %d", g[8 * 16 + c]); printf("\n");
  }
  if (mode == 8) {  // 128B swizzle with a 64-byte inner box: where rows land, what the gaps hold
    static uint32_t gg[16 * 16];
    for (int i = 0; i < 256; i++) gg[i] = i;
    cudaMemcpy(d, gg, 1024, cudaMemcpyHostToDevice);
    CUtensorMap m;
    cuuint64_t dim[2] = {16, 16}, st[1] = {64};
    cuuint32_t box[2] = {16, 4}, es[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dim, st, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    load<<<1, 32>>>(m, o, 0, 1, 256);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(h, o, 4096, cudaMemcpyDeviceToHost);
    printf("sw128 inner 64B encode %d (%s)\n", (int)r, cudaGetErrorString(e));
    for (int line = 0; line < 6; line++) { printf(" line %d:", line); for (int ch = 0; ch < 8; ch++) printf(" %8x", h[line * 32 + ch * 4]); printf("\n"); }
  }
  if (mode == 9) {  // loads at negative coordinates
    for (int i = 0; i < 256; i++) g[i] = 0x3F800000 + i;
    put();
    for (int nan = 0; nan < 2; nan++) {
      load<<<1, 32>>>(enc(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, d, 4, nan), o, -8, -8, 1024);
      cudaError_t e = cudaDeviceSynchronize();
      cudaMemcpy(h, o, 4096, cudaMemcpyDeviceToHost);
      printf("load (-8,-8) nan %d (%s): row 7: %08x %08x | row 8: %08x %08x %08x\n", nan, cudaGetErrorString(e), h[7 * 16 + 7], h[7 * 16 + 8], h[8 * 16 + 7], h[8 * 16 + 8], h[8 * 16 + 9]);
    }
  }
  return 0;
}
