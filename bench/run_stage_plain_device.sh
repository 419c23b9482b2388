#!/usr/bin/env bash
# The staged launches with `plain` (the frameworks' contiguity flags checked before `layout`): the
# attention transposed-view tests and the staged GEMMs, then bench/stage_host_cost.py and
# bench/stage_device_cost.py (staged 4096-size products against aligned ones, beside cuBLAS).
# Usage (on the GPU machine, from the project root): bash bench/run_stage_plain_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "staging tests" 300 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_gemm.py tests/test_gpu_attention.py -k "stages or transposed"
run_step "stage host cost" 120 "$log" python3 bench/stage_host_cost.py "$run"
cp "$(result stage_host_cost)" "$out/" 2>> "$log"
date -u >> "$log"
run_step "stage device cost" 200 "$log" python3 bench/stage_device_cost.py "$run"
cp "$(result stage_device_cost)" "$out/" 2>> "$log"
date -u >> "$log"
