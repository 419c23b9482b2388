// Hardware probe behind jittile/interpreter/tma.py: what the H200 TMA unit does (run by run.sh).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>

__global__ void k(const __grid_constant__ CUtensorMap m, uint32_t* out, int c0, int c1, int off) {
  __shared__ alignas(1024) uint32_t s[1024];
  __shared__ alignas(8) uint64_t bar;
  for (int i = threadIdx.x; i < 1024; i += 32) s[i] = 0xEEEEEEEEu;
  __syncthreads();
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(s) + off, ba = (uint32_t)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(ba));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 1024;" :: "r"(ba));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(sa), "l"(&m), "r"(c0), "r"(c1), "r"(ba) : "memory");
    asm volatile("{ .reg .pred p; W%=: mbarrier.try_wait.parity.shared.b64 p, [%0], 0; @!p bra W%=; }" :: "r"(ba) : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 1024; i += 32) out[i] = s[i];
}

int main(int argc, char** argv) {
  int mode = atoi(argv[1]);
  static uint32_t h[1024];
  uint32_t b[16] = {0x3F800FFF, 0x3F801000, 0x3F803000, 0x3F801001, 0x3F800001, 0x7F800000, 0x7FC00001, 0x7F800001,
                    0x00000FFF, 0x00001000, 0x00003000, 0x807FFFFF, 0x7F7FF000, 0x7F7FFFFF, 0xBF801800, 0x3F81F000};
  void* d; uint32_t* o;
  cudaMalloc(&d, 64 * 32 * 4); cudaMalloc((void**)&o, 4096);
  for (int i = 0; i < 64 * 32 && i < 1024; i++) h[i] = (mode == 0) ? b[i % 16] : (uint32_t)i;
  static uint32_t g[64 * 32];
  for (int i = 0; i < 64 * 32; i++) g[i] = (mode == 0) ? b[i % 16] : (uint32_t)i;
  cudaMemcpy(d, g, sizeof g, cudaMemcpyHostToDevice);
  CUtensorMap m;
  cuuint64_t dim[2] = {16, 16}, st[1] = {64};
  cuuint32_t box[2] = {16, 16}, es[2] = {1, 1};
  CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_NONE;
  int off = 0, runs = 1;
  if (mode == 0) runs = 3;
  if (mode >= 1) { dim[0] = 32; dim[1] = 64; st[0] = 128; box[0] = 32; box[1] = 8; }
  if (mode == 1) { sw = CU_TENSOR_MAP_SWIZZLE_128B; off = 128; }
  if (mode == 2) { off = 16; }
  if (mode == 3) { off = 64; }
  if (mode == 4) { sw = CU_TENSOR_MAP_SWIZZLE_128B; off = 512; }
  for (int t = 0; t < runs; t++) {
    CUtensorMapDataType ty = (mode == 0 && t == 1) ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    CUresult r = cuTensorMapEncodeTiled(&m, ty, 2, d, dim, st, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        t == 2 ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    int c = (t == 2) ? 8 : 0;
    k<<<1, 32>>>(m, o, c, c, off);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(h, o, 4096, cudaMemcpyDeviceToHost);
    printf("mode %d run %d encode %d err %s\n", mode, t, (int)r, cudaGetErrorString(e));
    if (mode == 0) {
      for (int i = 0; i < 16; i++) printf(" %08x", h[i]);
      printf("\n last %08x\n", h[255]);
    } else {
      for (int row = 0; row < 10; row++) {
        printf(" smem line %d:", row);
        for (int ch = 0; ch < 8; ch++) printf(" %4x", h[row * 32 + ch * 4]);  // first word of each 16B chunk
        printf("\n");
      }
    }
  }
  return 0;
}
