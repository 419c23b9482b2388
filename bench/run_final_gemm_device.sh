#!/usr/bin/env bash
# Issue #23 on the H200, one call within 8 minutes: bench/gemm.py over every bf16 shape (cold
# tunings in parallel workers), then the GEMM GPU tests on the compile cache it left.
# Usage (on the GPU machine, from the project root): bash bench/run_final_gemm_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "bf16 bench" 230 "$out/gemm_bench_run$run.log" \
  python3 bench/gemm.py "$run" --samples 10 --only bf16
cp "$(result gemm)" "$out/" 2>> "$log"
run_step "gemm tests" 220 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" --durations=5 \
  tests/test_gpu_gemm.py tests/test_gpu_autotune.py
date -u >> "$log"
