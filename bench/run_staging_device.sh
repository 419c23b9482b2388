#!/usr/bin/env bash
# The staged launches (operands TMA cannot describe copied into aligned ones) on the GPU: their
# GPU tests and the host time the layout checks add; then bench/run_skinny_intercept_device.sh's
# steps (the skinny products' fixed cost, the DRAM floor); one call within 9.5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_staging_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "staging tests" 120 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_gemm.py -k "stages or tuned_bf16"
run_step "stage host cost" 60 "$log" python3 bench/stage_host_cost.py "$run"
cp "$(result stage_host_cost)" "$out/" 2>> "$log"
bash bench/run_skinny_intercept_device.sh "$out" "$run"
