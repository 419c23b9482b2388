#!/usr/bin/env bash
# Issue #23's next lever, measured on the GPU: split-K pairs (a tile's two splits on the two CTAs
# of a cluster, meeting through two mbarriers, `meet`, instead of `settle`'s tickets and polled
# counters, 2.6-2.8 us in run 131; interpreted exact on the CPU, 0 bytes of local memory for
# sm_90a), bench/pair_split_meeting.patch applied to this copy of the tree: on an H200 every
# bf16 GEMM shape tuned cold (bench/gemm.py), then the pairs' forced GPU tests; elsewhere the
# tests, then the intercepts of 1024 x 1024 and 64 x 4096 with the pairs beside the whole-K
# tiles, the clustered tiles and the ticket split-K. Within 6 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_pair_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
{ git apply bench/pair_split_meeting.patch || patch -p1 < bench/pair_split_meeting.patch; } \
  >> "$log" 2>&1 || { echo "patch failed" >> "$log"; exit 1; }
tests() {
  run_step "pair tests" "$1" "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
    tests/test_gpu_gemm.py -k "SPLIT2 and CLUSTER2"
}
intercept() {  # NAME M N SPEC...: bench/gemm_intercept.py's file into $OUT as NAME
  local name=$1
  run_step "intercept $name" 100 "$log" python3 bench/gemm_intercept.py "$run$name" "${@:2}"
  cp "bench/results/gemm_intercept_run$run$name.json" "$out/gemm_intercept_${name}_run$run.json" \
    2>> "$log"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  gemm_bench_on_h200 200 --only bf16
  tests 120
else
  tests 120
  intercept 1024 1024 1024 64x128:1:2 128x128:2 128x128:2:2 128x256:2:2
  intercept 64 64 4096 64x32 64x64:2:2 64x128:2
fi
date -u >> "$log"
