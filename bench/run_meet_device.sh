#!/usr/bin/env bash
# Issue #23 on the H200 after split-K's meeting through registers (settle: the splits store
# their fp32 fragments, the last adds them in split order), one call within 9.5 minutes: the
# intercept fit at 512x4096 (run 74's configs, so the fixed cost compares), the GEMM GPU tests
# (the split-K determinism test among them), then bench/gemm.py over every shape of both types.
# Usage (on the GPU machine, from the project root): bash bench/run_meet_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step intercept 110 "$out/intercept_run$run.log" python3 bench/gemm_intercept.py "$run" \
  512 4096 128x256 128x256:2 128x256:4 64x256 128x128:2
cp "$(result gemm_intercept)" "$out/" 2>> "$log"
run_step "gemm tests" 170 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" --durations=5 \
  tests/test_gpu_gemm.py
run_step bench 260 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>> "$log"
date -u >> "$log"
