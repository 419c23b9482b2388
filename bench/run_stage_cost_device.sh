#!/usr/bin/env bash
# The staged launches on the GPU after the layout checks were memoised: their GPU tests, then
# bench/stage_host_cost.py (the checks alone, and launches with them against a pass-through);
# on an H200 then every GEMM shape, both types, tuned cold (bench/gemm.py), the launches now
# with the checks. One call within 9.5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_stage_cost_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "staging tests" 150 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_gemm.py tests/test_gpu_attention.py -k "stages or tuned_bf16 or transposed"
run_step "stage host cost" 90 "$log" python3 bench/stage_host_cost.py "$run"
cp "$(result stage_host_cost)" "$out/" 2>> "$log"
gemm_bench_on_h200 300
date -u >> "$log"
