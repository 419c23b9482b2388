#!/usr/bin/env bash
# Issue #23 on the H200, one call within 9.5 minutes: bench/gemm.py over every shape of both types
# (cold tunings in parallel workers), then the GEMM GPU tests on the compile cache it left
# (JITTILE_CACHE=1: tests/conftest.py turns the disk cache off otherwise).
# Usage (on the GPU machine, from the project root): bash bench/run_verify_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step bench 300 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>> "$log"
JITTILE_CACHE=1 run_step "gemm tests" 240 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  --durations=5 tests/test_gpu_gemm.py
date -u >> "$log"
