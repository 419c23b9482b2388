#!/usr/bin/env bash
# Issue #23's next lever, measured on the GPU before it lands: bench/pair_split_meeting.patch
# (split-K pairs: a tile's two splits on the two CTAs of a cluster, meeting through two
# mbarriers, `meet`, instead of `settle`'s tickets and polled counters, 2.6-2.8 us in run 131;
# interpreted exact on the CPU, 0 bytes of local memory for sm_90a) applied to this copy of the
# tree, then its forced GPU tests and the tuned shapes, the skinny products' intercepts with the
# pairs beside the whole-K tiles and the ticket split-K, and on an H200 every GEMM shape tuned
# cold (bench/gemm.py). One call within 9.5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_pair_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
{ git apply bench/pair_split_meeting.patch || patch -p1 < bench/pair_split_meeting.patch; } \
  >> "$log" 2>&1 || { echo "patch failed" >> "$log"; exit 1; }
run_step "pair tests" 240 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
  tests/test_gpu_gemm.py -k "CLUSTER2 or tuned_bf16"
for m in 1 16 64; do
  run_step "intercept $m" 100 "$log" python3 bench/gemm_intercept.py \
    "$run$m" "$m" 4096 64x16 64x16:2 64x16:2:2 64x32 64x64:2:2 64x128:2
  cp "bench/results/gemm_intercept_run$run$m.json" "$out/gemm_intercept_${m}_run$run.json" 2>> "$log"
done
gemm_bench_on_h200 240
date -u >> "$log"
