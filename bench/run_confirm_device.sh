#!/usr/bin/env bash
# Issue #23, after run 120: which kernels cuBLAS runs on the shapes still below it (the short
# ones and 8192x4096x14336), then the whole GEMM GPU suite (tuned shapes, forced configs, split-K
# determinism, the disk cache in a fresh process) on the working tree.
#   bash bench/run_confirm_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cublas kernels" 90 "$out/cublas_kernels_run$run.log" python3 bench/cublas_kernels.py \
    "$run" 256x8192x8192 512x4096x4096 1024x1024x1024 64x4096x4096 8192x4096x14336
cp "$(result cublas_kernels)" "$out/" 2>/dev/null
run_step "gemm tests" 420 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" tests/test_gpu_gemm.py
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
grep -v "^$" "$out/cublas_kernels_run$run.log" | tail -30 >> "$log"
cat "$log"
