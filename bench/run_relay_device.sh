#!/usr/bin/env bash
# Issue #23: a cluster's releases passed on by a relay thread (consumers arrive at a local
# barrier only; runs 122-125 found the consumers' remote arrivals cost a round trip per stage).
# The example against BASELINE (the example before the change, carried untracked), clustered
# tiles and one alone, hot L2, beside cuBLAS; then the forced configs' GPU tests.
#   bash bench/run_relay_device.sh "$OUT" RUN BASELINE
source bench/device_env.sh "$@"
baseline=${3:?baseline copy of the example}
run_step "base ab" 300 "$out/base_ab_run$run.log" python3 bench/base_ab.py "$run" "$baseline" \
    512x4096x4096:128x128@2 256x8192x8192:128x128@2 8192x8192x8192:128x128@2 \
    1024x1024x1024:64x128@2 512x4096x4096:64x256@2 8192x8192x8192:128x256@2 \
    4096x4096x4096:128x192@2 512x4096x4096:128x128 128x8192x8192:64x128@2
cp "$(result base_ab)" "$out/" 2>/dev/null
grep " us, " "$out/base_ab_run$run.log" >> "$log"
run_step "forced config tests" 240 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
    tests/test_gpu_gemm.py -k "each_kind or resident or fp8_wide"
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
cat "$log"
