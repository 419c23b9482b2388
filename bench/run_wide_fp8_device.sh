#!/usr/bin/env bash
# Issue #23's fp8 128x256 tiles on the H200 (run 82: promoted in two 128-wide pieces; run 84:
# in four 64-wide pieces, two buffers alternating), one call within 9.5 minutes:
# bench/promotion_ab.py (128x192 / 128x256 / 128x256 in clusters of two, promoted and not,
# beside cuBLAS), the fp8 GPU tests, then bench/gemm.py's fp8 shapes.
# Usage (on the GPU machine, from the project root): bash bench/run_wide_fp8_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "promotion ab" 200 "$out/promotion_ab_run$run.log" python3 bench/promotion_ab.py "$run"
cp "$(result promotion_ab)" "$out/" 2>> "$log"
run_step "fp8 tests" 150 "$out/fp8_tests_run$run.log" "${GPU_TESTS[@]}" --durations=5 \
  tests/test_gpu_gemm.py -k fp8
run_step bench 180 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10 \
  --only fp8
cp "$(result gemm)" "$out/" 2>> "$log"
date -u >> "$log"
