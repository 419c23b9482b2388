#!/usr/bin/env bash
# The staged launches on the GPU after the layout checks were memoised: their GPU tests, then
# bench/stage_host_cost.py (the checks alone, and launches with them against a pass-through).
# Usage (on the GPU machine, from the project root): bash bench/run_stage_cost_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "staging tests" 150 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_gemm.py -k "stages or tuned_bf16"
run_step "stage host cost" 120 "$log" python3 bench/stage_host_cost.py "$run"
cp "$(result stage_host_cost)" "$out/" 2>> "$log"
date -u >> "$log"
