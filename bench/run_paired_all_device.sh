#!/usr/bin/env bash
# Issue #23 on the H200, within 9 minutes: bench/promotion_ab.py on the fp8 tiles of the short
# and square shapes (every unsplit fp8 job promoted once per two K-stages, against once per
# stage), bench/gemm.py over every shape of both types, and the autotuning GPU tests (cold-L2
# samples).
# Usage (on the GPU machine, from the project root): bash bench/run_paired_all_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "promotion ab" 120 "$out/promotion_ab_run$run.log" python3 bench/promotion_ab.py "$run" \
  512x4096x4096:128x128,64x128 256x8192x8192:128x128/2 1024x1024x1024:64x128 \
  4096x4096x4096:128x192,128x128
cp "$(result promotion_ab)" "$out/" 2>> "$log"
run_step bench 260 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>> "$log"
run_step "autotune tests" 100 "$out/autotune_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_autotune.py
date -u >> "$log"
