#!/usr/bin/env bash
# Issue #23's fp8 promotion on the H200, one call within 9.5 minutes: bench/promotion_ab.py
# (whole-stage promotion, the two-halves schedule, no promotion), the atomics and GEMM GPU
# tests, then bench/gemm.py's fp8 shapes.
# Usage (on the GPU machine, from the project root): bash bench/run_promotion_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "promotion ab" 200 "$out/promotion_ab_run$run.log" python3 bench/promotion_ab.py "$run"
cp "$(result promotion_ab)" "$out/" 2>> "$log"
run_step "gpu tests" 190 "$out/gpu_tests_run$run.log" "${GPU_TESTS[@]}" --durations=5 \
  tests/test_gpu_atomics.py tests/test_gpu_gemm.py
run_step bench 150 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10 \
  --only fp8
cp "$(result gemm)" "$out/" 2>> "$log"
date -u >> "$log"
