#!/usr/bin/env bash
# Issue #23 on the H200, one call within 9 minutes: the wgmma rate without loads
# (bench/wgmma_rate.py), bench/gemm.py over every bf16 shape with the widened tuning space
# (128x256 split-K, 64-row tiles past M = 512; its lines say where each tuning's time went),
# and the GEMM GPU tests. At most 6 files into $OUT.
# Usage (on the GPU machine, from the project root): bash bench/run_space_device.sh "$OUT" RUN
export JITTILE_CACHE_DIR=${JITTILE_CACHE_DIR:-/tmp/jittile-device-cache}  # kept across calls
source bench/device_env.sh "$@"
timeout 90 python3 bench/wgmma_rate.py "$run" 2>&1 | grep -v '^ \|^{\|^}' >> "$log"
echo "wgmma rate rc=$? $(date -u +%T)" >> "$log"
run_step "gemm bench" 240 "$out/gemm_bench_run$run.log" \
  python3 bench/gemm.py "$run" --samples 10 --only "${GEMM_KIND:-bf16}"
run_step "gemm tests" 150 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" --durations=8 \
  tests/test_gpu_gemm.py
cp "$(result gemm)" "$(result wgmma_rate)" "$out/" 2>> "$log"
date -u >> "$log"
