#!/usr/bin/env bash
# Issue #23's fp8 promotion on the H200, within 5 minutes: bench/promotion_ab.py (the 128x256
# tile promoted once per two K-stages against once per stage, unpromoted, and cuBLAS, with
# mean errors), then the fp8 GEMM GPU tests.
# Usage (on the GPU machine, from the project root): bash bench/run_paired_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "promotion ab" 200 "$out/promotion_ab_run$run.log" python3 bench/promotion_ab.py "$run"
cp "$(result promotion_ab)" "$out/" 2>> "$log"
run_step "fp8 tests" 100 "$out/fp8_tests_run$run.log" "${GPU_TESTS[@]}" tests/test_gpu_gemm.py -k fp8
date -u >> "$log"
